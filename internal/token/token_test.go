package token_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/token"
)

func TestGenerateParse(t *testing.T) {
	t.Parallel()
	id, secret, hash, err := token.Generate()
	if err != nil {
		t.Fatal(err)
	}
	s := secret.Reveal()
	if !strings.HasPrefix(s, "klt_"+id+"_") || len(s) != 4+26+1+43 {
		t.Fatalf("token %q: want klt_<26-char id>_<43-char secret>", s)
	}
	got, err := token.ParseID(s)
	if err != nil || got != id {
		t.Fatalf("ParseID = %q, %v; want %q", got, err, id)
	}
	if !token.Matches(s, hash) {
		t.Errorf("Matches(token, its hash) = false")
	}
	last := "A"
	if strings.HasSuffix(s, "A") {
		last = "B"
	}
	if token.Matches(s[:len(s)-1]+last, hash) {
		t.Errorf("Matches(another secret, the hash) = true")
	}
	_, other, _, _ := token.Generate()
	if other.Reveal() == s {
		t.Errorf("two tokens alike")
	}
}

func TestParseIDRefusesOtherCredentials(t *testing.T) {
	t.Parallel()
	_, secret, _, _ := token.Generate()
	s := secret.Reveal()
	for name, in := range map[string]string{
		"empty":           "",
		"a password":      "hunter2",
		"no prefix":       strings.TrimPrefix(s, "klt_"),
		"GitHub's":        "ghp_" + strings.TrimPrefix(s, "klt_"),
		"short":           s[:len(s)-1],
		"long":            s + "A",
		"bad id":          "klt_" + strings.Repeat("U", 26) + s[30:],
		"no separator":    s[:30] + "." + s[31:],
		"secret not b64":  s[:len(s)-1] + "=",
		"space in secret": s[:len(s)-1] + " ",
	} {
		if _, err := token.ParseID(in); !errors.Is(err, token.ErrMalformed) {
			t.Errorf("%s: ParseID(%q) = %v, want ErrMalformed", name, in, err)
		}
	}
}

func TestSecretNeverPrints(t *testing.T) {
	t.Parallel()
	_, secret, _, _ := token.Generate()
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("made", "token", secret)
	for _, out := range []string{fmt.Sprint(secret), fmt.Sprintf("%v %s %q", secret, secret, secret), b.String()} {
		if strings.Contains(out, secret.Reveal()[10:]) {
			t.Errorf("the secret printed: %s", out)
		}
	}
}

func TestCovers(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		glob, state string
		want        bool
	}{
		"all":                    {token.AllStates, "acme/infra/prod", true},
		"exact":                  {"acme/prod", "acme/prod", true},
		"exact, other":           {"acme/prod", "acme/prod2", false},
		"star, one segment":      {"acme/*", "acme/prod", true},
		"star stops at a slash":  {"acme/*", "acme/infra/prod", false},
		"double star crosses":    {"acme/**", "acme/infra/prod", true},
		"middle star":            {"acme/*/prod", "acme/net/prod", true},
		"middle star, not depth": {"acme/*/prod", "acme/net/x/prod", false},
		"alternatives":           {"acme/{dev,stage}", "acme/stage", true},
		"another team":           {"acme/**", "other/prod", false},
	}
	for name, c := range cases {
		if got := (token.Token{States: c.glob}).Covers(c.state); got != c.want {
			t.Errorf("%s: %q covers %q = %v, want %v", name, c.glob, c.state, got, c.want)
		}
	}
}

func TestStatusAt(t *testing.T) {
	t.Parallel()
	now := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		tok  token.Token
		want token.Status
	}{
		"no expiry":          {token.Token{}, token.Live},
		"expires later":      {token.Token{ExpiresAt: now.Add(time.Second)}, token.Live},
		"expires now":        {token.Token{ExpiresAt: now}, token.Expired},
		"expired":            {token.Token{ExpiresAt: now.Add(-time.Hour)}, token.Expired},
		"revoked":            {token.Token{RevokedAt: now.Add(-time.Hour)}, token.Revoked},
		"revoked, expired":   {token.Token{RevokedAt: now.Add(-time.Hour), ExpiresAt: now.Add(-time.Minute)}, token.Revoked},
		"revoked, in future": {token.Token{RevokedAt: now.Add(time.Hour)}, token.Revoked},
	}
	for name, c := range cases {
		if got := c.tok.StatusAt(now); got != c.want {
			t.Errorf("%s: StatusAt = %s, want %s", name, got, c.want)
		}
	}
}
