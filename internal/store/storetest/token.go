package storetest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/oklog/ulid/v2"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/token"
)

// RunTokens runs the token contract (token.Store, ADR 0054). newStore must
// return a fresh, empty, migrated store for each call and close it in
// t.Cleanup; subtests call it in parallel.
func RunTokens(t *testing.T, newStore func(t *testing.T) token.Store) {
	t.Run("CreateGet", func(t *testing.T) { t.Parallel(); testTokenCreateGet(t, newStore(t)) })
	t.Run("Invalid", func(t *testing.T) { t.Parallel(); testTokenInvalid(t, newStore(t)) })
	t.Run("List", func(t *testing.T) { t.Parallel(); testTokenList(t, newStore(t)) })
	t.Run("Revoke", func(t *testing.T) { t.Parallel(); testTokenRevoke(t, newStore(t)) })
}

// newToken makes a token.New for actor with a real secret; it returns the
// token string too.
func newToken(t *testing.T, actor string) (token.New, string) {
	t.Helper()
	id, secret, hash, err := token.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return token.New{ID: id, Actor: actor, States: token.AllStates, CreatedBy: "admin", Hash: hash}, secret.Reveal()
}

func testTokenCreateGet(t *testing.T, s token.Store) {
	ctx := t.Context()
	n, secret := newToken(t, "ci-deployer")
	n.ReadOnly, n.States, n.TTL = true, "acme/**", 90*time.Minute
	before := time.Now().Add(-time.Second)
	made, err := s.CreateToken(ctx, n)
	if err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	after := time.Now().Add(time.Second)
	if made.CreatedAt.Before(before) || made.CreatedAt.After(after) {
		t.Errorf("CreatedAt %s: want the store's clock, between %s and %s", made.CreatedAt, before, after)
	}
	if got := made.ExpiresAt.Sub(made.CreatedAt); got != n.TTL {
		t.Errorf("ExpiresAt - CreatedAt = %s, want the TTL %s", got, n.TTL)
	}
	want := token.Token{ID: n.ID, Actor: "ci-deployer", ReadOnly: true, States: "acme/**", CreatedAt: made.CreatedAt,
		CreatedBy: "admin", ExpiresAt: made.ExpiresAt}
	if diff := cmp.Diff(want, made); diff != "" {
		t.Errorf("CreateToken returned (-want +got):\n%s", diff)
	}
	got, hash, err := s.GetToken(ctx, n.ID)
	if err != nil {
		t.Fatalf("GetToken: %v", err)
	}
	if diff := cmp.Diff(made, got); diff != "" {
		t.Errorf("GetToken returned other than CreateToken (-create +get):\n%s", diff)
	}
	if !token.Matches(secret, hash) {
		t.Errorf("the stored hash does not match the token string")
	}
	if strings.Contains(string(hash), secret) {
		t.Errorf("the store holds the secret itself")
	}
	n2, _ := newToken(t, "other")
	n2.ID = n.ID
	if _, err := s.CreateToken(ctx, n2); !errors.Is(err, engine.ErrConflict) {
		t.Errorf("CreateToken with an id that exists: %v, want ErrConflict", err)
	}
	if _, _, err := s.GetToken(ctx, ulid.Make().String()); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("GetToken of an unknown id: %v, want ErrNotFound", err)
	}
	never, _ := newToken(t, "forever")
	if tok, err := s.CreateToken(ctx, never); err != nil || !tok.ExpiresAt.IsZero() {
		t.Errorf("CreateToken without a TTL: %+v, %v; want no expiry", tok, err)
	}
}

func testTokenInvalid(t *testing.T, s token.Store) {
	ctx := t.Context()
	cases := map[string]struct {
		change func(*token.New)
		want   string
	}{
		"blank actor":      {func(n *token.New) { n.Actor = " " }, "token actor"},
		"actor with a tab": {func(n *token.New) { n.Actor = "a\tb" }, "control character"},
		"long actor":       {func(n *token.New) { n.Actor = strings.Repeat("a", token.MaxActor+1) }, "too long"},
		"blank creator":    {func(n *token.New) { n.CreatedBy = "" }, "token creator"},
		"empty glob":       {func(n *token.New) { n.States = "" }, "state glob is empty"},
		"unclosed glob":    {func(n *token.New) { n.States = "acme/[prod" }, "not a valid pattern"},
		"short TTL":        {func(n *token.New) { n.TTL = time.Second }, "at least 1m0s"},
		"negative TTL":     {func(n *token.New) { n.TTL = -time.Hour }, "token lifetime"},
		"short hash":       {func(n *token.New) { n.Hash = n.Hash[:8] }, "want 32"},
		"id not a ULID":    {func(n *token.New) { n.ID = "tok-1" }, "not a ULID"},
	}
	for name, c := range cases {
		n, _ := newToken(t, "ci")
		c.change(&n)
		_, err := s.CreateToken(ctx, n)
		if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: CreateToken: %v; want ErrInvalid saying %q", name, err, c.want)
		}
	}
	if got, err := s.ListTokens(ctx); err != nil || len(got) != 0 {
		t.Errorf("after refused creations ListTokens = %v, %v; want nothing stored", got, err)
	}
}

func testTokenList(t *testing.T, s token.Store) {
	ctx := t.Context()
	got, err := s.ListTokens(ctx)
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("ListTokens of an empty store = %#v, %v; want an empty, non-nil list", got, err)
	}
	var ids []string
	for _, actor := range []string{"c", "a", "b"} {
		n, _ := newToken(t, actor)
		if _, err := s.CreateToken(ctx, n); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, n.ID)
	}
	got, err = s.ListTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs []string
	for _, tok := range got {
		gotIDs = append(gotIDs, tok.ID)
	}
	if diff := cmp.Diff(ids, gotIDs); diff != "" {
		t.Errorf("ListTokens order (-by creation +got):\n%s", diff)
	}
}

func testTokenRevoke(t *testing.T, s token.Store) {
	ctx := t.Context()
	n, _ := newToken(t, "ci")
	if _, err := s.CreateToken(ctx, n); err != nil {
		t.Fatal(err)
	}
	// Revocations race: each sees the first one's record.
	var wg sync.WaitGroup
	got := make([]token.Token, 4)
	errs := make([]error, 4)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = s.RevokeToken(ctx, n.ID, []string{"alice", "bob", "carol", "dave"}[i]) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil {
			t.Fatalf("RevokeToken %d: %v", i, errs[i])
		}
		if got[i].RevokedAt.IsZero() || got[i].RevokedAt != got[0].RevokedAt || got[i].RevokedBy != got[0].RevokedBy {
			t.Errorf("RevokeToken %d returned revoked %s by %q; want the one revocation (%s by %q)", i,
				got[i].RevokedAt, got[i].RevokedBy, got[0].RevokedAt, got[0].RevokedBy)
		}
	}
	stored, _, err := s.GetToken(ctx, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.RevokedAt != got[0].RevokedAt || stored.RevokedBy != got[0].RevokedBy || stored.StatusAt(time.Now()) != token.Revoked {
		t.Errorf("stored after revocation: %+v", stored)
	}
	if _, err := s.RevokeToken(ctx, ulid.Make().String(), "alice"); !errors.Is(err, engine.ErrNotFound) || !strings.Contains(err.Error(), "no such token") {
		t.Errorf("RevokeToken of an unknown id: %v, want ErrNotFound naming it", err)
	}
	if _, err := s.RevokeToken(ctx, n.ID, ""); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("RevokeToken by nobody: %v, want ErrInvalid", err)
	}
}
