package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/store/storetest"
	"github.com/kilolock/kilolock/migrations"
)

// raw opens a plain connection on dsn (the test's schema), closed at cleanup.
func raw(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestApplicationName(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		param, option, want string
	}{
		"default":              {want: postgres.DefaultApplicationName},
		"option":               {option: "klbot", want: "klbot"},
		"the DSN's wins":       {param: "from-dsn", option: "klbot", want: "from-dsn"},
		"the DSN's, no option": {param: "from-dsn", want: "from-dsn"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.DSN(t)
			if tc.param != "" {
				var err error
				if dsn, err = pgtest.WithParam(dsn, "application_name", tc.param); err != nil {
					t.Fatal(err)
				}
			}
			var opts []postgres.Option
			if tc.option != "" {
				opts = append(opts, postgres.WithApplicationName(tc.option))
			}
			s, err := postgres.Open(t.Context(), dsn, opts...)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer s.Close()
			var got string
			if err := s.Pool().QueryRow(t.Context(), `SELECT current_setting('application_name')`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("application_name = %q; want %q", got, tc.want)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	base := pgtest.BaseDSN(t)
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	server := fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	noDB, err := pgtest.WithParam(base, "dbname", "kl_no_such_database")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		dsn  string
		want []string
	}{
		"nothing listens": {
			dsn:  "postgres://kl:s3cret-pw@127.0.0.1:1/kl?sslmode=disable&connect_timeout=5",
			want: []string{"connecting to PostgreSQL at 127.0.0.1:1/kl as kl", "connection refused"},
		},
		"unknown host": {
			dsn:  "postgres://kl:s3cret-pw@kl-no-such-host.invalid:5433/kl?sslmode=disable&connect_timeout=5",
			want: []string{"kl-no-such-host.invalid:5433", "kl-no-such-host.invalid"},
		},
		"no such database": {
			dsn:  noDB,
			want: []string{"connecting to PostgreSQL at " + server + "/kl_no_such_database", "does not exist"},
		},
		"not a DSN": {
			dsn:  "postgres://kl:s3cret-pw@127.0.0.1:notaport/kl",
			want: []string{"parsing the DSN"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := postgres.Open(t.Context(), tc.dsn)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded; want an error")
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Open: %q; want it to say %q", msg, w)
				}
			}
			if strings.Contains(msg, "s3cret-pw") {
				t.Errorf("Open: %q shows the password", msg)
			}
			if msg[0] < 'a' || msg[0] > 'z' {
				t.Errorf("Open: %q should start lowercase (docs/style.md 7)", msg)
			}
		})
	}
}

// TestOpenNewerSchemaOfTheSameLevel: a store a newer binary migrated
// further (a schema version this binary lacks, at its level) opens and
// takes writes; before ADR 0048 it was refused ("upgrade kl").
func TestOpenNewerSchemaOfTheSameLevel(t *testing.T) {
	t.Parallel()
	s, dsn := setup(t)
	s.Close()
	if _, err := raw(t, dsn).Exec(t.Context(), `INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, true)`); err != nil {
		t.Fatalf("faking a newer schema: %v", err)
	}
	s, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open of a newer schema at the same level: %v", err)
	}
	defer s.Close()
	if _, err := s.CreateState(t.Context(), storetest.NewState("s")); err != nil {
		t.Fatalf("CreateState on a newer schema at the same level: %v", err)
	}
}

// TestCompat runs the compatibility suite (ADR 0048) on fresh schemas.
func TestCompat(t *testing.T) {
	t.Parallel()
	storetest.RunCompat(t, func(t *testing.T) storetest.CompatDB {
		dsn := pgtest.DSN(t)
		return storetest.CompatDB{Dialect: store.Postgres, Open: func(t *testing.T, b store.Binary, extra ...*goose.Migration) (storetest.CompatStore, error) {
			s, err := postgres.Open(t.Context(), dsn, postgres.WithBinary(b, extra...))
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { s.Close() })
			return s, nil
		}}
	})
}

// embedded returns the embedded PostgreSQL migrations (file name → text)
// and the newest version.
func embedded(t *testing.T) (fstest.MapFS, int64) {
	t.Helper()
	names, err := fs.Glob(migrations.Postgres, "postgres/*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("embedded migrations: %v", err)
	}
	out := fstest.MapFS{}
	var newest int64
	for _, n := range names {
		b, err := fs.ReadFile(migrations.Postgres, n)
		if err != nil {
			t.Fatal(err)
		}
		out[path.Base(n)] = &fstest.MapFile{Data: b}
		v, err := strconv.ParseInt(strings.SplitN(path.Base(n), "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", n, err)
		}
		newest = max(newest, v)
	}
	// The Go migrations (no file) come with the SQL ones.
	return out, max(newest, store.SchemaVersion())
}

// TestFailedMigrationLeavesNothing runs the real schema plus one more
// migration that fails half-way (after creating a table and changing a
// row): goose runs it in one transaction, so the table, the row change and
// the version record all roll back; the error names the file; and the
// binary's own migrations then open the database at their newest version.
func TestFailedMigrationLeavesNothing(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := s.CreateState(t.Context(), storetest.NewState("s")); err != nil {
		t.Fatalf("CreateState: %v", err)
	}
	s.Close()
	broken, newest := embedded(t)
	name := fmt.Sprintf("%05d_half_done.sql", newest+1)
	broken[name] = &fstest.MapFile{Data: []byte(`-- +goose Up
CREATE TABLE half_done (x BIGINT);
UPDATE states SET lineage = 'clobbered';
SELECT no_such_function();
-- +goose Down
DROP TABLE half_done;
`)}
	_, err = postgres.Open(t.Context(), dsn, postgres.WithMigrations(broken))
	if err == nil {
		t.Fatal("Open with a failing migration succeeded")
	}
	t.Logf("Open with a failing migration: %v", err)
	for _, want := range []string{name, fmt.Sprintf("version %d", newest+1), "no_such_function", "rolled back"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open: %q; want it to name %q", err, want)
		}
	}
	conn := raw(t, dsn)
	var tables int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'half_done'`).Scan(&tables); err != nil || tables != 0 {
		t.Errorf("half_done tables after the failed migration: %d, %v; want none", tables, err)
	}
	var version int64
	if err := conn.QueryRow(t.Context(), `SELECT max(version_id) FROM goose_db_version`).Scan(&version); err != nil || version != newest {
		t.Errorf("schema version after the failed migration: %d, %v; want %d", version, err, newest)
	}
	s, err = postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open after the failed migration: %v", err)
	}
	defer s.Close()
	if st, err := s.GetState(t.Context(), "s"); err != nil || st.Lineage != "lineage-s" {
		t.Fatalf("state after the failed migration = %+v, %v; want it untouched", st, err)
	}
}

// TestConcurrentOpenMigratesOnce opens one fresh schema from several
// goroutines at once (each its own pool, like replicas starting together):
// the advisory lock lets one migrate and the others find the work done.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			s, err := postgres.Open(t.Context(), dsn)
			if err == nil {
				_, err = s.CreateState(t.Context(), storetest.NewState("s"))
				if errors.Is(err, engine.ErrConflict) {
					err = nil
				}
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("opener %d: %v", i, err)
		}
	}
	all, _ := embedded(t)
	want := len(all) + len(store.GoMigrations(store.Postgres))
	var applied int
	if err := raw(t, dsn).QueryRow(t.Context(), `SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&applied); err != nil || applied != want {
		t.Fatalf("migration records = %d, %v; want one per migration: %d", applied, err, want)
	}
}

// TestContextCanceledWhileWaiting holds the state row lock from another
// connection: a Commit waiting for it gives up when its context ends.
func TestContextCanceledWhileWaiting(t *testing.T) {
	t.Parallel()
	s, dsn := setup(t)
	if _, err := s.CreateState(t.Context(), storetest.NewState("s")); err != nil {
		t.Fatal(err)
	}
	r := engine.Run{ID: "01WAITER", Kind: engine.KindApply, State: "s", Status: engine.StatusApplying}
	if err := s.CreateRun(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	conn := raw(t, dsn)
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck
	if _, err := tx.Exec(t.Context(), `SELECT 1 FROM states WHERE name = 's' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.Commit(ctx, engine.CommitRequest{State: "s", Run: r.ID, Merge: storetest.Merge("x", "terraform_data.a")})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Commit while another connection holds the state: %v; want context.DeadlineExceeded", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("a cancelled Commit waited %v for the lock; want about 200ms", waited)
	}
	_, err = s.Acquire(ctx, engine.AcquireRequest{State: "s", Run: r.ID, Lease: time.Minute,
		Reservations: []engine.Reservation{{Address: "terraform_data.a", Mode: engine.ModeWrite}}})
	if err == nil {
		t.Fatal("Acquire with an expired context succeeded")
	}
	tx.Rollback(t.Context()) //nolint:errcheck
	if _, err := s.Commit(t.Context(), engine.CommitRequest{State: "s", Run: r.ID, Merge: storetest.Merge("x", "terraform_data.a")}); err != nil {
		t.Fatalf("Commit after the lock was released: %v", err)
	}
}

// TestWithClock stamps runs and leases with the given clock instead of the
// database's, as the sqlite adapter's WithClock does.
func TestWithClock(t *testing.T) {
	t.Parallel()
	fixed := time.Date(2031, 3, 4, 5, 6, 7, 8000, time.UTC)
	s, _ := setup(t, postgres.WithClock(func() time.Time { return fixed }))
	st, err := s.CreateState(t.Context(), storetest.NewState("s"))
	if err != nil || !st.CreatedAt.Equal(fixed) {
		t.Fatalf("CreateState = %+v, %v; want created at %v", st, err, fixed)
	}
	if err := s.CreateRun(t.Context(), engine.Run{ID: "01R", Kind: engine.KindApply, State: "s", Status: engine.StatusApplying}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Acquire(t.Context(), engine.AcquireRequest{State: "s", Run: "01R", Lease: time.Minute,
		Reservations: []engine.Reservation{{Address: "terraform_data.a", Mode: engine.ModeWrite}}})
	if err != nil || !res.Held[0].AcquiredAt.Equal(fixed) || !res.Held[0].ExpiresAt.Equal(fixed.Add(time.Minute)) {
		t.Fatalf("Acquire = %+v, %v; want acquired at %v for a minute", res, err, fixed)
	}
}

// TestMarkerTextRoundTrips stores marker and run text that PostgreSQL text
// columns cannot hold raw (a NUL byte) or that JSONB would reject; bodies
// are JSON in TEXT columns, so it round-trips exactly as in SQLite.
func TestMarkerTextRoundTrips(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	if _, err := s.CreateState(t.Context(), storetest.NewState("s")); err != nil {
		t.Fatal(err)
	}
	reason := "terraform said: \x00 \u2028 \\u0000 \"quoted\" ünïcode"
	end := &engine.End{Cause: engine.CauseFailed, Step: engine.StepCommit, Err: reason}
	r := engine.Run{ID: "01R", Kind: engine.KindApply, State: "s", Status: engine.StatusFailed, End: end}
	if err := s.CreateRun(t.Context(), r); err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	if err := s.AddMarkers(t.Context(), r.ID, engine.Marker{Kind: engine.MarkerFailed, End: end}); err != nil {
		t.Fatalf("AddMarkers: %v", err)
	}
	got, err := s.GetRun(t.Context(), r.ID)
	if err != nil || got.End == nil || got.End.Err != reason {
		t.Fatalf("GetRun end = %+v, %v; want the error %q kept", got.End, err, reason)
	}
	ms, err := s.Markers(t.Context(), r.ID)
	if err != nil || len(ms) != 1 || ms[0].End == nil || ms[0].End.Err != reason {
		t.Fatalf("Markers = %+v, %v; want the reason kept", ms, err)
	}
}
