package action_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/kilolock/kilolock/internal/github/githubfake"
)

var update = flag.Bool("update", false, "rewrite testdata/action-steps.yml from action.yml")

// actionFile is action.yml as the Actions runner reads it. Decoding with
// KnownFields makes a key this harness does not model (continue-on-error,
// working-directory …) fail the test instead of being ignored.
type actionFile struct {
	Name        string                  `yaml:"name"`
	Description string                  `yaml:"description"`
	Author      string                  `yaml:"author"`
	Branding    map[string]string       `yaml:"branding"`
	Inputs      map[string]actionInput  `yaml:"inputs"`
	Outputs     map[string]actionOutput `yaml:"outputs"`
	Runs        struct {
		Using string       `yaml:"using"`
		Steps []actionStep `yaml:"steps"`
	} `yaml:"runs"`
}

type actionInput struct {
	Description string `yaml:"description"`
	Required    bool   `yaml:"required"`
	Default     string `yaml:"default"`
}

type actionOutput struct {
	Description string `yaml:"description"`
	Value       string `yaml:"value"`
}

type actionStep struct {
	ID    string            `yaml:"id"`
	Name  string            `yaml:"name"`
	If    string            `yaml:"if"`
	Shell string            `yaml:"shell"`
	Run   string            `yaml:"run"`
	Uses  string            `yaml:"uses"`
	Env   map[string]string `yaml:"env"`
	With  map[string]string `yaml:"with"`
}

func readAction(t *testing.T) (actionFile, []byte) {
	t.Helper()
	b, err := os.ReadFile("action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var a actionFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&a); err != nil {
		t.Fatalf("parsing action.yml: %v", err)
	}
	return a, b
}

// exprRE matches one ${{ … }} expression.
var exprRE = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// TestActionShape checks what the runner does not: a composite action
// whose run steps all say `shell: bash` and never interpolate an
// expression into a script (inputs reach scripts through env:, so an input
// holding `"; rm -rf ~` stays data); whose only action is setup-go; whose
// expressions name declared inputs and existing steps; and which uses every
// input it declares.
func TestActionShape(t *testing.T) {
	a, raw := readAction(t)
	if a.Runs.Using != "composite" {
		t.Errorf("runs.using = %q, want composite", a.Runs.Using)
	}
	ids := map[string]bool{}
	for i, s := range a.Runs.Steps {
		what := fmt.Sprintf("step %d (%s)", i, s.Name)
		switch {
		case s.Run != "" && s.Uses != "":
			t.Errorf("%s has both run and uses", what)
		case s.Run != "":
			if s.Shell != "bash" {
				t.Errorf("%s: shell %q, want bash", what, s.Shell)
			}
			if strings.Contains(s.Run, "${{") {
				t.Errorf("%s interpolates an expression into its script; pass it through env:", what)
			}
		case s.Uses != "":
			if !strings.HasPrefix(s.Uses, "actions/setup-go@") {
				t.Errorf("%s uses %s: the action builds kl from its own source and needs nothing but Go", what, s.Uses)
			}
		default:
			t.Errorf("%s has neither run nor uses", what)
		}
		if s.ID != "" {
			ids[s.ID] = true
		}
	}
	used := map[string]bool{}
	for _, m := range exprRE.FindAllStringSubmatch(string(raw), -1) {
		expr := m[1]
		for _, ref := range regexp.MustCompile(`inputs\.([a-z0-9-]+)`).FindAllStringSubmatch(expr, -1) {
			if _, ok := a.Inputs[ref[1]]; !ok {
				t.Errorf("${{ %s }} names input %q, which action.yml does not declare", expr, ref[1])
			}
			used[ref[1]] = true
		}
		for _, ref := range regexp.MustCompile(`steps\.([a-z0-9_-]+)\.outputs`).FindAllStringSubmatch(expr, -1) {
			if !ids[ref[1]] {
				t.Errorf("${{ %s }} names step %q, which has no step with that id", expr, ref[1])
			}
		}
	}
	for _, s := range a.Runs.Steps {
		for _, ref := range regexp.MustCompile(`inputs\.([a-z0-9-]+)`).FindAllStringSubmatch(s.If, -1) {
			used[ref[1]] = true
		}
	}
	for name := range a.Inputs {
		if !used[name] {
			t.Errorf("input %q is declared but no step uses it", name)
		}
	}
	for _, want := range []string{"run-id", "conclusion", "committed-serial"} {
		if _, ok := a.Outputs[want]; !ok {
			t.Errorf("output %q is missing", want)
		}
	}
}

// TestLintWorkflow keeps testdata/action-steps.yml, the action's steps as
// one job of a reusable workflow (workflow_call with the action's inputs),
// in step with action.yml: actionlint lints workflows, not action
// metadata, so `make lint-actions` lints this file to reach the action's
// run steps (and runs shellcheck on them where it is installed). -update
// rewrites it.
func TestLintWorkflow(t *testing.T) {
	_, raw := readAction(t)
	got := lintWorkflow(t, raw)
	path := filepath.Join("testdata", "action-steps.yml")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s (go test ./action -update writes it): %v", path, err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is out of date with action.yml (go test ./action -update; -want +got):\n%s", path, diff)
	}
}

// lintWorkflow builds the reusable workflow of TestLintWorkflow from the
// YAML nodes of action.yml, so the steps keep their text and comments.
func lintWorkflow(t *testing.T, raw []byte) []byte {
	t.Helper()
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		t.Fatal(err)
	}
	doc := root.Content[0]
	inputs, runs := mapGet(doc, "inputs"), mapGet(doc, "runs")
	if inputs == nil || runs == nil || mapGet(runs, "steps") == nil {
		t.Fatal("action.yml has no inputs or no runs.steps")
	}
	callInputs := mapping()
	for i := 0; i+1 < len(inputs.Content); i += 2 {
		spec := mapping("type", scalar("string"))
		for _, k := range []string{"description", "required", "default"} {
			if v := mapGet(inputs.Content[i+1], k); v != nil {
				spec.Content = append(spec.Content, scalar(k), v)
			}
		}
		callInputs.Content = append(callInputs.Content, scalar(inputs.Content[i].Value), spec)
	}
	wf := mapping(
		"name", scalar("kilolock action steps"),
		"on", mapping("workflow_call", mapping("inputs", callInputs)),
		"permissions", mapping("contents", scalar("read"), "checks", scalar("write"), "pull-requests", scalar("write")),
		"jobs", mapping("action", mapping("runs-on", scalar("ubuntu-latest"), "steps", mapGet(runs, "steps"))),
	)
	wf.HeadComment = "Generated from action/action.yml by TestLintWorkflow (go test ./action -update): the\n" +
		"action's steps as a reusable workflow, for actionlint (make lint-actions). Do not edit."
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(wf); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mapGet(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalar(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

// mapping builds a mapping node from key, value pairs (values are nodes).
func mapping(kv ...any) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Content = append(m.Content, scalar(kv[i].(string)), kv[i+1].(*yaml.Node))
	}
	return m
}

// e2eConfig is the root module the action plans: terraform_data resources
// (no provider download), one with an instance key holding a comma, one
// whose input is a sensitive variable (TF_VAR_db_password: e2ePassword).
const e2eConfig = `variable "db_password" {
  type      = string
  sensitive = true
}

resource "terraform_data" "web" {
  input = "v1"
}

resource "terraform_data" "db" {
  input = var.db_password
}

resource "terraform_data" "m" {
  for_each = toset(["a,b"])
  input    = each.key
}
`

// e2ePassword is the value of the sensitive variable of e2eConfig, which
// no summary, check run, comment or log may show.
const e2ePassword = "action-s3cr3t-pw-5510"

// TestActionRuns uses the action four times on one pull request of a
// GitHub fake, as a workflow would — with the repository as the action's
// path (it builds kl from it), a temp SQLite store, real Terraform:
//
//  1. plan, creating the state, with targets split on commas and lines:
//     the job summary, the check run and the comment show its diff (ADR
//     0044), the sensitive variable's value masked;
//  2. apply of that plan (plan-run = the first run-id output);
//  3. plan again: no changes;
//  4. apply of the first plan again: kl refuses before storing a run.
//
// Each time the job summary holds the report, the outputs are set, and
// GitHub holds one check run per name and one sticky comment, updated in
// place rather than added to.
func TestActionRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kl and runs Terraform")
	}
	for _, bin := range []string{"bash", "go", "terraform", "git"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not on PATH", bin)
		}
	}
	actionPath, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := readAction(t)
	root := t.TempDir()
	work, temp := filepath.Join(root, "workspace"), filepath.Join(root, "runner-temp")
	for _, d := range []string{filepath.Join(work, "infra"), temp, filepath.Join(root, "store")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "infra", "main.tf"), []byte(e2eConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	// The store as a secret would give it: a URL, which the action masks
	// and never prints.
	store := "file://" + filepath.Join(root, "store", "kl.db")

	const repo, pr, token = "acme/infra", 7, "ghs_job_token_from_the_fake"
	head := strings.Repeat("e7", 20)
	fake := githubfake.New(t)
	fake.AddRepo(repo)
	fake.AddPR(repo, githubfake.PR{Number: pr, HeadSHA: head})
	fake.AddToken(token, "github-actions[bot]")
	event := filepath.Join(root, "event.json")
	if err := os.WriteFile(event, githubfake.PullRequestEvent("pull_request.synchronize.22", repo, pr, head), 0o644); err != nil {
		t.Fatal(err)
	}
	merge := strings.Repeat("0f", 20) // GITHUB_SHA of a pull_request event: the merge commit, not the head

	r := &runner{t: t, action: a, work: work, temp: temp}
	r.github = map[string]string{
		"action_path": actionPath, "action_ref": "", "actor": "octocat", "token": token,
		"repository": repo, "sha": merge, "event_name": "pull_request", "workspace": work,
		"server_url": fake.URL(), "api_url": fake.URL() + "/api/v3", "run_id": "9001",
	}
	// The job's environment: the test's own, less anything of Actions,
	// Kilolock or Terraform, plus what a runner sets. GITHUB_TOKEN is not
	// in it (a runner does not export it): the action passes its
	// github-token input, whose default is github.token.
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GITHUB_") || strings.HasPrefix(k, "RUNNER_") || strings.HasPrefix(k, "INPUT_") ||
			strings.HasPrefix(k, "ACTIONS_") || strings.HasPrefix(k, "KL_") || strings.HasPrefix(k, "TF_") || k == "CI" {
			continue
		}
		r.env = append(r.env, kv)
	}
	r.env = append(r.env, "CI=true", "GITHUB_ACTIONS=true", "RUNNER_OS=Linux", "RUNNER_TEMP="+temp,
		"GITHUB_WORKSPACE="+work, "GITHUB_REPOSITORY="+repo, "GITHUB_SHA="+merge,
		"GITHUB_EVENT_NAME=pull_request", "GITHUB_EVENT_PATH="+event, "GITHUB_ACTOR=octocat",
		"GITHUB_API_URL="+r.github["api_url"], "GITHUB_SERVER_URL="+fake.URL(), "GITHUB_RUN_ID=9001",
		"TF_CLI_CONFIG_FILE=/dev/null", "CHECKPOINT_DISABLE=1", "TF_VAR_db_password="+e2ePassword)

	planName, applyName := "kl plan · acme/prod", "kl apply · acme/prod"
	checkRuns := func(t *testing.T, want int) map[string]githubfake.CheckRun {
		t.Helper()
		got := map[string]githubfake.CheckRun{}
		for _, c := range fake.CheckRuns(repo) {
			if _, dup := got[c.Name]; dup {
				t.Errorf("two check runs named %q", c.Name)
			}
			if c.HeadSHA != head {
				t.Errorf("check run %q is on %s, want the pull request's head %s", c.Name, c.HeadSHA, head)
			}
			got[c.Name] = c
		}
		if len(got) != want {
			t.Errorf("%d check runs, want %d: %v", len(got), want, got)
		}
		return got
	}
	comment := func(t *testing.T, edits int) githubfake.Comment {
		t.Helper()
		cs := fake.Comments(repo, pr)
		if len(cs) != 1 {
			t.Fatalf("%d comments on #%d, want 1 sticky comment", len(cs), pr)
		}
		if cs[0].Edits != edits || cs[0].User != "github-actions[bot]" {
			t.Errorf("comment by %s edited %d times, want github-actions[bot], %d", cs[0].User, cs[0].Edits, edits)
		}
		return cs[0]
	}
	use := func(t *testing.T, inputs map[string]string, wantCode int) run {
		t.Helper()
		res := r.use(inputs)
		t.Logf("action log:\n%s", res.log)
		if res.code != wantCode || (wantCode == 0) != (res.failed == "") {
			t.Fatalf("action: step %q failed with exit status %d, want %d", res.failed, res.code, wantCode)
		}
		for _, line := range strings.Split(res.log, "\n") {
			if strings.Contains(line, store) && !strings.HasPrefix(line, "::add-mask::") {
				t.Errorf("the log shows the store outside an add-mask command: %q", line)
			}
		}
		noPassword(t, "the action's log", res.log)
		noPassword(t, "the job summary", res.summary)
		for _, c := range fake.CheckRuns(repo) {
			noPassword(t, "check run "+c.Name, c.Title+c.Summary+c.Text)
		}
		for _, c := range fake.Comments(repo, pr) {
			noPassword(t, "the comment", c.Body)
		}
		return res
	}

	var plan1 string
	t.Run("plan", func(t *testing.T) {
		res := use(t, map[string]string{"command": "plan", "state": "acme/prod", "working-directory": "infra",
			"targets": "terraform_data.web, terraform_data.m[\"a,b\"]\n terraform_data.db\n", "store": store, "create-state": "true"}, 0)
		o := res.outputs
		plan1 = o["run-id"]
		if plan1 == "" || o["conclusion"] != "success" || o["committed-serial"] != "" || o["exit-code"] != "0" {
			t.Errorf("outputs = %v, want a run-id, conclusion success, no committed serial, exit code 0", o)
		}
		for _, want := range []string{"### 📝 Plan `" + plan1 + "` on **acme/prod**: planned", "<!-- kilolock:summary-end -->",
			"`terraform_data.web`, `terraform_data.m[\"a,b\"]`, `terraform_data.db`", "per instance: +3"} {
			if !strings.Contains(res.summary, want) {
				t.Errorf("job summary does not hold %q:\n%s", want, res.summary)
			}
		}
		cr := checkRuns(t, 1)[planName]
		if cr.Conclusion != "success" || cr.ExternalID != plan1 || !strings.Contains(cr.Summary, "Plan `"+plan1+"`") {
			t.Errorf("plan check run = %+v", cr)
		}
		c := comment(t, 0)
		if !strings.Contains(c.Body, "Plan `"+plan1+"`") {
			t.Errorf("comment does not tell plan %s:\n%s", plan1, c.Body)
		}
		// The diff (ADR 0044): its summary line, then one block per
		// resource instance (its summary is HTML: a quote is &#34;), the
		// sensitive input masked.
		blocks := []string{"**Diff:** 3 to add\n", "\n#### Diff by resource instance\n",
			"<details><summary><code>terraform_data.web</code> will be created</summary>", "\n+     input  = \"v1\"\n",
			"<details><summary><code>terraform_data.db</code> will be created</summary>", "\n+     input  = (sensitive value)\n",
			"<details><summary><code>terraform_data.m[&#34;a,b&#34;]</code> will be created</summary>", "\n+     input  = \"a,b\"\n"}
		for what, md := range map[string]string{"the job summary": res.summary, "the plan check run": cr.Summary + cr.Text, "the comment": c.Body} {
			for _, want := range blocks {
				if !strings.Contains(md, want) {
					t.Errorf("%s does not show the diff's %q:\n%s", what, want, md)
				}
			}
		}
		if !strings.Contains(cr.Text, "```diff\n+ resource \"terraform_data\" \"web\" {\n") {
			t.Errorf("the plan check run's text does not hold the blocks:\n%s", cr.Text)
		}
	})
	if plan1 == "" {
		t.FailNow()
	}

	t.Run("apply", func(t *testing.T) {
		res := use(t, map[string]string{"command": "apply", "state": "acme/prod", "plan-run": plan1, "store": store}, 0)
		o := res.outputs
		if o["run-id"] == "" || o["run-id"] == plan1 || o["conclusion"] != "success" || o["committed-serial"] != "1" {
			t.Errorf("outputs = %v, want the apply run, conclusion success, committed serial 1", o)
		}
		if !strings.Contains(res.summary, "of plan `"+plan1+"`") {
			t.Errorf("job summary does not tell the apply of %s:\n%s", plan1, res.summary)
		}
		crs := checkRuns(t, 2)
		if ac := crs[applyName]; ac.Conclusion != "success" || ac.ExternalID != o["run-id"] {
			t.Errorf("apply check run = %+v", ac)
		}
		if pc := crs[planName]; pc.Updates != 0 {
			t.Errorf("the apply updated the plan check run (%d updates)", pc.Updates)
		}
		if c := comment(t, 1); !strings.Contains(c.Body, "Apply `"+o["run-id"]+"`") {
			t.Errorf("comment does not tell apply %s:\n%s", o["run-id"], c.Body)
		}
	})

	t.Run("plan again", func(t *testing.T) {
		res := use(t, map[string]string{"command": "plan", "state": "acme/prod", "working-directory": "infra",
			"store": store, "create-state": "true"}, 0)
		if o := res.outputs; o["run-id"] == "" || o["run-id"] == plan1 || o["conclusion"] != "neutral" {
			t.Errorf("outputs = %v, want a new plan run with conclusion neutral (no changes)", o)
		}
		if !strings.Contains(res.log, "state acme/prod exists") {
			t.Errorf("create-state did not find the existing state")
		}
		pc := checkRuns(t, 2)[planName]
		if pc.Updates != 1 || pc.Conclusion != "neutral" || pc.ExternalID != res.outputs["run-id"] {
			t.Errorf("plan check run = %+v, want updated once to neutral for %s", pc, res.outputs["run-id"])
		}
		// The first plan's blocks are gone with its report: this plan has
		// no diff to show.
		if pc.Text != "" {
			t.Errorf("the plan check run of a plan with no changes holds a text:\n%s", pc.Text)
		}
		comment(t, 2)
	})

	t.Run("apply refused before a run", func(t *testing.T) {
		res := use(t, map[string]string{"command": "apply", "state": "acme/prod", "plan-run": plan1, "store": store}, 3)
		if o := res.outputs; o["run-id"] != "" || o["conclusion"] != "failure" || o["exit-code"] != "3" {
			t.Errorf("outputs = %v, want no run-id, conclusion failure, exit code 3", o)
		}
		if !strings.Contains(res.summary, "stopped before it stored a run") || !strings.Contains(res.summary, "already applied") {
			t.Errorf("job summary does not say kl stopped:\n%s", res.summary)
		}
		checkRuns(t, 2)
		comment(t, 2)
	})

	// Terraform's plan options (ADR 0045): recorded in the plan's scope
	// and planned with; -var is refused before kl runs, its value unsaid.
	t.Run("terraform options", func(t *testing.T) {
		const secretVar = "-var=db_password=not-in-the-log-7f3a"
		res := r.use(map[string]string{"command": "plan", "state": "acme/prod", "working-directory": "infra",
			"store": store, "terraform-options": "-parallelism=2\n" + secretVar})
		if res.failed != "Check inputs" || !strings.Contains(res.log, "input terraform-options: -var is refused here") {
			t.Errorf("a -var in terraform-options: step %q failed (exit %d), want Check inputs to refuse it:\n%s", res.failed, res.code, res.log)
		}
		if strings.Contains(res.log, "not-in-the-log-7f3a") {
			t.Errorf("the refusal of a -var shows its value:\n%s", res.log)
		}
		res = use(t, map[string]string{"command": "plan", "state": "acme/prod", "working-directory": "infra",
			"store": store, "terraform-options": "-destroy\n  -parallelism=2 "}, 0)
		for _, want := range []string{"terraform options `-destroy`, `-parallelism=2`", "per instance: +0 \\~0 -3 ±0 — **⚠ 3 to destroy**", "**Diff:** 3 to destroy"} {
			if !strings.Contains(res.summary, want) {
				t.Errorf("the job summary of a -destroy plan does not hold %q:\n%s", want, res.summary)
			}
		}
		res = r.use(map[string]string{"command": "apply", "state": "acme/prod", "plan-run": plan1, "store": store, "terraform-options": "-destroy"})
		if res.failed != "Check inputs" || !strings.Contains(res.log, "input terraform-options is for command plan") {
			t.Errorf("terraform-options on apply: step %q failed, want Check inputs to refuse it:\n%s", res.failed, res.log)
		}
	})
}

// noPassword fails the test when s shows e2ePassword.
func noPassword(t *testing.T, what, s string) {
	t.Helper()
	if strings.Contains(s, e2ePassword) {
		t.Errorf("%s shows the sensitive variable's value:\n%s", what, s)
	}
}

// TestFindGo runs the action's "Find Go" step against Go versions on PATH:
// the action sets up Go only when there is none, or one older than the
// go.mod version (compared as versions: 1.26.10 is newer than 1.26.8).
func TestFindGo(t *testing.T) {
	a, _ := readAction(t)
	var find *actionStep
	for i := range a.Runs.Steps {
		if a.Runs.Steps[i].ID == "go" {
			find = &a.Runs.Steps[i]
		}
	}
	if find == nil {
		t.Fatal(`action.yml has no step with id "go"`)
	}
	actionPath, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if want == nil {
		t.Fatal("go.mod has no go line")
	}
	major, minor, _ := strings.Cut(string(want[1]), ".")
	minor, _, _ = strings.Cut(minor, ".")
	cases := map[string]struct {
		have  string // GOVERSION of the go on PATH; "" for none
		setup string
	}{
		"no go":        {"", "true"},
		"older minor":  {"go1.20.1", "true"},
		"older patch":  {"go" + major + "." + minor + ".0", "true"},
		"same":         {"go" + string(want[1]), "false"},
		"newer patch":  {"go" + major + "." + minor + ".99", "false"},
		"newer minor":  {"go" + major + ".99.0", "false"},
		"release cand": {"go" + major + "." + minor + "rc1", "true"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := "/usr/bin:/bin"
			if c.have != "" {
				if err := os.WriteFile(filepath.Join(dir, "go"), []byte("#!/bin/sh\necho "+c.have+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				path = dir + ":" + path
			}
			r := &runner{t: t, action: a, work: dir, temp: dir, github: map[string]string{"action_path": actionPath},
				env: []string{"PATH=" + path, "HOME=" + dir}}
			env := map[string]string{}
			for k, v := range find.Env {
				env[k] = r.expand(v, nil, nil, env)
			}
			out, err := r.step(0, find.Name, find.Run, env)
			if err != nil {
				t.Fatalf("Find Go: %v\n%s", err, out.log)
			}
			if out.outputs["setup"] != c.setup {
				t.Errorf("Go %q on PATH: setup=%q, want %q\n%s", c.have, out.outputs["setup"], c.setup, out.log)
			}
		})
	}
}
