package bot

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/report"
)

// TestLockSets: which jobs of one pull request may run at once (ADR
// 0041): a plan, a close or merge, /kl recover and /kl unfence exclude
// every job that locks; applies exclude each other only on a shared
// project (without -p: any); replies lock nothing.
func TestLockSets(t *testing.T) {
	t.Parallel()
	args := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	base := JobBase{Repo: "acme/infra", PR: 7, Actor: "alice"}
	jobs := map[string]struct {
		kind string
		args []byte
	}{
		"plan":       {KindPlan, args(PlanArgs{JobBase: base, Trigger: TriggerPush})},
		"merge":      {KindApply, args(ApplyArgs{JobBase: base, Trigger: TriggerMerge})},
		"apply c":    {KindApply, args(ApplyArgs{JobBase: base, Trigger: TriggerComment, Project: "c"})},
		"apply d":    {KindApply, args(ApplyArgs{JobBase: base, Trigger: TriggerButton, Project: "d"})},
		"apply all":  {KindApply, args(ApplyArgs{JobBase: base, Trigger: TriggerComment})},
		"recover":    {KindReply, args(ReplyArgs{JobBase: base, Command: Command{Name: CmdRecover}})},
		"why":        {KindReply, args(ReplyArgs{JobBase: base, Command: Command{Name: CmdWhy}})},
		"refresh":    {KindRefresh, args(RefreshArgs{JobBase: base})},
		"apply c 2":  {KindApply, args(ApplyArgs{JobBase: base, Trigger: TriggerComment, Project: "c"})},
		"unfence -p": {KindReply, args(ReplyArgs{JobBase: base, Command: Command{Name: CmdUnfence, Project: "c", Reason: "checked"}})},
	}
	together := map[[2]string]bool{
		{"apply c", "apply d"}: true, {"apply c 2", "apply d"}: true, {"apply c", "why"}: true, {"plan", "why"}: true, {"plan", "refresh"}: true,
		{"apply all", "why"}: true, {"recover", "why"}: true, {"why", "refresh"}: true, {"merge", "refresh"}: true,
	}
	sets := map[string]lockSet{}
	for name, j := range jobs {
		s, live, err := lockSetOf(j.kind, j.args)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if live.Actor != "alice" {
			t.Errorf("%s: live job %+v, want alice's", name, live)
		}
		sets[name] = s
	}
	for a, sa := range sets {
		for b, sb := range sets {
			if a >= b {
				continue
			}
			want := together[[2]string{a, b}] || together[[2]string{b, a}] || sa.none() || sb.none()
			if got := !sa.conflicts(sb); got != want {
				t.Errorf("%s and %s at once = %v, want %v (%+v, %+v)", a, b, got, want, sa, sb)
			}
			if sa.conflicts(sb) != sb.conflicts(sa) {
				t.Errorf("conflicts(%s, %s) is not symmetric", a, b)
			}
		}
	}
	if _, _, err := lockSetOf(KindApply, []byte("{")); err == nil {
		t.Error("lockSetOf accepted args that are not JSON")
	}
}

// TestJobStateAcrossSnoozes: the job state is read back from River's
// metadata as written (the wait's start kept), a first attempt starts one,
// and the snooze grows from 0.5 s to 5 s but never past a parked apply's
// deadline.
func TestJobStateAcrossSnoozes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 7, 10, 12, 0, 0, 0, time.UTC)
	st, n, err := readJobState(nil, now)
	if err != nil || n != 0 || !st.Started.Equal(now) {
		t.Fatalf("first attempt: %+v, %d, %v; want a state started now, no snoozes", st, n, err)
	}
	st.Parked = map[string]parkedApply{"c": {Run: "RUN", Plan: "PLAN", Since: now, Until: now.Add(10 * time.Minute)}}
	meta, err := json.Marshal(map[string]any{metadataKey: st, "snoozes": 4})
	if err != nil {
		t.Fatal(err)
	}
	back, n, err := readJobState(meta, now.Add(time.Hour))
	if err != nil || n != 4 || !back.Started.Equal(now) || back.Parked["c"] != st.Parked["c"] {
		t.Errorf("read back: %+v, %d, %v; want the state as written, 4 snoozes", back, n, err)
	}
	if _, _, err := readJobState([]byte(`{"klbot": 3}`), now); err == nil {
		t.Error("readJobState accepted a state that is not an object")
	}
	for snoozes, want := range map[int]time.Duration{0: 500 * time.Millisecond, 1: time.Second, 3: 4 * time.Second, 4: 5 * time.Second, 50: 5 * time.Second} {
		jr := &jobRun{st: &jobState{}, snoozes: snoozes}
		if got := jr.snoozeFor(); got != want {
			t.Errorf("after %d snoozes: %s, want %s", snoozes, got, want)
		}
	}
	jr := &jobRun{st: &jobState{Parked: map[string]parkedApply{"c": {Until: time.Now().Add(time.Second)}}}, snoozes: 10}
	if got := jr.snoozeFor(); got > time.Second || got <= 0 {
		t.Errorf("snooze with a deadline in 1 s: %s, want at most 1 s", got)
	}
}

// TestLiveWhat: what makes an in-progress check run's next write due at
// once — its phase, what it waits on — and what does not (elapsed time,
// Terraform's progress, the run id: the 30 s refresh shows those).
func TestLiveWhat(t *testing.T) {
	t.Parallel()
	n := report.InProgress{Phase: report.LiveApplying, Started: time.Unix(0, 0)}
	same := n
	same.Now, same.Step, same.Done, same.Total, same.Run = time.Unix(100, 0), "apply", 3, 20, "RUN"
	if liveWhat(n) != liveWhat(same) {
		t.Errorf("progress alone makes a write due: %q vs %q", liveWhat(n), liveWhat(same))
	}
	waiting := n
	waiting.Phase = report.LiveWaiting
	other := report.InProgress{Phase: report.LiveQueued, Behind: []report.LiveJob{{Kind: report.JobPlan, Started: time.Unix(5, 0)}}}
	for _, m := range []report.InProgress{waiting, other} {
		if liveWhat(m) == liveWhat(n) {
			t.Errorf("a change of phase or of what it waits on is not due: %+v", m)
		}
	}
}
