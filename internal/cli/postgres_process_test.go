package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
)

var seedFlag = flag.Uint64("kl.seed", 0, "seed of TestPostgresApplyProcesses/concurrent_applies (0: from the clock)")

// TestPostgresApplyProcesses drives real `kl apply` processes on one
// PostgreSQL store (issue #3): several at once with overlapping footprints,
// and processes killed with SIGKILL: an apply holding its reservations, an
// apply waiting for them, a plan planning.
func TestPostgresApplyProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/kl, runs Terraform and PostgreSQL")
	}
	if _, err := exec.LookPath("terraform"); err != nil {
		t.Skip("terraform not on PATH (make tools)")
	}
	t.Parallel()
	pgtest.BaseDSN(t) // skip before building when there is no server
	bin := buildKL(t, t.TempDir())
	t.Run("concurrent applies", func(t *testing.T) { testConcurrentApplyProcesses(t, bin) })
	t.Run("kill -9 holder", func(t *testing.T) { testKilledApplyProcess(t, bin) })
	t.Run("kill -9 waiting apply", func(t *testing.T) { testKilledWaitingApply(t, bin) })
	t.Run("kill -9 plan", func(t *testing.T) { testKilledPlanProcess(t, bin) })
}

// testConcurrentApplyProcesses: a state of 10 terraform_data resources (r07
// and r08 read r00.id, r09 reads r01.input); 8 plans made at one head, each
// of a random subset (seeded; -kl.seed re-runs one) with new values, drawn
// so that some write the same resource and some only read the same one;
// then 8 `kl apply --wait 30s` processes started at once. Whatever
// happened:
//
//   - each exits 0 (applied, committed a version) or 3 (refused, with a
//     reason); no two conflicting reservations are ever seen held at once;
//   - serials are contiguous, and each version after the plans' source is
//     the exact write set of one committed apply;
//   - the head equals the serial replay of the committed runs' values (no
//     lost update), and `terraform plan` of the configuration holding the
//     replayed values reports no changes against the pulled head;
//   - every refused apply run has a reason and a failed marker; every apply
//     that waited has a waited marker naming a holder whose footprint
//     conflicts with its own over the named addresses;
//   - nothing is left running or reserved.
func testConcurrentApplyProcesses(t *testing.T, bin string) {
	const (
		state = "shared"
		nRuns = 8
	)
	k := setupPostgres(t)
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (re-run with -args -kl.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	base := tfConfig{}
	for i := range 10 {
		n := fmt.Sprintf("r%02d", i)
		base[n] = tfData{Value: n + "-base"}
	}
	base["r07"] = tfData{Value: "r07-base", Ref: "r00.id"}
	base["r08"] = tfData{Value: "r08-base", Ref: "r00.id"}
	base["r09"] = tfData{Value: "r09-base", Ref: "r01.input"}
	names := base.names()
	configDir := func(name string, c tfConfig) string {
		dir := filepath.Join(k.dir, name)
		write(t, filepath.Join(dir, "main.tf"), c.hcl())
		return dir
	}

	k.ok("state", "init", state)
	var bp planDoc
	k.jsonOf(&bp, "plan", "--state", state, "-C", configDir("base", base))
	k.ok("apply", bp.Run.ID)
	source, baseIDs, _ := tfInstances(t, []byte(k.ok("state", "pull", state)))

	// Draw the change sets until some pair writes one resource and some
	// other pair only reads one (r00 or r01) — by the config's references,
	// before Terraform says so.
	values := make([]map[string]string, nRuns)
	for try := 0; ; try++ {
		for i := range values {
			values[i] = map[string]string{}
			for _, j := range rng.Perm(len(names))[:1+rng.IntN(3)] {
				values[i][names[j]] = fmt.Sprintf("%s-run%d-%03d", names[j], i, rng.IntN(1000))
			}
		}
		if w, r := predictedOverlaps(base, values); w && r {
			break
		}
		if try == 1000 {
			t.Fatalf("seed %d: no draw with both a write/write and a read-only overlap", seed)
		}
	}

	// Plan all at the same head, two at a time (2 cores), in-process.
	dirs := make([]string, nRuns)
	for i := range dirs {
		dirs[i] = configDir(fmt.Sprintf("run-%d", i), base.with(values[i]))
	}
	planned := make([]result, nRuns)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for i := range planned {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			planned[i] = k.runWith(envWith(k.env, fmt.Sprintf("KL_ACTOR=user%d", i)), "", "plan", "--state", state, "-C", dirs[i], "--json")
		})
	}
	wg.Wait()
	plans := make([]planDoc, nRuns)
	planIdx := map[string]int{}
	for i, r := range planned {
		if r.err != nil {
			t.Fatalf("plan %d: %v\n%s", i, r.err, r.errOut)
		}
		if err := json.Unmarshal([]byte(r.out), &plans[i]); err != nil {
			t.Fatalf("plan %d: %v\n%s", i, err, r.out)
		}
		if plans[i].Envelope.SourceSerial != source {
			t.Fatalf("plan %d made at serial %d, want %d", i, plans[i].Envelope.SourceSerial, source)
		}
		planIdx[plans[i].Run.ID] = i
		t.Logf("run %d: plan %s sets %v; writes %v, reads %v", i, plans[i].Run.ID, values[i], plans[i].Footprint.Write, plans[i].Footprint.Read)
	}

	// Apply all at once, each in its own process and work dir, while the
	// test samples the live reservations.
	sampler := sampleReservations(t, k.store, state)
	procs := make([]*bgProc, nRuns)
	started := time.Now()
	for i := range procs {
		env := envWith(k.env, "KL_WORKDIR="+filepath.Join(k.dir, fmt.Sprintf("work-%d", i)), fmt.Sprintf("KL_ACTOR=user%d", i))
		procs[i] = startKL(t, bin, k.dir, env, "apply", "--wait", "30s", "--json", plans[i].Run.ID)
	}
	applies := make([]storyDoc, nRuns)
	for i, p := range procs {
		res := p.wait(t, 4*time.Minute)
		if err := json.Unmarshal([]byte(res.out), &applies[i]); err != nil {
			t.Fatalf("run %d: kl apply exit %d, stdout not JSON: %v\nstdout:\n%s\nstderr:\n%s", i, res.code, err, res.out, res.errOut)
		}
		a := applies[i].Run
		t.Logf("run %d: apply %s exit %d: %s %s", i, a.ID, res.code, a.Status, a.Reason)
		switch {
		case res.code == 0 && a.Status == "applied" && a.CommittedSerial > source:
		case res.code == 3 && a.Status == "refused" && a.Reason != "":
		default:
			t.Errorf("run %d: kl apply exit %d, run %s status %q, serial %d, reason %q; want exit 0 applied or 3 refused with a reason\nstderr:\n%s",
				i, res.code, a.ID, a.Status, a.CommittedSerial, a.Reason, res.errOut)
		}
	}
	samples := sampler()
	t.Logf("all %d applies done in %s; %d reservation samples", nRuns, time.Since(started).Round(time.Millisecond), samples)

	// Serials contiguous from 0; each version after the source is the
	// exact write set of one committed apply; replay them in serial order.
	plannedInput := func(c tfConfig, n string) string {
		switch r := c[n]; r.Ref {
		case "r00.id":
			return r.Value + ":" + baseIDs["r00"]
		case "r01.input":
			return r.Value + ":" + c["r01"].Value
		default:
			return r.Value
		}
	}
	replayInput, replayValue := map[string]string{}, map[string]string{}
	for _, n := range names {
		replayInput[n], replayValue[n] = plannedInput(base, n), base[n].Value
	}
	var hist historyDoc
	k.jsonOf(&hist, "history", "--state", state, "--limit", "100")
	sort.Slice(hist.Entries, func(i, j int) bool { return hist.Entries[i].Version.Serial < hist.Entries[j].Version.Serial })
	committed := 0
	for i, e := range hist.Entries {
		v := e.Version
		if v.Serial != int64(i) {
			t.Fatalf("serials not contiguous from 0: version %d at position %d", v.Serial, i)
		}
		if v.Serial <= source {
			continue
		}
		idx, ok := planIdx[v.Provenance.PlanRun]
		if !ok {
			t.Fatalf("version %d by plan %s: not one of this test's plans", v.Serial, v.Provenance.PlanRun)
		}
		committed++
		a := applies[idx].Run
		if a.ID != v.Provenance.Run || a.CommittedSerial != v.Serial {
			t.Errorf("version %d by apply %s; run %d's apply %s says it committed %d", v.Serial, v.Provenance.Run, idx, a.ID, a.CommittedSerial)
		}
		if !v.Provenance.Exact || v.Provenance.Partial || !maps.Equal(set(v.Changed), set(plans[idx].Footprint.Write)) {
			t.Errorf("version %d: changed %v (exact %v, partial %v); plan %d writes %v", v.Serial, v.Changed,
				v.Provenance.Exact, v.Provenance.Partial, idx, plans[idx].Footprint.Write)
		}
		cfg := base.with(values[idx])
		for _, addr := range v.Changed {
			n := strings.TrimPrefix(addr, "terraform_data.")
			replayInput[n], replayValue[n] = plannedInput(cfg, n), cfg[n].Value
		}
	}
	ok := 0
	for _, a := range applies {
		if a.Run.Status == "applied" {
			ok++
		}
	}
	if committed != ok || committed == 0 {
		t.Errorf("%d versions after serial %d, %d applies committed; want equal and at least one", committed, source, ok)
	}

	// No lost update: the head is the serial replay.
	head := k.ok("state", "pull", state)
	serial, ids, inputs := tfInstances(t, []byte(head))
	if want := hist.Entries[len(hist.Entries)-1].Version.Serial; serial != want {
		t.Errorf("pulled head has serial %d, history ends at %d", serial, want)
	}
	for _, n := range names {
		if inputs[n] != replayInput[n] {
			t.Errorf("head %s = %q, want %q (serial replay)", n, inputs[n], replayInput[n])
		}
	}
	if ids["r00"] != baseIDs["r00"] {
		t.Errorf("r00 was replaced: id %s, was %s", ids["r00"], baseIDs["r00"])
	}
	final := filepath.Join(k.dir, "final")
	write(t, filepath.Join(final, "main.tf"), base.with(replayValue).hcl())
	write(t, filepath.Join(final, "terraform.tfstate"), head)
	if out, changes := terraformPlanChanges(t, k, final); changes {
		t.Errorf("terraform plan of the replayed values against the head plans changes:\n%s", out)
	}

	checkApplyStories(t, k, state, bp.Run.ID, applies, plans)

	var st statusDoc
	k.jsonOf(&st, "status")
	if len(st.Active) != 0 {
		t.Errorf("kl status after every apply exited: %d active runs, want none: %+v", len(st.Active), st.Active)
	}
	if t.Failed() {
		t.Logf("seed %d; head:\n%s", seed, head)
	}
}

// checkApplyStories checks, with `kl runs` and `kl why`, that the apply
// runs of state (but basePlan's) are exactly those of applies (plans[i]'s
// apply is applies[i]), each applied or refused with a reason and a failed
// marker, and that every apply that waited has waited markers naming
// another of these applies that reserved, over addresses where their
// footprints conflict.
func checkApplyStories(t *testing.T, k *kit, state, basePlan string, applies []storyDoc, plans []planDoc) {
	t.Helper()
	byApply := map[string]int{}
	for i, a := range applies {
		byApply[a.Run.ID] = i
	}
	var runs runsDoc
	k.jsonOf(&runs, "runs", "--state", state, "--limit", "200")
	whys := map[string]whyDoc{}
	for _, r := range runs.Runs {
		if r.Kind != "apply" || r.PlanRun == basePlan {
			continue
		}
		if _, ok := byApply[r.ID]; !ok {
			t.Errorf("apply run %s of plan %s (%s) is not one a kl apply process reported", r.ID, r.PlanRun, r.Status)
		}
		var w whyDoc
		k.jsonOf(&w, "why", r.ID)
		whys[r.ID] = w
	}
	for i, a := range applies {
		id := a.Run.ID
		w, ok := whys[id]
		if !ok {
			t.Errorf("run %d: apply %s not listed by kl runs", i, id)
			continue
		}
		switch w.Run.Status {
		case "applied":
		case "refused":
			if w.Reason == "" || !slices.ContainsFunc(w.Decisive, func(m markerDoc) bool { return m.Kind == "failed" && m.Reason != "" }) {
				t.Errorf("run %d: refused apply %s without a reason and a failed marker: reason %q, decisive %+v", i, id, w.Reason, w.Decisive)
			}
		default:
			t.Errorf("run %d: apply %s ended %s: %s", i, id, w.Run.Status, w.Reason)
		}
		waited := w.Reserved != nil && w.Reserved.WaitedMS > 0 || strings.Contains(w.Reason, "reservations conflict")
		if waited && len(w.Waited) == 0 {
			t.Errorf("run %d: apply %s waited (reserved %+v, reason %q) but has no waited marker", i, id, w.Reserved, w.Reason)
		}
		for _, m := range w.Waited {
			j, ok := byApply[m.OtherRun]
			switch {
			case !ok || j == i:
				t.Errorf("run %d: apply %s waited on %q, not another apply of this test", i, id, m.OtherRun)
			case whys[m.OtherRun].Reserved == nil:
				t.Errorf("run %d: apply %s waited on apply %s, which never reserved anything", i, id, m.OtherRun)
			case len(m.Addresses) == 0:
				t.Errorf("run %d: apply %s: waited marker on %s names no address", i, id, m.OtherRun)
			default:
				for _, addr := range m.Addresses {
					if !conflictOver(addr, plans[i].Footprint, plans[j].Footprint) {
						t.Errorf("run %d: apply %s waited on run %d (%s) over %s, where their footprints %+v and %+v do not conflict",
							i, id, j, m.OtherRun, addr, plans[i].Footprint, plans[j].Footprint)
					}
				}
			}
		}
		if len(w.Waited) > 0 {
			t.Logf("run %d: waited on %d run(s), then %s", i, len(w.Waited), w.Run.Status)
		}
	}
}

// predictedOverlaps says, from base's references, whether two of the
// change sets write a common resource, and whether two only read a common
// one (no conflict between them). Changing r01 rewrites r09 (it reads
// r01.input); a written resource with a Ref reads the referenced one.
func predictedOverlaps(base tfConfig, values []map[string]string) (writeWrite, readOnly bool) {
	type fp struct{ w, r map[string]bool }
	fps := make([]fp, len(values))
	for i, vs := range values {
		f := fp{w: map[string]bool{}, r: map[string]bool{}}
		for n := range vs {
			f.w[n] = true
		}
		if f.w["r01"] {
			f.w["r09"] = true
		}
		for n := range f.w {
			if ref, _, ok := strings.Cut(base[n].Ref, "."); ok {
				f.r[ref] = true
			}
		}
		fps[i] = f
	}
	meets := func(a, b map[string]bool) bool {
		for n := range a {
			if b[n] {
				return true
			}
		}
		return false
	}
	for i := range fps {
		for j := i + 1; j < len(fps); j++ {
			a, b := fps[i], fps[j]
			switch {
			case meets(a.w, b.w):
				writeWrite = true
			case !meets(a.w, b.r) && !meets(b.w, a.r) && meets(a.r, b.r):
				readOnly = true
			}
		}
	}
	return writeWrite, readOnly
}

// conflictOver reports whether reservation sets of footprints a and b
// conflict at addr: one writes it and the other reads or writes it.
func conflictOver(addr string, a, b footprintDoc) bool {
	aw, bw := slices.Contains(a.Write, addr), slices.Contains(b.Write, addr)
	ar, br := aw || slices.Contains(a.Read, addr), bw || slices.Contains(b.Read, addr)
	return aw && br || bw && ar
}

// sampleReservations reads the live reservations of state every 20 ms
// from the test process, failing the test if two conflicting ones are ever
// held at once by different runs. The returned func stops it (so does the
// test's cleanup) and returns the number of samples.
func sampleReservations(t *testing.T, dsn, state string) func() int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		cancel()
		t.Fatalf("opening the store to sample reservations: %v", err)
	}
	var n int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
			rs, err := s.Reservations(ctx, state)
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
					t.Errorf("sampling reservations: %v", err)
				}
				return
			}
			n++
			for i := range rs {
				for j := i + 1; j < len(rs); j++ {
					if rs[i].Run != rs[j].Run && rs[i].ConflictsWith(rs[j]) {
						t.Errorf("conflicting reservations held at once: run %s %s %s and run %s %s %s",
							rs[i].Run, rs[i].Mode, rs[i].Address, rs[j].Run, rs[j].Mode, rs[j].Address)
						return
					}
				}
			}
		}
	}()
	var once sync.Once
	stop := func() int {
		once.Do(func() {
			cancel()
			<-done
			s.Close()
		})
		return n
	}
	t.Cleanup(func() { stop() })
	return stop
}

// terraformPlanChanges runs `terraform init` and `terraform plan
// -detailed-exitcode` in dir (its terraform.tfstate is the local state)
// and reports whether the plan has changes, with its output.
func terraformPlanChanges(t *testing.T, k *kit, dir string) (string, bool) {
	t.Helper()
	k.terraform(dir, "init", "-input=false")
	cmd := exec.Command("terraform", "plan", "-detailed-exitcode", "-input=false", "-lock=false", "-no-color")
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), k.env...), "TF_IN_AUTOMATION=1", "TF_INPUT=0")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), false
	case errors.As(err, &ee) && ee.ExitCode() == 2:
		return string(out), true
	default:
		t.Fatalf("terraform plan in %s: %v\n%s", dir, err, out)
		return "", false
	}
}
