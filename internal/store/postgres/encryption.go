package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/seal"
	"github.com/kilolock/kilolock/internal/store"
)

// encryptionKeys reads the kl_encryption rows through q.
func (s *Store) encryptionKeys(ctx context.Context, q querier) ([]store.EncryptionKey, error) {
	rows, err := q.Query(ctx, `SELECT key_id, canary, added_at, retired_at FROM kl_encryption ORDER BY key_id`)
	if err != nil {
		return nil, fmt.Errorf("reading kl_encryption: %w", s.mapErr(err))
	}
	defer rows.Close()
	var out []store.EncryptionKey
	for rows.Next() {
		var k store.EncryptionKey
		var added int64
		var retired *int64
		if err := rows.Scan(&k.ID, &k.Canary, &added, &retired); err != nil {
			return nil, fmt.Errorf("reading kl_encryption: %w", s.mapErr(err))
		}
		k.AddedAt = fromNanos(added)
		if retired != nil {
			k.RetiredAt = fromNanos(*retired)
		}
		out = append(out, k)
	}
	return out, s.mapErr(rows.Err())
}

// checkEncryption refuses a store whose encryption the keyring does not
// match, and records the sealing key of one it may use
// (store.CheckEncryption, ADR 0066). A binary that may only read the store
// (ADR 0048) records nothing: it seals nothing.
func (s *Store) checkEncryption(ctx context.Context) error {
	keys, err := s.encryptionKeys(ctx, s.pool)
	if err != nil {
		return err
	}
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return err
	}
	add, err := store.CheckEncryption(s.keys, keys, now)
	if err != nil || add == nil {
		return err
	}
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO kl_encryption (key_id, canary, added_at) VALUES ($1, $2, $3) ON CONFLICT (key_id) DO NOTHING`,
			add.ID, add.Canary, nanos(add.AddedAt)); err != nil {
			return s.mapErr(err)
		}
		// Again with what is committed now: another process may have
		// recorded the same id meanwhile, with another key.
		keys, err := s.encryptionKeys(ctx, tx)
		if err != nil {
			return err
		}
		_, err = store.CheckEncryption(s.keys, keys, now)
		return err
	})
	if errors.Is(err, engine.ErrReadOnly) {
		return nil
	}
	return err
}

// Reseal seals every artifact and version snapshot under the keyring's
// first key — the clear ones and those sealed under another of its keys —
// ResealBatch rows per write transaction (each row locked FOR UPDATE),
// then retires every other key in kl_encryption (ADR 0066, `kl store
// reseal`). Errors: no key configured; a blob the keyring cannot open (it
// names the row; what was re-sealed before stays re-sealed, and a second
// run goes on from there).
func (s *Store) Reseal(ctx context.Context) (store.ResealResult, error) {
	res := store.NewResealResult(s.keys.SealingID())
	if !s.keys.Enabled() {
		return res, fmt.Errorf("re-sealing the store: %w: set %s", seal.ErrNoKey, s.keys.VariableOr(seal.DefaultVariable))
	}
	type blob struct {
		a, b string
		n    int64
		data []byte
	}
	passes := []struct {
		kind, sel, upd string
		place          func(blob) string
	}{
		{"artifacts", `SELECT run, name, 0::bigint, data FROM artifacts WHERE (run, name) > ($1, $2) ORDER BY run, name LIMIT $3 FOR UPDATE`,
			`UPDATE artifacts SET data = $1 WHERE run = $2 AND name = $3`, func(b blob) string { return store.ArtifactPlace(b.a, b.b) }},
		{"versions", `SELECT state, ''::text, serial, snapshot FROM versions WHERE (state, serial) > ($1, $2::bigint) ORDER BY state, serial LIMIT $3 FOR UPDATE`,
			`UPDATE versions SET snapshot = $1 WHERE state = $2 AND serial = $3`, func(b blob) string { return store.VersionPlace(b.a, b.n) }},
	}
	for _, p := range passes {
		var after blob
		for done := false; !done; {
			read, resealed, unchanged, next, last := 0, 0, 0, after, false
			err := s.withTx(ctx, func(tx pgx.Tx) error {
				// A retried transaction starts over: counts and cursor
				// are taken only from the one that committed.
				read, resealed, unchanged, next, last = 0, 0, 0, after, false
				var cur any = after.b
				if p.kind == "versions" {
					cur = after.n
				}
				rows, err := tx.Query(ctx, p.sel, after.a, cur, store.ResealBatch)
				if err != nil {
					return s.mapErr(err)
				}
				var batch []blob
				for rows.Next() {
					var b blob
					if err := rows.Scan(&b.a, &b.b, &b.n, &b.data); err != nil {
						rows.Close()
						return s.mapErr(err)
					}
					batch = append(batch, b)
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					return s.mapErr(err)
				}
				for _, b := range batch {
					read++
					sealed, err := store.Reseal(s.keys, p.place(b), b.data)
					if err != nil {
						return err
					}
					if sealed == nil {
						unchanged++
						continue
					}
					second := any(b.b)
					if p.kind == "versions" {
						second = b.n
					}
					if _, err := tx.Exec(ctx, p.upd, sealed, b.a, second); err != nil {
						return s.mapErr(err)
					}
					resealed++
				}
				last = len(batch) < store.ResealBatch
				if len(batch) > 0 {
					next = batch[len(batch)-1]
				}
				return nil
			})
			if err != nil {
				return res, fmt.Errorf("re-sealing the store's %s: %w", p.kind, err)
			}
			after, done = next, last
			res.Read[p.kind] += read
			res.Resealed[p.kind] += resealed
			res.Unchanged[p.kind] += unchanged
		}
	}
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		res.Retired = nil
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `UPDATE kl_encryption SET retired_at = $1 WHERE key_id <> $2 AND retired_at IS NULL RETURNING key_id`, nanos(now), res.Key)
		if err != nil {
			return s.mapErr(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		res.Retired = ids
		return s.mapErr(err)
	})
	slices.Sort(res.Retired)
	if err != nil {
		return res, fmt.Errorf("re-sealing the store: retiring the other keys: %w", err)
	}
	return res, nil
}
