package engine_test

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
)

var seedFlag = flag.Uint64("kl.seed", 0, "seed of TestConcurrentAppliesNoLostUpdate (0: from the clock)")

// TestConcurrentAppliesNoLostUpdate is the acceptance test of concurrent
// apply on one shared state: 10–14 plans (6 with -short) of random subsets
// of 12 resources, some overlapping, all made at one head, applied at once
// from goroutines with random small waits. Some commit, some wait, some
// conflict, some go stale or re-plan. Whatever happened:
//
//   - serials are contiguous;
//   - every committed version changed exactly its plan's write set;
//   - the head equals the serial replay of the committed runs' values in
//     commit order: no lost update;
//   - every refused or failed apply run has a reason and a failed marker,
//     and every stale refusal names a version that changed its write set.
//
// r10 reads r00's id (stable: a change to r00 is read-changed for r10's
// plans); r11 reads r01's input (a change to r01 also rewrites r11). The
// replay takes, per version, the planned inputs of the addresses it changed.
// On a loaded machine a holder can outlive its 3s lease: that run must fail
// with ErrLeaseLost having committed only part of its write set (marked
// partial) — or, stalled before Terraform ran, end lease-expired having
// committed nothing — and the replay still holds.
// Re-run a failure with -kl.seed=SEED (go test -args).
func TestConcurrentAppliesNoLostUpdate(t *testing.T) {
	t.Parallel()
	h := setup(t)
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (re-run with -kl.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	const nRes = 12
	names := make([]string, nRes)
	base := config{}
	for i := range names {
		names[i] = fmt.Sprintf("r%02d", i)
		base[names[i]] = res{Value: names[i] + "-base"}
	}
	base["r10"] = res{Value: "r10-base", Ref: "r00.id"}
	base["r11"] = res{Value: "r11-base", Ref: "r01.input"}
	h.base(base)
	source := h.headSerial()
	baseHead, _ := h.head()

	nRuns := 10 + rng.IntN(5)
	if testing.Short() {
		nRuns = 6
	}
	type run struct {
		values map[string]string
		wait   time.Duration
		delay  time.Duration
		plan   engine.Run
		out    *engine.ApplyOutcome
		err    error
	}
	runs := make([]*run, nRuns)
	for i := range runs {
		r := &run{values: map[string]string{}}
		for _, k := range rng.Perm(nRes)[:1+rng.IntN(3)] {
			r.values[names[k]] = fmt.Sprintf("%s-run%02d-%d", names[k], i, rng.IntN(1000))
		}
		r.wait = []time.Duration{0, 300 * time.Millisecond, 5 * time.Second}[rng.IntN(3)]
		r.delay = time.Duration(rng.IntN(300)) * time.Millisecond
		runs[i] = r
	}

	// Plan all at the same head, two at a time (2 cores).
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	errs := make([]error, nRuns)
	for i, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out, err := h.eng.Plan(h.ctx, engine.PlanInput{State: testState, Dir: h.write(base.with(r.values)), Actor: fmt.Sprintf("user%02d", i)})
			if err != nil {
				errs[i] = err
				return
			}
			r.plan = out.Run
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("planning: %v", err)
	}
	for i, r := range runs {
		if r.plan.Envelope.SourceSerial != source {
			t.Fatalf("run %d planned at %d, want %d", i, r.plan.Envelope.SourceSerial, source)
		}
		t.Logf("run %d: plan %s writes %v reads %v, wait %s", i, r.plan.ID, r.plan.Envelope.Footprint.Write, r.plan.Envelope.Footprint.Read, r.wait)
	}

	// Apply all at once.
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(r.delay)
			r.out, r.err = h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: r.plan.ID, Actor: r.plan.Actor, Wait: r.wait})
		}()
	}
	wg.Wait()

	byPlan := map[string]*run{}
	var committed, conflicts, stale, replanned, leaseLost, lostEarly int
	for i, r := range runs {
		byPlan[r.plan.ID] = r
		var ce *engine.ConflictError
		var se *engine.StaleError
		switch {
		case r.err == nil:
			committed++
			t.Logf("run %d: committed version %d", i, r.out.Version.Serial)
		case errors.Is(r.err, engine.ErrLeaseLost) && r.out != nil && r.out.Version != nil:
			// The machine stalled the holder past its 3s lease while
			// Terraform ran: the engine commits only what the head had not
			// changed and says so.
			leaseLost++
		case errors.Is(r.err, engine.ErrLeaseLost):
			// Stalled past its lease before Terraform: the sweep ended the
			// run, which stopped there and committed nothing.
			lostEarly++
			if run := h.run(runErrorID(r.err)); run.Status != engine.StatusLeaseExpired || run.CommittedSerial != 0 {
				t.Errorf("run %d lost its lease before Terraform: run %s is %s, committed %d; want lease-expired, nothing committed: %v",
					i, run.ID, run.Status, run.CommittedSerial, r.err)
			}
		case errors.As(r.err, &ce):
			conflicts++
			if pr := h.run(r.plan.ID); pr.Status != engine.StatusPlanned {
				t.Errorf("run %d: conflict refusal left its plan %s, want planned", i, pr.Status)
			}
		case errors.As(r.err, &se):
			stale++
			for _, e := range se.Entries {
				if e.Class != engine.ClassWriteChanged || len(e.Addresses) == 0 ||
					len(e.Addresses.Overlapping(r.plan.Envelope.Footprint.Write)) != len(e.Addresses) {
					t.Errorf("run %d: stale entry %+v does not name a change to its write set %v", i, e, r.plan.Envelope.Footprint.Write)
				}
				v, err := h.store.GetVersion(h.ctx, testState, e.Serial)
				if err != nil || len(v.Changed.Overlapping(r.plan.Envelope.Footprint.Write)) == 0 || v.Provenance.Run != e.Run {
					t.Errorf("run %d: stale entry names version %d (%v, %v), which did not change %v", i, e.Serial, v.Changed, err, r.plan.Envelope.Footprint.Write)
				}
			}
		case errors.Is(r.err, engine.ErrIntentChanged):
			replanned++
		default:
			t.Errorf("run %d: unexpected apply error: %v", i, r.err)
		}
		if r.err != nil {
			t.Logf("run %d: %v", i, r.err)
		}
	}
	t.Logf("%d runs: %d committed, %d conflicts, %d stale, %d refused after re-plan, %d lost their lease (%d before Terraform)",
		nRuns, committed, conflicts, stale, replanned, leaseLost+lostEarly, lostEarly)
	if committed == 0 {
		t.Fatal("no run committed")
	}

	// What Terraform writes for resource n under configuration c.
	plannedInput := func(c config, n string) string {
		switch r := c[n]; r.Ref {
		case "r00.id":
			return r.Value + ":" + baseHead.Resources["r00"].ID
		case "r01.input":
			return r.Value + ":" + c["r01"].Value
		default:
			return r.Value
		}
	}
	replay := map[string]string{}
	for _, n := range names {
		replay[n] = plannedInput(base, n)
		if got := baseHead.Resources[n].Input; got != replay[n] {
			t.Fatalf("base %s = %q, want %q", n, got, replay[n])
		}
	}

	// Serials contiguous; each version changed exactly its plan's write set;
	// replay each version's changes in commit order.
	vs := h.versions()
	for i, v := range vs {
		if v.Serial != vs[0].Serial+int64(i) {
			t.Fatalf("serials not contiguous: %d after %d", v.Serial, vs[i-1].Serial)
		}
		if v.Serial <= source {
			continue
		}
		r := byPlan[v.Provenance.PlanRun]
		if r == nil || r.out == nil || r.out.Version == nil || r.out.Version.Serial != v.Serial {
			t.Fatalf("version %d by plan %s: not a commit of this test's runs", v.Serial, v.Provenance.PlanRun)
		}
		write, p := r.plan.Envelope.Footprint.Write, v.Provenance
		switch {
		case r.err != nil: // lease lost: a part of the write set, marked
			if !p.Partial || len(v.Changed.Minus(write)) > 0 {
				t.Errorf("version %d of a lost lease: changed %v of %v, partial %v", v.Serial, v.Changed, write, p.Partial)
			}
		case !sameSet(v.Changed, write):
			t.Errorf("version %d changed %v, plan %s wrote %v", v.Serial, v.Changed, r.plan.ID, write)
		case !p.Exact || p.Partial:
			if leaseLost == 0 {
				t.Errorf("version %d is not exact: %+v", v.Serial, p.Deviation)
			} else {
				t.Logf("version %d is not exact beside a lost lease: %+v", v.Serial, p.Deviation)
			}
		}
		cfg := base.with(r.values)
		for _, a := range v.Changed {
			n := strings.TrimPrefix(string(a), "terraform_data.")
			replay[n] = plannedInput(cfg, n)
		}
	}
	if got := int64(len(vs)) - 1 - (source - vs[0].Serial); got != int64(committed+leaseLost) {
		t.Errorf("%d versions after the base, %d commits", got, committed+leaseLost)
	}

	// No lost update: the head is the serial replay.
	hs, doc := h.head()
	for _, n := range names {
		if got := hs.Resources[n].Input; got != replay[n] {
			t.Errorf("head %s = %q, want %q (serial replay)", n, got, replay[n])
		}
	}
	if hs.Resources["r00"].ID != baseHead.Resources["r00"].ID {
		t.Errorf("r00 was replaced")
	}
	if rs := h.reservations(); len(rs) != 0 {
		t.Errorf("reservations left: %v", rs)
	}

	// Every refused or failed apply run explains itself.
	applies, err := h.store.ListRuns(h.ctx, engine.RunQuery{State: testState, Kind: engine.KindApply, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range applies {
		switch a.Status {
		case engine.StatusApplied:
		case engine.StatusRefused, engine.StatusFailed:
			causes := map[engine.RunStatus][]engine.Cause{
				engine.StatusRefused: {engine.CauseRefusedConflict, engine.CauseRefusedStale, engine.CauseIntentChanged, engine.CauseBehindHead, engine.CauseRefusedClaim},
				engine.StatusFailed:  {engine.CauseTerraformFailed, engine.CauseFailed, engine.CauseLeaseLost},
			}[a.Status]
			if a.End.Is(engine.CauseRefusedFenced) {
				// Under load a holder can miss its renewal while its
				// Terraform runs: the sweep fences its writes (ADR 0035)
				// until it commits them. A refusal is then right, naming
				// only runs whose lease did lapse.
				for _, b := range a.End.Blockers {
					if b.Fenced && !slices.Contains(kinds(h.markers(b.Run)), engine.MarkerLeaseExpired) {
						t.Errorf("apply run %s is refused as fenced by run %s, whose lease never lapsed", a.ID, b.Run)
					}
				}
				causes = append(causes, engine.CauseRefusedFenced)
			}
			if a.End == nil || !slices.Contains(causes, a.End.Cause) || report.EndText(a.ID, a.End) == "" {
				t.Errorf("apply run %s is %s with end %+v; want one of %v, in words", a.ID, a.Status, a.End, causes)
			}
			ms := h.markers(a.ID)
			if !slices.Contains(kinds(ms), engine.MarkerFailed) {
				t.Errorf("apply run %s is %s without a failed marker: %v", a.ID, a.Status, kinds(ms))
			} else if a.End != nil && !slices.ContainsFunc(ms, func(m engine.Marker) bool { return m.Kind == engine.MarkerFailed && m.End.Is(a.End.Cause) }) {
				t.Errorf("apply run %s: no failed marker has the run's cause %s", a.ID, a.End.Cause)
			}
		case engine.StatusLeaseExpired:
			if !a.End.Is(engine.CauseLeaseExpired) || a.End.Holder == (engine.Holder{}) || !slices.Contains(kinds(h.markers(a.ID)), engine.MarkerLeaseExpired) {
				t.Errorf("apply run %s is lease-expired with end %+v, naming no holder, or without a lease-expired marker: %v", a.ID, a.End, kinds(h.markers(a.ID)))
			}
		default:
			t.Errorf("apply run %s ended %s", a.ID, a.Status)
		}
	}
	if t.Failed() {
		t.Logf("head:\n%s", doc)
	}
}
