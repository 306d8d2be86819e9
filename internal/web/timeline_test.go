package web

import (
	"encoding/xml"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestTimelineGolden draws a fixed story — A's plan and apply commit
// version 1; B's plan is classified at its preflight against version 1
// (plan input changed) and refused; C's apply waits on D's backend lock,
// then commits version 2 — and compares the SVG with its golden file. It
// must be well-formed XML, and each part of the story must be drawn.
func TestTimelineGolden(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	fin := func(s int) *time.Time { x := at(s); return &x }
	const (
		planA, applyA = "01J00000000000000000000A01", "01J00000000000000000000A02"
		planB, applyB = "01J00000000000000000000B01", "01J00000000000000000000B02"
		planC, applyC = "01J00000000000000000000C01", "01J00000000000000000000C02"
		lockD         = "01J00000000000000000000D01"
	)
	run := func(id string, k engine.RunKind, st engine.RunStatus, from, to int) engine.Run {
		return engine.Run{ID: id, Kind: k, State: "prod", Actor: "alice", Status: st, CreatedAt: at(from), UpdatedAt: at(to), FinishedAt: fin(to)}
	}
	m := func(r string, s int, k engine.MarkerKind, serial int64, other string) engine.Marker {
		return engine.Marker{Run: r, Seq: int64(s), At: at(s), Kind: k, Serial: serial, Other: other}
	}
	pa, aa := run(planA, engine.KindPlan, engine.StatusApplied, 0, 2), run(applyA, engine.KindApply, engine.StatusApplied, 3, 6)
	pb, ab := run(planB, engine.KindPlan, engine.StatusPlanned, 1, 3), run(applyB, engine.KindApply, engine.StatusRefused, 7, 8)
	ab.PR = &engine.PullRequest{Repo: "acme/infra", Number: 7}
	ab.SincePlan = &engine.SincePlan{PlanRun: planB, Entries: []engine.SincePlanEntry{{Serial: 1, Class: engine.ClassReadChanged, Run: applyA, CommittedAt: at(6)}}}
	pc, ac := run(planC, engine.KindPlan, engine.StatusApplied, 8, 9), run(applyC, engine.KindApply, engine.StatusApplied, 10, 16)
	ac.SincePlan = &engine.SincePlan{PlanRun: planC, Entries: []engine.SincePlanEntry{{Serial: 1, Class: engine.ClassIndependent, Run: applyA, CommittedAt: at(6)}}}
	ld := run(lockD, engine.KindApply, engine.StatusApplied, 9, 13)
	ld.Actor, ld.Backend = "bob", &engine.LockInfo{ID: "tf-1", Operation: engine.OperationTypeApply}
	stories := []*engine.RunStory{
		{Run: aa, Plan: &pa, Apply: &aa, Markers: []engine.Marker{m(planA, 2, engine.MarkerPlanned, 0, ""), m(applyA, 3, engine.MarkerReserved, 0, ""),
			m(applyA, 4, engine.MarkerApplyStarted, 0, ""), m(applyA, 5, engine.MarkerApplied, 0, ""), m(applyA, 6, engine.MarkerCommitted, 1, "")}},
		{Run: ab, Plan: &pb, Apply: &ab, Markers: []engine.Marker{m(planB, 3, engine.MarkerPlanned, 0, ""), m(applyB, 7, engine.MarkerPreflight, 0, ""),
			m(applyB, 8, engine.MarkerStalenessFailed, 0, "")}},
		{Run: ld, Markers: nil},
		{Run: ac, Plan: &pc, Apply: &ac, Markers: []engine.Marker{m(planC, 9, engine.MarkerPlanned, 0, ""), m(applyC, 10, engine.MarkerWaited, 0, lockD),
			m(applyC, 13, engine.MarkerReserved, 0, ""), m(applyC, 13, engine.MarkerPreflight, 0, ""), m(applyC, 14, engine.MarkerApplyStarted, 0, ""),
			m(applyC, 15, engine.MarkerApplied, 0, ""), m(applyC, 16, engine.MarkerCommitted, 2, "")}},
	}
	got := buildTimeline("prod", stories, time.Time{}, time.Time{}).svg(true)
	d := xml.NewDecoder(strings.NewReader(got))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, got)
		}
	}
	for _, want := range []string{
		`class="phase planning"`, `class="phase waiting"`, `class="phase applying"`, `class="phase committing"`,
		`class="arrow read-changed"`, `class="arrow independent"`, `class="refused"`, `class="waited"`,
		">v1</text>", ">v2</text>", "apply 000B02 · alice · #7", "backend lock 000D01 · bob", `href="/runs/01J00000000000000000000C02"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the SVG lacks %q", want)
		}
	}
	path := filepath.Join("testdata", "timeline.svg")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (run with -update and review the diff):\n%s", path, got)
	}
	// A window that ends as C plans leaves out its apply and the lock.
	if tl := buildTimeline("prod", stories, time.Time{}, at(8)); len(tl.rows) != 5 {
		t.Errorf("a window to 12:00:08 draws %d rows, want 5 (A's and B's runs, C's plan, not its apply nor the lock)", len(tl.rows))
	}
}

// TestTimelineRowOfAFailedApply (fresh-eyes review): an apply that
// reserved and then failed before Terraform ran (its re-plan failed), or
// whose lease expired mid-apply, has a row: a cross titled with how it
// ended, and for the one Terraform ran, the applying bar to its end.
func TestTimelineRowOfAFailedApply(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	end := t0.Add(3 * time.Second)
	failed := engine.Run{ID: "01FAILED", Kind: engine.KindApply, Status: engine.StatusFailed, CreatedAt: t0, UpdatedAt: end, FinishedAt: &end}
	row := runRow(failed, []engine.Marker{{Kind: engine.MarkerReserved, At: t0.Add(time.Second)}})
	if len(row.marks) != 1 || row.marks[0].kind != "refused" || row.marks[0].title != "failed" {
		t.Errorf("a failed apply's row = %+v; want a cross titled failed", row)
	}
	lapsed := failed
	lapsed.Status = engine.StatusLeaseExpired
	row = runRow(lapsed, []engine.Marker{{Kind: engine.MarkerReserved, At: t0}, {Kind: engine.MarkerApplyStarted, At: t0.Add(time.Second)}})
	if len(row.bars) != 1 || row.bars[0].kind != phaseApplying || !row.bars[0].to.Equal(end) || len(row.marks) != 1 || row.marks[0].title != "lease expired" {
		t.Errorf("a lapsed apply's row = %+v; want applying to its end and a cross titled lease expired", row)
	}
}
