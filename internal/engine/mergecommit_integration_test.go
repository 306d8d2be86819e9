package engine_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
)

// A merge-time apply re-plans the pull request's merge commit (ADR 0062).
// The pair of issue 15: D, merged first, updates x in place; C's plan reads
// x. C's head lacks D's change, so a re-plan of C's reviewed configuration
// would revert x ("configuration behind the head"); its merge commit holds
// both changes, so the re-plan of the merge commit plans only C's change
// and is applied in place of the reviewed plan, the commit named in the
// story.
func TestReadChangedMergeCommit(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg, c, _ := readChanged(h, "id", func(cfg config) config { return cfg.with(map[string]string{"x": "x1"}) })
	head := h.headSerial()
	const sha = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
	merge := h.write(cfg.with(map[string]string{"x": "x1", "r": "r1"}))

	out, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: c.ID, Actor: "alice", MergeCommit: &engine.MergeCommit{SHA: sha, Dir: merge}})
	if err != nil {
		t.Fatalf("Apply C with its merge commit: %v", err)
	}
	if out.Version == nil || out.Version.Serial != head+1 {
		t.Fatalf("Apply C committed %+v, want version %d", out.Version, head+1)
	}
	hs, _ := h.head()
	if got := hs.Resources["x"].Input; got != "x1" {
		t.Errorf("x = %q, want D's x1 kept", got)
	}
	if got, want := hs.Resources["r"].Input, "r1:"+hs.Resources["x"].ID; got != want {
		t.Errorf("r = %q, want C's %q", got, want)
	}
	m := h.marker(out.Run.ID, engine.MarkerReplanned)
	if m.IntentChanged == nil || *m.IntentChanged || m.Commit != sha {
		t.Errorf("replanned marker = %+v; want intent unchanged, commit %s", m, sha)
	}
	rp := h.run(m.Other)
	if rp.ReplanOf != c.ID || rp.Envelope == nil || rp.Envelope.CommitSHA != sha || rp.ApplyRun != out.Run.ID {
		t.Errorf("re-plan = replan of %q, envelope %+v, apply run %q; want C's re-plan at %s, applied by %s", rp.ReplanOf, rp.Envelope, rp.ApplyRun, sha, out.Run.ID)
	}
	var fact *engine.Fact
	for _, f := range h.run(out.Run.ID).AllowedBecause {
		if f.Kind == engine.FactReplanApplied {
			fact = &f
		}
	}
	if fact == nil || fact.Commit != sha {
		t.Errorf("allowed-because = %+v; want a replan-applied fact naming %s", h.run(out.Run.ID).AllowedBecause, sha)
	}
	story, err := h.eng.RunStory(h.ctx, out.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := report.RunStory(&b, story, report.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"re-planned the merge commit 0a1b2c3 against head", "configuration re-planned", "the merge commit 0a1b2c3"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("story lacks %q:\n%s", want, b.String())
		}
	}
}

// A merge commit that still reverts what the plan reads (the base gained
// nothing of D's change: D was applied from outside the branch) is behind
// the head as the reviewed configuration is, named with its commit.
func TestReadChangedMergeCommitBehindHead(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg, c, _ := readChanged(h, "id", func(cfg config) config { return cfg.with(map[string]string{"x": "x1"}) })
	merge := h.write(cfg.with(map[string]string{"r": "r1"}))
	_, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: c.ID, Actor: "alice", MergeCommit: &engine.MergeCommit{SHA: "abcdef0", Dir: merge}})
	if !errors.Is(err, engine.ErrBehindHead) {
		t.Fatalf("Apply C = %v, want ErrBehindHead", err)
	}
	if m := h.marker(runErrorID(err), engine.MarkerReplanned); m.Commit != "abcdef0" {
		t.Errorf("replanned marker = %+v, want commit abcdef0", m)
	}
	hs, _ := h.head()
	if got := hs.Resources["x"].Input; got != "x1" {
		t.Errorf("x = %q, want D's x1", got)
	}
}

// Without a version since the plan changing what it reads, the reviewed
// plan itself is applied — the same digest — whatever the merge commit
// holds: the merge commit is only a re-plan's configuration.
func TestMergeCommitUnusedWithoutReplan(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"x": {Value: "x0"}, "r": {Value: "r0", Ref: "x.id"}}
	h.base(cfg)
	c := h.plan(cfg.with(map[string]string{"r": "r1"}))
	merge := h.write(cfg.with(map[string]string{"r": "r1", "x": "elsewhere"}))
	out, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: c.ID, Actor: "alice", MergeCommit: &engine.MergeCommit{SHA: "abcdef0", Dir: merge}})
	if err != nil {
		t.Fatalf("Apply C: %v", err)
	}
	for _, m := range h.markers(out.Run.ID) {
		if m.Kind == engine.MarkerReplanned {
			t.Errorf("re-planned without a read-changed version: %+v", m)
		}
	}
	if hs, _ := h.head(); hs.Resources["x"].Input != "x0" {
		t.Errorf("x = %q: the merge commit's configuration was applied, not the reviewed plan", hs.Resources["x"].Input)
	}
}

// A bad merge commit is refused before any run is created.
func TestMergeCommitRefused(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"x": {Value: "x0"}}
	h.base(cfg)
	c := h.plan(cfg.with(map[string]string{"x": "x1"}))
	abs := filepath.Join(h.dir, "abs.tfvars")
	if err := os.WriteFile(abs, []byte("# no values\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := h.plan(cfg.with(map[string]string{"x": "x2"}), func(in *engine.PlanInput) { in.VarFiles = []string{abs} })
	dir := h.write(cfg)
	for _, tc := range []struct {
		plan string
		mc   engine.MergeCommit
		want string
	}{
		{c.ID, engine.MergeCommit{SHA: "main", Dir: dir}, `merge commit "main": want a commit SHA`},
		{c.ID, engine.MergeCommit{SHA: "abcdef0", Dir: filepath.Join(dir, "nope")}, "is not a directory"},
		{d.ID, engine.MergeCommit{SHA: "abcdef0", Dir: dir}, "by an absolute path"},
	} {
		_, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: tc.plan, Actor: "alice", MergeCommit: &tc.mc})
		if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Apply with %+v = %v; want ErrInvalid saying %q", tc.mc, err, tc.want)
		}
		if rs := h.applyRuns(tc.plan); len(rs) != 0 {
			t.Errorf("Apply with %+v created apply runs %v", tc.mc, rs)
		}
	}
}

// A parked merge-time apply (klbot's, ADR 0041) that resumes after the
// writer it waited for committed re-plans its merge commit as a fresh
// apply does: C reads x, D (holding x while its Terraform runs) writes it.
// C parks; a resume with a merge commit that is not a directory is refused
// (the check runs on resume too) and leaves C parked; resumed with the
// merge commit once D committed, C's re-plan of it keeps D's x and is
// applied. The run's first marker says it ran after the merge.
func TestParkedMergeCommitResumes(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"x": {Value: "x0"}, "r": {Value: "r0", Ref: "x.id"}, "y": {Value: "y0"}}
	h.base(cfg)
	gate, release := h.gate()
	defer release()
	// D updates x in place (its id, which r reads, stays) and creates g,
	// whose Terraform waits at the gate: D holds x meanwhile.
	dCfg := cfg.with(map[string]string{"x": "x1"})
	dCfg["g"] = res{Value: "g1", Gate: gate}
	d := h.plan(dCfg, actor("dave"))
	c := h.plan(cfg.with(map[string]string{"r": "r1"}))
	doneD := make(chan error, 1)
	holder := h.applyInTerraform(d.ID, func(_ *engine.ApplyOutcome, err error) { doneD <- err })

	const sha = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
	merged := cfg.with(map[string]string{"x": "x1", "r": "r1"})
	merged["g"] = res{Value: "g1", Gate: gate}
	mc := &engine.MergeCommit{SHA: sha, Dir: h.write(merged)}
	in := engine.ApplyInput{PlanRun: c.ID, Actor: "alice", Wait: time.Minute, Park: true, MergeCommit: mc,
		PR: &engine.PullRequest{Repo: "acme/infra", Number: 3, HeadSHA: "cccccccc"}}
	_, err := h.eng.Apply(h.ctx, in)
	var pe *engine.ParkedError
	if !errors.As(err, &pe) || len(pe.Blockers) != 1 || pe.Blockers[0].Run != holder {
		t.Fatalf("Apply C (park) = %v; want a *ParkedError naming %s", err, holder)
	}
	if ms := h.markers(pe.Run); len(ms) == 0 || ms[0].Kind != engine.MarkerAfterMerge || ms[0].Commit != sha {
		t.Errorf("C's apply markers = %+v; want after-merge (commit %s) first", ms, sha)
	}

	release()
	if err := <-doneD; err != nil {
		t.Fatalf("Apply D: %v", err)
	}
	in.Resume = pe.Run
	bad := in
	bad.MergeCommit = &engine.MergeCommit{SHA: sha, Dir: filepath.Join(h.dir, "nope")}
	if _, err := h.eng.Apply(h.ctx, bad); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("resume with a merge commit that is not a directory = %v, want ErrInvalid", err)
	}
	if r := h.run(pe.Run); r.Status != engine.StatusWaiting {
		t.Errorf("C's apply after a refused resume is %s, want still waiting", r.Status)
	}
	out, err := h.eng.Apply(h.ctx, in)
	if err != nil {
		t.Fatalf("resume C with its merge commit: %v", err)
	}
	if m := h.marker(out.Run.ID, engine.MarkerReplanned); m.IntentChanged == nil || *m.IntentChanged || m.Commit != sha {
		t.Errorf("replanned marker = %+v; want intent unchanged, commit %s", m, sha)
	}
	hs, _ := h.head()
	if got := hs.Resources["x"].Input; got != "x1" {
		t.Errorf("x = %q, want D's x1 kept", got)
	}
	if got, want := hs.Resources["r"].Input, "r1:"+hs.Resources["x"].ID; got != want {
		t.Errorf("r = %q, want C's %q", got, want)
	}
}
