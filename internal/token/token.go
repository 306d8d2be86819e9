// Package token holds Kilolock's API tokens (ADR 0054): the credential of
// Terraform's http backend, the API and the pages, made by `kl token
// create`. A token names an actor, says whether it may write, which states
// it covers (a glob) and until when it is valid.
//
// The secret is shown once, when the token is made, and never stored: the
// store keeps the SHA-256 of the whole token string. A token is
// "klt_<ID>_<SECRET>": ID is the token's ULID (public: `kl token list` and
// `kl token revoke` name it, the request log names it), SECRET 32 random
// bytes from crypto/rand in unpadded base64url (43 characters). A request's
// token is looked up by its ID and its hash compared with the stored one in
// constant time (crypto/subtle).
//
// Why a plain SHA-256 and not a password hash (bcrypt, scrypt, Argon2): a
// password hash is slow on purpose, so that guessing a low-entropy secret
// from its stolen hash costs too much. A secret of 256 uniformly random
// bits cannot be guessed from its SHA-256 at any speed (2^255 tries on
// average), so slowness adds nothing — and Terraform sends the token with
// every request, so a slow hash would cost every request its time.
//
// The package consumes Store, which store/sqlite and store/postgres
// implement; storetest.RunTokens holds both to the same contract.
package token

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/oklog/ulid/v2"

	"github.com/kilolock/kilolock/internal/engine"
)

// Prefix begins every token; secret scanners and people recognise it.
const Prefix = "klt_"

// secretBytes is how many random bytes a token's secret holds: 256 bits.
const secretBytes = 32

// secretLen is the length of the secret in unpadded base64url.
var secretLen = base64.RawURLEncoding.EncodedLen(secretBytes)

// idLen is the length of a ULID in its text form.
const idLen = ulid.EncodedSize

// AllStates is the glob of a token that covers every state (the default of
// `kl token create`).
const AllStates = "**"

// Limits of a token's text fields, in characters.
const (
	MaxActor  = 200 // as KL_ACTOR
	MaxStates = 500
)

// MinTTL is the shortest lifetime of a token that expires: the expiry is
// compared with the clock of the server that checks the token, while the
// store's clock stamped it, so a lifetime of seconds would depend on how
// well two clocks agree.
const MinTTL = time.Minute

// Token is a token as stored: everything but its secret. Times are UTC.
type Token struct {
	ID        string    // a ULID: sortable by creation time
	Actor     string    // who acts with it: run records and history name them
	ReadOnly  bool      // it may read (GET) but not lock or write
	States    string    // the states it covers: a doublestar glob over state names (AllStates: every state)
	CreatedAt time.Time // by the store's clock
	CreatedBy string    // the actor of `kl token create`
	ExpiresAt time.Time // zero: it does not expire
	RevokedAt time.Time // zero: not revoked
	RevokedBy string    // the actor of `kl token revoke`
}

// New is a token to store: the record without its times, and the hash of
// the token string.
type New struct {
	ID        string
	Actor     string
	ReadOnly  bool
	States    string
	CreatedBy string
	// TTL is how long it is valid from its creation (by the store's clock);
	// 0: it does not expire.
	TTL  time.Duration
	Hash []byte // Hash(token), 32 bytes
}

// Store keeps tokens. Errors: engine.ErrNotFound for an unknown id,
// engine.ErrConflict for an id that exists, engine.ErrInvalid for a New
// that Check refuses; a store this binary may only read refuses the writes
// (a *store.CompatError).
type Store interface {
	// CreateToken stores t, stamped with the store's clock (CreatedAt, and
	// ExpiresAt = CreatedAt + t.TTL when t.TTL > 0), and returns it.
	CreateToken(ctx context.Context, t New) (Token, error)
	// GetToken returns the token id and its stored hash, revoked and
	// expired ones too.
	GetToken(ctx context.Context, id string) (Token, []byte, error)
	// ListTokens returns every token, revoked and expired ones too, oldest
	// first (by id).
	ListTokens(ctx context.Context) ([]Token, error)
	// RevokeToken marks token id revoked by by, at the store's clock, and
	// returns it. A token revoked already is returned as it was (revoking
	// twice changes nothing). engine.ErrInvalid for an empty by.
	RevokeToken(ctx context.Context, id, by string) (Token, error)
}

// Secret is a token string as made: it prints as "klt_…" in %v and in logs
// (slog.LogValuer) so that the secret never lands in a log by mistake.
type Secret string

// Reveal returns the token string itself (for printing it once).
func (s Secret) Reveal() string { return string(s) }

// String hides the secret.
func (s Secret) String() string { return Prefix + "…" }

// LogValue hides the secret from slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Generate makes a new token: its id, the token string and its hash.
func Generate() (id string, secret Secret, hash []byte, err error) {
	raw := make([]byte, secretBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", "", nil, fmt.Errorf("making a token: reading random bytes: %w", err)
	}
	id = ulid.Make().String()
	s := Prefix + id + "_" + base64.RawURLEncoding.EncodeToString(raw)
	return id, Secret(s), Hash(s), nil
}

// Hash is the SHA-256 of the token string s, as stored.
func Hash(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// ErrMalformed: the credential is not a Kilolock token at all.
var ErrMalformed = errors.New("not a Kilolock token (want klt_<ID>_<SECRET>, as kl token create prints it)")

// ParseID returns the id inside the token string s, or ErrMalformed. It
// checks the shape only; Matches checks the secret.
func ParseID(s string) (string, error) {
	rest, ok := strings.CutPrefix(s, Prefix)
	if !ok || len(rest) != idLen+1+secretLen || rest[idLen] != '_' {
		return "", ErrMalformed
	}
	id := rest[:idLen]
	if _, err := ulid.ParseStrict(id); err != nil {
		return "", ErrMalformed
	}
	if _, err := base64.RawURLEncoding.DecodeString(rest[idLen+1:]); err != nil {
		return "", ErrMalformed
	}
	return id, nil
}

// Matches reports whether the token string s hashes to stored, comparing
// the hashes in constant time.
func Matches(s string, stored []byte) bool {
	return subtle.ConstantTimeCompare(Hash(s), stored) == 1
}

// Covers reports whether the token's glob covers state name (doublestar:
// "*" within one /-separated segment, "**" across segments).
func (t Token) Covers(name string) bool {
	ok, err := doublestar.Match(t.States, name)
	return err == nil && ok
}

// Status is what a token is at a time.
type Status string

// Statuses of a token.
const (
	Live    Status = "live"
	Expired Status = "expired"
	Revoked Status = "revoked"
)

// StatusAt is the token's status at now: revoked before expired.
func (t Token) StatusAt(now time.Time) Status {
	switch {
	case !t.RevokedAt.IsZero():
		return Revoked
	case !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt):
		return Expired
	}
	return Live
}

// Check returns an engine.ErrInvalid error naming what is wrong with t, or
// nil: an id that is not a ULID, an actor or creator that is blank, too
// long or not printable text on one line, a glob that does not parse, a
// negative TTL or one under MinTTL, a hash that is not 32 bytes.
func Check(t New) error {
	if _, err := ulid.ParseStrict(t.ID); err != nil {
		return engine.Errorf(engine.ErrInvalid, "token id %q is not a ULID", t.ID)
	}
	if p := WordsProblem(t.Actor, MaxActor); p != "" {
		return engine.Errorf(engine.ErrInvalid, "token actor %q: %s", t.Actor, p)
	}
	if p := WordsProblem(t.CreatedBy, MaxActor); p != "" {
		return engine.Errorf(engine.ErrInvalid, "token creator %q: %s", t.CreatedBy, p)
	}
	if err := CheckStates(t.States); err != nil {
		return err
	}
	if t.TTL < 0 || (t.TTL > 0 && t.TTL < MinTTL) {
		return engine.Errorf(engine.ErrInvalid, "token lifetime %s: use at least %s, or none (it does not expire)", t.TTL, MinTTL)
	}
	if len(t.Hash) != sha256.Size {
		return engine.Errorf(engine.ErrInvalid, "token hash of %d bytes: want %d (SHA-256)", len(t.Hash), sha256.Size)
	}
	return nil
}

// CheckStates returns an engine.ErrInvalid error when glob is not a state
// glob: empty, too long, not printable text, or not a valid doublestar
// pattern (an unclosed "[" or "{").
func CheckStates(glob string) error {
	if glob == "" {
		return engine.Errorf(engine.ErrInvalid, "state glob is empty: use %s for every state", AllStates)
	}
	if n := utf8.RuneCountInString(glob); n > MaxStates {
		return engine.Errorf(engine.ErrInvalid, "state glob is too long: %d characters, at most %d", n, MaxStates)
	}
	if p := engine.TextProblem(glob); p != "" {
		return engine.Errorf(engine.ErrInvalid, "state glob %q %s", glob, p)
	}
	if !doublestar.ValidatePattern(glob) {
		return engine.Errorf(engine.ErrInvalid, "state glob %q is not a valid pattern (an unclosed [ or {?): "+
			"use * within a segment and ** across segments, e.g. acme/** or acme/*/prod", glob)
	}
	return nil
}

// WordsProblem says what makes s unfit to name someone (an actor), or "":
// blank, spaces at either end, longer than max characters, or not
// printable text on one line (engine.TextProblem).
func WordsProblem(s string, max int) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "blank: use printable text"
	case strings.TrimSpace(s) != s:
		return "begins or ends with a space: remove it"
	case utf8.RuneCountInString(s) > max:
		return fmt.Sprintf("too long: %d characters, at most %d", utf8.RuneCountInString(s), max)
	}
	return engine.TextProblem(s)
}
