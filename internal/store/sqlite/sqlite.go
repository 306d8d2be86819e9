// Package sqlite is the embedded engine.Store: one SQLite file, so kl works
// on a laptop with nothing else installed (docs/design.md "Two programs"). It uses
// modernc.org/sqlite (pure Go, no cgo) through database/sql.
//
// Several kl PROCESSES may share one file. Safety comes from SQLite itself,
// never from an in-process mutex: the database runs in WAL mode (readers do
// not block the writer), every write transaction begins IMMEDIATE so it takes
// the single write lock before it reads anything (no read-then-upgrade
// deadlock, no lost update), and busy_timeout makes a writer wait for the
// lock instead of failing. A commit's "lock the state head" (docs/design.md apply
// step 6) is that write lock.
//
// The schema is migrations/sqlite, applied with goose at Open.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pressly/goose/v3"
	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/seal"
	"github.com/kilolock/kilolock/internal/store"
	"github.com/kilolock/kilolock/migrations"
)

// DefaultBusyTimeout is how long a write waits for another connection or
// process to release SQLite's write lock before failing with ErrBusy.
const DefaultBusyTimeout = 10 * time.Second

// ErrBusy means SQLite's write lock stayed held by another connection —
// usually another kl process sharing the file — for longer than the busy
// timeout. Retrying later is safe: the failed transaction wrote nothing.
var ErrBusy = errors.New("database is busy: another connection (often another kl process) held the write lock past the busy timeout")

// Store is the SQLite engine.Store. It is safe for concurrent use by many
// goroutines and, through the same file, by many processes.
type Store struct {
	// Algorithms are the engine.Store methods written once (store.Algorithms):
	// CreateState, CreateRun, Commit, UpdateRun, RenewRun, AddMarkers,
	// Acquire, Reservations, Renew, Release, ExpireLeases, over this
	// adapter's statements (its executor).
	store.Algorithms

	db          *sql.DB
	path        string
	busyTimeout time.Duration
	clock       func() time.Time
	binary      store.Binary  // this binary, as the compatibility rules see it
	compat      store.Compat  // the store's, as Open found it
	keys        *seal.Keyring // seals artifacts and snapshots (nil: none; ADR 0066)
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
	busyTimeout time.Duration
	clock       func() time.Time
	log         *slog.Logger
	binary      store.Binary       // tests: a newer binary (store.ThisBinary if zero)
	extra       []*goose.Migration // tests: a newer binary's Go migrations
	keys        *seal.Keyring
}

// WithKeyring makes the store seal every artifact and version snapshot it
// writes with kr's first key and open them with any of its keys (ADR
// 0066); a keyring without a key (seal.Parse of "") still names its
// variable when Open refuses an encrypted store. Unset: nothing is sealed,
// and an encrypted store is refused naming KL_ENCRYPTION_KEY.
func WithKeyring(kr *seal.Keyring) Option {
	return func(o *options) { o.keys = kr }
}

// WithBusyTimeout sets how long a write waits for the write lock
// (DefaultBusyTimeout if unset; rounded to milliseconds, at least 1 ms).
func WithBusyTimeout(d time.Duration) Option {
	return func(o *options) { o.busyTimeout = d }
}

// WithClock sets the store's clock (time.Now if unset): it stamps versions,
// runs, markers and reservation leases, and decides which leases have ended.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.clock = now }
}

// WithLogger sets the logger of Open's notes on the files' permissions
// (slog.Default() if unset): info when it made a file private, a warning
// when it could not.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// Open opens (creating if needed) the store at path, a file name. It creates
// the parent directory with mode 0700 and the file with mode 0600 — the
// database holds saved plans and state snapshots, which hold secrets — then
// applies the embedded migrations. A database migrated by a newer binary
// opens by the compatibility rules of ADR 0048 (store.Binary.Check): read
// and write at the same compatibility level, read only when its level is
// higher (every write then fails with a *store.CompatError), and refused
// with a *store.CompatError when its read level is higher too. A file
// that exists, is not empty and is not a SQLite database (its first 16
// bytes are not "SQLite format 3\x00", or SQLite cannot read it), or is
// another program's SQLite database (it has tables but not Kilolock's
// schema), is refused before anything is written to it or its mode
// changed: it is read through a read-only connection first.
//
// A database file, or its -wal or -shm file, that exists already (an empty
// file made beforehand, a copy) keeps its mode; so when one belongs to the
// current user and group or others have any permission on it, Open sets it
// to 0600 and logs it at info. When it cannot (or the file is someone
// else's), it logs a warning and goes on.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	o := options{busyTimeout: DefaultBusyTimeout, clock: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	if o.busyTimeout < time.Millisecond {
		o.busyTimeout = time.Millisecond
	}
	if path == "" {
		return nil, fmt.Errorf("opening store: empty database path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	dir := filepath.Dir(abs)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("opening store %s: creating directory %s: %w", path, dir, err)
	}
	// Nothing is written to a file until it is known to be a database (or
	// is empty, or new): a mistyped path must not be chmod-ed or migrated.
	if err := checkHeader(abs); err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	// Nor is another program's database made a store: an existing one must
	// hold Kilolock's schema, read through a read-only connection before
	// the file's mode is changed or the WAL pragma rewrites its header.
	if err := checkSchema(ctx, abs, o.busyTimeout); err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	for _, p := range []string{abs, abs + "-wal", abs + "-shm"} {
		makePrivate(p, o.log)
	}

	db, err := sql.Open("sqlite", dsn(abs, o.busyTimeout))
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	if o.binary == (store.Binary{}) {
		o.binary = store.ThisBinary()
	}
	s := &Store{db: db, path: abs, busyTimeout: o.busyTimeout, clock: o.clock, binary: o.binary, keys: o.keys}
	s.Algorithms = store.Algorithms{DB: s.database()}
	if err := s.migrate(store.Migrating(ctx, o.binary), o.extra); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	if err := s.checkEncryption(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	return s, nil
}

// sqliteHeader is the first 16 bytes of every SQLite database file
// (https://www.sqlite.org/fileformat.html, "The Database Header").
const sqliteHeader = "SQLite format 3\x00"

// checkHeader returns an error when path is an existing, non-empty file
// that does not begin with sqliteHeader. A missing file, an empty one
// (Open initialises it) and one it cannot read (os.OpenFile then says
// why) pass.
func checkHeader(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return nil
	}
	head := make([]byte, len(sqliteHeader))
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("reading its header: %w", err)
	}
	if string(head[:n]) != sqliteHeader {
		return errors.New("not a SQLite database (the file does not begin with the SQLite header); it was left unchanged: " +
			"point KL_STORE or --store at a Kilolock store, or at a new path for kl state init")
	}
	return nil
}

// checkSchema returns an error unless path is missing, empty, not a
// regular file (os.OpenFile then says why), or a SQLite database that holds
// Kilolock's schema — goose's version table, which the first migration
// creates (a store whose first migration was interrupted has it too) — or
// no schema at all (a file another kl process has just begun to initialise:
// it has switched it to WAL, which writes the header, and not yet created
// goose's table). It reads the file through a read-only connection
// (mode=ro) with no pragma that writes: a foreign database is left as it
// was, mode and content.
func checkSchema(ctx context.Context, path string, busy time.Duration) error {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return nil
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("_busy_timeout", strconv.FormatInt(busy.Milliseconds(), 10))
	q.Set("_query_only", "1")
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return fmt.Errorf("reading it read-only: %w", err)
	}
	defer db.Close()
	// A Kilolock store has goose's version table and, once migration 1
	// ran, the states table; another program's goose-managed database has
	// the version table and tables of its own but no states table.
	var objects, kilolock, states, others int64
	err = db.QueryRowContext(ctx,
		`SELECT count(*), coalesce(sum(type = 'table' AND name = ?), 0), coalesce(sum(type = 'table' AND name = 'states'), 0),
		        coalesce(sum(type = 'table' AND name NOT IN (?, 'sqlite_sequence')), 0) FROM sqlite_schema`,
		goose.DefaultTablename, goose.DefaultTablename).Scan(&objects, &kilolock, &states, &others)
	var se *sqlite.Error
	switch {
	case errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOTADB:
		return errors.New("not a SQLite database (SQLite cannot read it: " + se.Error() + "); it was left unchanged: " +
			"point KL_STORE or --store at a Kilolock store, or at a new path for kl state init")
	case errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_BUSY || se.Code()&0xff == sqlite3.SQLITE_LOCKED):
		return fmt.Errorf("%w (busy timeout %s) while checking its schema: %w", ErrBusy, busy, err)
	case err != nil:
		return fmt.Errorf("reading its schema read-only: %w", err)
	case objects > 0 && kilolock == 0:
		return errors.New("a SQLite database but not a Kilolock store (no Kilolock schema: no " + goose.DefaultTablename +
			" table); it was left unchanged: point KL_STORE or --store at a Kilolock store, or at a new path for kl state init")
	case states == 0 && others > 0:
		return errors.New("a SQLite database whose " + goose.DefaultTablename + " table is another program's (tables of its own, no Kilolock states table); " +
			"it was left unchanged: point KL_STORE or --store at a Kilolock store, or at a new path for kl state init")
	}
	return nil
}

// makePrivate sets the existing file path to mode 0600 when it belongs to
// the current user and grants group or others any permission, logging at
// info; a file it cannot change, or that is another user's, gets a warning.
// A missing file, and any file where the platform has no Unix owner, is
// left alone (SQLite creates -wal and -shm with the database file's mode).
func makePrivate(path string, log *slog.Logger) {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	mode := fi.Mode().Perm()
	if mode&0o077 == 0 {
		return
	}
	const why = "the store holds saved plans and state snapshots, which hold secrets"
	uid, ok := fileOwner(fi)
	if !ok {
		return // no Unix owner (Windows): the permission bits say little there
	}
	if uid != os.Getuid() {
		log.Warn("store file is open to group or others and belongs to another user: leaving its mode; make it 0600",
			"path", path, "mode", fmt.Sprintf("%#o", mode), "why", why)
		return
	}
	if err := os.Chmod(path, 0o600); err != nil {
		log.Warn("store file is open to group or others and could not be made private (0600)",
			"path", path, "mode", fmt.Sprintf("%#o", mode), "err", err, "why", why)
		return
	}
	log.Info("store file was open to group or others: set its mode to 0600",
		"path", path, "was", fmt.Sprintf("%#o", mode), "why", why)
}

// fileOwner returns the uid of fi's owner, read from the Uid field of its
// platform stat (syscall.Stat_t on Unix) without naming that type, which
// Windows lacks; ok is false where there is none.
func fileOwner(fi os.FileInfo) (uid int, ok bool) {
	v := reflect.ValueOf(fi.Sys())
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return 0, false
	}
	f := v.FieldByName("Uid")
	if !f.IsValid() || !f.CanUint() {
		return 0, false
	}
	return int(f.Uint()), true
}

// dsn builds the modernc.org/sqlite data source name: a file: URI (so a path
// with '?' or '#' survives) with the connection settings every pooled
// connection gets.
func dsn(path string, busy time.Duration) string {
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(busy.Milliseconds(), 10))
	q.Set("_journal_mode", "WAL")
	q.Set("_foreign_keys", "1")
	// Every read-write transaction is BEGIN IMMEDIATE: it takes the write
	// lock before its first read.
	q.Set("_txlock", "immediate")
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return u.String()
}

// migrate applies the embedded goose migrations (and extra, a test's),
// then reads the store's compatibility level and applies the rules
// (checkCompat). Processes opening one new file at the same moment may
// race: each migration runs in its own IMMEDIATE transaction, so the loser
// fails ("table already exists") and rolls back; migrate then re-reads the
// version and finds the work done. A schema newer than this binary's is
// left as it is: checkCompat decides.
func (s *Store) migrate(ctx context.Context, extra []*goose.Migration) error {
	fsys, err := fs.Sub(migrations.SQLite, "sqlite")
	if err != nil {
		return fmt.Errorf("migrating schema: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.db, fsys,
		goose.WithDisableGlobalRegistry(true), goose.WithVerbose(false),
		goose.WithGoMigrations(append(store.GoMigrations(store.SQLite), extra...)...))
	if err != nil {
		return fmt.Errorf("migrating schema: %w", err)
	}
	sources := p.ListSources()
	newest := sources[len(sources)-1].Version
	// Racing openers of a new file can also meet SQLITE_BUSY outside the
	// busy handler's reach (switching a fresh file to WAL, creating goose's
	// version table): retry the whole step a few times with a short,
	// growing pause.
	const attempts = 8
	for attempt := 1; ; attempt++ {
		cur, err := p.GetDBVersion(ctx)
		if err != nil {
			if attempt < attempts && ctx.Err() == nil {
				pause(ctx, attempt)
				continue
			}
			return fmt.Errorf("reading schema version: %w", s.mapErr(err))
		}
		if cur >= newest {
			return s.checkCompat(ctx, cur)
		}
		_, err = p.Up(ctx)
		if err == nil {
			return s.checkCompat(ctx, newest)
		}
		if attempt == attempts || ctx.Err() != nil {
			return fmt.Errorf("migrating schema from version %d to %d: %w", cur, newest, s.mapErr(err))
		}
		pause(ctx, attempt)
	}
}

// checkCompat reads the compatibility level of the store, at schema
// version schema, and refuses it when this binary may not even read it
// (store.Binary.Check). A store it may only read opens: its writes are
// refused one by one (guardWrite).
func (s *Store) checkCompat(ctx context.Context, schema int64) error {
	c, err := s.readCompat(ctx, s.db, schema)
	if err != nil {
		return err
	}
	s.compat = c
	if access, err := s.binary.Check(c); access == "" {
		return err
	}
	return nil
}

// readCompat reads the kl_compat row through q.
func (s *Store) readCompat(ctx context.Context, q querier, schema int64) (store.Compat, error) {
	c, err := store.ScanCompat(q.QueryRowContext(ctx, store.CompatQuery), schema, sql.ErrNoRows)
	return c, s.mapErr(err)
}

// Compat reads the store's compatibility record now (a newer binary may
// have raised it since Open), with the schema version Open found.
func (s *Store) Compat(ctx context.Context) (store.Compat, error) {
	return s.readCompat(ctx, s.db, s.compat.Schema)
}

// Access is what this binary may do with the store now: store.ReadWrite,
// or store.ReadOnly with the *store.CompatError its writes get.
func (s *Store) Access(ctx context.Context) (store.Access, error) {
	c, err := s.Compat(ctx)
	if err != nil {
		return "", err
	}
	return s.binary.Check(c)
}

// guardWrite refuses the write transaction tx when the store's level is
// above this binary's (store.Binary.CheckWrite), read inside tx: a write
// transaction is BEGIN IMMEDIATE, so no migration raises the level between
// this read and tx's commit.
func (s *Store) guardWrite(ctx context.Context, tx *sql.Tx) error {
	c, err := s.readCompat(ctx, tx, s.compat.Schema)
	if err != nil {
		return err
	}
	return s.binary.CheckWrite(c)
}

// pause sleeps 25 ms × attempt (at most 200 ms), or until ctx ends.
func pause(ctx context.Context, attempt int) {
	d := time.Duration(min(attempt, 8)) * 25 * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// maxDamage is how many of quick_check's findings CheckIntegrity names.
const maxDamage = 3

// CheckIntegrity runs SQLite's PRAGMA quick_check (every page and index
// entry readable and consistent, without the full cross-check of
// integrity_check: O(N) in the file's size) and refuses a damaged store
// with ErrInvalid, naming what SQLite found and what to do: restore it from
// a backup (README "Backups"). kl calls it before a command that writes.
func (s *Store) CheckIntegrity(ctx context.Context) error {
	found, err := s.quickCheck(ctx)
	var se *sqlite.Error
	if errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_CORRUPT || se.Code()&0xff == sqlite3.SQLITE_NOTADB) {
		// So damaged that the check itself cannot read it.
		found, err = append(found, se.Error()), nil
	}
	if err != nil {
		return fmt.Errorf("checking the integrity of store %s: %w", s.path, s.mapErr(err))
	}
	if len(found) > 0 {
		return engine.Errorf(engine.ErrInvalid, "store %s is damaged (SQLite's quick_check: %s); kl writes nothing to it: "+
			"restore it from a backup (see the README, Backups), or move it aside and start a new store", s.path, strings.Join(found, "; "))
	}
	return nil
}

// quickCheck returns what PRAGMA quick_check found wrong (nothing: ok).
func (s *Store) quickCheck(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `PRAGMA quick_check(`+strconv.Itoa(maxDamage)+`)`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return found, err
		}
		if line != "ok" {
			found = append(found, line)
		}
	}
	return found, rows.Err()
}

// Close closes the database. Further calls fail.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("closing store %s: %w", s.path, err)
	}
	return nil
}

// now is the store's clock in UTC.
func (s *Store) now() time.Time { return s.clock().UTC() }

// mapErr maps driver errors onto the engine's sentinels (docs/style.md 7), keeping
// the driver error in the chain: no row → engine.ErrNotFound; a UNIQUE or
// PRIMARY KEY violation → engine.ErrConflict; a FOREIGN KEY violation (the
// referenced state or run is missing) → engine.ErrNotFound; SQLITE_BUSY or
// SQLITE_LOCKED once the busy timeout has run out → ErrBusy.
func (s *Store) mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return engine.ErrNotFound
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch code := se.Code(); {
	case code == sqlite3.SQLITE_CONSTRAINT_UNIQUE, code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return engine.Errorf(engine.ErrConflict, "%w", err)
	case code == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return engine.Errorf(engine.ErrNotFound, "%w", err)
	case code&0xff == sqlite3.SQLITE_BUSY, code&0xff == sqlite3.SQLITE_LOCKED:
		return fmt.Errorf("%w (busy timeout %s): %w", ErrBusy, s.busyTimeout, err)
	}
	return err
}

// withTx runs fn in one write transaction (BEGIN IMMEDIATE: the write lock
// is taken first) and commits it when fn returns nil; otherwise, or on a
// panic, it rolls back and nothing fn wrote stays. Before fn it checks
// that this binary may write (guardWrite): every write of the store is
// such a transaction.
func (s *Store) withTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.mapErr(err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if err := s.guardWrite(ctx, tx); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	// The first transaction after the keyring sealed or hashed something
	// (in it or before it) records the key; one that only sweeps leases or
	// writes stories for a reader records nothing (ADR 0066 §5).
	record := s.keyPending.Load() && s.keys.Used()
	if record {
		if err := s.recordKey(ctx, tx); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return s.mapErr(err)
	}
	if record {
		s.keyPending.Store(false)
	}
	return nil
}

// querier is what *sql.DB and *sql.Tx share: an executor runs on either.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// executor is the store's store.Executor on q: the *sql.DB, where each
// statement runs on its own, or a write transaction's *sql.Tx. SQLite's
// statements, in SQLite's dialect; errors through Store.mapErr. Its Lock
// methods take no locks of their own: a write transaction is BEGIN
// IMMEDIATE, so it holds the database's write lock from its first
// statement.
type executor struct {
	s *Store
	q querier
}

var _ store.Executor = executor{}

// database is the store's store.DB: the executor on the *sql.DB, and
// write transactions.
type database struct{ executor }

var _ store.DB = database{}

func (s *Store) database() database { return database{executor{s: s, q: s.db}} }

// InTx runs fn in one write transaction (withTx: BEGIN IMMEDIATE). It runs
// fn once: SQLite has no deadlocks to retry, a writer waits for the lock
// instead (busy_timeout).
func (d database) InTx(ctx context.Context, fn func(tx store.Executor) error) error {
	return d.s.withTx(ctx, func(tx *sql.Tx) error { return fn(executor{s: d.s, q: tx}) })
}

// Now is the store's clock in UTC (store.Executor).
func (e executor) Now(context.Context) (time.Time, error) { return e.s.now(), nil }

// nanos and fromNanos convert times to and from the schema's INTEGER Unix
// nanoseconds (UTC).
func nanos(t time.Time) int64 { return t.UnixNano() }

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }
