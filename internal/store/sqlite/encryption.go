package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/kilolock/kilolock/internal/seal"
	"github.com/kilolock/kilolock/internal/store"
)

// encryptionKeys reads the kl_encryption rows through q.
func (s *Store) encryptionKeys(ctx context.Context, q querier) ([]store.EncryptionKey, error) {
	rows, err := q.QueryContext(ctx, `SELECT key_id, canary, added_at, retired_at FROM kl_encryption ORDER BY key_id`)
	if err != nil {
		return nil, fmt.Errorf("reading kl_encryption: %w", s.mapErr(err))
	}
	defer rows.Close()
	var out []store.EncryptionKey
	for rows.Next() {
		var k store.EncryptionKey
		var added int64
		var retired sql.NullInt64
		if err := rows.Scan(&k.ID, &k.Canary, &added, &retired); err != nil {
			return nil, fmt.Errorf("reading kl_encryption: %w", s.mapErr(err))
		}
		k.AddedAt = fromNanos(added)
		if retired.Valid {
			k.RetiredAt = fromNanos(retired.Int64)
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
	keys, err := s.encryptionKeys(ctx, s.db)
	if err != nil {
		return err
	}
	add, err := store.CheckEncryption(s.keys, keys, s.now())
	if err != nil {
		return err
	}
	s.keyPending.Store(add != nil)
	return nil
}

// recordKey records the sealing key in write transaction tx, checking
// again under the write lock: another process may have recorded the same
// id meanwhile, with another key.
func (s *Store) recordKey(ctx context.Context, tx *sql.Tx) error {
	keys, err := s.encryptionKeys(ctx, tx)
	if err != nil {
		return err
	}
	add, err := store.CheckEncryption(s.keys, keys, s.now())
	if err != nil || add == nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO kl_encryption (key_id, canary, added_at) VALUES (?, ?, ?)`, add.ID, add.Canary, nanos(add.AddedAt))
	return s.mapErr(err)
}

// Reseal seals every artifact and version snapshot under the keyring's
// first key — the clear ones and those sealed under another of its keys —
// ResealBatch rows per write transaction, then retires every other key in
// kl_encryption (ADR 0066, `kl store reseal`). Errors: no key configured;
// a blob the keyring cannot open (it names the row; what was re-sealed
// before stays re-sealed, and a second run goes on from there).
func (s *Store) Reseal(ctx context.Context) (store.ResealResult, error) {
	res := store.NewResealResult(s.keys.SealingID())
	if !s.keys.Enabled() {
		return res, fmt.Errorf("re-sealing the store: %w: set %s", seal.ErrNoKey, s.keys.VariableOr(seal.DefaultVariable))
	}
	for _, p := range resealPasses {
		var after resealBlob
		for done := false; !done; {
			err := s.withTx(ctx, func(tx *sql.Tx) error {
				var err error
				after, done, err = s.resealBatch(ctx, tx, p, after, &res)
				return err
			})
			if err != nil {
				return res, fmt.Errorf("re-sealing the store's %s: %w", p.kind, err)
			}
		}
	}
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE kl_encryption SET retired_at = ? WHERE key_id <> ? AND retired_at IS NULL RETURNING key_id`, nanos(s.now()), res.Key)
		if err != nil {
			return s.mapErr(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return s.mapErr(err)
			}
			res.Retired = append(res.Retired, id)
		}
		return s.mapErr(rows.Err())
	})
	slices.Sort(res.Retired)
	if err != nil {
		return res, fmt.Errorf("re-sealing the store: retiring the other keys: %w", err)
	}
	if res.Compacted, err = s.compact(ctx); err != nil {
		return res, fmt.Errorf("re-sealing the store: rewriting the file: %w", err)
	}
	return res, nil
}

// compact rewrites the database file so that no copy of a blob as it was
// before the re-seal stays in it: the pages an UPDATE freed and the old
// frames of the WAL keep their bytes. It checkpoints the WAL, runs VACUUM
// (a new copy of the database holding only live rows), and checkpoints
// again with TRUNCATE. ok is false when another connection kept the WAL
// from being truncated (it still holds old frames until the next
// checkpoint that can).
func (s *Store) compact(ctx context.Context) (ok bool, err error) {
	checkpoint := func() (bool, error) {
		var busy, frames, done int
		if err := s.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &done); err != nil {
			return false, s.mapErr(err)
		}
		return busy == 0, nil
	}
	if _, err := checkpoint(); err != nil {
		return false, err
	}
	if _, err := s.db.ExecContext(ctx, `VACUUM`); err != nil {
		return false, s.mapErr(err)
	}
	return checkpoint()
}

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
	{"artifacts", `SELECT run, name, 0, data FROM artifacts WHERE (run, name) > (?, ?) ORDER BY run, name LIMIT ?`,
		`UPDATE artifacts SET data = ? WHERE run = ? AND name = ?`,
		func(b resealBlob) string { return store.ArtifactPlace(b.a, b.b) }, func(b resealBlob) any { return b.b }},
	{"versions", `SELECT state, '', serial, snapshot FROM versions WHERE (state, serial) > (?, ?) AND length(snapshot) > 0 ORDER BY state, serial LIMIT ?`,
		`UPDATE versions SET snapshot = ? WHERE state = ? AND serial = ?`,
		func(b resealBlob) string { return store.VersionPlace(b.a, b.n) }, func(b resealBlob) any { return b.n }},
	{"headers", `SELECT state, '', serial, header FROM versions WHERE (state, serial) > (?, ?) AND header IS NOT NULL ORDER BY state, serial LIMIT ?`,
		`UPDATE versions SET header = ? WHERE state = ? AND serial = ?`,
		func(b resealBlob) string { return store.HeaderPlace(b.a, b.n) }, func(b resealBlob) any { return b.n }},
	// An entry keeps its name (its hash) when re-sealed: the hash is an id.
	{"entries", `SELECT state, hex(hash), 0, body FROM state_entries WHERE (state, hash) > (?, unhex(?)) ORDER BY state, hash LIMIT ?`,
		`UPDATE state_entries SET body = ? WHERE state = ? AND hash = unhex(?)`,
		func(b resealBlob) string { return store.EntryPlace(b.a, mustHex(b.b)) }, func(b resealBlob) any { return b.b }},
}

// mustHex decodes SQLite's hex() of a hash.
func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}

// resealBatch re-seals, in tx, the batch of pass p after the row after,
// adding its counts to res; it returns the batch's last row and whether it
// was the last batch.
func (s *Store) resealBatch(ctx context.Context, tx *sql.Tx, p resealPass, after resealBlob, res *store.ResealResult) (resealBlob, bool, error) {
	rows, err := tx.QueryContext(ctx, p.sel, after.a, p.second(after), store.ResealBatch)
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
		res.Read[p.kind]++
		sealed, err := store.Reseal(s.keys, p.place(b), b.data)
		if err != nil {
			return after, false, err
		}
		if sealed == nil {
			res.Unchanged[p.kind]++
			continue
		}
		if _, err := tx.ExecContext(ctx, p.upd, sealed, b.a, p.second(b)); err != nil {
			return after, false, s.mapErr(err)
		}
		res.Resealed[p.kind]++
	}
	if len(batch) > 0 {
		after = batch[len(batch)-1]
	}
	return after, len(batch) < store.ResealBatch, nil
}
