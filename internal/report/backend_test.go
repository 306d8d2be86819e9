package report

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// Backend locks in words (issue 14; ADR 0056): a fresh-eyes review of
// real Terraform against kl serve found false words in the views. Each
// case renders the view as the engine hands it over and checks the words
// that must be there and the false ones that must not.

const lockRun = "01LOCK0000000000000000000A"

var lockAt = time.Date(2026, 12, 2, 10, 2, 0, 0, time.UTC)

// lockRunOf is a backend lock's run of Terraform operation op as the
// engine's views read it (Backend and Lock set).
func lockRunOf(op string, status engine.RunStatus, end *engine.End, facts engine.LockFacts) engine.Run {
	info := engine.LockInfo{ID: "tf-lock-1", Operation: op, Who: "bob@laptop", Version: "1.11.4", Created: lockAt}
	return engine.Run{ID: lockRun, Kind: engine.KindApply, State: "acme/prod", Actor: "bob", Holder: engine.Holder{Host: "vm", PID: 4242},
		Status: status, End: end, CreatedAt: lockAt, Backend: &info, Lock: &facts}
}

// views renders run r (its markers ms) in kl runs, kl run show and kl
// why, as text and as JSON.
func lockViews(t *testing.T, r engine.Run, ms []engine.Marker, verdict engine.Verdict) map[string]string {
	t.Helper()
	for i := range ms {
		ms[i].Run, ms[i].Lock = r.ID, r.Backend // as the engine's views read them
	}
	out := map[string]string{}
	for name, f := range map[string]func(Options) (string, error){
		"runs": func(o Options) (string, error) {
			var b strings.Builder
			err := Runs(&b, []engine.Run{r}, RunsPage{}, o)
			return b.String(), err
		},
		"run show": func(o Options) (string, error) {
			var b strings.Builder
			err := RunStory(&b, &engine.RunStory{Run: r, Markers: ms}, o)
			return b.String(), err
		},
		"why": func(o Options) (string, error) {
			var b strings.Builder
			var decisive []engine.Marker
			for _, m := range ms {
				if m.Kind != engine.MarkerReserved && m.Kind != engine.MarkerReleased {
					decisive = append(decisive, m)
				}
			}
			err := Why(&b, &engine.Why{Run: r, Verdict: verdict, Decisive: decisive}, o)
			return b.String(), err
		},
	} {
		for _, fm := range []Format{Text, JSON} {
			s, err := f(Options{Format: fm})
			if err != nil {
				t.Fatalf("%s (%s): %v", name, fm, err)
			}
			out[name+" "+fm.String()] = s
		}
	}
	return out
}

func lockMarkers(op, mode string, extra ...engine.Marker) []engine.Marker {
	ms := []engine.Marker{
		{Seq: 1, At: lockAt, Kind: engine.MarkerBackendLock, By: "bob", Extra: map[string]string{"id": "tf-lock-1", "operation": op, "mode": mode, "who": "bob@laptop", "version": "1.11.4"}},
		{Seq: 2, At: lockAt, Kind: engine.MarkerReserved, Count: 1, Addresses: engine.AddressSet{engine.AllAddresses}},
	}
	return append(ms, extra...)
}

func wantWords(t *testing.T, views map[string]string, want []string, never []string) {
	t.Helper()
	for name, s := range views {
		for _, w := range want {
			if !strings.Contains(s, w) {
				t.Errorf("%s does not say %q:\n%s", name, w, s)
			}
		}
		for _, w := range never {
			if strings.Contains(s, w) {
				t.Errorf("%s says %q:\n%s", name, w, s)
			}
		}
	}
}

// jsonRun is the run object of a runs, run or why document.
func jsonRun(t *testing.T, doc string) map[string]any {
	t.Helper()
	var d struct {
		Run  map[string]any   `json:"run"`
		Runs []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	if d.Run == nil && len(d.Runs) == 1 {
		return d.Runs[0]
	}
	return d.Run
}

// F1: a terraform plan's read lock, unlocked, applied nothing: it reads
// as a read lock of Terraform's plan operation that was released, never
// "applied", "no changes" or "allowed"; its JSON kind is backend-lock.
func TestPlanReadLockReadsReleased(t *testing.T) {
	t.Parallel()
	unlocked := engine.Marker{Seq: 3, At: lockAt.Add(time.Second), Kind: engine.MarkerUnlocked, By: "bob"}
	r := lockRunOf(engine.OperationTypePlan, engine.StatusApplied, &engine.End{Cause: engine.CauseUnlocked},
		engine.LockFacts{Mode: engine.ModeRead, Unlocked: &unlocked})
	views := lockViews(t, r, lockMarkers(engine.OperationTypePlan, "read", unlocked), engine.VerdictReleased)
	wantWords(t, views, []string{"released"}, []string{"applied", "no changes", ": allowed", `"allowed"`, `"kind": "apply"`})
	for _, name := range []string{"run show text", "why text"} {
		if !strings.Contains(views[name], "the read lock of terraform plan (OperationTypePlan) ended at UNLOCK by bob: a read lock writes nothing") {
			t.Errorf("%s does not name the read lock of terraform plan:\n%s", name, views[name])
		}
	}
	for _, name := range []string{"runs json", "run show json", "why json"} {
		j := jsonRun(t, views[name])
		if j["kind"] != "backend-lock" || j["status"] != "released" || j["backend_lock"].(map[string]any)["mode"] != "read" {
			t.Errorf("%s: run kind %v, status %v, lock %v; want backend-lock, released, mode read", name, j["kind"], j["status"], j["backend_lock"])
		}
	}
}

// F2: a write lock whose POSTs were all refused wrote nothing: released
// with no version written, naming the refused writes.
func TestRefusedWriteLockReadsReleased(t *testing.T) {
	t.Parallel()
	refused := engine.Marker{Seq: 3, At: lockAt.Add(time.Second), Kind: engine.MarkerBackendRefused, Serial: 51, FromSerial: 1,
		Extra: map[string]string{"refusal": engine.RefusalLineage, "lineage": "another-lineage", "state_lineage": "L1"}}
	unlocked := engine.Marker{Seq: 4, At: lockAt.Add(2 * time.Second), Kind: engine.MarkerUnlocked, By: "bob"}
	r := lockRunOf("state-push", engine.StatusApplied, &engine.End{Cause: engine.CauseUnlocked},
		engine.LockFacts{Mode: engine.ModeWrite, Refused: []engine.Marker{refused}, Unlocked: &unlocked})
	views := lockViews(t, r, lockMarkers("state-push", "write", refused, unlocked), engine.VerdictReleased)
	wantWords(t, views, []string{"released"}, []string{"applied", "no changes", ": allowed", `"allowed"`})
	for _, name := range []string{"run show text", "why text"} {
		if !strings.Contains(views[name], "the write lock of terraform state push (state-push) ended at UNLOCK by bob with no version written: Kilolock refused its write") ||
			!strings.Contains(views[name], "the document has lineage another-lineage, the state has lineage L1") {
			t.Errorf("%s does not say no version was written and name the refused write:\n%s", name, views[name])
		}
	}
	if !strings.Contains(views["runs text"], "released with no version written: 1 write refused") {
		t.Errorf("kl runs does not count the refused write:\n%s", views["runs text"])
	}
}

// F4: kl status shows a plan's read lock as reading, with no writes line.
func TestStatusReadLockReads(t *testing.T) {
	t.Parallel()
	r := lockRunOf(engine.OperationTypePlan, engine.StatusApplying, nil, engine.LockFacts{Mode: engine.ModeRead})
	st := &engine.Status{Active: []engine.ActiveRun{{Run: r, Since: lockAt, LeaseUntil: lockAt.Add(time.Hour),
		Holds: []engine.Reservation{{Address: engine.AllAddresses, Mode: engine.ModeRead, Run: lockRun}}}}}
	var b strings.Builder
	if err := Status(&b, st, Options{}); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	if !strings.Contains(s, "reading (terraform plan through the backend)") || strings.Contains(s, "applying") || strings.Contains(s, "writes ") {
		t.Errorf("kl status of a read lock:\n%s\nwant \"reading (terraform plan through the backend)\", no \"applying\", no writes line", s)
	}
	var j strings.Builder
	if err := Status(&j, st, Options{Format: JSON}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(j.String(), `"status": "reading"`) {
		t.Errorf("kl status --json of a read lock:\n%s", j.String())
	}
}

// F5, F7: a fence left by a lapsed backend lock names its lease
// (KL_BACKEND_LOCK_TTL), Terraform's operation, Who and the actor —
// never a holder that "stopped renewing" (that is kl serve, alive) — and,
// with no checkpoint, offers no recover: unfence after checking.
func TestLapsedBackendLockFence(t *testing.T) {
	t.Parallel()
	end := &engine.End{Cause: engine.CauseLeaseExpired, Holder: engine.Holder{Host: "vm", PID: 4242}, LeaseEnd: lockAt.Add(time.Hour),
		Fenced: engine.AddressSet{engine.AllAddresses}, TerraformStarted: lockAt, Recoverable: true}
	// The sweep's marker (store.LeaseExpiredMarker): what stays fenced.
	lapsed := engine.Marker{Seq: 4, At: lockAt.Add(time.Hour), Kind: engine.MarkerLeaseExpired, Addresses: engine.AddressSet{engine.AllAddresses},
		End: &engine.End{Cause: engine.CauseLeaseExpired, Fenced: engine.AddressSet{engine.AllAddresses}, TerraformStarted: lockAt}}
	for _, c := range []struct {
		name    string
		writes  int
		want    []string
		refuses []string
	}{
		{"no checkpoint", 0, []string{"nothing to recover", "kl run unfence " + lockRun}, []string{"kl run recover"}},
		{"two checkpoints", 2, []string{"kl run recover " + lockRun, "commits its last checkpoint (2 writes)", "kl run unfence " + lockRun}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := lockRunOf(engine.OperationTypeApply, engine.StatusLeaseExpired, end, engine.LockFacts{Mode: engine.ModeWrite, Writes: c.writes, LeaseExpired: &lapsed})
			views := lockViews(t, r, lockMarkers(engine.OperationTypeApply, "write", lapsed), engine.VerdictFailed)
			var b strings.Builder
			if err := Status(&b, &engine.Status{Expired: []string{lockRun}, Fenced: []engine.FencedRun{{Run: r, TerraformStarted: lockAt,
				Fences: []engine.Reservation{{Address: engine.AllAddresses, Mode: engine.ModeWrite, Run: lockRun}}}}}, Options{}); err != nil {
				t.Fatal(err)
			}
			views["status text"] = b.String()
			delete(views, "runs json")
			delete(views, "runs text")
			wantWords(t, views, append([]string{"KL_BACKEND_LOCK_TTL", "without an UNLOCK", "terraform apply (OperationTypeApply)", "bob@laptop", "bob"}, c.want...),
				append([]string{"stopped renewing", "holder vm:4242", "mid-apply"}, c.refuses...))
		})
	}
}

// F6: an apply through the backend whose UNLOCK came after its lease ran
// out: the views say the lease ran out at its end time without an
// UNLOCK, that the UNLOCK arrived after and committed, and that nothing
// more is needed — not "lease expired mid-apply (fenced)".
func TestLateUnlockAfterLease(t *testing.T) {
	t.Parallel()
	leaseEnd := lockAt.Add(time.Minute)
	end := &engine.End{Cause: engine.CauseLeaseExpired, Holder: engine.Holder{Host: "vm", PID: 4242}, LeaseEnd: leaseEnd,
		Fenced: engine.AddressSet{engine.AllAddresses}, TerraformStarted: lockAt, Lifted: engine.LiftCommitted}
	unlocked := engine.Marker{Seq: 6, At: leaseEnd.Add(20 * time.Second), Kind: engine.MarkerUnlocked, By: "bob"}
	r := lockRunOf(engine.OperationTypeApply, engine.StatusLeaseExpired, end, engine.LockFacts{Mode: engine.ModeWrite, Writes: 1, Unlocked: &unlocked})
	r.CommittedSerial = 1
	views := lockViews(t, r, lockMarkers(engine.OperationTypeApply, "write", unlocked), engine.VerdictFailed)
	delete(views, "run show json") // its verdict is the committed version
	delete(views, "run show text")
	wantWords(t, views, []string{"UNLOCK arrived after"}, []string{"mid-apply (fenced)", "stopped renewing"})
	for _, name := range []string{"why text"} {
		for _, w := range []string{"ran out at 2026-12-02T10:03:00Z without an UNLOCK", "arrived after the lease ran out, at 2026-12-02T10:03:20Z", "committed its last checkpoint as version 1", "nothing more is needed"} {
			if !strings.Contains(views[name], w) {
				t.Errorf("%s does not say %q:\n%s", name, w, views[name])
			}
		}
	}
}

// F8: a kl apply that waited on a backend lock names the lock's operator,
// Terraform's operation and Who, not a bare run id.
func TestWaitedOnBackendLockNamesIt(t *testing.T) {
	t.Parallel()
	info := engine.LockInfo{ID: "tf-lock-1", Operation: engine.OperationTypeApply, Who: "bob@laptop", Version: "1.11.4"}
	m := engine.Marker{Kind: engine.MarkerWaited, Other: lockRun, Addresses: engine.AddressSet{engine.AllAddresses},
		OtherBackend: &info, OtherActor: "bob"}
	want := "backend lock " + lockRun + " by bob (terraform apply (OperationTypeApply), Terraform 1.11.4, on bob@laptop)"
	if got := markerWords(m).plain(); !strings.Contains(got, want) {
		t.Errorf("the waited marker reads %q, want it to name %q", got, want)
	}
	f := engine.Fact{Kind: engine.FactWaitedFor, Run: lockRun, Addresses: engine.AddressSet{engine.AllAddresses}, Backend: &info, Actor: "bob"}
	if got := factWords(f, 0, 1).plain(); !strings.Contains(got, want) {
		t.Errorf("the waited-for fact reads %q, want it to name %q", got, want)
	}
}

// The refusals the HTTP layer records before the engine reads the
// document (a body over the cap, a Content-MD5 mismatch, a lock id
// that holds nothing) read in words, never as their JSON keys.
func TestRefusedWriteWordsOfTheHTTPLayer(t *testing.T) {
	t.Parallel()
	for refusal, want := range map[string]string{
		engine.RefusalTooLarge:   "its body was over the server's body cap (KL_MAX_BODY_MIB, KLBOT_MAX_BODY_MIB)",
		engine.RefusalContentMD5: "its Content-MD5 header did not match its body",
		engine.RefusalLockID:     "its ?ID=lock-9 names no write lock holding the state",
	} {
		m := engine.Marker{Kind: engine.MarkerBackendRefused, Reason: "HTTP 4xx to a POST by bob: why",
			Extra: map[string]string{"refusal": refusal, "lock_id": "lock-9"}}
		got := refusedWords(m).plain()
		if !strings.HasPrefix(got, want) || strings.Contains(got, refusal+":") || !strings.HasSuffix(got, ": HTTP 4xx to a POST by bob: why") {
			t.Errorf("refusal %s reads %q; want it to start %q and end with the answer's words", refusal, got, want)
		}
	}
}

// A write lock's "apply-started" marker (at LOCK for a terraform apply,
// at the first write otherwise) says what the lease now means — a lease
// that runs out before UNLOCK fences the state — and never that
// Terraform wrote: a lock force-unlocked before any write wrote nothing,
// and its story must not say "Terraform writes through the backend"
// beside "it wrote nothing" (review of issue 14, i14x).
func TestApplyStartedOfABackendLockSaysNoWrite(t *testing.T) {
	t.Parallel()
	unlocked := engine.Marker{Seq: 4, At: lockAt.Add(time.Minute), Kind: engine.MarkerUnlocked, By: "alice"}
	started := engine.Marker{Seq: 3, At: lockAt, Kind: engine.MarkerApplyStarted, Serial: 11, Extra: map[string]string{"backend": "true"}}
	r := lockRunOf(engine.OperationTypeApply, engine.StatusApplied, &engine.End{Cause: engine.CauseUnlocked}, engine.LockFacts{Mode: engine.ModeWrite, Unlocked: &unlocked})
	views := lockViews(t, r, lockMarkers(engine.OperationTypeApply, "write", started, unlocked), engine.VerdictReleased)
	delete(views, "runs json")
	delete(views, "runs text")
	wantWords(t, views, []string{"fences the state if its lease runs out before UNLOCK (head serial 11)"}, []string{"Terraform writes through the backend"})
}

// A backend lock's fence that `kl run recover` committed never had an
// UNLOCK: kl runs must not say "its UNLOCK arrived after its lease ran
// out" of it (that is a late UNLOCK's line), but that its last
// checkpoint was recovered (review of issue 14, i14x).
func TestRecoveredBackendFenceHadNoUnlock(t *testing.T) {
	t.Parallel()
	end := &engine.End{Cause: engine.CauseLeaseExpired, Holder: engine.Holder{Host: "vm", PID: 4242}, LeaseEnd: lockAt.Add(time.Minute),
		Fenced: engine.AddressSet{engine.AllAddresses}, TerraformStarted: lockAt, Lifted: engine.LiftRecovered}
	r := lockRunOf(engine.OperationTypeApply, engine.StatusLeaseExpired, end, engine.LockFacts{Mode: engine.ModeWrite, Writes: 1})
	r.CommittedSerial = 12
	views := lockViews(t, r, lockMarkers(engine.OperationTypeApply, "write"), engine.VerdictFailed)
	for _, name := range []string{"runs text", "runs json"} {
		s := views[name]
		if strings.Contains(s, "UNLOCK arrived") || !strings.Contains(s, "lease ran out without an UNLOCK; its last checkpoint recovered (kl run recover)") {
			t.Errorf("%s of a recovered fence:\n%s", name, s)
		}
	}
}
