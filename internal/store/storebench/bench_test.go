package storebench_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/store/sqlite"
	"github.com/kilolock/kilolock/internal/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The seeded history: versions of one state, each changing
// changesPerVersion addresses drawn from addressPool distinct addresses.
const (
	versions          = 100_000
	changesPerVersion = 10
	addressPool       = 5_000
	historyState      = "bench/history"
	reservationState  = "bench/reservations"
	holders           = 32
	sincePlanMax      = 40 // a plan 1..40 versions behind the head
	historyPage       = 50
)

// reservationPool is what the holders draw 1–3 addresses from: 60
// resources in 6 modules, 3 module prefixes and 4 outputs.
var reservationPool = func() []engine.Address {
	var out []engine.Address
	for m := range 6 {
		for r := range 10 {
			out = append(out, engine.Address(fmt.Sprintf("module.m%d.terraform_data.r%d", m, r)))
		}
	}
	out = append(out, "module.m0.*", "module.m3.*", "module.m5.*", "output.a", "output.b", "output.c", "output.d")
	return out
}()

// backend is one seeded store.
type backend struct {
	name   string
	s      engine.Store
	head   int64
	seeded time.Duration
}

// result is one measured operation on one backend.
type result struct {
	p50, p99 time.Duration
	opsPerS  float64
	refused  float64 // share of acquisitions refused with a conflict
	samples  int
}

// BenchmarkStore seeds both stores once and measures each operation on each;
// it prints a side-by-side table with postgres/sqlite ratios at the end.
func BenchmarkStore(b *testing.B) {
	backends := []*backend{seedSQLite(b), seedPostgres(b)}
	results := map[string]map[string]result{}
	var mu sync.Mutex
	keep := func(op, name string, r result) {
		mu.Lock()
		defer mu.Unlock()
		if results[op] == nil {
			results[op] = map[string]result{}
		}
		results[op][name] = r
	}
	for _, be := range backends {
		b.Run("since-plan/"+be.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			r := measure(b, func() error {
				_, err := be.s.VersionsAfter(b.Context(), historyState, be.head-1-int64(rng.IntN(sincePlanMax)))
				return err
			})
			keep("since-plan", be.name, r)
		})
		b.Run("history/"+be.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, 4))
			r := measure(b, func() error {
				before := historyPage + rng.Int64N(be.head-historyPage)
				vs, err := be.s.History(b.Context(), historyState, engine.HistoryQuery{Before: before, Limit: historyPage})
				if err == nil && len(vs) != historyPage {
					err = fmt.Errorf("history page of %d versions", len(vs))
				}
				return err
			})
			keep("history", be.name, r)
		})
		b.Run("reservations/"+be.name, func(b *testing.B) {
			keep("reservations", be.name, reserve(b, be))
		})
	}
	printTable(backends, results)
}

// measure runs op b.N times, timing each call; it reports p50 and p99.
func measure(b *testing.B, op func() error) result {
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	r := result{p50: pct(lat, 50), p99: pct(lat, 99), samples: len(lat)}
	b.ReportMetric(float64(r.p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(r.p99.Microseconds())/1000, "p99-ms")
	return r
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}

// reserve runs b.N acquisitions shared by 32 holders, each its own run: an
// acquisition of a random 1–3 addresses (read or write) followed, when
// granted, by a release. ops/s counts acquisitions (granted or refused).
func reserve(b *testing.B, be *backend) result {
	ctx := b.Context()
	runs := make([]string, holders)
	for i := range runs {
		runs[i] = fmt.Sprintf("01BENCH%s%02d%012d", strings.ToUpper(be.name[:2]), i, time.Now().UnixNano()%1e12)
		if err := be.s.CreateRun(ctx, engine.Run{ID: runs[i], Kind: engine.KindApply, State: reservationState, Actor: "bench", Status: engine.StatusApplying}); err != nil {
			b.Fatal(err)
		}
	}
	var next, refused atomic.Int64
	lat := make([][]time.Duration, holders)
	var wg sync.WaitGroup
	errs := make(chan error, holders)
	b.ResetTimer()
	start := time.Now()
	for h := range holders {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(h), 9))
			for next.Add(1) <= int64(b.N) {
				want := make([]engine.Reservation, 1+rng.IntN(3))
				for i := range want {
					mode := engine.ModeRead
					if rng.IntN(2) == 0 {
						mode = engine.ModeWrite
					}
					want[i] = engine.Reservation{Address: reservationPool[rng.IntN(len(reservationPool))], Mode: mode}
				}
				t0 := time.Now()
				_, err := be.s.Acquire(ctx, engine.AcquireRequest{State: reservationState, Run: runs[h], Lease: time.Minute,
					Holder: engine.Holder{Host: "bench", PID: h}, Reservations: want})
				var ce *engine.ConflictError
				switch {
				case errors.As(err, &ce):
					refused.Add(1)
				case err != nil:
					errs <- err
					return
				default:
					if err := be.s.Release(ctx, runs[h]); err != nil {
						errs <- err
						return
					}
				}
				lat[h] = append(lat[h], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	r := result{p50: pct(all, 50), p99: pct(all, 99), opsPerS: float64(b.N) / elapsed.Seconds(),
		refused: float64(refused.Load()) / float64(b.N), samples: b.N}
	b.ReportMetric(r.opsPerS, "ops/s")
	b.ReportMetric(100*r.refused, "%refused")
	return r
}

// seedSQLite makes a store file and fills its history in one transaction
// with prepared statements.
func seedSQLite(b *testing.B) *backend {
	b.Helper()
	t0 := time.Now()
	path := filepath.Join(b.TempDir(), "bench.db")
	s, err := sqlite.Open(b.Context(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	createStates(b, s)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := b.Context()
	// Bulk load the usual way: no fsync while seeding, the secondary index
	// built once at the end (same definition as the migration's), rows in
	// primary-key order, many rows per INSERT.
	for _, q := range []string{`PRAGMA synchronous = OFF`, `DROP INDEX version_changes_by_address`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	const perStmt = 100 // versions per INSERT
	insV, err := tx.Prepare(`INSERT INTO versions (state, serial, lineage, created_at, provenance, resources, size, snapshot) VALUES ` +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?), ", perStmt), ", "))
	if err != nil {
		b.Fatal(err)
	}
	insC, err := tx.Prepare(`INSERT INTO version_changes (state, serial, address) VALUES ` +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?), ", perStmt*changesPerVersion), ", "))
	if err != nil {
		b.Fatal(err)
	}
	h := newHistory(b)
	vArgs := make([]any, 0, 8*perStmt)
	cArgs := make([]any, 0, 3*perStmt*changesPerVersion)
	for v := int64(1); v <= versions; v++ {
		vArgs = append(vArgs, historyState, v, h.lineage, h.created(v), h.provenance(v), 20, h.size, h.snapshot)
		for _, a := range h.changed(v) {
			cArgs = append(cArgs, historyState, v, a)
		}
		if v%perStmt != 0 {
			continue
		}
		if _, err := insV.ExecContext(ctx, vArgs...); err != nil {
			b.Fatal(err)
		}
		if _, err := insC.ExecContext(ctx, cArgs...); err != nil {
			b.Fatal(err)
		}
		vArgs, cArgs = vArgs[:0], cArgs[:0]
	}
	if _, err := tx.ExecContext(ctx, `UPDATE states SET head_serial = ? WHERE name = ?`, versions, historyState); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{
		`CREATE INDEX version_changes_by_address ON version_changes (state, address, serial)`,
		`ANALYZE`, `PRAGMA synchronous = FULL`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	return &backend{name: "sqlite", s: s, head: versions, seeded: time.Since(t0)}
}

// seedPostgres opens a store on a fresh schema and fills its history with
// COPY.
func seedPostgres(b *testing.B) *backend {
	b.Helper()
	t0 := time.Now()
	dsn := pgtest.DSN(b)
	s, err := postgres.Open(b.Context(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	createStates(b, s)
	ctx := b.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	// Bulk load the usual way: version_changes' key, index and foreign key
	// are dropped for the COPY and made again once at the end (the same
	// definitions as the migration's), in one transaction.
	tx, err := conn.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck
	for _, q := range []string{
		`SET LOCAL maintenance_work_mem = '256MB'`,
		`ALTER TABLE version_changes DROP CONSTRAINT version_changes_state_serial_fkey`,
		`ALTER TABLE version_changes DROP CONSTRAINT version_changes_pkey`,
		`DROP INDEX version_changes_by_address`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	h := newHistory(b)
	v := int64(0)
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"versions"},
		[]string{"state", "serial", "lineage", "created_at", "provenance", "resources", "size", "snapshot"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if v++; v > versions {
				return nil, nil
			}
			return []any{historyState, v, h.lineage, h.created(v), h.provenance(v), int64(20), h.size, h.snapshot}, nil
		})); err != nil {
		b.Fatal(err)
	}
	v, i := int64(1), 0
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"version_changes"}, []string{"state", "serial", "address"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == changesPerVersion {
				v, i = v+1, 0
			}
			if v > versions {
				return nil, nil
			}
			i++
			return []any{historyState, v, h.changed(v)[i-1]}, nil
		})); err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{
		`ALTER TABLE version_changes ADD PRIMARY KEY (state, serial, address)`,
		`CREATE INDEX version_changes_by_address ON version_changes (state, address, serial)`,
		`ALTER TABLE version_changes ADD FOREIGN KEY (state, serial) REFERENCES versions (state, serial)`,
		`UPDATE states SET head_serial = ` + fmt.Sprint(versions) + ` WHERE name = '` + historyState + `'`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		b.Fatal(err)
	}
	return &backend{name: "postgres", s: s, head: versions, seeded: time.Since(t0)}
}

func createStates(b *testing.B, s engine.Store) {
	b.Helper()
	for _, name := range []string{historyState, reservationState} {
		if _, err := s.CreateState(b.Context(), storetest.NewState(name)); err != nil {
			b.Fatal(err)
		}
	}
}

// history generates the seeded versions: a tiny snapshot (the queries never
// read it), a realistic provenance, and changesPerVersion distinct addresses
// per version, the same for both stores.
type history struct {
	lineage  string
	snapshot []byte
	size     int64
	changes  [][]string
	base     int64
}

func newHistory(b *testing.B) *history {
	b.Helper()
	h, err := seedHistory()
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// seedHistory generates the history once for both stores.
var seedHistory = sync.OnceValues(func() (*history, error) {
	doc := []byte(`{"version":4,"serial":0,"lineage":"lineage-` + historyState + `","resources":[]}`)
	z, err := store.CompressSnapshot(doc)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(5, 6))
	h := &history{lineage: "lineage-" + historyState, snapshot: z, size: int64(len(doc)),
		changes: make([][]string, versions+1), base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()}
	for v := 1; v <= versions; v++ {
		seen := map[int]bool{}
		for len(seen) < changesPerVersion {
			seen[rng.IntN(addressPool)] = true
		}
		for n := range seen {
			h.changes[v] = append(h.changes[v], fmt.Sprintf("module.m%d.terraform_data.r%d", n%50, n))
		}
		slices.Sort(h.changes[v])
	}
	return h, nil
})

func (h *history) created(v int64) int64 { return h.base + v*int64(time.Minute) }

func (h *history) changed(v int64) []string { return h.changes[v] }

func (h *history) provenance(v int64) string {
	p, _ := json.Marshal(engine.Provenance{
		Run: fmt.Sprintf("01BENCHAPPLY%014d", v), PlanRun: fmt.Sprintf("01BENCHPLAN%015d", v),
		SourceSerial: max(v-3, 0), CommittedSerial: v, Mode: engine.CommitSnapshotMerge, Exact: true,
		PlanDigest: "sha256:0000000000000000000000000000000000000000000000000000000000000000",
		Actor:      "bench", PR: &engine.PullRequest{Repo: "acme/infra", Number: int(v % 997)},
	})
	return string(p)
}

// printTable prints the figures side by side with postgres/sqlite ratios.
func printTable(backends []*backend, results map[string]map[string]result) {
	w := os.Stdout
	fmt.Fprintf(w, "\nstore benchmark: %d versions, %d changed-address rows; %d reservation holders\n",
		versions, versions*changesPerVersion, holders)
	for _, be := range backends {
		fmt.Fprintf(w, "  seeded %-8s in %v\n", be.name, be.seeded.Round(time.Millisecond))
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000) }
	ratio := func(pg, lite float64) string {
		if lite == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", pg/lite)
	}
	fmt.Fprintf(w, "%-34s %12s %12s %12s %12s %10s %10s\n", "operation", "sqlite p50", "sqlite p99", "postgres p50", "postgres p99", "p50 pg/sq", "p99 pg/sq")
	rows := []struct{ op, label string }{
		{"since-plan", fmt.Sprintf("since-plan (1–%d versions behind)", sincePlanMax)},
		{"history", fmt.Sprintf("history page (%d, random depth)", historyPage)},
		{"reservations", "acquire+release (latency)"},
	}
	for _, row := range rows {
		l, p := results[row.op]["sqlite"], results[row.op]["postgres"]
		fmt.Fprintf(w, "%-34s %12s %12s %12s %12s %10s %10s\n", row.label, ms(l.p50), ms(l.p99), ms(p.p50), ms(p.p99),
			ratio(float64(p.p50), float64(l.p50)), ratio(float64(p.p99), float64(l.p99)))
	}
	l, p := results["reservations"]["sqlite"], results["reservations"]["postgres"]
	fmt.Fprintf(w, "%-34s %12s %12s %12s %12s %10s\n", "reservations, 32 holders", "sqlite ops/s", "refused", "pg ops/s", "refused", "pg/sq")
	fmt.Fprintf(w, "%-34s %12.0f %11.0f%% %12.0f %11.0f%% %10s\n", "acquire (+release when granted)",
		l.opsPerS, 100*l.refused, p.opsPerS, 100*p.refused, ratio(p.opsPerS, l.opsPerS))
}
