package report

import (
	"bytes"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

const (
	botSHA     = "0123456789abcdef0123456789abcdef01234567"
	botHeadSHA = "1123456789abcdef0123456789abcdef01234567"
)

// botRefusal is alice's "/kl apply" of project infra, refused by rule.
func botRefusal(rule BotRule) BotRefusal {
	return BotRefusal{Rule: rule, AskedBy: AskedByComment, Actor: "alice", Repo: "acme/infra", PR: 42, Project: "infra",
		PlanRun: planA, PlanSHA: botSHA, HeadSHA: botSHA}
}

// botNotices are klbot's notices, one golden file each under
// testdata/bot/.
func botNotices() map[string]BotNotice {
	with := func(r BotRefusal, f func(*BotRefusal)) BotRefusal { f(&r); return r }
	m := map[string]BotNotice{
		"refused-open-pr": with(botRefusal(BotRuleOpenPR), func(r *BotRefusal) { r.PRState = "closed" }),
		"refused-trigger": with(botRefusal(BotRuleTrigger), func(r *BotRefusal) { r.AskedBy = AskedByButton }),
		"refused-write":   with(botRefusal(BotRuleWrite), func(r *BotRefusal) { r.Actor, r.Permission = "mallory", "read" }),
		"refused-head-button": with(botRefusal(BotRuleHead), func(r *BotRefusal) {
			r.AskedBy, r.ButtonSHA, r.HeadSHA = AskedByButton, botSHA, botHeadSHA
		}),
		"refused-head-plan":   with(botRefusal(BotRuleHead), func(r *BotRefusal) { r.HeadSHA = botHeadSHA }),
		"refused-head-merged": with(botRefusal(BotRuleHead), func(r *BotRefusal) { r.AskedBy, r.Merged, r.HeadSHA = AskedByMerge, true, botHeadSHA }),
		"refused-approved": with(botRefusal(BotRuleApproved), func(r *BotRefusal) {
			r.ApprovedBy, r.ChangesRequestedBy = []string{"bob", "carol"}, []string{"erin"}
		}),
		"refused-approved-none":      botRefusal(BotRuleApproved),
		"refused-mergeable-unknown":  botRefusal(BotRuleMergeable),
		"refused-mergeable-conflict": with(botRefusal(BotRuleMergeable), func(r *BotRefusal) { r.Mergeable = ptrBool(false) }),
		"refused-plan-closed": with(botRefusal(BotRuleOpenPlan), func(r *BotRefusal) {
			r.Problem, r.PlanClosed = "plan run "+planA+" is superseded, not planned", true
		}),
		"refused-plan-unknown": with(botRefusal(BotRuleOpenPlan), func(r *BotRefusal) {
			r.Problem = "run " + planA + " does not exist (see `kl runs`)"
		}),
		"plan-not-allowed":        PlanNotAllowed{Actor: "mallory", Repo: "acme/infra", Permission: "none"},
		"unfence-not-allowed":     PlanNotAllowed{Actor: "mallory", Repo: "acme/infra", Permission: "read", Command: "/kl unfence"},
		"recover-nothing":         NothingFenced{Command: "/kl recover"},
		"unfence-nothing-project": NothingFenced{Command: "/kl unfence", Project: "dns"},
		"recover-refused": FenceRefused{Command: "/kl recover", Project: "infra", Run: planA,
			Problem: "cannot recover run " + planA + ": Terraform wrote nothing Kilolock saw"},
		"nothing-to-apply":         NothingToApply{Planned: []string{"dns", "infra"}},
		"nothing-to-apply-project": NothingToApply{Project: "web"},
		"no-such-project":          NoSuchProject{Project: "web", Projects: []string{"infra", "dns"}},
		"config-invalid": ConfigProblem{Title: "kl.yaml is invalid", HeadSHA: botSHA,
			Problems: []string{"kl.yaml:1: version 2: want version: 1", `kl.yaml:4: unknown field "dirr" in a project (see docs/kl-yaml.md)`}},
		"config-default-branch": ConfigProblem{Title: "the default branch's kl.yaml is invalid", HeadSHA: botSHA, OnDefaultBranch: true,
			Problems: []string{"kl.yaml:1: version 2: want version: 1"}},
		"config-loosens": ConfigProblem{Title: "kl.yaml loosens a safety key", HeadSHA: botSHA,
			Problems: []string{`kl.yaml:2: project "infra": apply_requirements [] loosens [approved] set by the default branch's kl.yaml (line 2): ` +
				"a pull request may add to the list, not leave out what its base has; change it on the default branch first"}},
		"config-archive": ConfigProblem{Title: "the repository archive was refused", HeadSHA: botSHA,
			Problem: `extracting repository archive: entry "x/../evil": name holds "..": unsafe repository archive`},
		"fork-not-planned": ForkNotPlanned{HeadSHA: botSHA, HeadRepo: "mallory/infra", Repo: "acme/infra"},
		"none-touched": NoneTouched{Files: 2, HeadSHA: botSHA, Projects: []NoticeProject{
			{Name: "infra", Dir: "infra", WhenModified: []string{"*.tf", "../modules/**"}}, {Name: "dns", Dir: ".", WhenModified: []string{"dns/*.tf"}}}},
		"missing-state": MissingState{State: "acme/infra", Project: "infra"},
		"plan-failed": PlanFailed{Project: "infra", State: "acme/infra", CheckRun: "kl plan · infra",
			Error: "terraform plan: exit status 1: Error: Unsupported block type\n```\nsneaky fence"},
		"help":               Help{},
		"help-not-a-command": Help{Problem: `unknown command "aply"`},
		"why-not-this-repo":  NotThisRepo{Run: planA, Repo: "acme/infra"},
		"why-no-run-yet":     NoRunYet{},
		"history-no-project": NoProjectHere{Project: "web", Projects: []string{"infra", "dns"}},
		"history-none-yet":   NoProjectHere{},
	}
	for name, n := range liveNotices() {
		m[name] = n
	}
	return m
}

// liveNotices are klbot's words while a job runs (live.go), one golden
// file each under testdata/bot/.
func liveNotices() map[string]BotNotice {
	applyJob := LiveJob{Kind: JobApply, Ask: AskComment, Project: "infra", Actor: "alice", Started: at(-30)}
	parked := LiveJob{Project: "dns", Actor: "bob", Run: applyB, Waiting: true}
	blocker := engine.Blocker{Run: applyB, Actor: "bob", PR: &engine.PullRequest{Repo: "acme/infra", Number: 43},
		Addresses: engine.NewAddressSet("module.app.aws_instance.web", "module.app.aws_lb.main")}
	live := func(check string, asked LiveJob, phase LivePhase, f func(*InProgress)) InProgress {
		n := InProgress{Check: check, Project: "infra", Asked: asked, Phase: phase, Started: at(0), Now: at(42.4)}
		if f != nil {
			f(&n)
		}
		return n
	}
	plan := LiveJob{Kind: JobPlan, Ask: AskComment, Actor: "bob"}
	apply := LiveJob{Kind: JobApply, Ask: AskButton, Project: "infra", Actor: "alice"}
	return map[string]BotNotice{
		"live-queued": live("kl plan · infra", plan, LiveQueued, func(n *InProgress) { n.Behind = []LiveJob{applyJob} }),
		"live-queued-two": live("kl plan · infra", LiveJob{Kind: JobPlan, Ask: AskPush, HeadSHA: botSHA}, LiveQueued, func(n *InProgress) {
			n.Behind = []LiveJob{applyJob, parked}
		}),
		"live-waiting": live("kl apply · infra", apply, LiveWaiting, func(n *InProgress) {
			n.PlanRun, n.Run, n.WaitingOn, n.WaitSince, n.WaitUntil = planA, applyA, []engine.Blocker{blocker}, at(1), at(601)
		}),
		"live-planning": live("kl plan · infra", LiveJob{Kind: JobPlan, Ask: AskRerequest, Project: "infra", Actor: "bob"}, LivePlanning, nil),
		"live-applying": live("kl apply · infra", LiveJob{Kind: JobApply, Ask: AskMerge, Actor: "carol"}, LiveApplying, func(n *InProgress) {
			n.PlanRun, n.Run, n.Step, n.Done, n.Total = planA, applyA, "apply", 3, 20
		}),
		"live-reply": live("/kl recover", LiveJob{Kind: JobRecover, Ask: AskComment, Actor: "alice"}, LiveQueued, func(n *InProgress) {
			n.Behind, n.Reply = []LiveJob{{Kind: JobPlan, Ask: AskPush, HeadSHA: botHeadSHA, Started: at(-5)}}, true
		}),
		"joined": Joined{Command: "`/kl apply`", Rest: []string{"web"}, Joined: []JoinedProject{
			{Project: "infra", Job: applyJob, Run: applyA, Check: "kl apply · infra"},
			{Project: "dns", Job: parked, Run: applyB, Check: "kl apply · dns"}}},
		"joined-all": Joined{Command: "the Apply button", Joined: []JoinedProject{{Project: "infra", Job: applyJob, Check: "kl apply · infra"}}},
		"not-finished-gave-up": NotFinished{Check: "kl apply · infra", Reason: GaveUp,
			Err: "reporting \"kl apply · infra\": GitHub answered 403: Resource not accessible by integration"},
		"not-finished-not-reached": NotFinished{Check: "kl apply · infra", Reason: NotReached},
	}
}

// noteOf is a notice's sticky-comment line, if it has one.
type noteOf interface{ Note() string }

// TestGoldenBot pins klbot's notices (testdata/bot/NAME.md, -update
// rewrites them) and their sticky-comment notes (testdata/bot/notes.md).
func TestGoldenBot(t *testing.T) {
	t.Parallel()
	notices := botNotices()
	var notes []string
	for _, name := range slices.Sorted(maps.Keys(notices)) {
		n := notices[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := Notice(&b, n, Options{Format: Markdown}); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("bot", name+".md"), b.String())
		})
		if n, ok := n.(noteOf); ok {
			notes = append(notes, "- "+name+": "+n.Note()+"\n")
		}
	}
	for name, n := range map[string]noteOf{
		"plan-superseded":      PlanSuperseded{Project: "infra", HeadSHA: botHeadSHA, PlanRun: planA, PlanSHA: botSHA},
		"plan-superseded-gone": PlanSuperseded{Project: "infra", HeadSHA: botHeadSHA, PlanRun: planA, PlanSHA: botSHA, Gone: true},
		"closed-unmerged":      ClosedUnapplied{PlanRun: planA},
		"closed-merged":        ClosedUnapplied{PlanRun: planA, Merged: true},
	} {
		notes = append(notes, "- "+name+": "+n.Note()+"\n")
	}
	slices.Sort(notes)
	golden(t, filepath.Join("bot", "notes.md"), strings.Join(notes, ""))
}

// TestBotHeadingLevel: a notice's heading follows Options.HeadingLevel.
func TestBotHeadingLevel(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := Notice(&b, MissingState{State: "s", Project: "p"}, Options{Format: Markdown, HeadingLevel: 5}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "##### ⛔ State `s` does not exist\n") {
		t.Errorf("at level 5:\n%s", b.String())
	}
}

// TestHeadingLevel: a Markdown view at HeadingLevel 5 is the view at the
// default level with its "###" and "####" headings two levels down — what
// klbot's sticky comment did to them by rewriting lines before the option.
func TestHeadingLevel(t *testing.T) {
	t.Parallel()
	demote := func(md string) string {
		var out strings.Builder
		for _, l := range strings.SplitAfter(md, "\n") {
			if strings.HasPrefix(l, "### ") || strings.HasPrefix(l, "#### ") {
				l = "##" + l
			}
			out.WriteString(l)
		}
		return out.String()
	}
	for _, c := range goldenCases() {
		t.Run(c.view+"/"+c.name, func(t *testing.T) {
			t.Parallel()
			o := Options{Format: Markdown, Now: now, RunURL: runURL}
			want := demote(render(t, c, o))
			o.HeadingLevel = 5
			if got := render(t, c, o); got != want {
				t.Errorf("at HeadingLevel 5:\n%s\nwant:\n%s", got, want)
			}
		})
	}
	for level, want := range map[int]string{0: "### ", 1: "# ", 3: "### ", 6: "###### ", 9: "###### "} {
		if got := (Options{HeadingLevel: level}).heading(0); got != want {
			t.Errorf("HeadingLevel %d: heading %q, want %q", level, got, want)
		}
	}
	if got := (Options{HeadingLevel: 6}).heading(1); got != "###### " {
		t.Errorf("a section below level 6: %q", got)
	}
}

// TestPermissionWords: a refusal says in words what the user may do and
// what the command needs — never "has none permission".
func TestPermissionWords(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		perm string
		verb string
		want string
	}{
		"none":    {"none", "/kl apply", "@stranger has no permission on acme/infra; /kl apply needs write"},
		"unknown": {"", "/kl plan", "@stranger has no permission on acme/infra; /kl plan needs write"},
		"read":    {"read", "the Apply button", "@stranger has read permission on acme/infra; the Apply button needs write"},
		"triage":  {"triage", "/kl apply", "@stranger has triage permission on acme/infra; /kl apply needs write"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := PermissionWords("stranger", "acme/infra", tc.perm, tc.verb); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
