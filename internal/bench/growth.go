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

// GrowthResult is figure 4: what one SQLite store holds, in bytes of used
// pages ((page_count − freelist_count) × page_size, after a WAL
// checkpoint), after `kl state init --from` of the synthetic state and
// after each `kl plan` + `kl apply` of a one-resource change.
type GrowthResult struct {
	Resources int
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
func (r GrowthResult) PerVersion() float64 {
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
// one resource's input; the store's used bytes are read after each.
func Growth(ctx context.Context, opts GrowthOptions) (*GrowthResult, error) {
	opts.defaults()
	if opts.KL == "" || opts.Terraform == "" {
		return nil, fmt.Errorf("growth benchmark: kl and terraform binaries are required")
	}
	root, err := os.MkdirTemp(opts.TempDir, "klbench-growth-")
	if err != nil {
		return nil, fmt.Errorf("growth benchmark: %w", err)
	}
	defer os.RemoveAll(root)
	state, config, err := overheadFixtureData(opts.Resources)
	if err != nil {
		return nil, err
	}
	stateFile, cfg, db := filepath.Join(root, "state.tfstate"), filepath.Join(root, "config"), filepath.Join(root, "kl.db")
	if err := os.WriteFile(stateFile, state, 0o600); err != nil {
		return nil, fmt.Errorf("growth benchmark: %w", err)
	}
	env := append(cleanEnv(os.Environ()), "KL_STORE="+db, "KL_WORKDIR="+filepath.Join(root, "runs"), "KL_TERRAFORM="+opts.Terraform,
		"KL_ACTOR=klbench", "NO_COLOR=1")
	kl := func(args ...string) (commandResult, error) { return runCommand(ctx, root, env, opts.KL, args...) }
	if _, err := kl("state", "init", overheadStateName, "--from", stateFile); err != nil {
		return nil, err
	}
	res := &GrowthResult{Resources: opts.Resources}
	if res.Init, err = storeBytes(ctx, db); err != nil {
		return nil, err
	}
	changed := fmt.Appendf(nil, "input = %q\n", changedResource+"-changed")
	for i := range opts.Applies {
		c := bytes.Replace(config, changed, fmt.Appendf(nil, "input = %q\n", fmt.Sprintf("%s-v%d", changedResource, i+1)), 1)
		if err := writeFiles(cfg, map[string][]byte{"main.tf": c}); err != nil {
			return nil, err
		}
		out, err := kl("--json", "plan", "--state", overheadStateName, "-C", cfg)
		if err != nil {
			return nil, err
		}
		plan, err := runStatus(out.Stdout, "planned")
		if err != nil {
			return nil, fmt.Errorf("growth benchmark: kl plan: %w", err)
		}
		if _, err := kl("--json", "apply", plan); err != nil {
			return nil, err
		}
		b, err := storeBytes(ctx, db)
		if err != nil {
			return nil, err
		}
		res.After = append(res.After, b)
		fmt.Fprintf(opts.Progress, "  apply %d  store %s (+%s)\n", i+1, FormatBytes(float64(b)), FormatBytes(float64(b-prevOf(res, i))))
	}
	time.Sleep(1100 * time.Millisecond) // the last plan closed more than the 1 s retention ago
	out, err := runCommand(ctx, root, append(env, "KL_RETENTION=1s"), opts.KL, "--json", "gc", "--dry-run")
	if err != nil {
		return nil, err
	}
	var gc struct {
		Bytes int64 `json:"bytes"`
	}
	if err := json.Unmarshal(out.Stdout, &gc); err != nil {
		return nil, fmt.Errorf("growth benchmark: kl gc --dry-run: %w", err)
	}
	res.Retained = gc.Bytes
	return res, nil
}

// prevOf is the store's size before apply i of res.
func prevOf(res *GrowthResult, i int) int64 {
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
