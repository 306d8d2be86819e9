// Package postgres is the engine.Store for teams: one PostgreSQL database
// shared by many kl processes and by klbot's replicas (docs/design.md "Two
// programs"). It uses github.com/jackc/pgx/v5 through a pgxpool.Pool.
//
// Safety comes from PostgreSQL, never from an in-process mutex. Every write
// transaction runs at READ COMMITTED and takes row locks in one order —
// the state row, then run rows (by id), then reservation rows — so that
// writers on one state queue behind each other instead of interleaving:
//
//   - Commit and Acquire lock the state row first
//     (SELECT … FROM states WHERE name = $1 FOR NO KEY UPDATE). Two commits,
//     two acquisitions, or a commit and an acquisition on one state therefore
//     run one after the other, in any number of processes, and each sees
//     everything the previous one wrote. FOR NO KEY UPDATE excludes every
//     other FOR [NO KEY] UPDATE of the row exactly as FOR UPDATE does, but
//     lets inserts that merely reference the state (CreateRun's foreign-key
//     check) proceed while a commit runs.
//   - UpdateRun, AddMarkers, Release and the lease sweep lock the run row
//     the same way before they number markers or change the run.
//
// A deadlock PostgreSQL breaks (40P01) or a serialization failure (40001)
// rolls the transaction back and it is run again from the start (so a
// Merge or UpdateRun callback may run more than once: it must depend only on
// its arguments, as the engine's do).
//
// Clock: by default "now" is the DATABASE's clock, read once per write
// transaction after its locks are taken (clock_timestamp()). Leases are
// stamped and compared with it, so replicas on hosts whose clocks disagree
// still agree on which leases have ended; a lease is the only time the store
// compares across processes. WithClock replaces it with a process clock.
//
// The schema is migrations/postgres, applied with goose at Open under a
// PostgreSQL advisory lock, so replicas starting together migrate once.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/seal"
	"github.com/kilolock/kilolock/internal/store"
	"github.com/kilolock/kilolock/migrations"
)

// DefaultApplicationName is the application_name the store's connections
// report to PostgreSQL (pg_stat_activity) when neither the DSN nor
// PGAPPNAME sets one.
const DefaultApplicationName = "kilolock"

// txAttempts is how many times a transaction runs before a deadlock or
// serialization failure is returned.
const txAttempts = 5

// Store is the PostgreSQL engine.Store. It is safe for concurrent use by
// many goroutines and, through the same database, by many processes.
type Store struct {
	// Algorithms are the engine.Store methods written once (store.Algorithms):
	// CreateState, CreateRun, Commit, UpdateRun, RenewRun, AddMarkers,
	// Acquire, Reservations, Renew, Release, ExpireLeases, over this
	// adapter's statements (its executor).
	store.Algorithms

	pool   *pgxpool.Pool
	clock  func() time.Time
	binary store.Binary  // this binary, as the compatibility rules see it
	compat store.Compat  // the store's, as Open found it
	keys   *seal.Keyring // seals artifacts and snapshots (nil: none; ADR 0066)
	// keyPending: the keyring's sealing key may be used but has no
	// kl_encryption row yet; the first write transaction once the keyring
	// has sealed or hashed records it (recordKey), so a binary that only
	// reads records nothing.
	keyPending atomic.Bool
}

var _ engine.Store = (*Store)(nil)

// Option configures Open.
type Option func(*options)

type options struct {
	appName    string
	clock      func() time.Time
	maxConns   int32
	migrations fs.FS
	binary     store.Binary       // tests: a newer binary (store.ThisBinary if zero)
	extra      []*goose.Migration // tests: a newer binary's Go migrations
	keys       *seal.Keyring
}

// WithKeyring makes the store seal every artifact and version snapshot it
// writes with kr's first key and open them with any of its keys (ADR
// 0066); a keyring without a key (seal.Parse of "") still names its
// variable when Open refuses an encrypted store. Unset: nothing is sealed,
// and an encrypted store is refused naming KL_ENCRYPTION_KEY.
func WithKeyring(kr *seal.Keyring) Option {
	return func(o *options) { o.keys = kr }
}

// WithApplicationName sets the application_name reported when the DSN
// (and PGAPPNAME) sets none; DefaultApplicationName otherwise. klbot passes
// "klbot" so operators can tell its connections from kl's.
func WithApplicationName(name string) Option {
	return func(o *options) { o.appName = name }
}

// WithClock makes the store stamp versions, runs, markers and leases with
// now (a process clock) instead of the database's clock. Use it only where
// every process sharing the database uses the same clock (tests).
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.clock = now }
}

// WithMaxConns caps the connection pool (n > 0). The default is pgxpool's
// (the greater of 4 and the number of CPUs), or pool_max_conns in the DSN.
func WithMaxConns(n int32) Option {
	return func(o *options) { o.maxConns = n }
}

// Open connects to the database named by dsn (a postgres:// URL or a
// key=value string, as libpq and pgx read it, PG* environment variables
// included), checks that it answers, and applies the embedded migrations.
//
// Errors: a DSN that does not parse; a server that cannot be reached or
// refuses the login — the error names host, port, user and database and the
// cause, never the password; a migration that fails — the error names the
// migration file, and nothing of it stays (each runs in one transaction);
// a store this binary may not read (*store.CompatError); an encrypted
// store the keyring (WithKeyring) does not match (store.ErrEncryption). A database
// migrated by a newer binary opens by the compatibility rules of ADR 0048
// (store.Binary.Check): read and write at the same compatibility level,
// read only when its level is higher — every write then fails with a
// *store.CompatError, which errors.Is engine.ErrReadOnly.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	o := options{appName: DefaultApplicationName}
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("opening PostgreSQL store: parsing the DSN: %s", parseCause(err, dsn))
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" && o.appName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = o.appName
	}
	if o.maxConns > 0 {
		cfg.MaxConns = o.maxConns
	}
	where := describe(cfg.ConnConfig.Config)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening PostgreSQL store %s: %w", where, err)
	}
	if o.binary == (store.Binary{}) {
		o.binary = store.ThisBinary()
	}
	s := &Store{pool: pool, clock: o.clock, binary: o.binary, keys: o.keys}
	s.Algorithms = store.Algorithms{DB: s.database()}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("opening PostgreSQL store: %w", s.mapErr(err)) // names the server
	}
	fsys := o.migrations
	if fsys == nil {
		if fsys, err = fs.Sub(migrations.Postgres, "postgres"); err != nil {
			pool.Close()
			return nil, fmt.Errorf("opening PostgreSQL store %s: %w", where, err)
		}
	}
	if err := s.migrate(store.Migrating(ctx, o.binary), cfg.ConnConfig, fsys, o.extra); err != nil {
		pool.Close()
		return nil, fmt.Errorf("opening PostgreSQL store %s: %w", where, err)
	}
	if err := s.checkEncryption(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("opening PostgreSQL store %s: %w", where, err)
	}
	return s, nil
}

// parseCause is why pgx could not parse dsn, without the DSN: pgx's
// *pgconn.ParseConfigError quotes it, its password redacted only on a
// best-effort basis (libpq's "password = pw" and "password=a\ b" defeat
// it, issue 15 §4), so its text is cut to what follows the quote, and any
// copy of dsn left in the cause is replaced. The error is not wrapped:
// its Error and its ConnString field hold the DSN.
func parseCause(err error, dsn string) string {
	msg := err.Error()
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if i := strings.LastIndex(msg, "`: "); i >= 0 {
			msg = msg[i+len("`: "):]
		} else {
			msg = "it is neither a postgres:// URL nor a key=value string"
		}
	}
	if dsn != "" {
		msg = strings.ReplaceAll(msg, dsn, "(the DSN)")
	}
	return msg
}

// describe names a server for error messages: host:port/database as user,
// without the password.
func describe(c pgconn.Config) string {
	return fmt.Sprintf("%s/%s as %s", hostPort(c.Host, c.Port), c.Database, c.User)
}

func hostPort(host string, port uint16) string {
	if strings.HasPrefix(host, "/") {
		return fmt.Sprintf("socket %s/.s.PGSQL.%d", host, port)
	}
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return host + ":" + strconv.Itoa(int(port))
}

// migrationLockKey is the first key of the advisory lock held while
// migrating; the second is a hash of the schema, so stores in different
// schemas of one database migrate independently.
const migrationLockKey = 0x6b6c // "kl"

// migrate applies the goose migrations in fsys (and the Go ones, with a
// test's extra) through a database/sql handle on the same connection
// settings, then reads the store's compatibility level and applies the
// rules (checkCompat). It holds a session advisory lock for the whole
// check-and-migrate, so processes starting together wait for each other
// (pg_advisory_lock blocks; no polling) and migrate once.
func (s *Store) migrate(ctx context.Context, cc *pgx.ConnConfig, fsys fs.FS, extra []*goose.Migration) error {
	db := stdlib.OpenDB(*cc)
	defer db.Close()
	lock, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrating schema: %w", s.mapErr(err))
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, `SELECT pg_advisory_lock($1, hashtext(current_schema()))`, migrationLockKey); err != nil {
		return fmt.Errorf("migrating schema: taking the migration lock: %w", s.mapErr(err))
	}
	defer lock.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1, hashtext(current_schema()))`, migrationLockKey) //nolint:errcheck // closing the session releases it too
	schema, err := runMigrations(ctx, db, fsys, extra)
	if err != nil {
		return fmt.Errorf("migrating schema: %w", s.mapErr(err))
	}
	return s.checkCompat(ctx, schema)
}

// MigrationProvider is the goose provider of the PostgreSQL schema: the
// SQL migrations in fsys (migrations.Postgres's "postgres" directory) and
// the Go ones (store.GoMigrations). klbot's readiness check uses it
// too, so both count the same versions.
func MigrationProvider(db *sql.DB, fsys fs.FS, extra ...*goose.Migration) (*goose.Provider, error) {
	return goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithDisableGlobalRegistry(true), goose.WithVerbose(false),
		goose.WithGoMigrations(append(store.GoMigrations(store.Postgres), extra...)...))
}

// runMigrations applies the migrations the database lacks and returns its
// schema version; a schema newer than fsys's newest migration (a newer
// binary's) is left as it is: checkCompat decides. A failed migration is
// named by its file.
func runMigrations(ctx context.Context, db *sql.DB, fsys fs.FS, extra []*goose.Migration) (int64, error) {
	p, err := MigrationProvider(db, fsys, extra...)
	if err != nil {
		return 0, err
	}
	sources := p.ListSources()
	newest := sources[len(sources)-1].Version
	cur, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading schema version: %w", err)
	}
	if cur >= newest {
		return cur, nil
	}
	if _, err := p.Up(ctx); err != nil {
		var pe *goose.PartialError
		if errors.As(err, &pe) && pe.Failed != nil && pe.Failed.Source != nil {
			return 0, fmt.Errorf("applying migration %s (version %d) on top of version %d; it was rolled back: %w",
				pe.Failed.Source.Path, pe.Failed.Source.Version, lastApplied(cur, pe), pe.Err)
		}
		return 0, fmt.Errorf("migrating from version %d to %d: %w", cur, newest, err)
	}
	return newest, nil
}

// lastApplied is the schema version left after a partial migration.
func lastApplied(cur int64, pe *goose.PartialError) int64 {
	if n := len(pe.Applied); n > 0 {
		return pe.Applied[n-1].Source.Version
	}
	return cur
}

// Close closes the pool's connections. Further calls fail.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// mapErr maps pgx errors onto the engine's sentinels (docs/style.md 7), keeping
// the driver error in the chain: no row → engine.ErrNotFound; unique
// violation (23505) → engine.ErrConflict; foreign-key violation (23503: the
// referenced state or run is missing) → engine.ErrNotFound; check violation
// (23514), a NUL byte or invalid UTF-8 in text (22021, 22P05) →
// engine.ErrInvalid; a failure to connect → an error naming host, port,
// user and database and the cause (never the password). Deadlocks and
// serialization failures are retried by withTx before they get here.
func (s *Store) mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.ErrNotFound
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return &connectError{where: describe(*ce.Config), err: ce}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505":
			return engine.Errorf(engine.ErrConflict, "%w", err)
		case "23503":
			return engine.Errorf(engine.ErrNotFound, "%w", err)
		case "23514", "22021", "22P05":
			return engine.Errorf(engine.ErrInvalid, "%w", err)
		}
		return err
	}
	return err
}

// connectError is a failure to connect: it names the server (host, port,
// database, user — never the password) and the cause, each distinct line of
// it once (pgx reports every attempt, e.g. with TLS and without).
type connectError struct {
	where string
	err   *pgconn.ConnectError
}

func (e *connectError) Error() string {
	cause := error(e.err)
	if u := errors.Unwrap(e.err); u != nil {
		cause = u
	}
	var lines []string
	seen := map[string]bool{}
	for _, l := range strings.Split(cause.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" && !seen[l] {
			seen[l] = true
			lines = append(lines, l)
		}
	}
	return fmt.Sprintf("connecting to PostgreSQL at %s: %s", e.where, strings.Join(lines, "; "))
}

// Unwrap returns pgx's *pgconn.ConnectError.
func (e *connectError) Unwrap() error { return e.err }

// retryable reports whether err is a deadlock or serialization failure:
// PostgreSQL rolled the transaction back and running it again may succeed.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// withTx runs fn in one READ COMMITTED transaction and commits it when fn
// returns nil; otherwise, or on a panic, it rolls back and nothing fn wrote
// stays. Before fn it checks that this binary may write (guarded): every
// write of the store is such a transaction. A deadlock or serialization failure runs fn again (up to
// txAttempts times, with a short random back-off).
func (s *Store) withTx(ctx context.Context, fn func(tx pgx.Tx) error) (err error) {
	fn = s.guarded(ctx, fn)
	if s.keyPending.Load() {
		// The first transaction after the keyring sealed or hashed
		// something (in it or before it) records the key; one that only
		// sweeps leases or writes stories for a reader records nothing
		// (ADR 0066 §5).
		write := fn
		recorded := false
		fn = func(tx pgx.Tx) error {
			if err := write(tx); err != nil {
				return err
			}
			if recorded = s.keys.Used(); recorded {
				return s.recordKey(ctx, tx)
			}
			return nil
		}
		defer func() {
			if err == nil && recorded {
				s.keyPending.Store(false)
			}
		}()
	}
	for attempt := 1; ; attempt++ {
		err := s.tryTx(ctx, fn)
		if err == nil || !retryable(err) || attempt == txAttempts || ctx.Err() != nil {
			if err != nil && retryable(err) {
				return fmt.Errorf("gave up after %d attempts: %w", attempt, s.mapErr(err))
			}
			return err
		}
		time.Sleep(time.Duration(rand.IntN(10*attempt)+1) * time.Millisecond)
	}
}

func (s *Store) tryTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.mapErr(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return s.mapErr(tx.Commit(ctx))
}

// querier is what *pgxpool.Pool and pgx.Tx share: an executor runs on
// either.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// executor is the store's store.Executor on q: the pool, where each
// statement runs on its own, or a READ COMMITTED transaction. PostgreSQL's
// statements, in its dialect (arrays and unnest for many rows in one
// statement); errors through Store.mapErr. Its Lock methods take row locks
// (FOR NO KEY UPDATE) in the order the package doc gives.
type executor struct {
	s *Store
	q querier
}

var _ store.Executor = executor{}

// database is the store's store.DB: the executor on the pool, and
// transactions.
type database struct{ executor }

var _ store.DB = database{}

func (s *Store) database() database { return database{executor{s: s, q: s.pool}} }

// InTx runs fn in one READ COMMITTED transaction (withTx), and again from
// the start after a deadlock or serialization failure.
func (d database) InTx(ctx context.Context, fn func(tx store.Executor) error) error {
	return d.s.withTx(ctx, func(tx pgx.Tx) error { return fn(executor{s: d.s, q: tx}) })
}

// Now is the store's clock in UTC (store.Executor): the database's, read
// through the executor — inside a transaction after the locks it took so
// far — unless WithClock set another.
func (e executor) Now(ctx context.Context) (time.Time, error) { return e.s.now(ctx, e.q) }

// sqlNow is the database clock as Unix nanoseconds (microsecond precision).
// clock_timestamp(), not now(): now() is the transaction's START, which may
// precede a lock wait by seconds.
const sqlNow = `(extract(epoch FROM clock_timestamp()) * 1000000000)::bigint`

// now returns the store's clock in UTC: the database's (read through q, so
// inside a transaction after its locks) unless WithClock set another.
func (s *Store) now(ctx context.Context, q querier) (time.Time, error) {
	if s.clock != nil {
		return s.clock().UTC(), nil
	}
	var n int64
	if err := q.QueryRow(ctx, `SELECT `+sqlNow).Scan(&n); err != nil {
		return time.Time{}, fmt.Errorf("reading the database clock: %w", s.mapErr(err))
	}
	return fromNanos(n), nil
}

// nanos and fromNanos convert times to and from the schema's BIGINT Unix
// nanoseconds (UTC).
func nanos(t time.Time) int64 { return t.UnixNano() }

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }
