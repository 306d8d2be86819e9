package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/planopts"
	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/terraform"
)

func (a *app) planCommand() *cobra.Command {
	var in engine.PlanInput
	var pr string
	cmd := &cobra.Command{
		Use:   "plan --state NAME [-C DIR] [--target ADDR]... [-- TERRAFORM OPTIONS]",
		Short: "Plan DIR against the head of state NAME and store the plan run with its envelope",
		Long: `Plan runs terraform init/plan/show in an isolated work dir against the head version of
the state, stores the saved plan (server-side: it holds secrets) and the envelope — source
serial, scope, write set, read set, reservation set, plan digest — and lists the other open
plans whose footprints overlap this one.

Terraform runs in DIR (-C, like terraform -chdir): a relative --var-file path is relative
to DIR, not to the current directory.

After --, Terraform's own plan options, spelt as for terraform plan: -destroy,
-refresh-only, -refresh=false, -parallelism=N (it bounds the apply too) and
-var NAME=VALUE. They are kept in the plan's scope and every re-plan repeats them; a -var
value is kept with the plan's secrets, never printed, and never on a command line.
Options Kilolock cannot honour (-state, -lock=false, -chdir, …) are refused with the reason.`,
		Args: planArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if in.Options, in.Vars, err = planopts.Parse(args, planopts.CLI); err != nil {
				return err
			}
			return a.plan(cmd.Context(), in, pr)
		},
	}
	cmd.Flags().StringVar(&in.State, "state", "", "state to plan against (required)")
	// Cobra checks it before RunE: `required flag(s) "state" not set`.
	_ = cmd.MarkFlagRequired("state")
	cmd.Flags().StringVarP(&in.Dir, "dir", "C", ".", "Terraform root module directory")
	cmd.Flags().StringArrayVar(&in.Targets, "target", nil, "resource address to target (repeatable), as terraform plan -target")
	cmd.Flags().StringArrayVar(&in.VarFiles, "var-file", nil, "variables file (repeatable), as terraform plan -var-file; a relative path is relative to -C DIR, as with terraform -chdir")
	cmd.Flags().StringArrayVar(&in.Replace, "replace", nil, "resource instance to replace (repeatable), as terraform plan -replace")
	cmd.Flags().StringVar(&pr, "pr", "", "pull request this plan is for, OWNER/REPO#N, or \"actions\" for the pull request of the GitHub Actions event (recorded in the envelope and named in every report)")
	cmd.Flags().StringVar(&in.CommitSHA, "commit", "", "commit SHA the configuration is at, 7-40 hex characters (recorded in the envelope)")
	cmd.Flags().Var(laneFlag{&in.Lane}, "lane", "lane to plan in: terraform (default), native (plan only the closure of --target or --changed-file, proved, else fall back to terraform) or auto (native when the closure is at most a quarter of the state's resources)")
	cmd.Flags().StringArrayVar(&in.ChangedFiles, "changed-file", nil, "file of -C DIR the change touched, relative to DIR (repeatable; native lane without --target: the scope is what these files declare or reach)")
	cmd.Flags().StringVar(&in.BaseDir, "base-dir", "", "root module directory of the base the --changed-file paths changed from (e.g. a checkout of main)")
	cmd.Flags().BoolVar(&in.PlannedAtMerge, "at-merge", false, "record that this plan is made as its pull request merges, so nobody reviewed it: every report of it and of its apply says \"planned at merge, not reviewed\" (needs --pr)")
	return cmd
}

// planArgs accepts kl plan's arguments: none, or Terraform's plan options
// after "--" (planopts). A word before "--" is refused without being
// quoted: it may be a -var value typed without the "--".
func planArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
		return errors.New("kl plan takes no arguments: Terraform's plan options go after --, e.g. kl plan --state NAME -- -destroy -var NAME=VALUE")
	}
	return nil
}

// plan is kl plan: it checks in and the --pr value pr before a run is
// stored, plans in.State with them and prints the plan run.
func (a *app) plan(ctx context.Context, in engine.PlanInput, pr string) error {
	if err := checkPlanInput(in); err != nil {
		return err
	}
	p, sha, err := a.planPullRequest(pr, in.CommitSHA)
	if err != nil {
		return err
	}
	if in.PlannedAtMerge && p == nil {
		return errors.New("--at-merge needs --pr: a plan made at merge is the plan of the pull request that merged")
	}
	// A newer plan of a pull request replaces its older open plans of the
	// same project (state, directory), as klbot's do (issue 15 §4).
	in.PR, in.CommitSHA, in.SupersedeOlder = p, sha, p != nil
	e, err := a.engineToWrite(ctx, true)
	if err != nil {
		return err
	}
	if err := knownState(ctx, e, in.State); err != nil {
		return err
	}
	in.Actor = a.actor()
	prog := a.progress()
	in.Progress = prog.update
	a.phase.set(phasePlan)
	out, err := e.Plan(ctx, in)
	prog.done()
	if err != nil {
		return err
	}
	return report.Plan(a.io.Out, out, a.reportOptions())
}

// checkPlanInput checks kl plan's flags: --commit is a commit SHA; -C,
// --var-file, --target and --replace are text kl accepts (checkText); -C
// is a directory and each --var-file a file (checkPlanFiles).
func checkPlanInput(in engine.PlanInput) error {
	if in.CommitSHA != "" && !commitSHA.MatchString(in.CommitSHA) {
		return fmt.Errorf("--commit %q: want a commit SHA, 7 to 40 hexadecimal characters (e.g. git rev-parse HEAD)", in.CommitSHA)
	}
	// Stored in the envelope and printed in every report.
	if err := errors.Join(checkText("-C", in.Dir, maxPath), checkTexts("--var-file", in.VarFiles, maxPath),
		checkTexts("--target", in.Targets, maxPath), checkTexts("--replace", in.Replace, maxPath)); err != nil {
		return err
	}
	if err := checkLaneInput(in); err != nil {
		return err
	}
	// Before a run is stored: a plan that cannot start clutters kl runs.
	return checkPlanFiles(in.Dir, in.VarFiles)
}

// laneFlag is --lane: engine.ParseLaneChoice's values.
type laneFlag struct{ c *engine.LaneChoice }

func (f laneFlag) String() string {
	if f.c == nil || *f.c == "" {
		return string(engine.LaneChoiceTerraform)
	}
	return string(*f.c)
}

func (f laneFlag) Set(s string) error {
	c, err := engine.ParseLaneChoice(s)
	if err != nil {
		return errors.New("want terraform, native or auto")
	}
	*f.c = c
	return nil
}

func (laneFlag) Type() string { return "LANE" }

// checkLaneInput checks the native lane's flags: --changed-file and
// --base-dir only with --lane native or auto, --base-dir a directory
// whenever --changed-file scopes the plan.
func checkLaneInput(in engine.PlanInput) error {
	native := in.Lane == engine.LaneChoiceNative || in.Lane == engine.LaneChoiceAuto
	if !native && (len(in.ChangedFiles) > 0 || in.BaseDir != "") {
		return errors.New("--changed-file and --base-dir scope a native-lane plan: add --lane native or --lane auto")
	}
	if err := errors.Join(checkTexts("--changed-file", in.ChangedFiles, maxPath), checkText("--base-dir", in.BaseDir, maxPath)); err != nil {
		return err
	}
	if len(in.ChangedFiles) > 0 && len(in.Targets) > 0 {
		return errors.New("--target and --changed-file scope a native-lane plan two ways: give one (targets would plan none of the files' other changes)")
	}
	if len(in.ChangedFiles) == 0 {
		return nil
	}
	if in.BaseDir == "" {
		return errors.New("--changed-file needs --base-dir: the root module directory of the base, to tell what the files changed")
	}
	if st, err := os.Stat(in.BaseDir); err != nil || !st.IsDir() {
		return fmt.Errorf("--base-dir %s: not a directory", in.BaseDir)
	}
	return nil
}

// planPullRequest returns the pull request named by --pr (nil for none)
// and the plan's commit: sha (--commit), or with --pr actions and no
// --commit, the head commit of the GitHub Actions event's pull request.
func (a *app) planPullRequest(pr, sha string) (*engine.PullRequest, string, error) {
	switch pr {
	case "":
		return nil, sha, nil
	case "actions":
		// The pull request of the GitHub Actions event, if any.
		if a.getenv("GITHUB_REPOSITORY") == "" {
			return nil, "", errors.New("--pr actions: GITHUB_REPOSITORY is not set (not in GitHub Actions?): " +
				"pass --pr OWNER/REPO#N to name the pull request, or leave --pr out")
		}
		// The commit is the event's, or --commit; kl plan needs none.
		t, err := a.ghTargetOf(ghReportFlags{sha: sha})
		if err != nil && !errors.Is(err, errNoCommit) {
			return nil, "", fmt.Errorf("--pr actions: %w", err)
		}
		if !repoPattern.MatchString(t.repo.String()) {
			return nil, "", fmt.Errorf("--pr actions: GITHUB_REPOSITORY=%s: want OWNER/REPO", preview(t.repo.String()))
		}
		if t.pr <= 0 {
			return nil, sha, nil
		}
		if sha == "" && !t.askHead {
			sha = t.sha
		}
		p := &engine.PullRequest{Repo: t.repo.String(), Number: t.pr, HeadSHA: sha}
		p.URL = a.prURL(p)
		return p, sha, nil
	default:
		p, err := parsePR(pr)
		if err != nil {
			return nil, "", err
		}
		p.HeadSHA = sha
		p.URL = a.prURL(p)
		return p, sha, nil
	}
}

// prURL links pull request p, of the repository of the GitHub Actions
// job (GITHUB_REPOSITORY, on GITHUB_SERVER_URL), so that every report
// of its plan and apply links it; "" outside Actions or for another
// repository.
func (a *app) prURL(p *engine.PullRequest) string {
	server, repo := strings.TrimSuffix(a.getenv("GITHUB_SERVER_URL"), "/"), a.getenv("GITHUB_REPOSITORY")
	if server == "" || !strings.EqualFold(repo, p.Repo) {
		return ""
	}
	return fmt.Sprintf("%s/%s/pull/%d", server, p.Repo, p.Number)
}

// mergeFlags checks kl apply's --merge-commit, --merge-dir and
// --after-merge and sets in's MergeCommit and AfterMerge from them; an
// error names the flag and what is wrong.
func mergeFlags(in *engine.ApplyInput, merge *engine.MergeCommit, afterMerge string) error {
	switch {
	case merge.Dir != "" && merge.SHA == "":
		return errors.New("--merge-dir is for --merge-commit: name the merge commit it is a checkout of")
	case merge.SHA != "" && !commitSHA.MatchString(merge.SHA):
		return fmt.Errorf("--merge-commit %s: want a commit SHA, 7 to 40 hexadecimal characters (e.g. git rev-parse HEAD)", preview(merge.SHA))
	case afterMerge != "" && afterMerge != afterMergeUnknown && !commitSHA.MatchString(afterMerge):
		return fmt.Errorf("--after-merge=%s: want the pull request's merge commit, 7 to 40 hexadecimal characters, or --after-merge alone", preview(afterMerge))
	case afterMerge != "" && merge.SHA != "" && afterMerge != afterMergeUnknown && !strings.EqualFold(afterMerge, merge.SHA):
		return fmt.Errorf("--after-merge=%s and --merge-commit %s name two merge commits: give one", afterMerge, merge.SHA)
	}
	if afterMerge != "" {
		in.AfterMerge = &engine.AfterMerge{}
		if afterMerge != afterMergeUnknown {
			in.AfterMerge.Commit = afterMerge
		}
	}
	if merge.SHA == "" {
		return nil
	}
	if merge.Dir == "" {
		merge.Dir = "."
	}
	if fi, err := os.Stat(merge.Dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("--merge-dir %s: not a directory: name the plan's root module directory in the checkout of merge commit %s", preview(merge.Dir), merge.SHA)
	}
	in.MergeCommit = merge
	return nil
}

// afterMergeUnknown is kl apply --after-merge given without a commit.
const afterMergeUnknown = "-"

func (a *app) applyCommand() *cobra.Command {
	var in engine.ApplyInput
	var pr, commit string
	var merge engine.MergeCommit
	var afterMerge string
	cmd := &cobra.Command{
		Use: "apply RUN",
		Example: `  kl apply 01J9Z6M3W4X5Y6Z7A8B9C0D1E2
  kl apply --pr acme/infra#42 --commit 0123abcd --state acme/infra/prod   # the pull request's reviewed plan
  kl apply --pr acme/infra#42 --commit 0123abcd --merge-commit "$(git rev-parse HEAD)" --merge-dir infra   # at merge`,
		Short: "Apply plan run RUN: reserve its footprint, check what changed since plan, apply, commit",
		Long: `Apply takes every reservation of the plan's envelope at once (or none), waiting up to --wait
for runs that hold overlapping ones; classifies the versions committed since the plan
(independent / plan input changed / planned target changed): a changed planned target
refuses, a changed plan input re-plans against the head and applies that re-plan only if its
intent is unchanged, it changes nothing outside the plan's footprint or that the plan reads, and
it needs no reservation beyond the plan's — otherwise the re-plan is left for review
(--strict-since-plan refuses instead); applies the saved plan (or that re-plan) to the snapshot
it was made from; and commits the result into the head as a new version in one transaction. A
plan without changes reserves nothing, runs no Terraform and commits nothing.

--pr OWNER/REPO#N instead of RUN applies the pull request's reviewed plan: its newest plan
(kl plan --pr) at commit --commit SHA — the pull request's last commit, as a merge-time apply
gives it — or, without --commit, at the commit of its newest plan; --state narrows it to one
state. No such plan, or the newest one there stale, superseded or failed, is an error naming the
pull request, the commit and the plans it has; so are plans of several projects at that commit
(name one with --state). It reads only the store: any CI can run it at merge.

At merge, --merge-commit SHA names the pull request's merge commit (its merge_commit_sha, or
its merge group's commit), checked out with the plan's root module at --merge-dir DIR (default:
the working directory): when a version since the plan changed what the plan reads, the re-plan
plans that configuration instead of the reviewed one, so the change of a pull request merged
just before (which this one's head lacks) is planned, not reverted. Every check of the re-plan
stays; the story names the commit (ADR 0062). Without a re-plan the reviewed plan is applied.
--after-merge (or --after-merge=SHA, the merge commit; --merge-commit implies it) records on the
run that its pull request has merged: a refusal then says to plan the base branch at merge and
apply that, since the merged branch can no longer be re-planned.

If this kl is killed while Terraform applies, what Terraform wrote is kept as a checkpoint:
once the run's lease has run out, kl run recover RUN commits it.

Exit status: 0 committed (or nothing to commit: a plan without changes); 3 refused (reservation conflict, stale plan, intent changed, plan
not applicable: an apply run, a plan of another state, a plan applied or discarded); 130 or 143
stopped by SIGINT (Ctrl-C) or SIGTERM; 1 any other failure (a failed Terraform apply commits what
it wrote; no plan of the pull request at the commit).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if in.Wait < 0 {
				return fmt.Errorf("--wait %s: negative: use 0 to refuse at once, or how long to wait (e.g. 5m)", in.Wait)
			}
			if err := mergeFlags(&in, &merge, afterMerge); err != nil {
				return err
			}
			return a.apply(cmd.Context(), in, args, pr, commit)
		},
	}
	cmd.Flags().StringVar(&in.State, "state", "", "refuse unless the plan belongs to this state (with --pr: the state whose plan to apply)")
	cmd.Flags().StringVar(&afterMerge, "after-merge", "", "record that this apply runs after its pull request merged, as --after-merge or --after-merge=SHA (its merge commit): a refusal then says to plan the base branch at merge, not to re-plan the merged branch (implied by --merge-commit)")
	cmd.Flags().Lookup("after-merge").NoOptDefVal = afterMergeUnknown
	cmd.Flags().BoolVar(&in.Strict, "strict-since-plan", false, "refuse when a version since the plan changed its read set, instead of re-planning")
	cmd.Flags().BoolVar(&in.Validate, "validate", false, "for a native-lane plan: first plan the whole configuration in the terraform lane against the head and refuse unless it plans the same on the write set (ADR 0069)")
	cmd.Flags().DurationVar(&in.Wait, "wait", 0, "wait this long for conflicting reservations to be released (e.g. 5m); 0 refuses at once; not negative")
	cmd.Flags().StringVar(&pr, "pr", "", "apply the newest plan of this pull request, OWNER/REPO#N, instead of RUN")
	cmd.Flags().StringVar(&commit, "commit", "", "with --pr: the pull request's head commit whose plan to apply, 7-40 hex characters (default: the commit of its newest plan)")
	cmd.Flags().StringVar(&merge.SHA, "merge-commit", "", "the pull request's merge commit, 7-40 hex characters: a re-plan plans its configuration (at --merge-dir) instead of the reviewed one (ADR 0062)")
	cmd.Flags().StringVar(&merge.Dir, "merge-dir", "", "with --merge-commit: the plan's root module directory in a checkout of the merge commit (default: the working directory)")
	return cmd
}

// apply is kl apply: the plan run is RUN (args) or, with --pr, the pull
// request's plan at commit (engine.PRPlan); its story is printed whenever
// an apply run exists — refused, failed or committed.
func (a *app) apply(ctx context.Context, in engine.ApplyInput, args []string, pr, commit string) error {
	switch {
	case len(args) == 1 && pr != "":
		return errors.New("kl apply takes a RUN or --pr OWNER/REPO#N, not both")
	case len(args) == 0 && pr == "":
		return errors.New("kl apply needs the plan run to apply: RUN, or --pr OWNER/REPO#N for a pull request's reviewed plan")
	case commit != "" && pr == "":
		return errors.New("--commit is for --pr: RUN names the plan itself")
	case commit != "" && !commitSHA.MatchString(commit):
		return fmt.Errorf("--commit %q: want a commit SHA, 7 to 40 hexadecimal characters", commit)
	}
	var q *engine.PRPlanQuery
	if pr != "" {
		p, err := parsePR(pr)
		if err != nil {
			return err
		}
		q = &engine.PRPlanQuery{PR: *p, Commit: commit, State: in.State}
	}
	e, err := a.engineToWrite(ctx, true)
	if err != nil {
		return err
	}
	// An unknown state is an error, as for every command that names one;
	// a plan of another existing state is a refusal.
	if err := knownState(ctx, e, in.State); err != nil {
		return err
	}
	if q != nil {
		plan, err := e.PRPlan(ctx, *q)
		if err != nil {
			return err
		}
		args = []string{plan.ID}
	}
	in.PlanRun = runArg(args)
	in.Actor = a.actor()
	p := a.progress()
	in.Progress = func(ev engine.Progress) {
		a.phase.terraformPhase(ev.Phase)
		p.update(ev)
	}
	in.OnWait = func(bs []engine.Blocker) {
		a.phase.set(phaseApplyWait)
		p.waiting(bs)
	}
	a.phase.set(phaseApplyStart)
	out, err := e.Apply(ctx, in)
	p.done()
	id := runOf(err)
	if out != nil {
		id = out.Run.ID
	}
	if id != "" {
		story, serr := e.RunStory(context.WithoutCancel(ctx), id)
		if serr != nil {
			return errors.Join(err, serr)
		}
		if rerr := report.Apply(a.io.Out, story, a.reportOptions()); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	// A plan that is not applicable (an apply run, a plan of another
	// state or lineage, a corrupted saved plan) is refused too.
	return refusal(err, engine.ErrInvalid)
}

// checkPlanFiles checks that dir (-C) is a directory and that each of
// varFiles (--var-file, relative to dir as with terraform -chdir) is a file.
func checkPlanFiles(dir string, varFiles []string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("-C %s: no such directory", preview(dir))
	case err != nil:
		return fmt.Errorf("-C %s: %w", preview(dir), err)
	case !fi.IsDir():
		return fmt.Errorf("-C %s: not a directory: name the Terraform root module directory", preview(dir))
	}
	for _, f := range varFiles {
		path := f
		if !filepath.IsAbs(f) {
			path = filepath.Join(dir, f)
		}
		where := ""
		if path != f {
			where = " (" + path + ": a relative --var-file is relative to -C DIR)"
		}
		fi, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("--var-file %s: no such file%s", preview(f), where)
		case err != nil:
			return fmt.Errorf("--var-file %s: %w", preview(f), err)
		case fi.IsDir():
			return fmt.Errorf("--var-file %s: a directory, not a variables file%s", preview(f), where)
		}
	}
	return nil
}

// runOf returns the apply run id carried by a refusal, if any.
func runOf(err error) string {
	var re *engine.RunError
	if errors.As(err, &re) {
		return re.Run
	}
	return ""
}

func (a *app) footprintCommand() *cobra.Command {
	var configDir string
	var refreshOnly bool
	cmd := &cobra.Command{
		Use:   "footprint PLAN.json",
		Short: "Print the write set, read set and reservation set of a `terraform show -json` plan",
		Long: `Footprint reads the JSON of any saved plan (terraform show -json PLANFILE > plan.json),
including plans made elsewhere with real cloud providers, and prints what Kilolock would
reserve for it.

Plan JSON does not hold the whole configuration: it leaves out locals and what dynamic
blocks, lifecycle conditions, replace_triggered_by and provisioner connection blocks
reference. Without --config-dir, references through locals widen to their module prefix,
so does a resource whose planned values hold nested blocks its configuration does not list
(a dynamic block's trace) or that has lifecycle conditions, and the read set is marked
unverified unless widenings cover it. With --config-dir (the plan's root module directory;
remote modules are found through .terraform/modules/modules.json after terraform init),
all of these are read from the .tf files; a module whose directory cannot be read widens
to its prefix.

A plan made with terraform plan -refresh-only changes only what the refresh found
changed outside Terraform; its JSON lists those objects in resource_drift and does not
say it is refresh-only: pass --refresh-only for its write set.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := readInput(cmd.Context(), args[0], a.io.In)
			if err != nil {
				return err
			}
			plan, err := terraform.ParsePlanJSON(b)
			if err != nil {
				return fmt.Errorf("reading plan %s: %w", args[0], err)
			}
			fp, sum, err := terraform.PlanFootprint(plan, terraform.ExtractOptions{ConfigDir: configDir, RefreshOnly: refreshOnly})
			if err != nil {
				return fmt.Errorf("reading plan %s: %w", args[0], err)
			}
			if n := terraform.DriftCount(plan); !refreshOnly && sum.Empty() && n > 0 {
				fmt.Fprintf(a.io.Err, "kl: plan %s changes nothing, and its refresh found %d object(s) changed outside Terraform: "+
					"if it was made with terraform plan -refresh-only, pass --refresh-only (plan JSON does not say)\n",
					args[0], n)
			}
			return report.Footprint(a.io.Out, args[0], fp, sum, a.reportOptions())
		},
	}
	cmd.Flags().StringVar(&configDir, "config-dir", "", "root module directory of the plan, to read what plan JSON leaves out (locals, dynamic blocks, lifecycle conditions)")
	cmd.Flags().BoolVar(&refreshOnly, "refresh-only", false, "the plan was made with terraform plan -refresh-only (its JSON does not say): its write set is what its refresh found changed outside Terraform (resource_drift)")
	return cmd
}

// progress returns a progress line for stderr, active only on a terminal
// and without --json.
func (a *app) progress() *progressLine {
	return newProgressLine(a.io.Err, !a.jsonOut && isTTY(a.stderr), termWidth(a.stderr), time.Now)
}

// commitSHA is a full or abbreviated Git commit SHA.
var commitSHA = regexp.MustCompile(`^[0-9a-fA-F]{7,40}$`)

// parsePR parses OWNER/REPO#N.
func parsePR(s string) (*engine.PullRequest, error) {
	repo, num, ok := strings.Cut(s, "#")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n <= 0 || !repoPattern.MatchString(repo) {
		return nil, fmt.Errorf("--pr %q: want OWNER/REPO#NUMBER, e.g. acme/infra#42", s)
	}
	return &engine.PullRequest{Repo: repo, Number: n}, nil
}
