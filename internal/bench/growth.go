package bench

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", as internal/store/sqlite uses
)

// GrowthOptions configures Growth (figure 4, ADR 0063).
type GrowthOptions struct {
	// KL and Terraform are the binaries (required).
	KL, Terraform string
	// Resources is the size of the synthetic state (2,000 if zero).
	Resources int
	// Applies is how many plan + apply cycles run on the store (3 if zero).
	Applies int
	// TempDir is the parent of the figure's temporary directory.
	TempDir string
	// Progress receives one line per apply (nil: discarded).
	Progress io.Writer
	// Postgres is the DSN of an empty PostgreSQL schema (search_path) for
	// the same run on a PostgreSQL store; "" runs SQLite only.
	Postgres string
}

func (o *GrowthOptions) defaults() {
	if o.Resources <= 0 {
		o.Resources = 2000
	}
	if o.Applies <= 0 {
		o.Applies = 3
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// GrowthResult is figure 4: what one store holds after `kl state init
// --from` of the synthetic state and after each `kl plan` + `kl apply` of a
// one-resource change — a SQLite store (the embedded GrowthSeries) and, with
// GrowthOptions.Postgres, the same run on a PostgreSQL store.
type GrowthResult struct {
	Resources int
	// GrowthSeries is the SQLite store's: bytes of used pages
	// ((page_count − freelist_count) × page_size, after a WAL checkpoint).
	GrowthSeries
	// Postgres is the PostgreSQL store's: the sum of pg_total_relation_size
	// (heap, indexes, TOAST, free space and visibility maps) of the store's
	// tables; nil when not measured.
	Postgres *GrowthSeries
}

// GrowthSeries is one store's sizes in bytes over the run.
type GrowthSeries struct {
	// Init is the store after the state init; After[i] after apply i+1.
	Init  int64
	After []int64
	// Retained is what the closed plans' saved plans, configuration
	// archives and -var values hold at the end (`kl gc --dry-run` with a
	// 1 s retention): what KL_RETENTION deletes later.
	Retained int64
}

// PerVersion is the median growth of the store per plan + apply cycle, in
// bytes (NaN without applies).
func (r GrowthSeries) PerVersion() float64 {
	xs := make([]float64, 0, len(r.After))
	prev := r.Init
	for _, b := range r.After {
		xs = append(xs, float64(b-prev))
		prev = b
	}
	return MedianFloat(xs)
}

// Growth measures figure 4: a fresh SQLite store, the synthetic state of
// opts.Resources terraform_data resources adopted with `kl state init
// --from`, then opts.Applies cycles of `kl plan` + `kl apply`, each changing
// one resource's input; the store's used bytes are read after each. With
// opts.Postgres the same run follows on that PostgreSQL schema.
func Growth(ctx context.Context, opts GrowthOptions) (*GrowthResult, error) {
	opts.defaults()
	if opts.KL == "" || opts.Terraform == "" {
		return nil, fmt.Errorf("growth benchmark: kl and terraform binaries are required")
	}
	res := &GrowthResult{Resources: opts.Resources}
	var err error
	fmt.Fprintf(opts.Progress, "  SQLite\n")
	if res.GrowthSeries, err = growthRun(ctx, opts, ""); err != nil {
		return nil, err
	}
	if opts.Postgres != "" {
		fmt.Fprintf(opts.Progress, "  PostgreSQL\n")
		pg, err := growthRun(ctx, opts, opts.Postgres)
		if err != nil {
			return nil, err
		}
		res.Postgres = &pg
	}
	return res, nil
}

// growthRun is one store's run of Growth: the SQLite file kl.db in a fresh
// directory, or the PostgreSQL store at dsn when dsn is set.
func growthRun(ctx context.Context, opts GrowthOptions, dsn string) (GrowthSeries, error) {
	var res GrowthSeries
	root, err := os.MkdirTemp(opts.TempDir, "klbench-growth-")
	if err != nil {
		return res, fmt.Errorf("growth benchmark: %w", err)
	}
	defer os.RemoveAll(root)
	state, config, err := overheadFixtureData(opts.Resources)
	if err != nil {
		return res, err
	}
	stateFile, cfg, store := filepath.Join(root, "state.tfstate"), filepath.Join(root, "config"), filepath.Join(root, "kl.db")
	size := func() (int64, error) { return storeBytes(ctx, store) }
	if dsn != "" {
		store = dsn
		size = func() (int64, error) { return pgStoreBytes(ctx, dsn) }
	}
	if err := os.WriteFile(stateFile, state, 0o600); err != nil {
		return res, fmt.Errorf("growth benchmark: %w", err)
	}
	env := append(cleanEnv(os.Environ()), "KL_STORE="+store, "KL_WORKDIR="+filepath.Join(root, "runs"), "KL_TERRAFORM="+opts.Terraform,
		"KL_ACTOR=klbench", "NO_COLOR=1")
	kl := func(args ...string) (commandResult, error) { return runCommand(ctx, root, env, opts.KL, args...) }
	if _, err := kl("state", "init", overheadStateName, "--from", stateFile); err != nil {
		return res, err
	}
	if res.Init, err = size(); err != nil {
		return res, err
	}
	changed := fmt.Appendf(nil, "input = %q\n", changedResource+"-changed")
	for i := range opts.Applies {
		c := bytes.Replace(config, changed, fmt.Appendf(nil, "input = %q\n", fmt.Sprintf("%s-v%d", changedResource, i+1)), 1)
		if err := growthCycle(kl, cfg, c); err != nil {
			return res, err
		}
		b, err := size()
		if err != nil {
			return res, err
		}
		res.After = append(res.After, b)
		fmt.Fprintf(opts.Progress, "  apply %d  store %s (+%s)\n", i+1, FormatBytes(float64(b)), FormatBytes(float64(b-prevOf(res, i))))
	}
	time.Sleep(1100 * time.Millisecond) // the last plan closed more than the 1 s retention ago
	out, err := runCommand(ctx, root, append(env, "KL_RETENTION=1s"), opts.KL, "--json", "gc", "--dry-run")
	if err != nil {
		return res, err
	}
	var gc struct {
		Bytes int64 `json:"bytes"`
	}
	if err := json.Unmarshal(out.Stdout, &gc); err != nil {
		return res, fmt.Errorf("growth benchmark: kl gc --dry-run: %w", err)
	}
	res.Retained = gc.Bytes
	return res, nil
}

// growthCycle writes config c into cfg and runs `kl plan` and `kl apply`
// of the plan.
func growthCycle(kl func(args ...string) (commandResult, error), cfg string, c []byte) error {
	if err := writeFiles(cfg, map[string][]byte{"main.tf": c}); err != nil {
		return err
	}
	out, err := kl("--json", "plan", "--state", overheadStateName, "-C", cfg)
	if err != nil {
		return err
	}
	plan, err := runStatus(out.Stdout, "planned")
	if err != nil {
		return fmt.Errorf("growth benchmark: kl plan: %w", err)
	}
	_, err = kl("--json", "apply", plan)
	return err
}

// prevOf is the store's size before apply i of res.
func prevOf(res GrowthSeries, i int) int64 {
	if i == 0 {
		return res.Init
	}
	return res.After[i-1]
}

// storeBytes is the used bytes of the SQLite file at path after a WAL
// checkpoint: (page_count − freelist_count) × page_size.
func storeBytes(ctx context.Context, path string) (int64, error) {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return 0, fmt.Errorf("growth benchmark: opening %s: %w", path, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return 0, fmt.Errorf("growth benchmark: checkpointing %s: %w", path, err)
	}
	var pages, free, size int64
	for q, v := range map[string]*int64{`PRAGMA page_count`: &pages, `PRAGMA freelist_count`: &free, `PRAGMA page_size`: &size} {
		if err := db.QueryRowContext(ctx, q).Scan(v); err != nil {
			return 0, fmt.Errorf("growth benchmark: %s of %s: %w", q, path, err)
		}
	}
	return (pages - free) * size, nil
}

// pgStoreBytes is the size of the PostgreSQL store at dsn: the sum of
// pg_total_relation_size (heap, indexes, TOAST, free space and visibility
// maps) over the tables of the DSN's current schema, where the store keeps
// all of its tables.
func pgStoreBytes(ctx context.Context, dsn string) (int64, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, fmt.Errorf("growth benchmark: connecting to the PostgreSQL store: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int64
	err = conn.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
		FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
		WHERE ns.nspname = current_schema() AND c.relkind IN ('r', 'p', 'm')`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("growth benchmark: size of the PostgreSQL store: %w", err)
	}
	return n, nil
}
