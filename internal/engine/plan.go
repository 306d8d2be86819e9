package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/kilolock/kilolock/internal/plandiff"
)

// PlanInput is one `kl plan` (or klbot's plan on push).
type PlanInput struct {
	State string
	Dir   string // root module directory
	// ScopeDir, when set, is the directory recorded in the envelope's scope
	// instead of Dir's absolute path (klbot: the project's directory inside
	// the repository, not the job's temporary checkout).
	ScopeDir string
	Targets  []string // -target addresses, recorded in the scope (Terraform's JSON does not list them)
	Replace  []string // -replace instance addresses (forced replacement)
	VarFiles []string
	// Options are the Terraform plan options (ADR 0045), stored in the
	// envelope's scope; Options.Vars is set from Vars (VarNames).
	Options PlanOptions
	// Vars are the -var values: secrets, kept only in the plan's
	// ArtifactVars and handed to Terraform only through its environment.
	Vars         []Var
	Actor        string
	PR           *PullRequest
	CommitSHA    string
	ChangedFiles []string
	// Lane is the lane asked for ("" is the terraform lane; ADR 0052,
	// docs/adr/0069-native-lane.md). The native lane scopes to Targets, or
	// without targets to ChangedFiles against BaseDir (the base's root
	// module directory, which holds each changed file's old content).
	Lane    LaneChoice
	BaseDir string
	// ScopeIncomplete says why ChangedFiles may not be every file the
	// change touched (klbot: GitHub lists at most 3000 files of a pull
	// request; a changed file outside the root module directory that
	// touches the project). A native or auto plan scoped to changed files
	// then falls back to the terraform lane with it as the fell-back
	// marker's reason: a partial list would be a narrower scope than the
	// change (ADR 0070). "" when the list is complete.
	ScopeIncomplete string
	// ListedByPR says ChangedFiles is the pull request's own file list
	// (klbot: GitHub's, against the merge base). Otherwise (kl plan
	// --changed-file, a list a script computed) the native lane checks
	// that every file differing between Dir and BaseDir is listed, and
	// falls back naming the first that is not (closure.Unlisted): a list
	// computed wrong must not narrow the plan. A pull request's list is not
	// checked so: BaseDir is then the base branch's tree, which differs
	// from the head by what the base gained since the merge base too.
	ListedByPR bool
	Progress   func(Progress)
	// SupersedeOlder: once this plan is stored, the open plans of PR of
	// the same state, scope directory and workspace are superseded by it
	// (SupersededByNewerPlan at CommitSHA), before its overlaps are
	// listed, so a pull request's older plan is never its own overlap (kl
	// plan --pr; klbot supersedes its own rows first).
	SupersedeOlder bool
	// PlannedAtMerge records in the envelope that this plan was made when
	// its pull request merged, not in the pull request where it could be
	// reviewed (the GitHub Action's on-missing-plan: plan-and-apply).
	PlannedAtMerge bool
}

// PlanOutcome is a stored plan run and the other open plans of the same
// state whose footprints overlap it (docs/design.md plan step 4: surfaced before
// anyone applies).
type PlanOutcome struct {
	Run      Run
	Overlaps []Overlap
	// Fences are the fences of crashed applies this plan's footprint meets
	// (ADR 0035): its apply is refused until they are lifted.
	Fences []Fence
	// Diff is what the plan does per resource instance and attribute
	// (PlanResult.Diff, ADR 0044); nil when none was made.
	Diff *plandiff.Diff
}

// Overlap is another open plan sharing part of this plan's footprint.
// WriteWrite: both write (they cannot apply at once, and the later one will
// be stale); WriteRead / ReadWrite: this plan writes what the other reads,
// or the reverse (they serialize; the reader re-plans).
type Overlap struct {
	Run        string       `json:"run"`
	Actor      string       `json:"actor"`
	PR         *PullRequest `json:"pr,omitempty"`
	WriteWrite AddressSet   `json:"write_write,omitempty"`
	WriteRead  AddressSet   `json:"write_read,omitempty"`
	ReadWrite  AddressSet   `json:"read_write,omitempty"`
}

// Plan makes a plan run (docs/design.md "How a run flows", plan): read the head
// serial N, plan against version N in an isolated work dir, derive the
// envelope (ADR D1), store it with the saved plan, and list overlapping open
// plans. A failed plan is stored as a failed run with a "failed" marker.
func (e *Engine) Plan(ctx context.Context, in PlanInput) (*PlanOutcome, error) {
	st, err := e.getState(ctx, in.State)
	if err != nil {
		return nil, err
	}
	for _, t := range in.Targets {
		if err := validateTarget(t); err != nil {
			return nil, Errorf(ErrInvalid, "--target %q: %v", t, err)
		}
	}
	for _, r := range in.Replace {
		if _, err := ParseAddress(r); err != nil || strings.HasSuffix(r, "*") {
			return nil, Errorf(ErrInvalid, "--replace %q: want a resource instance address", r)
		}
	}
	in.Options.Vars = VarNames(in.Vars)
	if err := errors.Join(in.Options.Check(), CheckVars(in.Vars)); err != nil {
		return nil, err
	}
	dir := in.Dir
	if dir == "" {
		dir = "."
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	started := e.now()
	run := Run{
		ID: NewRunID(), Kind: KindPlan, State: st.Name, Actor: in.Actor, Holder: e.Holder,
		Status: StatusPlanning, PR: in.PR, CreatedAt: started, UpdatedAt: started,
		LeaseUntil: started.Add(e.lease()),
	}
	if err := e.Store.CreateRun(ctx, run); err != nil {
		return nil, fmt.Errorf("creating plan run: %w", err)
	}
	// Renewed for the whole plan: killed, the run ends lease-expired.
	ka := e.keepAlive(ctx, run.ID)
	defer ka.Stop()
	scopeDir := dir
	if in.ScopeDir != "" {
		scopeDir = in.ScopeDir
	}
	scope := Scope{Dir: scopeDir, Targets: in.Targets, Replace: in.Replace, ChangedFiles: in.ChangedFiles, VarFiles: in.VarFiles, Workspace: "default",
		Options: in.Options}
	lp, err := e.planLane(ctx, run, st, in, dir)
	if err != nil {
		e.failRun(ctx, run.ID, Failed(StepPlan, err))
		return nil, fmt.Errorf("planning run %s on state %s: %w", run.ID, st.Name, err)
	}
	res := lp.res
	run, err = e.storePlan(ctx, run, st, scope, res, in.Vars, planOrigin{PR: in.PR, Commit: in.CommitSHA, AtMerge: in.PlannedAtMerge,
		Lane: lp.lane, Slice: lp.slice, LaneReason: lp.why, Whole: lp.whole})
	if err != nil {
		return nil, err
	}
	if in.SupersedeOlder {
		if err := e.supersedeOlder(ctx, run); err != nil {
			return nil, err
		}
	}
	overlaps, err := e.Overlaps(ctx, run)
	if err != nil {
		return nil, err
	}
	fences, err := e.fencesOver(ctx, run)
	if err != nil {
		return nil, err
	}
	return &PlanOutcome{Run: run, Overlaps: overlaps, Fences: fences, Diff: res.Diff}, nil
}

// validateTarget accepts what terraform plan -target accepts: a resource or
// instance address, or a module path ("module.app", `module.app["eu"]`).
func validateTarget(t string) error {
	if _, err := ParseAddress(t); err == nil && t != "*" && !strings.HasSuffix(t, "*") {
		return nil
	}
	if strings.HasPrefix(t, "module.") {
		if _, err := ParseAddress(t + ".*"); err == nil {
			return nil
		}
	}
	return fmt.Errorf("want a resource, instance or module address")
}

// planOrigin is where a plan comes from, for its envelope: its pull
// request and commit, the reviewed plan it re-plans (ReplanOf, "" for
// none), and whether it was planned at merge (PlanInput.PlannedAtMerge).
type planOrigin struct {
	PR       *PullRequest
	Commit   string
	ReplanOf string
	AtMerge  bool
	// Lane, Slice and LaneReason: the lane the plan was made in ("" is the
	// terraform lane), its slice and why (lanePlan).
	Lane       Lane
	Slice      *Slice
	LaneReason string
	// Whole: a native-lane plan's whole configuration (ArtifactWholeConfig).
	Whole []byte
}

// storePlan stores a finished plan's artifacts — with vars, the -var
// values it was made with, as ArtifactVars — and envelope and marks it
// planned.
func (e *Engine) storePlan(ctx context.Context, run Run, st State, scope Scope, res *PlanResult, vars []Var, o planOrigin) (Run, error) {
	pr, sha, replanOf := o.PR, o.Commit, o.ReplanOf
	if res.Lineage != st.Lineage {
		e.failRun(ctx, run.ID, &End{Cause: CauseFailed, Step: StepCheckLineage, Lineage: res.Lineage, StateLineage: st.Lineage})
		return Run{}, Errorf(ErrInvalid, "plan %s was made against lineage %s, but state %s has lineage %s", run.ID, res.Lineage, st.Name, st.Lineage)
	}
	intent, err := json.Marshal(res.Intent)
	if err != nil {
		return Run{}, fmt.Errorf("encoding intent of run %s: %w", run.ID, err)
	}
	artifacts := map[string][]byte{ArtifactPlanFile: res.PlanFile, ArtifactConfig: res.Config, ArtifactIntent: intent}
	if res.Diff != nil {
		if artifacts[ArtifactDiff], err = plandiff.Marshal(res.Diff); err != nil {
			return Run{}, fmt.Errorf("encoding diff of run %s: %w", run.ID, err)
		}
	}
	if o.Whole != nil {
		artifacts[ArtifactWholeConfig] = o.Whole
	}
	if len(vars) > 0 {
		if artifacts[ArtifactVars], err = MarshalVars(vars); err != nil {
			return Run{}, fmt.Errorf("encoding -var values of run %s: %w", run.ID, err)
		}
	}
	for _, name := range []string{ArtifactPlanFile, ArtifactConfig, ArtifactWholeConfig, ArtifactIntent, ArtifactDiff, ArtifactVars} {
		data, ok := artifacts[name]
		if !ok {
			continue
		}
		if err := e.Store.PutArtifact(ctx, run.ID, name, data); err != nil {
			e.failRun(ctx, run.ID, Failed(StepStoreArtifact, err).withArtifact(name))
			return Run{}, fmt.Errorf("storing %s of run %s: %w", name, run.ID, err)
		}
	}
	env := &Envelope{
		Actor: run.Actor, Holder: run.Holder, StartedAt: run.CreatedAt, FinishedAt: e.now(),
		State: st.Name, Lineage: res.Lineage, SourceSerial: res.Serial, Scope: scope,
		Footprint: res.Footprint, Lane: LaneTerraform, PlanDigest: res.Digest, Summary: res.Summary, Slice: o.Slice, LaneReason: o.LaneReason,
		TerraformVersion: res.TerraformVersion, PR: pr, CommitSHA: sha, PlannedAtMerge: o.AtMerge,
	}
	if o.Lane != "" {
		env.Lane = o.Lane
	}
	if env.Reverts, err = e.reverts(ctx, st.Name, res.Serial, pr, scope.Options, res.Planned); err != nil {
		e.failRun(ctx, run.ID, Failed(StepPlan, err))
		return Run{}, fmt.Errorf("checking what plan %s would undo: %w", run.ID, err)
	}
	env.Reservations = res.Footprint.Reservations()
	// Terraform says "complete": false only from 1.8; a -target plan is
	// targeted whatever the version (docs/terraform.md "Plan JSON").
	env.Summary.Targets = env.Summary.Targets || len(scope.Targets) > 0
	marker := Marker{Kind: MarkerPlanned, Serial: res.Serial, Count: len(env.Reservations)}
	widenMarkers := providerMarkers(res.Notes)
	for _, w := range res.Footprint.Widened {
		widenMarkers = append(widenMarkers, Marker{Kind: MarkerWidened, Addresses: AddressSet{w.Address}, Reason: w.From + ": " + w.Reason})
	}
	run, err = e.Store.UpdateRun(ctx, run.ID, []RunStatus{StatusPlanning}, func(r *Run) error {
		r.Envelope = env
		r.Status = StatusPlanned
		r.ReplanOf = replanOf
		t := env.FinishedAt
		r.FinishedAt = &t
		return nil
	}, append(widenMarkers, marker)...)
	if err != nil {
		return Run{}, fmt.Errorf("storing envelope of run %s: %w", run.ID, leaseLost(run.ID, err))
	}
	return run, nil
}

// Overlaps lists the other open plans of run's state whose footprints
// overlap run's (docs/design.md plan step 4).
func (e *Engine) Overlaps(ctx context.Context, run Run) ([]Overlap, error) {
	if run.Envelope == nil {
		return nil, nil
	}
	open, err := e.Store.ListRuns(ctx, RunQuery{State: run.State, Kind: KindPlan, Statuses: []RunStatus{StatusPlanned, StatusApplying}, Limit: 1000})
	if err != nil {
		return nil, fmt.Errorf("listing open plans of state %s: %w", run.State, err)
	}
	// A planned plan a later version already made stale can never commit:
	// it overlaps nobody (as kl status leaves it out). A plan being
	// applied is listed whatever its since-plan says.
	var planned, applying []Run
	for _, o := range open {
		if o.Status == StatusPlanned {
			planned = append(planned, o)
		} else {
			applying = append(applying, o)
		}
	}
	if planned, err = e.applicable(ctx, planned); err != nil {
		return nil, err
	}
	open = append(planned, applying...)
	fp := run.Envelope.Footprint
	var out []Overlap
	for _, o := range open {
		if o.ID == run.ID || o.Envelope == nil || o.ID == run.ReplanOf || o.ReplanOf == run.ID {
			continue
		}
		if o.ReplanOf != "" && o.Status == StatusApplying {
			continue // a re-plan applied in place of its reviewed plan, which is listed
		}
		ofp := o.Envelope.Footprint
		ov := Overlap{
			Run: o.ID, Actor: o.Actor, PR: o.PR,
			WriteWrite: fp.Write.Overlapping(ofp.Write),
			WriteRead:  fp.Write.Overlapping(ofp.Read.Minus(ofp.Write)),
			ReadWrite:  fp.Read.Minus(fp.Write).Overlapping(ofp.Write),
		}
		if len(ov.WriteWrite)+len(ov.WriteRead)+len(ov.ReadWrite) > 0 {
			out = append(out, ov)
		}
	}
	return out, nil
}

// failRun marks a run in progress failed with a "failed" marker, using a
// context that survives ctx's cancellation. It logs instead of returning:
// it runs on an error path whose own error is what the caller reports. A run
// no longer in progress (the lease sweep ended it) keeps its status.
func (e *Engine) failRun(ctx context.Context, id string, end *End) {
	bctx, cancel := background(ctx)
	defer cancel()
	status := StatusFailed
	if ctx.Err() != nil {
		status, end = StatusInterrupted, interruptedEnd(end, PhasePlanning)
	}
	_, err := e.Store.UpdateRun(bctx, id, inProgress, func(r *Run) error {
		r.Status = status
		r.End = end
		t := e.now()
		r.FinishedAt = &t
		return nil
	}, Marker{Kind: MarkerFailed, End: end})
	if err != nil {
		e.log().Error("recording failure of run", "run", id, "cause", end.Cause, "step", end.Step, "err", err)
	}
}

// PlanDiff returns the diff of plan run id (ArtifactDiff, ADR 0044).
// ErrNotFound when the run is unknown, is not a plan, or has no diff: it
// failed before Terraform planned, or an older kl planned it.
func (e *Engine) PlanDiff(ctx context.Context, id string) (*plandiff.Diff, error) {
	run, err := e.getRun(ctx, id)
	if err != nil {
		return nil, err
	}
	if run.Kind != KindPlan {
		return nil, Errorf(ErrNotFound, "run %s is an apply run: its plan %s has the diff", id, run.PlanRun)
	}
	b, err := e.Store.GetArtifact(ctx, id, ArtifactDiff)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, Errorf(ErrNotFound, "plan %s has no stored diff (it failed before Terraform planned, or an older kl made it)", id)
		}
		return nil, fmt.Errorf("reading diff of plan %s: %w", id, err)
	}
	d, err := plandiff.Unmarshal(b)
	if err != nil {
		return nil, fmt.Errorf("reading diff of plan %s: %w", id, err)
	}
	return d, nil
}
