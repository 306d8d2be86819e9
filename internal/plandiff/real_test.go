package plandiff_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/plandiff"
	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/terraform"
)

var update = flag.Bool("update", false, "record the real plans of the scenarios under testdata/plans (then run the report goldens with -update)")

// TestRealPlans plans every scenario with the real Terraform on PATH
// (whichever version CI has) and checks the diff against Terraform's own
// rendering of the same saved plan (checkPlan). With -update it records
// the plans under testdata/plans, which the report's golden files render.
func TestRealPlans(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			rp := planScenario(t, sc)
			if *update {
				recordPlan(t, sc.name, rp)
			}
			checkPlan(t, rp, sc.secrets)
		})
	}
}

// TestRecordedPlans runs checkPlan on the plans recorded under
// testdata/plans (Terraform 1.11.4: README.md there), so that what the
// golden files show is checked too.
func TestRecordedPlans(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			checkPlan(t, readRecorded(t, sc.name), sc.secrets)
		})
	}
}

func recordPlan(t *testing.T, name string, rp realPlan) {
	t.Helper()
	dir := filepath.Join("testdata", "plans", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, b := range map[string][]byte{"plan.json": rp.planJSON, "show.txt": rp.show, "prior.tfstate": rp.prior,
		"terraform-version.txt": []byte(rp.version + "\n")} {
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readRecorded(t *testing.T, name string) realPlan {
	t.Helper()
	dir := filepath.Join("testdata", "plans", name)
	read := func(file string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatalf("reading the recorded plan (go test -run TestRealPlans -update records it): %v", err)
		}
		return b
	}
	return realPlan{planJSON: read("plan.json"), show: read("show.txt"), prior: read("prior.tfstate"),
		version: strings.TrimSpace(string(read("terraform-version.txt")))}
}

// checkPlan builds the diff of a real plan and checks it against
// Terraform's rendering of the same saved plan: every attribute path
// Terraform prints as changed is in the diff, the counts agree with its
// "Plan:" line, and none of secrets appears in any rendering of the diff
// (text, Markdown, JSON, the stored encoding) — while Terraform's own
// rendering may show one (docs/terraform.md: terraform_data's output).
func checkPlan(t *testing.T, rp realPlan, secrets []string) {
	t.Helper()
	plan, err := terraform.ParsePlanJSON(rp.planJSON)
	if err != nil {
		t.Fatal(err)
	}
	d, err := plandiff.Build(plan, plandiff.Options{PriorState: rp.prior})
	if err != nil {
		t.Fatal(err)
	}
	show := string(rp.show)
	want, got := changedPaths(show), diffPaths(d)
	if len(want) == 0 {
		t.Fatalf("read no changed path from terraform show (%s):\n%s", rp.version, show)
	}
	for addr, paths := range want {
		for _, p := range paths {
			if !slices.Contains(got[addr], p) {
				t.Errorf("%s: terraform show (%s) prints %q as changed; the diff has %q", addr, rp.version, p, got[addr])
			}
		}
	}
	imp, add, change, destroy, ok := planLine(show)
	c := d.Counts()
	if !ok || imp != c.Import || add != c.Add+c.Replace || change != c.Change || destroy != c.Destroy+c.Replace {
		t.Errorf("terraform show (%s) says %d to import, %d to add, %d to change, %d to destroy (found %t); the diff counts %+v",
			rp.version, imp, add, change, destroy, ok, c)
	}
	for _, s := range secrets {
		if strings.Contains(show, s) {
			t.Logf("terraform show (%s) prints the sensitive value %q in clear; the diff must not", rp.version, s)
		}
		for name, out := range renderings(t, d) {
			if strings.Contains(out, s) {
				t.Errorf("the %s rendering of the diff holds the sensitive value %q", name, s)
			}
		}
	}
}

// renderings are every way Kilolock shows or stores a diff.
func renderings(t *testing.T, d *plandiff.Diff) map[string]string {
	t.Helper()
	out := map[string]string{}
	stored, err := plandiff.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	out["stored"] = string(stored)
	for _, budget := range []int{1 << 30, report.CheckRunSummaryLimit, 2000} {
		out["markdown/"+strconv.Itoa(budget)] = report.DiffMarkdown(d, budget, "01TESTRUN")
	}
	at := time.Date(2026, 7, 10, 12, 0, 0, 0, time.UTC)
	run := engine.Run{ID: "01TESTRUN", Kind: engine.KindPlan, State: "s", Actor: "alice", Status: engine.StatusPlanned,
		CreatedAt: at, Envelope: &engine.Envelope{Actor: "alice", State: "s", StartedAt: at, FinishedAt: at}}
	for _, o := range []report.Options{{Format: report.Text}, {Format: report.Text, Color: true}, {Format: report.JSON}, {Format: report.Markdown}} {
		var b bytes.Buffer
		if err := report.Plan(&b, &engine.PlanOutcome{Run: run, Diff: d}, o); err != nil {
			t.Fatal(err)
		}
		out["plan/"+o.Format.String()+map[bool]string{true: "/color"}[o.Color]] = b.String()
		b.Reset()
		if err := report.RunStory(&b, &engine.RunStory{Run: run, Plan: &run, Diff: d}, o); err != nil {
			t.Fatal(err)
		}
		out["run/"+o.Format.String()+map[bool]string{true: "/color"}[o.Color]] = b.String()
	}
	return out
}
