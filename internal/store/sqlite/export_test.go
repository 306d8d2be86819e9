package sqlite

import (
	"context"

	"github.com/pressly/goose/v3"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
)

// WithBinary makes Open act as binary b (its version and compatibility
// level) instead of store.ThisBinary, with the Go migrations extra on top
// of the embedded ones: tests open a store as a newer binary would.
func WithBinary(b store.Binary, extra ...*goose.Migration) Option {
	return func(o *options) { o.binary, o.extra = b, extra }
}

// Unconvert stores every version of state whole again and forgets its
// manifests, entries and backfill progress: a store as written before
// migration 17 (storetest.EntriesStore).
func (s *Store) Unconvert(ctx context.Context, state string) error {
	vs, err := s.History(ctx, state, engine.HistoryQuery{Limit: 1000})
	if err != nil {
		return err
	}
	for _, v := range vs {
		doc, err := s.Snapshot(ctx, state, v.Serial)
		if err != nil {
			return err
		}
		z, err := store.CompressSnapshot(doc)
		if err != nil {
			return err
		}
		if _, err := s.db.ExecContext(ctx, `UPDATE versions SET snapshot = ?, header = NULL WHERE state = ? AND serial = ?`, z, state, v.Serial); err != nil {
			return err
		}
	}
	for _, q := range []string{`DELETE FROM version_entries WHERE state = ?`, `DELETE FROM state_entries WHERE state = ?`, `DELETE FROM kl_backfill WHERE state = ?`} {
		if _, err := s.db.ExecContext(ctx, q, state); err != nil {
			return err
		}
	}
	return nil
}
