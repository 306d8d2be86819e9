package store

import (
	"time"

	"github.com/kilolock/kilolock/internal/token"
)

// The kl_tokens table (migration 12, ADR 0054) is read and written by each
// adapter's token.go in its own dialect; what both share is here: the row
// a token.New becomes, and how a row is scanned.

// NewTokenRecord is the token t becomes when stored at now (the store's
// clock): CreatedAt now, ExpiresAt now + t.TTL when t.TTL > 0. Times are
// truncated to microseconds, which both stores keep.
func NewTokenRecord(t token.New, now time.Time) token.Token {
	now = now.UTC().Truncate(time.Microsecond)
	tok := token.Token{ID: t.ID, Actor: t.Actor, ReadOnly: t.ReadOnly, States: t.States, CreatedAt: now, CreatedBy: t.CreatedBy}
	if t.TTL > 0 {
		tok.ExpiresAt = now.Add(t.TTL)
	}
	return tok
}

// Bool is b as the schema's integer: 1 or 0.
func Bool(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// NullNanos is t as the schema's nullable Unix nanoseconds: nil for the
// zero time.
func NullNanos(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	n := t.UnixNano()
	return &n
}

// ScanToken scans a row of the columns id, hash, actor, read_only, states,
// created_at, created_by, expires_at, revoked_at, revoked_by into a token
// and its stored hash. Errors are the driver's, for the adapter to map.
func ScanToken(row interface{ Scan(dest ...any) error }) (token.Token, []byte, error) {
	var (
		t                 token.Token
		hash              []byte
		readOnly, created int64
		expires, revoked  *int64
		revokedBy         *string
	)
	if err := row.Scan(&t.ID, &hash, &t.Actor, &readOnly, &t.States, &created, &t.CreatedBy, &expires, &revoked, &revokedBy); err != nil {
		return token.Token{}, nil, err
	}
	t.ReadOnly = readOnly != 0
	t.CreatedAt = time.Unix(0, created).UTC()
	if expires != nil {
		t.ExpiresAt = time.Unix(0, *expires).UTC()
	}
	if revoked != nil {
		t.RevokedAt = time.Unix(0, *revoked).UTC()
	}
	if revokedBy != nil {
		t.RevokedBy = *revokedBy
	}
	return t, hash, nil
}
