package postgres

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

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
// match (store.CheckEncryption, ADR 0066). The sealing key of one it may
// use is recorded by the binary's first write transaction (recordKey), not
// here: a binary that only reads seals nothing and records nothing, so a
// reader with a key never makes a clear store encrypted.
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
	if err != nil {
		return err
	}
	s.keyPending.Store(add != nil)
	return nil
}

// recordKey records the sealing key in write transaction tx, then checks
// again with what is committed: another replica may have recorded the
// same id meanwhile, with another key.
func (s *Store) recordKey(ctx context.Context, tx pgx.Tx) error {
	now, err := s.now(ctx, tx)
	if err != nil {
		return err
	}
	keys, err := s.encryptionKeys(ctx, tx)
	if err != nil {
		return err
	}
	add, err := store.CheckEncryption(s.keys, keys, now)
	if err != nil || add == nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO kl_encryption (key_id, canary, added_at) VALUES ($1, $2, $3) ON CONFLICT (key_id) DO NOTHING`,
		add.ID, add.Canary, nanos(add.AddedAt)); err != nil {
		return s.mapErr(err)
	}
	if keys, err = s.encryptionKeys(ctx, tx); err != nil {
		return err
	}
	_, err = store.CheckEncryption(s.keys, keys, now)
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
	for _, p := range resealPasses {
		var after resealBlob
		for done := false; !done; {
			// A retried transaction starts over: the counts and the
			// cursor are those of the one that committed.
			var c resealCounts
			next, last := after, false
			err := s.withTx(ctx, func(tx pgx.Tx) error {
				var err error
				c = resealCounts{}
				next, last, err = s.resealBatch(ctx, tx, p, after, &c)
				return err
			})
			if err != nil {
				return res, fmt.Errorf("re-sealing the store's %s: %w", p.kind, err)
			}
			after, done = next, last
			res.Read[p.kind] += c.read
			res.Resealed[p.kind] += c.resealed
			res.Unchanged[p.kind] += c.unchanged
		}
	}
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `UPDATE kl_encryption SET retired_at = $1 WHERE key_id <> $2 AND retired_at IS NULL RETURNING key_id`, nanos(now), res.Key)
		if err != nil {
			return s.mapErr(err)
		}
		res.Retired, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return s.mapErr(err)
	})
	slices.Sort(res.Retired)
	if err != nil {
		return res, fmt.Errorf("re-sealing the store: retiring the other keys: %w", err)
	}
	return res, nil
}

// resealCounts are one batch's counts.
type resealCounts struct{ read, resealed, unchanged int }

// resealBlob is one row a re-seal reads: its key (a and b, or a and n)
// and its blob.
type resealBlob struct {
	a, b string
	n    int64
	data []byte
}

// resealPass is one kind of blob: the SELECT of a batch after a cursor
// (its key), the UPDATE of one row, and the row's place.
type resealPass struct {
	kind, sel, upd string
	place          func(resealBlob) string
	second         func(resealBlob) any // the key's second column
}

// resealPasses are the re-seal's passes, in store.ResealKinds order.
var resealPasses = []resealPass{
	{"artifacts", `SELECT run, name, 0::bigint, data FROM artifacts WHERE (run, name) > ($1, $2) ORDER BY run, name LIMIT $3 FOR UPDATE`,
		`UPDATE artifacts SET data = $1 WHERE run = $2 AND name = $3`,
		func(b resealBlob) string { return store.ArtifactPlace(b.a, b.b) }, func(b resealBlob) any { return b.b }},
	{"versions", `SELECT state, ''::text, serial, snapshot FROM versions WHERE (state, serial) > ($1, $2::bigint) AND length(snapshot) > 0 ORDER BY state, serial LIMIT $3 FOR UPDATE`,
		`UPDATE versions SET snapshot = $1 WHERE state = $2 AND serial = $3`,
		func(b resealBlob) string { return store.VersionPlace(b.a, b.n) }, func(b resealBlob) any { return b.n }},
	{"headers", `SELECT state, ''::text, serial, header FROM versions WHERE (state, serial) > ($1, $2::bigint) AND header IS NOT NULL ORDER BY state, serial LIMIT $3 FOR UPDATE`,
		`UPDATE versions SET header = $1 WHERE state = $2 AND serial = $3`,
		func(b resealBlob) string { return store.HeaderPlace(b.a, b.n) }, func(b resealBlob) any { return b.n }},
	// An entry keeps its name (its hash) when re-sealed: the hash is an id.
	{"entries", `SELECT state, encode(hash, 'hex'), 0::bigint, body FROM state_entries WHERE (state, hash) > ($1, decode($2, 'hex')) ORDER BY state, hash LIMIT $3 FOR UPDATE`,
		`UPDATE state_entries SET body = $1 WHERE state = $2 AND hash = decode($3, 'hex')`,
		func(b resealBlob) string { return store.EntryPlace(b.a, mustHex(b.b)) }, func(b resealBlob) any { return b.b }},
}

// mustHex decodes PostgreSQL's encode(hash, 'hex').
func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}

// resealBatch re-seals, in tx, the batch of pass p after the row after,
// counting in c; it returns the batch's last row and whether it was the
// last batch.
func (s *Store) resealBatch(ctx context.Context, tx pgx.Tx, p resealPass, after resealBlob, c *resealCounts) (resealBlob, bool, error) {
	rows, err := tx.Query(ctx, p.sel, after.a, p.second(after), store.ResealBatch)
	if err != nil {
		return after, false, s.mapErr(err)
	}
	var batch []resealBlob
	for rows.Next() {
		var b resealBlob
		if err := rows.Scan(&b.a, &b.b, &b.n, &b.data); err != nil {
			rows.Close()
			return after, false, s.mapErr(err)
		}
		batch = append(batch, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return after, false, s.mapErr(err)
	}
	for _, b := range batch {
		c.read++
		sealed, err := store.Reseal(s.keys, p.place(b), b.data)
		if err != nil {
			return after, false, err
		}
		if sealed == nil {
			c.unchanged++
			continue
		}
		if _, err := tx.Exec(ctx, p.upd, sealed, b.a, p.second(b)); err != nil {
			return after, false, s.mapErr(err)
		}
		c.resealed++
	}
	if len(batch) > 0 {
		after = batch[len(batch)-1]
	}
	return after, len(batch) < store.ResealBatch, nil
}
