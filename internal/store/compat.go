package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/kilolock/kilolock/internal/engine"
)

// CompatLevel is this binary's store compatibility level (ADR 0048): the
// highest level whose rules of reservations, fences and commits it follows.
// It writes to a store whose level (Compat.Level) is at most this, and
// reads one whose read level (Compat.ReadLevel) is at most this. It is the
// highest level its migrations declare, or one above: a release that
// prepares the next one's raise (it no longer uses what that raise
// contracts) declares the next level without raising the store to it, so
// that the raise does not lock it out (ADR 0048 "Expand, then contract";
// TestMigrationsDeclared checks it).
const CompatLevel = compatLevel

// BinaryVersion is this binary's version as the store records and names it:
// kl_compat.raised_by of a level its migrations raise, and "this kl (version
// …)" in a *CompatError. "dev" unless the program sets it at start (or the
// linker does, -X); internal/version is to set it.
var BinaryVersion = "dev"

// Kind is what a schema migration does to the binaries already using the
// store (ADR 0048 "Expand, then contract").
type Kind string

// Migration kinds.
const (
	// Baseline: a migration made before the first release, when no older
	// binary could meet a newer store (migrations 1–9): together they are
	// level 1.
	Baseline Kind = "baseline"
	// Expand: adds only what binaries of the same level neither need nor
	// break — a table they do not use, a nullable or defaulted column, an
	// index that is not unique — and changes no rule they follow. They
	// keep reading and writing the store (ADR 0048 rule 1).
	Expand Kind = "expand"
	// Raise: raises the level (Migration.Level) in its own transaction,
	// before anything else it does: a contract (a drop, rename, retype, a
	// new constraint on what older binaries write, a rewrite of their rows)
	// or a change of the rules of reservations, fences or commits. Older
	// writers are refused from its commit on (ADR 0048 rule 2).
	Raise Kind = "raise"
)

// Level is a compatibility level as a migration sets it.
type Level struct {
	// Level: a binary writes only if its CompatLevel is at least this.
	Level int
	// ReadLevel (≤ Level): a binary reads only if its CompatLevel is at
	// least this. It stays below Level while what older binaries read still
	// means what they think (ADR 0048 rule 3).
	ReadLevel int
	// Why says what changed, for the refusal's message.
	Why string
}

// Migration declares one schema migration of both stores (the same number
// in migrations/sqlite, migrations/postgres, or GoMigrations): its Kind,
// the Level a Raise sets, and why it is of that kind.
type Migration struct {
	Version int64
	Kind    Kind
	Level   Level // Raise only
	Why     string
}

// CompatVersion is the schema version of migrations/*/00010_compat.sql,
// which creates kl_compat; LevelOneVersion the one that sets level 1.
const (
	CompatVersion   = 10
	LevelOneVersion = 11
)

// levelOne is the first level: the rules of the first release.
var levelOne = Level{Level: 1, ReadLevel: 1, Why: "the first release's rules of reservations, fences and commits"}

// levelTwo is instance-level reservations (ADR 0065): a write set names
// instances (x.y["a"]), and a resource overlaps each of its instances. A
// binary of level 1 compares addresses as strings: it would let its
// reservation of x.y beside another's of x.y["a"] and merge the whole
// resource over that instance's write. Reading is unchanged (ReadLevel 1):
// an instance address is an address to a level-1 view.
var levelTwo = Level{Level: 2, ReadLevel: 1, Why: "instance-level reservations (ADR 0065): a resource overlaps each of its instances"}

// InstancesVersion is the schema version of the Go migration that raises
// the store to levelTwo.
const InstancesVersion = 16

// levelThree is per-resource storage (ADR 0068): a version may be stored
// as a header and a manifest of resource entries, its snapshot column
// empty. A binary of level 2 reads versions.snapshot only: it would fail on
// such a version (or, reading the header, show a state without its
// resources), and a commit of its own would leave the head's manifest
// behind. So the read level rises with the level.
var levelThree = Level{Level: 3, ReadLevel: 3, Why: "per-resource storage (ADR 0068): a version may be a manifest of resource entries with no whole snapshot"}

// EntriesVersion is the schema version of the Go migration that raises the
// store to levelThree (after migration 17 made the tables).
const EntriesVersion = 19

// declared are the migrations of both stores, by version; build-tagged test
// files (kltest_*.go) append theirs.
var declared = []Migration{
	{Version: 1, Kind: Baseline, Why: "states, versions, runs, markers, reservations, artifacts"},
	{Version: 2, Kind: Baseline, Why: "klbot's tables"},
	{Version: 3, Kind: Baseline, Why: "a unique index on states.lineage (a contract, before any release)"},
	{Version: TypedEndsVersion, Kind: Baseline, Why: "rewrites run and marker rows as row version 2 (a contract, before any release)"},
	{Version: RunKindsOpenVersion, Kind: Baseline, Why: "drops the CHECK on runs.kind"},
	{Version: 6, Kind: Baseline, Why: "reservations.fenced_at: a nullable column, but a rule change (ADR 0035) — after a release it would raise the level"},
	{Version: 7, Kind: Baseline, Why: "klbot_refusal_replies"},
	{Version: 9, Kind: Baseline, Why: "klbot_apply_reports and an index"},
	{Version: CompatVersion, Kind: Expand, Why: "creates kl_compat; no binary before it reads or writes it"},
	{Version: LevelOneVersion, Kind: Raise, Level: levelOne, Why: "records level 1"},
	{Version: 12, Kind: Expand, Why: "kl_tokens (ADR 0054): a new table no older binary reads or writes; no rule of reservations, fences or commits changes"},
	{Version: 15, Kind: Expand, Why: "klbot_merge_groups (ADR 0058): a new table no older binary reads or writes; no rule of reservations, fences or commits changes"},
	{Version: InstancesVersion, Kind: Raise, Level: levelTwo, Why: "instance-level reservations (ADR 0065): a rule of reservations and commits changes; no schema change"},
	{Version: 17, Kind: Expand, Why: "state_entries, version_entries and the nullable versions.header (ADR 0068): tables and a column no older binary reads or writes"},
	{Version: EntriesVersion, Kind: Raise, Level: levelThree, Why: "per-resource storage (ADR 0068): versions stored as manifests, which level-2 binaries would misread (read level 3)"},
	{Version: EncryptionVersion, Kind: Expand, Why: "kl_encryption (ADR 0066): a new table no older binary reads or writes; no rule of reservations, fences or commits changes"},
}

// extraGoMigrations are the Go migrations of build-tagged test files.
var extraGoMigrations []func(Dialect) *goose.Migration

// Migrations returns the declarations of every schema migration this
// binary embeds, by version.
func Migrations() []Migration {
	out := slices.Clone(declared)
	slices.SortFunc(out, func(a, b Migration) int { return int(a.Version - b.Version) })
	return out
}

// SchemaVersion is the newest schema version this binary embeds (both
// stores are numbered alike).
func SchemaVersion() int64 {
	ms := Migrations()
	return ms[len(ms)-1].Version
}

// Compat is a store's compatibility record (the kl_compat row, ADR 0048)
// with its schema version.
type Compat struct {
	Schema    int64     // the store's goose version
	Level     int       // writers must be at this level or above
	ReadLevel int       // readers must be at this level or above
	RaisedBy  string    // BinaryVersion of the binary whose migration set Level
	RaisedAt  time.Time // when, UTC
	Why       string    // what changed at Level
}

// Binary is a binary as the compatibility rules see it.
type Binary struct {
	Version string // BinaryVersion
	Level   int    // CompatLevel
	Schema  int64  // SchemaVersion
}

// ThisBinary is this binary: BinaryVersion, CompatLevel, SchemaVersion.
func ThisBinary() Binary {
	return Binary{Version: BinaryVersion, Level: CompatLevel, Schema: SchemaVersion()}
}

// Access is what a binary may do with a store.
type Access string

// Accesses.
const (
	ReadWrite Access = "read-write"
	ReadOnly  Access = "read-only"
)

// Check applies ADR 0048's rules to a store c opened by b: ReadWrite when
// b's level is at least the store's (whatever the schema version: a newer
// schema at the same level only expanded); ReadOnly, with the
// *CompatError its writes get, when the store's level is higher but its read
// level is not; otherwise a *CompatError refusing it.
func (b Binary) Check(c Compat) (Access, error) {
	switch {
	case c.Level <= b.Level:
		return ReadWrite, nil
	case c.ReadLevel <= b.Level:
		return ReadOnly, &CompatError{Binary: b, Store: c, Write: true}
	}
	return "", &CompatError{Binary: b, Store: c}
}

// CheckWrite returns the *CompatError that refuses b's writes to store c
// (its level is above b's), or nil. Each write transaction of both stores
// calls it on the kl_compat row it read under a lock, so that a binary
// already running when a newer one raises the level stops writing from the
// raise's commit on.
func (b Binary) CheckWrite(c Compat) error {
	if c.Level <= b.Level {
		return nil
	}
	return &CompatError{Binary: b, Store: c, Write: true}
}

// CompatError refuses a binary a store at a higher compatibility level:
// its writes (Write), or any use (its read level is higher too). It names
// both sides and what to do, and errors.Is engine.ErrReadOnly when it
// refuses writes only.
type CompatError struct {
	Binary Binary
	Store  Compat
	Write  bool
}

func (e *CompatError) Error() string {
	b, c := e.Binary, e.Store
	raised := "raised by version " + orUnknown(c.RaisedBy)
	if !c.RaisedAt.IsZero() {
		raised += " on " + c.RaisedAt.UTC().Format("2006-01-02")
	}
	if c.Why != "" {
		raised += " (" + c.Why + ")"
	}
	this := fmt.Sprintf("this %s (version %s, compatibility level %d)", program(), orUnknown(b.Version), b.Level)
	upgrade := "upgrade to version " + orUnknown(c.RaisedBy) + " or later (the GitHub Action: a ref at or after it)"
	if e.Write {
		return fmt.Sprintf("%s must not write to this store: its compatibility level is %d, %s, and an older binary does not follow its rules; %s — reading still works",
			this, c.Level, raised, upgrade)
	}
	return fmt.Sprintf("%s cannot read this store: its compatibility level is %d and readers need level %d, %s; %s",
		this, c.Level, c.ReadLevel, raised, upgrade)
}

// Unwrap makes a refusal of writes errors.Is engine.ErrReadOnly.
func (e *CompatError) Unwrap() error {
	if e.Write {
		return engine.ErrReadOnly
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// program is the running binary's name: "kl", "klbot".
func program() string {
	if len(os.Args) > 0 && os.Args[0] != "" {
		return filepath.Base(os.Args[0])
	}
	return "binary"
}

// CompatQuery reads the kl_compat row (level, read_level, raised_by,
// raised_at as Unix nanoseconds, why). The postgres adapter appends
// FOR SHARE in a write transaction, which a raise's UPDATE waits for.
const CompatQuery = `SELECT level, read_level, raised_by, raised_at, why FROM kl_compat WHERE id = 1`

// ScanCompat scans a CompatQuery row into a Compat of schema version
// schema. No row (a store between migrations CompatVersion and
// LevelOneVersion) is level 0.
func ScanCompat(row interface{ Scan(dest ...any) error }, schema int64, noRow error) (Compat, error) {
	c := Compat{Schema: schema}
	var at int64
	err := row.Scan(&c.Level, &c.ReadLevel, &c.RaisedBy, &at, &c.Why)
	switch {
	case errors.Is(err, noRow):
		return c, nil
	case err != nil:
		return c, fmt.Errorf("reading the store's compatibility level: %w", err)
	}
	c.RaisedAt = time.Unix(0, at).UTC()
	return c, nil
}

// migratingKey is the context key of the binary that runs migrations.
type migratingKey struct{}

// Migrating returns ctx for goose's migrations run by binary b: a
// LevelMigration records b.Version as who raised the level. Without it,
// BinaryVersion.
func Migrating(ctx context.Context, b Binary) context.Context {
	return context.WithValue(ctx, migratingKey{}, b)
}

// migratingVersion is the version of the binary running ctx's migrations.
func migratingVersion(ctx context.Context) string {
	if b, ok := ctx.Value(migratingKey{}).(Binary); ok && b.Version != "" {
		return b.Version
	}
	return BinaryVersion
}

// LevelMigration is the Go migration version of both stores that sets the
// level to to (a Kind Raise migration): it upserts the kl_compat row with
// the version of the binary running it (Migrating) and the time, FIRST in its transaction — in PostgreSQL the
// UPDATE waits for every write transaction holding the row FOR SHARE, and
// the ones after it see the new level — then runs stmts, the contract's SQL
// in d's dialect. Down puts back from (level 0: no row) and does not undo
// stmts.
func LevelMigration(version int64, d Dialect, to, from Level, stmts ...string) *goose.Migration {
	ph := placeholders(d)
	set := func(ctx context.Context, tx *sql.Tx, l Level) error {
		if l.Level == 0 {
			_, err := tx.ExecContext(ctx, `DELETE FROM kl_compat WHERE id = 1`)
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO kl_compat (id, level, read_level, raised_by, raised_at, why) VALUES (1, `+
			ph(1)+`, `+ph(2)+`, `+ph(3)+`, `+ph(4)+`, `+ph(5)+`)
			ON CONFLICT (id) DO UPDATE SET level = excluded.level, read_level = excluded.read_level,
			raised_by = excluded.raised_by, raised_at = excluded.raised_at, why = excluded.why`,
			l.Level, l.ReadLevel, migratingVersion(ctx), time.Now().UTC().UnixNano(), l.Why)
		return err
	}
	up := func(ctx context.Context, tx *sql.Tx) error {
		if err := set(ctx, tx, to); err != nil {
			return fmt.Errorf("raising the compatibility level to %d: %w", to.Level, err)
		}
		for _, q := range stmts {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	}
	down := func(ctx context.Context, tx *sql.Tx) error { return set(ctx, tx, from) }
	return goose.NewGoMigration(version, &goose.GoFunc{RunTx: up}, &goose.GoFunc{RunTx: down})
}

// placeholders renders d's n-th SQL placeholder.
func placeholders(d Dialect) func(int) string {
	if d == Postgres {
		return func(n int) string { return fmt.Sprintf("$%d", n) }
	}
	return func(int) string { return "?" }
}

// SQLMigration is a Go migration version that runs up (Down: down), SQL
// both dialects accept, in goose's transaction: an Expand written in Go
// (the build-tagged test binaries' extra migration is one).
func SQLMigration(version int64, up, down []string) *goose.Migration {
	run := func(stmts []string) func(ctx context.Context, tx *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			for _, q := range stmts {
				if _, err := tx.ExecContext(ctx, q); err != nil {
					return fmt.Errorf("%s: %w", q, err)
				}
			}
			return nil
		}
	}
	return goose.NewGoMigration(version, &goose.GoFunc{RunTx: run(up)}, &goose.GoFunc{RunTx: run(down)})
}
