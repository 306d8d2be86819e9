package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/testprovider"
)

// Figures Run can be limited to (Options.Only).
const (
	OnlyAll         = "all"
	OnlyConcurrency = "concurrency"
	OnlyOverhead    = "overhead"
	// OnlyProvider is figure 2b: the overhead with the test provider.
	OnlyProvider = "provider"
	OnlyCommit   = "commit"
	OnlyGrowth   = "growth"
	// OnlyNative is figure 5: the native lane (issue 17).
	OnlyNative = "native"
)

// CheckOnly accepts "" and the Only* figure names.
func CheckOnly(only string) error {
	switch only {
	case "", OnlyAll, OnlyConcurrency, OnlyOverhead, OnlyProvider, OnlyCommit, OnlyGrowth, OnlyNative:
		return nil
	}
	return fmt.Errorf("unknown figure %q: want %s, %s, %s, %s, %s, %s or %s", only, OnlyAll, OnlyConcurrency, OnlyOverhead, OnlyProvider, OnlyCommit, OnlyGrowth, OnlyNative)
}

// Options configures Run.
type Options struct {
	// KL is the kl binary for the overhead figure; empty builds one from Src
	// into a temporary directory.
	KL string
	// Terraform is the terraform binary both Kilolock and the baselines run
	// (required for the concurrency and overhead figures).
	Terraform string
	// Src is the module root: commit benchmarks run there, kl is built from it.
	Src string
	// Runs is the number of interleaved repetitions of figures 1 and 2 (3
	// if zero); Count is go test's -count for figure 3 (5 if zero).
	Runs, Count int
	// Only is OnlyAll ("" too) or one figure.
	Only string
	// TempDir is the parent of every temporary directory ("" for the OS
	// default).
	TempDir string
	// NativeResources is the size of figure 5's big state
	// (DefaultNativeResources if zero; smaller for a smoke run).
	NativeResources int
}

// Results is what Run measured; a nil field was not run.
type Results struct {
	Machine     Machine
	Runs        int
	Concurrency *ConcurrencyResult
	Overhead    *OverheadResult
	// ProviderOverhead is figure 2b: Overhead with the test provider.
	ProviderOverhead *OverheadResult
	Commit           *CommitResult
	Growth           *GrowthResult
	// Native is figure 5: the native lane.
	Native *NativeResult
}

// Run measures the figures selected by opts, printing progress, each
// figure's medians and finally the summary table to w.
func Run(ctx context.Context, w io.Writer, opts Options) (*Results, error) {
	opts = opts.withDefaults()
	if err := CheckOnly(opts.Only); err != nil {
		return nil, err
	}
	want := func(f string) bool { return opts.Only == OnlyAll || opts.Only == f }
	res := &Results{Machine: ReadMachine(), Runs: opts.Runs}
	fmt.Fprintf(w, "klbench: Kilolock figures beside their baselines (prints, asserts nothing; medians of %d interleaved runs, commit: of go test -count %d)\n", opts.Runs, opts.Count)
	fmt.Fprintln(w, res.Machine)
	needTF := want(OnlyConcurrency) || want(OnlyOverhead) || want(OnlyProvider) || want(OnlyGrowth) || want(OnlyNative)
	if needTF {
		if opts.Terraform == "" {
			return nil, fmt.Errorf("no terraform binary")
		}
		fmt.Fprintf(w, "terraform: %s (%s)\n", opts.Terraform, terraformVersion(ctx, opts.Terraform))
	}
	started := time.Now()

	var err error
	if want(OnlyConcurrency) {
		if res.Concurrency, err = runConcurrency(ctx, w, opts); err != nil {
			return nil, err
		}
	}
	if want(OnlyOverhead) {
		if res.Overhead, err = runOverhead(ctx, w, opts); err != nil {
			return nil, err
		}
	}
	if want(OnlyProvider) {
		if res.ProviderOverhead, err = runProviderOverhead(ctx, w, opts); err != nil {
			return nil, err
		}
	}
	if want(OnlyCommit) {
		if res.Commit, err = runCommit(ctx, w, opts); err != nil {
			return nil, err
		}
	}
	if want(OnlyGrowth) {
		if res.Growth, err = runGrowth(ctx, w, opts); err != nil {
			return nil, err
		}
	}
	if want(OnlyNative) {
		if res.Native, err = runNative(ctx, w, opts); err != nil {
			return nil, err
		}
	}

	fmt.Fprintf(w, "\n== summary (medians; ratio: median of the per-round ratios, or x-valid; %s; took %s) ==\n", strings.TrimPrefix(res.Machine.String(), "machine: "), time.Since(started).Round(time.Second))
	if err := Summary(res).Render(w); err != nil {
		return nil, err
	}
	return res, nil
}

// withDefaults fills the zero Runs (3), Count (5) and Only (OnlyAll).
func (opts Options) withDefaults() Options {
	if opts.Runs <= 0 {
		opts.Runs = 3
	}
	if opts.Count <= 0 {
		opts.Count = 5
	}
	if opts.Only == "" {
		opts.Only = OnlyAll
	}
	return opts
}

// runConcurrency measures figure 1 and prints its heading and medians.
func runConcurrency(ctx context.Context, w io.Writer, opts Options) (*ConcurrencyResult, error) {
	fmt.Fprintf(w, "\n== 1. concurrency: 8 plans with disjoint write sets on one state, each apply sleeps 2 s, applied at once ==\n")
	c, err := Concurrency(ctx, ConcurrencyOptions{Terraform: opts.Terraform, Runs: opts.Runs, TempDir: opts.TempDir, Progress: w})
	if err != nil {
		return nil, err
	}
	writeConcurrency(w, c)
	return c, nil
}

// runOverhead measures figure 2 with opts.KL (or a kl built from opts.Src
// for it) and prints its heading and medians.
func runOverhead(ctx context.Context, w io.Writer, opts Options) (*OverheadResult, error) {
	kl, cleanup, err := klBinary(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	fmt.Fprintf(w, "\n== 2. overhead: kl plan + kl apply vs bare terraform, 2,000 resources, one changed ==\n")
	fmt.Fprintf(w, "  kl: %s\n", kl)
	o, err := Overhead(ctx, OverheadOptions{KL: kl, Terraform: opts.Terraform, Runs: opts.Runs, TempDir: opts.TempDir, Progress: w})
	if err != nil {
		return nil, err
	}
	if err := writeOverhead(w, o); err != nil {
		return nil, err
	}
	return o, nil
}

// runProviderOverhead measures figure 2b — figure 2 with the test
// provider built from opts.Src into a filesystem mirror, 20 ms per API call
// — and prints its heading and medians.
func runProviderOverhead(ctx context.Context, w io.Writer, opts Options) (*OverheadResult, error) {
	kl, mirror, cleanup, err := klWithProvider(ctx, opts, "klbench-provider-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	fmt.Fprintf(w, "\n== 2b. overhead with a real provider: kl plan + kl apply vs bare terraform, 2,000 %s resources, %s per Read, one changed ==\n",
		testprovider.Type+"_object", DefaultReadDelay)
	fmt.Fprintf(w, "  kl: %s; provider %s %s from a filesystem mirror; plugin caches filled before the first round (kl's, ADR 0061; terraform's plugin_cache_dir)\n",
		kl, testprovider.Source, testprovider.Version)
	o, err := Overhead(ctx, OverheadOptions{KL: kl, Terraform: opts.Terraform, Runs: opts.Runs, TempDir: opts.TempDir, Progress: w, Mirror: mirror})
	if err != nil {
		return nil, err
	}
	if err := writeOverhead(w, o); err != nil {
		return nil, err
	}
	return o, nil
}

// klWithProvider is what the figures of the test provider need: the kl
// binary (klBinary) and the provider's filesystem mirror built from
// opts.Src into a temporary dir named with prefix (BuildProviderMirror).
// cleanup removes both; on an error nothing is left.
func klWithProvider(ctx context.Context, opts Options, prefix string) (kl, mirror string, cleanup func(), err error) {
	kl, rmKL, err := klBinary(ctx, opts)
	if err != nil {
		return "", "", nil, err
	}
	dir, err := os.MkdirTemp(opts.TempDir, prefix)
	if err != nil {
		rmKL()
		return "", "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir); rmKL() }
	if mirror, err = BuildProviderMirror(ctx, opts.Src, dir); err != nil {
		cleanup()
		return "", "", nil, err
	}
	return kl, mirror, cleanup, nil
}

// BuildProviderMirror builds the test provider
// (./internal/testprovider/cmd/terraform-provider-kltest of the module at
// src, CGO off) into dir and lays out a filesystem mirror of it in
// dir/mirror (testprovider.WriteMirror), whose path it returns.
func BuildProviderMirror(ctx context.Context, src, dir string) (string, error) {
	bin := filepath.Join(dir, "terraform-provider-"+testprovider.Type)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./internal/testprovider/cmd/terraform-provider-kltest")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the test provider: %w\n%s", err, out)
	}
	mirror := filepath.Join(dir, "mirror")
	if err := testprovider.WriteMirror(mirror, bin); err != nil {
		return "", err
	}
	return mirror, nil
}

// klBinary returns the absolute path of opts.KL, checked to exist, or of a
// kl built from opts.Src into a temporary directory that cleanup removes.
func klBinary(ctx context.Context, opts Options) (kl string, cleanup func(), err error) {
	if opts.KL != "" {
		// Commands run in their own work dirs: a relative path would break.
		abs, err := filepath.Abs(opts.KL)
		if err != nil {
			return "", nil, err
		}
		if _, err := os.Stat(abs); err != nil {
			return "", nil, fmt.Errorf("kl binary: %w", err)
		}
		return abs, func() {}, nil
	}
	dir, err := os.MkdirTemp(opts.TempDir, "klbench-kl-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if kl, err = BuildKL(ctx, opts.Src, dir); err != nil {
		cleanup()
		return "", nil, err
	}
	return kl, cleanup, nil
}

// runGrowth measures figure 4 with opts.KL (or a kl built from opts.Src)
// on SQLite and on PostgreSQL (TEST_DATABASE_URL, or a throwaway cluster as
// the store tests start one: pgtest; SQLite alone when there is neither)
// and prints its heading and result, the two stores side by side.
func runGrowth(ctx context.Context, w io.Writer, opts Options) (*GrowthResult, error) {
	kl, cleanup, err := klBinary(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	fmt.Fprintf(w, "\n== 4. store growth: bytes per version, SQLite and PostgreSQL, 2,000 resources, 3 plan + apply cycles of a one-resource change ==\n")
	pg, err := growthPostgres(ctx)
	if err != nil {
		fmt.Fprintf(w, "  PostgreSQL not measured: %v\n", err)
	}
	defer pgtest.Stop()
	g, err := Growth(ctx, GrowthOptions{KL: kl, Terraform: opts.Terraform, TempDir: opts.TempDir, Progress: w, Postgres: pg})
	if err != nil {
		return nil, err
	}
	t := Table{Header: []string{"store", "after state init", "per version (median)", "of it, saved plans and archives until KL_RETENTION", "after each apply"}}
	add := func(name, unit string, s GrowthSeries) {
		after := make([]string, len(s.After))
		for i, b := range s.After {
			after[i] = FormatBytes(float64(b))
		}
		t.Add(name+" ("+unit+")", FormatBytes(float64(s.Init)), FormatBytes(s.PerVersion()),
			FormatBytes(float64(s.Retained)/float64(max(1, len(s.After)))), strings.Join(after, ", "))
	}
	add("SQLite", "used pages", g.GrowthSeries)
	if g.Postgres != nil {
		add("PostgreSQL", "pg_total_relation_size", *g.Postgres)
	}
	return g, t.Render(indent(w))
}

// growthPostgres is the DSN of a fresh schema on a PostgreSQL server for
// figure 4: TEST_DATABASE_URL's, or a throwaway cluster's (pgtest).
func growthPostgres(ctx context.Context) (string, error) {
	base, err := pgtest.Server()
	if err != nil {
		if errors.Is(err, pgtest.ErrNoServerBinaries) {
			return "", fmt.Errorf("%w: %s", err, pgtest.InstallHint)
		}
		return "", err
	}
	dsn, _, err := pgtest.NewSchema(ctx, base)
	return dsn, err
}

// runCommit measures figure 3 and prints its heading; its medians are in
// the summary.
func runCommit(ctx context.Context, w io.Writer, opts Options) (*CommitResult, error) {
	fmt.Fprintf(w, "\n== 3. commit: snapshot-merge into a 10,000-resource state (go test -bench, -benchmem, -count %d) ==\n", opts.Count)
	fmt.Fprintf(w, "  load average at start: %s\n", LoadAverage())
	return Commit(ctx, CommitOptions{Src: opts.Src, Count: opts.Count, Progress: indent(w)})
}

// writeConcurrency prints figure 1's medians.
func writeConcurrency(w io.Writer, c *ConcurrencyResult) {
	a, b := Median(c.Reservations), Median(c.WholeState)
	fmt.Fprintf(w, "  (a) reservations   apply wall %s  %s\n", FormatSeconds(a), formatAll(c.Reservations))
	fmt.Fprintf(w, "  (b) whole-state    apply wall %s  %s\n", FormatSeconds(b), formatAll(c.WholeState))
	fmt.Fprintf(w, "  (b)/(a) = %s (median of the per-round ratios)   floor: %s (all sleeps at once) vs %s (one after another)\n",
		FormatRatio(c.Ratio()), FormatSeconds(c.Sleep), FormatSeconds(c.Sleep*time.Duration(c.Plans)))
	fmt.Fprintf(w, "  engine in-process, SQLite store, %d real terraform processes per phase; waiting applies retry every %s in both modes;\n"+
		"  plans made %d at once before the applies, not in the figure: median %s; load average at start %s\n",
		c.Plans, c.Poll, c.Plans, FormatSeconds(Median(c.PlanPhase)), c.LoadAtStart)
}

// writeOverhead prints figure 2's medians and the breakdown of kl's time.
func writeOverhead(w io.Writer, o *OverheadResult) error {
	fmt.Fprintf(w, "  medians: kl plan %s vs terraform init + plan -out %s (%s); kl apply %s vs terraform apply PLAN %s (%s);\n"+
		"  CPU time (user + sys, kl with its terraform processes): kl plan + apply %s vs terraform %s (%s);\n"+
		"  ratios are medians of the per-round ratios; load average at start %s\n",
		FormatSeconds(o.Median(klPlan)),
		FormatSeconds(o.Median(OverheadRound.TFPlanStep)), FormatRatio(o.PlanRatio()),
		FormatSeconds(o.Median(klApply)), FormatSeconds(o.Median(tfApply)), FormatRatio(o.ApplyRatio()),
		FormatSeconds(o.Median(OverheadRound.KLTotalCPU)), FormatSeconds(o.Median(OverheadRound.TFTotalCPU)), FormatRatio(o.CPURatio()),
		o.LoadAtStart)
	fmt.Fprintf(w, "\n  where kl's time goes (medians of each line; from KL_LOG_LEVEL=debug step timings and bare-terraform runs of the same steps):\n\n")
	return Breakdown(o).Render(indent(w))
}

// BuildKL builds ./cmd/kl of the module at src into dir and returns the
// binary's path (CGO off, as make build).
func BuildKL(ctx context.Context, src, dir string) (string, error) {
	bin := filepath.Join(dir, "kl")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/kl")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building kl: %w\n%s", err, out)
	}
	return bin, nil
}

// terraformVersion returns the first line of `terraform version`.
func terraformVersion(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return "version unknown"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// indent returns a writer that prefixes every line with two spaces.
func indent(w io.Writer) io.Writer { return &indenter{w: w, bol: true} }

type indenter struct {
	w   io.Writer
	bol bool
}

func (i *indenter) Write(p []byte) (int, error) {
	var b []byte
	for _, c := range p {
		if i.bol {
			b = append(b, ' ', ' ')
		}
		b = append(b, c)
		i.bol = c == '\n'
	}
	if _, err := i.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}
