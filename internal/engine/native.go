package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/kilolock/kilolock/internal/closure"
	"github.com/kilolock/kilolock/internal/tfstate"
)

// LaneChoice is the lane a plan asks for (kl plan --lane, kl.yaml lane:;
// docs/adr/0069-native-lane.md): the terraform lane, the native lane, or
// auto, which takes the native lane when the closure is a small part of
// the state (AutoShare).
type LaneChoice string

// Lane choices.
const (
	LaneChoiceTerraform LaneChoice = "terraform"
	LaneChoiceNative    LaneChoice = "native"
	LaneChoiceAuto      LaneChoice = "auto"
)

// AutoShare: --lane auto takes the native lane when the closure's
// resources are at most 1/AutoShare of the head's resource entries (and
// at least one entry): the full plan then refreshes at least AutoShare
// times as much.
const AutoShare = 4

// ParseLaneChoice reads a --lane or kl.yaml lane: value; "" is the
// terraform lane. ErrInvalid names the value and the three choices.
func ParseLaneChoice(s string) (LaneChoice, error) {
	switch c := LaneChoice(s); c {
	case "":
		return LaneChoiceTerraform, nil
	case LaneChoiceTerraform, LaneChoiceNative, LaneChoiceAuto:
		return c, nil
	}
	return "", Errorf(ErrInvalid, "lane %q: want terraform, native or auto", s)
}

// lanePlan is what a plan's lane produced: Terraform's plan, the lane it
// was made in, the native lane's slice (nil in the terraform lane), and
// why that lane (Envelope.LaneReason).
type lanePlan struct {
	res   *PlanResult
	lane  Lane
	slice *Slice
	why   string
	whole []byte // the whole configuration's archive (ArtifactWholeConfig)
}

// planLane plans in.State at st's head in the lane in.Lane asks for. The
// native lane plans the slice and proves it (nativePlan); when it cannot,
// the run records a "fell-back" marker naming the check or the reason and
// plans in the terraform lane (ADR 0033 D2, D4).
func (e *Engine) planLane(ctx context.Context, run Run, st State, in PlanInput, dir string) (*lanePlan, error) {
	if in.Lane == "" || in.Lane == LaneChoiceTerraform {
		res, err := e.terraformPlan(ctx, run, st, in, dir)
		return &lanePlan{res: res, lane: LaneTerraform}, err
	}
	lp, fell, err := e.nativePlan(ctx, run, st, in, dir)
	if err != nil {
		return nil, err
	}
	if lp != nil && lp.lane == LaneNative {
		return lp, nil
	}
	why := ""
	if lp != nil {
		why = lp.why // auto chose the terraform lane
	}
	if fell != nil {
		if err := e.Store.AddMarkers(ctx, run.ID, *fell); err != nil {
			return nil, fmt.Errorf("recording the fall-back of plan %s: %w", run.ID, leaseLost(run.ID, err))
		}
		why = "fell back from the native lane: " + fell.Reason
	}
	res, err := e.terraformPlan(ctx, run, st, in, dir)
	return &lanePlan{res: res, lane: LaneTerraform, why: why}, err
}

// terraformPlan is the terraform lane's plan of dir against the head of st.
func (e *Engine) terraformPlan(ctx context.Context, run Run, st State, in PlanInput, dir string) (*PlanResult, error) {
	snapshot, err := e.Store.Snapshot(ctx, st.Name, st.HeadSerial)
	if err != nil {
		return nil, fmt.Errorf("reading head %d of state %s: %w", st.HeadSerial, st.Name, err)
	}
	return e.Terraform.Plan(ctx, PlanRequest{
		Run: run.ID, Dir: dir, Targets: in.Targets, VarFiles: in.VarFiles, Replace: in.Replace, Options: in.Options, Vars: in.Vars,
		Snapshot: snapshot, Progress: in.Progress,
	})
}

// fellBack is the "fell-back" marker of a native-lane plan that could not
// be made or proved: Extra["check"] names the closure proof check that
// failed ("" when the closure itself could not be computed), Reason says
// what was found.
func fellBack(check, reason string) *Marker {
	m := &Marker{Kind: MarkerFellBack, Reason: reason}
	if check != "" {
		m.Extra = map[string]string{"check": check}
		m.Reason = check + ": " + reason
	}
	return m
}

// nativePlan computes the closure of in's scope in dir, writes the slice
// (configuration and state), plans it and proves it. It returns the
// native lane's plan; or a fell-back marker; or, for --lane auto choosing
// the terraform lane, a lanePlan without a result that says why. err is
// bad input (ErrInvalid) or a cancelled context: the plan fails.
func (e *Engine) nativePlan(ctx context.Context, run Run, st State, in PlanInput, dir string) (*lanePlan, *Marker, error) {
	if m := optionsFallBack(in.Options); m != nil {
		return nil, m, nil
	}
	if in.ScopeIncomplete != "" && len(in.Targets) == 0 {
		return nil, fellBack("", in.ScopeIncomplete), nil
	}
	c, fell, err := closureOf(in, dir)
	if err != nil || fell != nil {
		return nil, fell, err
	}
	for _, r := range in.Replace {
		if !c.Contains(r) {
			// terraform plan -target … -replace of an address outside the
			// targets plans no replacement, and says nothing of it.
			return nil, fellBack("", fmt.Sprintf("the replacement of %s is outside the closure: the slice's plan would not replace it", r)), nil
		}
	}
	head, err := e.Store.GetVersion(ctx, st.Name, st.HeadSerial)
	if err != nil {
		return nil, nil, fmt.Errorf("reading head %d of state %s: %w", st.HeadSerial, st.Name, err)
	}
	why := "" // asked for
	if in.Lane == LaneChoiceAuto {
		var native bool
		if why, native = autoChoice(len(c.Addresses), head.Resources); !native {
			return &lanePlan{lane: LaneTerraform, why: why}, nil, nil
		}
	}
	closed, err := addressesOf(c.Addresses)
	if err != nil {
		return nil, fellBack("", err.Error()), nil
	}
	sl := &Slice{Roots: rootsOf(c.Scope.Targets), Closure: closed, Scoped: c.Scope.How,
		Outputs: c.Outputs(), Blocks: len(c.Blocks), StateResources: head.Resources}
	tmp, err := os.MkdirTemp("", "kl-slice-")
	if err != nil {
		return nil, nil, fmt.Errorf("writing the slice of plan %s: %w", run.ID, err)
	}
	defer os.RemoveAll(tmp)
	if err := c.WriteSlice(tmp); err != nil {
		return nil, fellBack("", "the sliced configuration could not be written: "+err.Error()), nil
	}
	doc, sliceState, err := e.sliceSnapshot(ctx, st.Name, st.HeadSerial, sl)
	if err != nil {
		return nil, nil, err
	}
	sl.Entries = len(sliceState.Resources)
	req := PlanRequest{Run: run.ID, Dir: tmp, Replace: in.Replace, VarFiles: absVarFiles(dir, in.VarFiles),
		Options: in.Options, Vars: in.Vars, Snapshot: doc, Progress: in.Progress}
	if c.Scope.How == "targets" {
		req.Targets = in.Targets
	}
	res, err := e.Terraform.Plan(ctx, req)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, ErrInvalid) {
			return nil, nil, err
		}
		return nil, fellBack(closure.CheckValidates, "terraform could not plan the slice: "+err.Error()), nil
	}
	checks, err := e.proveSlice(ctx, st, res.JSON, c, sliceState)
	if err != nil {
		return nil, nil, err
	}
	for _, ch := range checks {
		if !ch.Passed {
			return nil, fellBack(ch.Name, ch.Found), nil
		}
	}
	sl.Checks, sl.Proved = checks, true
	lp := &lanePlan{res: res, lane: LaneNative, slice: sl, why: why}
	if ar, ok := e.Terraform.(ConfigArchiver); ok {
		if lp.whole, err = ar.ArchiveConfig(dir, in.VarFiles); err != nil {
			return nil, nil, fmt.Errorf("archiving the whole configuration of plan %s for its validation: %w", run.ID, err)
		}
	}
	return lp, nil, nil
}

// autoChoice is --lane auto's choice for a closure of closure resources
// in a state of state resource entries: native when the closure is at most
// 1/AutoShare of the state, with the words saying why.
func autoChoice(closure, state int) (why string, native bool) {
	noun := "resources"
	if closure == 1 {
		noun = "resource"
	}
	held := fmt.Sprintf("lane auto: a closure of %d %s against the state's %d", closure, noun, state)
	if state == 0 || closure*AutoShare > state {
		return fmt.Sprintf("%s, more than 1/%d", held, AutoShare), false
	}
	return fmt.Sprintf("%s, at most 1/%d", held, AutoShare), true
}

// optionsFallBack is the fell-back marker of plan options a slice cannot
// plan, nil for none.
func optionsFallBack(o PlanOptions) *Marker {
	switch {
	case o.Destroy:
		// terraform plan -destroy -target also destroys what depends on
		// the targets; the closure holds what they depend on, not that.
		return fellBack("", "a destroy plan also destroys what depends on its targets, which the closure does not hold")
	case o.RefreshOnly:
		// A refresh-only plan records what changed outside Terraform,
		// anywhere in the state; a slice would hide the rest.
		return fellBack("", "a refresh-only plan refreshes every object of the state, not a closure")
	}
	return nil
}

// closureOf loads dir and computes the closure of in's scope: its changed
// files against in.BaseDir when it has them, else its targets. A closure
// the configuration does not allow is a fell-back marker; bad input
// (closure.ErrInvalid) is ErrInvalid.
func closureOf(in PlanInput, dir string) (*closure.Closure, *Marker, error) {
	cfg, err := closure.Load(dir)
	if err != nil {
		m, err := closureFallback("loading the configuration", err)
		return nil, m, err
	}
	var scope *closure.Scope
	if len(in.ChangedFiles) > 0 && len(in.Targets) > 0 {
		// Either scope alone is what the plan claims: targets would plan
		// none of the files' changes outside them, and say nothing.
		return nil, nil, Errorf(ErrInvalid, "a native-lane plan is scoped by its targets or by its changed files, not both")
	}
	if len(in.ChangedFiles) > 0 {
		if in.BaseDir == "" {
			return nil, nil, Errorf(ErrInvalid, "a native-lane plan scoped to changed files needs the base's root module directory to compare them with (kl plan --base-dir)")
		}
		if !in.ListedByPR {
			miss, err := closure.Unlisted(dir, in.BaseDir, in.ChangedFiles)
			if err != nil {
				m, err := closureFallback("scoping the plan", err)
				return nil, m, err
			}
			if miss != "" {
				return nil, fellBack("", miss+" differs from the base but is not among the changed files: the scope would miss its change"), nil
			}
		}
		scope, err = closure.FileScope(cfg, in.BaseDir, in.ChangedFiles)
	} else {
		scope, err = closure.TargetScope(cfg, in.Targets)
	}
	if err != nil {
		m, err := closureFallback("scoping the plan", err)
		return nil, m, err
	}
	c, err := closure.Compute(cfg, scope)
	if err != nil {
		m, err := closureFallback("computing the closure", err)
		return nil, m, err
	}
	return c, nil, nil
}

// closureFallback is a fell-back marker for a *closure.Fallback, or
// ErrInvalid for bad input; any other error (a configuration that does not
// parse) falls back too, saying so: the terraform lane's plan then gives
// Terraform's own diagnostics.
func closureFallback(step string, err error) (*Marker, error) {
	var fb *closure.Fallback
	switch {
	case errors.As(err, &fb):
		return fellBack("", fb.Reason), nil
	case errors.Is(err, closure.ErrInvalid):
		return nil, Errorf(ErrInvalid, "%s for the native lane: %v", step, err)
	}
	return fellBack("", step+" for the native lane failed: "+err.Error()), nil
}

// proveSlice runs the closure proof (ADR 0033 D2, docs/adr/0069): the
// slice validates (Terraform's plan of it validated it: a plan validates
// its configuration first), the plan stays within the slice, creates
// nothing the head holds outside it, and plans every target. An error is
// a store read that failed.
func (e *Engine) proveSlice(ctx context.Context, st State, plan *tfjson.Plan, c *closure.Closure, slice *tfstate.State) ([]SliceCheck, error) {
	if plan == nil {
		return []SliceCheck{{Name: closure.CheckWithinSlice, Found: "this Terraform implementation gives no plan JSON to prove the slice with"}}, nil
	}
	head, err := e.createdInHead(ctx, st, plan)
	if err != nil {
		return nil, err
	}
	var out []SliceCheck
	for _, ch := range []closure.Check{
		{Name: closure.CheckValidates, Passed: true},
		closure.WithinSlice(plan, c),
		closure.NoCreateOutside(plan, head, slice),
		closure.TargetsPlanned(plan, c),
	} {
		out = append(out, SliceCheck(ch))
	}
	return out, nil
}

// createdInHead reads from the head of st the entries of the resources
// plan creates (a state holding only those): what NoCreateOutside
// compares with the slice, without reading the whole head.
func (e *Engine) createdInHead(ctx context.Context, st State, plan *tfjson.Plan) (*tfstate.State, error) {
	var created []Address
	for _, rc := range plan.ResourceChanges {
		if rc.Change == nil || !rc.Change.Actions.Create() {
			continue
		}
		a, err := ParseAddress(tfstate.ResourceAddress(rc.ModuleAddress, string(rc.Mode), rc.Type, rc.Name))
		if err == nil && !slices.Contains(created, a) {
			created = append(created, a)
		}
	}
	doc, err := e.Store.Slice(ctx, st.Name, st.HeadSerial, created)
	if err != nil {
		return nil, fmt.Errorf("reading the head's entries of what the slice creates: %w", err)
	}
	s, err := tfstate.Parse(doc)
	if err != nil {
		return nil, fmt.Errorf("reading the head's entries of what the slice creates: %w", err)
	}
	return s, nil
}

// sliceSnapshot reads the native lane's state of version serial of state:
// the entries of sl.Closure (Store.Slice) and only the root outputs
// sl.Outputs — Terraform plans the removal of a root output the
// configuration lacks, so the slice's state must not hold the others. The
// plan, its re-plan, its apply, the commit and a recovery read the same
// slice of the same version.
func (e *Engine) sliceSnapshot(ctx context.Context, state string, serial int64, sl *Slice) ([]byte, *tfstate.State, error) {
	doc, err := e.Store.Slice(ctx, state, serial, sl.Closure)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the slice of version %d of state %s: %w", serial, state, err)
	}
	s, err := tfstate.Parse(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the slice of version %d of state %s: %w", serial, state, err)
	}
	for name := range s.Outputs {
		if !slices.Contains(sl.Outputs, name) {
			delete(s.Outputs, name)
		}
	}
	if doc, err = s.Marshal(); err != nil {
		return nil, nil, fmt.Errorf("writing the slice of version %d of state %s: %w", serial, state, err)
	}
	return doc, s, nil
}

// planBase is the snapshot of version serial a run of env plans or
// applies against: the slice for a native-lane plan, the whole version
// otherwise.
func (e *Engine) planBase(ctx context.Context, state string, serial int64, env *Envelope) ([]byte, error) {
	if env != nil && env.Lane == LaneNative && env.Slice != nil {
		doc, _, err := e.sliceSnapshot(ctx, state, serial, env.Slice)
		return doc, err
	}
	return e.Store.Snapshot(ctx, state, serial)
}

// rootsOf is the scope's targets as addresses; a module target
// ("module.app") is its tree ("module.app.*").
func rootsOf(targets []string) AddressSet {
	var out []Address
	for _, t := range targets {
		if a, err := ParseAddress(t); err == nil {
			out = append(out, a)
		} else if a, err := ParseAddress(t + ".*"); err == nil {
			out = append(out, a)
		}
	}
	return NewAddressSet(out...)
}

// addressesOf parses the closure's resource-level addresses; one that
// does not parse is an error naming it (the slice would miss its entry).
func addressesOf(addrs []string) (AddressSet, error) {
	var out []Address
	for _, s := range addrs {
		a, err := ParseAddress(s)
		if err != nil {
			return nil, fmt.Errorf("the closure's address %q is not one the state engine reads: %v", s, err)
		}
		out = append(out, a)
	}
	return NewAddressSet(out...), nil
}

// absVarFiles resolves relative var files against the root module dir, as
// Terraform run in dir would: the slice is planned from another directory.
func absVarFiles(dir string, files []string) []string {
	var out []string
	for _, f := range files {
		if !filepath.IsAbs(f) {
			f = filepath.Join(dir, f)
		}
		out = append(out, f)
	}
	return out
}
