package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// prPlanPage is how many plan runs PRPlan reads from the store at a time.
const prPlanPage = 500

// PRPlanQuery names the plan `kl apply --pr` applies: the newest plan of
// pull request PR (Repo and Number; HeadSHA and URL are ignored) at
// commit Commit — 7 to 40 hexadecimal characters, matched as a prefix
// either way, case-insensitively; "" for the commit of the pull request's
// newest plan, its last planned head — of state State ("" for any).
type PRPlanQuery struct {
	PR     PullRequest
	Commit string
	State  string
}

// PRPlan returns the plan run that q names (issue 15 §1): among the plan
// runs of q.PR, not counting re-plans an apply made (Run.ReplanOf), those
// at q.Commit; of them the newest of each project (state and scope
// directory). It reads the plans from the store in pages of prPlanPage,
// newest first.
//
// Errors: ErrNotFound, the message naming the pull request, the commit
// and the plans the pull request has (at most ten, newest first), when
// it has none, none at the commit, or the newest at the commit is not
// open (stale, superseded or failed: "not applicable"); ErrInvalid when
// the plans at the commit are of more than one project (pass a state); a
// plan already applied or being applied is returned, for Apply to refuse
// with its *StatusError.
func (e *Engine) PRPlan(ctx context.Context, q PRPlanQuery) (Run, error) {
	plans, err := e.prPlans(ctx, q)
	if err != nil {
		return Run{}, err
	}
	name := q.PR.String()
	if q.State != "" {
		name += " on state " + q.State
	}
	if len(plans) == 0 {
		return Run{}, Errorf(ErrNotFound, "no plan of %s in the store: plan it first (kl plan --pr %s --commit SHA)", name, q.PR.String())
	}
	commit := q.Commit
	if commit == "" {
		commit = planCommit(plans[0])
	}
	newest := map[string]Run{} // by project
	var projects []string
	for _, p := range plans {
		if commit == "" || !sameCommit(planCommit(p), commit) {
			continue
		}
		key := planProject(p)
		if _, ok := newest[key]; !ok {
			newest[key] = p
			projects = append(projects, key)
		}
	}
	switch {
	case commit == "":
		return Run{}, Errorf(ErrNotFound, "no plan of %s records its commit: pass --commit SHA, or plan it with --commit; its plans: %s", name, listPlans(plans))
	case len(projects) == 0:
		return Run{}, Errorf(ErrNotFound, "no plan of %s at commit %s: its plans are %s", name, commit, listPlans(plans))
	case len(projects) > 1:
		sort.Strings(projects)
		return Run{}, Errorf(ErrInvalid, "%s has plans of %d projects at commit %s (%s): name one with --state", name, len(projects), commit, strings.Join(projects, "; "))
	}
	p := newest[projects[0]]
	switch p.Status {
	case StatusPlanned, StatusApplying, StatusApplied:
		return p, nil
	case StatusPlanning:
		return Run{}, Errorf(ErrNotFound, "the newest plan of %s at commit %s, %s, is still planning", name, commit, p.ID)
	}
	return Run{}, Errorf(ErrNotFound, "the newest plan of %s at commit %s, %s, is %s: not applicable (kl why %s); its plans are %s",
		name, commit, p.ID, p.Status, p.ID, listPlans(plans))
}

// prPlans lists q.PR's plan runs (of q.State, when set), re-plans left
// out, newest first.
func (e *Engine) prPlans(ctx context.Context, q PRPlanQuery) ([]Run, error) {
	if q.PR.Repo == "" || q.PR.Number <= 0 {
		return nil, Errorf(ErrInvalid, "finding the plan of a pull request: want OWNER/REPO#NUMBER, got %q", q.PR.String())
	}
	if q.Commit != "" && !isHex(q.Commit, 7, 40) {
		return nil, Errorf(ErrInvalid, "finding the plan of %s: commit %q: want 7 to 40 hexadecimal characters", q.PR.String(), q.Commit)
	}
	var out []Run
	before := ""
	for {
		page, err := e.Store.ListRuns(ctx, RunQuery{State: q.State, Kind: KindPlan, Before: before, Limit: prPlanPage})
		if err != nil {
			return nil, fmt.Errorf("listing plans of %s: %w", q.PR.String(), err)
		}
		for _, r := range page {
			if r.ReplanOf == "" && samePR(r.PR, &q.PR) {
				out = append(out, r)
			}
		}
		if len(page) < prPlanPage {
			return out, nil
		}
		before = page[len(page)-1].ID
	}
}

// planCommit is the commit a plan was made at: its envelope's, else (a
// plan that failed before it stored one) its pull request's head.
func planCommit(r Run) string {
	if r.Envelope != nil && r.Envelope.CommitSHA != "" {
		return r.Envelope.CommitSHA
	}
	if r.PR != nil {
		return r.PR.HeadSHA
	}
	return ""
}

// planProject names a plan's project: its state and, when it stored an
// envelope, its scope directory and workspace.
func planProject(r Run) string {
	if r.Envelope == nil {
		return "state " + r.State
	}
	s := r.Envelope.Scope
	p := "state " + r.State + ", directory " + s.Dir
	if s.Workspace != "" && s.Workspace != "default" {
		p += ", workspace " + s.Workspace
	}
	return p
}

// sameCommit compares two commit SHAs, either possibly abbreviated.
func sameCommit(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	a, b = strings.ToLower(a), strings.ToLower(b)
	return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
}

// listPlans names up to ten plans: "RUN (status, commit abc1234, state S)".
func listPlans(plans []Run) string {
	var parts []string
	for i, p := range plans {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("and %d more (kl runs)", len(plans)-10))
			break
		}
		c := planCommit(p)
		if c == "" {
			c = "no commit recorded"
		} else {
			c = "commit " + c[:min(len(c), 12)]
		}
		parts = append(parts, fmt.Sprintf("%s (%s, %s, state %s)", p.ID, p.Status, c, p.State))
	}
	return strings.Join(parts, ", ")
}

// isHex reports whether s is min to max hexadecimal characters.
func isHex(s string, min, max int) bool {
	if len(s) < min || len(s) > max {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

// supersedeOlder closes the open plans of run's pull request that run
// replaces (PlanInput.SupersedeOlder, issue 15 §4): plans of the same
// state, scope directory and workspace, still planned, as klbot's
// supersedeOld does for a project — superseded by a newer plan of the
// pull request at run's commit. A plan an apply has claimed meanwhile is
// left to its apply.
func (e *Engine) supersedeOlder(ctx context.Context, run Run) error {
	if run.PR == nil || run.Envelope == nil {
		return nil
	}
	open, err := e.Store.ListRuns(ctx, RunQuery{State: run.State, Kind: KindPlan, Statuses: []RunStatus{StatusPlanned}, Limit: 1000})
	if err != nil {
		return fmt.Errorf("listing open plans of %s: %w", run.PR, err)
	}
	pr := &PullRequest{Repo: run.PR.Repo, Number: run.PR.Number}
	for _, o := range open {
		if o.ID == run.ID || o.ID > run.ID || !samePR(o.PR, run.PR) || o.Envelope == nil || planProject(o) != planProject(run) {
			continue
		}
		err := e.Supersede(ctx, o.ID, SupersededByNewerPlan, pr, run.Envelope.CommitSHA)
		var se *StatusError
		if err != nil && !errors.Is(err, ErrConflict) && !errors.As(err, &se) {
			return fmt.Errorf("superseding plan %s of %s by plan %s: %w", o.ID, run.PR, run.ID, err)
		}
	}
	return nil
}

// PRPlans returns the plans of pull request q.PR at commit q.Commit
// (required, matched as PRPlan matches it) of state q.State ("" for
// any): the newest of each project (state, scope directory and
// workspace), re-plans an apply made left out, newest first, whatever
// their status — kl github check judges each (ADR 0060). None is not an
// error. Errors: ErrInvalid for a malformed pull request or commit, or
// no commit; the store's.
func (e *Engine) PRPlans(ctx context.Context, q PRPlanQuery) ([]Run, error) {
	if q.Commit == "" {
		return nil, Errorf(ErrInvalid, "finding the plans of %s: no commit given", q.PR.String())
	}
	plans, err := e.prPlans(ctx, q)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []Run
	for _, p := range plans {
		if !sameCommit(planCommit(p), q.Commit) || seen[planProject(p)] {
			continue
		}
		seen[planProject(p)] = true
		out = append(out, p)
	}
	return out, nil
}
