package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
	"github.com/kilolock/kilolock/internal/token"
)

var _ token.Store = (*Store)(nil)

// tokenColumns are the columns ScanToken reads, in its order.
const tokenColumns = `id, hash, actor, read_only, states, created_at, created_by, expires_at, revoked_at, revoked_by`

// CreateToken stores t (token.Store), stamped with the store's clock, in
// one write transaction.
func (s *Store) CreateToken(ctx context.Context, t token.New) (token.Token, error) {
	if err := token.Check(t); err != nil {
		return token.Token{}, fmt.Errorf("creating token: %w", err)
	}
	tok := store.NewTokenRecord(t, s.now())
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO kl_tokens (`+tokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL)`,
			tok.ID, t.Hash, tok.Actor, store.Bool(tok.ReadOnly), tok.States, nanos(tok.CreatedAt), tok.CreatedBy, store.NullNanos(tok.ExpiresAt))
		return s.mapErr(err)
	})
	if err != nil {
		return token.Token{}, fmt.Errorf("creating token %s: %w", t.ID, err)
	}
	return tok, nil
}

// GetToken returns token id and its stored hash (token.Store).
func (s *Store) GetToken(ctx context.Context, id string) (token.Token, []byte, error) {
	t, hash, err := store.ScanToken(s.db.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM kl_tokens WHERE id = ?`, id))
	if err != nil {
		return token.Token{}, nil, fmt.Errorf("getting token %s: %w", id, s.mapErr(err))
	}
	return t, hash, nil
}

// ListTokens returns every token by id (token.Store).
func (s *Store) ListTokens(ctx context.Context) ([]token.Token, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+tokenColumns+` FROM kl_tokens ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("listing tokens: %w", s.mapErr(err))
	}
	defer rows.Close()
	out := []token.Token{}
	for rows.Next() {
		t, _, err := store.ScanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("listing tokens: %w", s.mapErr(err))
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing tokens: %w", s.mapErr(err))
	}
	return out, nil
}

// RevokeToken marks token id revoked (token.Store), once: a token revoked
// already keeps its first revocation.
func (s *Store) RevokeToken(ctx context.Context, id, by string) (token.Token, error) {
	if p := token.WordsProblem(by, token.MaxActor); p != "" {
		return token.Token{}, engine.Errorf(engine.ErrInvalid, "revoking token %s: the revoking actor %q: %s", id, by, p)
	}
	var t token.Token
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE kl_tokens SET revoked_at = ?, revoked_by = ? WHERE id = ? AND revoked_at IS NULL`,
			nanos(s.now()), by, id); err != nil {
			return s.mapErr(err)
		}
		var err error
		t, _, err = store.ScanToken(tx.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM kl_tokens WHERE id = ?`, id))
		return s.mapErr(err)
	})
	if errors.Is(err, engine.ErrNotFound) {
		return token.Token{}, engine.Errorf(engine.ErrNotFound, "revoking token %s: no such token (kl token list shows them)", id)
	}
	if err != nil {
		return token.Token{}, fmt.Errorf("revoking token %s: %w", id, err)
	}
	return t, nil
}
