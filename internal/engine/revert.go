package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/kilolock/kilolock/internal/plandiff"
)

// What a plan would undo (issue 12 §5, ADR 0046): a branch made before
// another pull request's apply plans that apply's change back, and
// Terraform says only "~ update in-place". The plan's planned values are
// compared with the stored snapshots of the versions before its source
// serial; no git is needed.

// RevertKind says which change of a version a plan would undo
// (plandiff.UndoKind).
type RevertKind string

// Revert kinds.
const (
	RevertChange   RevertKind = "change"   // attributes set back to their value before the version
	RevertCreation RevertKind = "creation" // the version created the instance; the plan destroys it
	RevertRemoval  RevertKind = "removal"  // the version removed the instance; the plan creates it again
)

// Revert is one instance a plan writes whose planned value would undo what
// an earlier version — at or before the plan's source serial, committed by
// another pull request or actor — changed there (ADR 0046). Only attribute
// names are kept, never values.
type Revert struct {
	// Address is the instance address ("terraform_data.a", `x.y["k"]`).
	Address string     `json:"address"`
	Serial  int64      `json:"serial"` // the version whose change the plan undoes
	Kind    RevertKind `json:"kind"`
	// Attributes are the top-level attributes the plan sets back to
	// their value before the version, sorted (none for a creation).
	Attributes []string `json:"attributes,omitempty"`
	// Paths are what of them it sets back (plandiff.UndonePath): `input`
	// when all the version changed in input, `input.a` when only that, or
	// part of a sensitive value. Empty in envelopes stored before they
	// were kept (then Attributes alone are known).
	Paths []plandiff.UndonePath `json:"paths,omitempty"`
	// The version's provenance: its run, plan, actor, pull request.
	Run         string       `json:"run,omitempty"`
	PlanRun     string       `json:"plan_run,omitempty"`
	Actor       string       `json:"actor,omitempty"`
	PR          *PullRequest `json:"pr,omitempty"`
	Mode        CommitMode   `json:"commit_mode,omitempty"`
	CommittedAt time.Time    `json:"committed_at"`
}

// RevertLookback is how many versions before (and at) a plan's source
// serial the revert check reads, newest first; RevertSnapshots bounds the
// snapshots it reads for them. Past either it stops and finds no more
// (ADR 0046): it never says a plan undoes nothing.
const (
	RevertLookback  = 100
	RevertSnapshots = 24
)

// reverts finds what planned would undo (ADR 0046): for each instance it
// writes, the versions at or before source that changed its resource are
// taken newest first — skipping the init version and an adoption
// through the backend (Provenance.Adopted: like `kl state init --from`,
// the state as it was before Kilolock held it, no one's change; the
// serials it skipped were never versions), those of the plan's
// own pull request (its own applied change is no one else's) and those a
// -refresh-only apply committed (they record changes made outside
// Terraform, no one's change: recordsDrift) — and the first whose change
// the planned value undoes (plandiff.Planned.Undo) is reported. A
// -destroy plan (opts.Destroy) destroys everything on purpose and undoes
// nothing: none. Sorted by address. A store error is returned as it is.
func (e *Engine) reverts(ctx context.Context, state string, source int64, pr *PullRequest, opts PlanOptions, planned *plandiff.Planned) ([]Revert, error) {
	if len(planned.Instances()) == 0 || opts.Destroy {
		return nil, nil
	}
	vs, err := e.Store.History(ctx, state, HistoryQuery{Before: source + 1, Limit: RevertLookback})
	if err != nil {
		return nil, fmt.Errorf("reading history of state %s for the revert check: %w", state, err)
	}
	snaps := &snapshotCache{e: e, state: state, resources: planned.Resources(), left: RevertSnapshots}
	head, err := snaps.get(ctx, source)
	if err != nil || head == nil {
		return nil, err
	}
	done := map[string]bool{}
	var out []Revert
	for i, v := range vs {
		if v.Provenance.Mode == CommitInit || v.Provenance.Adopted || samePR(v.Provenance.PR, pr) {
			continue
		}
		// The version before v is the next older one listed: serials
		// need not be consecutive (an adoption skips those below its own).
		prev := v.Serial - 1
		if i+1 < len(vs) {
			prev = vs[i+1].Serial
		}
		found, err := e.revertsOf(ctx, v, prev, planned, snaps, head, done)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
		if snaps.spent {
			break
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out, nil
}

// revertsOf checks version v, whose predecessor is version prev, against
// the planned instances not yet decided whose resource v changed.
func (e *Engine) revertsOf(ctx context.Context, v Version, prev int64, planned *plandiff.Planned, snaps *snapshotCache, head *plandiff.Snapshot, done map[string]bool) ([]Revert, error) {
	var insts []string
	for _, a := range planned.Instances() {
		if !done[a] && touches(v.Changed, a, planned.Resource(a)) {
			insts = append(insts, a)
		}
	}
	if len(insts) == 0 {
		return nil, nil
	}
	if drift, err := e.recordsDrift(ctx, v); err != nil || drift {
		return nil, err
	}
	before, err := snaps.get(ctx, prev)
	if err != nil || before == nil {
		return nil, err
	}
	after, err := snaps.get(ctx, v.Serial)
	if err != nil || after == nil {
		return nil, err
	}
	var out []Revert
	for _, a := range insts {
		u, ok := planned.Undo(a, before, after, head)
		if !ok {
			continue
		}
		done[a] = true
		p := v.Provenance
		out = append(out, Revert{Address: a, Serial: v.Serial, Kind: RevertKind(u.Kind), Attributes: u.Attributes, Paths: u.Paths,
			Run: p.Run, PlanRun: p.PlanRun, Actor: p.Actor, PR: p.PR, Mode: p.Mode, CommittedAt: v.CreatedAt})
	}
	return out, nil
}

// recordsDrift reports whether version v was committed by the apply of a
// -refresh-only plan (PlanOptions.RefreshOnly of the plan Terraform
// applied: the re-plan when there was one, Provenance.AppliedPlanRun,
// else the reviewed plan): such a version records what changed outside
// Terraform, and a plan that sets it back to the configuration undoes no
// one's change (ADR 0046 decision 3). A version without a plan, or whose
// plan run is gone, is not. Other store errors are returned.
func (e *Engine) recordsDrift(ctx context.Context, v Version) (bool, error) {
	id := v.Provenance.AppliedPlanRun
	if id == "" {
		id = v.Provenance.PlanRun
	}
	if id == "" {
		return false, nil
	}
	r, err := e.Store.GetRun(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading plan %s of version %d for the revert check: %w", id, v.Serial, err)
	}
	return r.Envelope != nil && r.Envelope.Scope.Options.RefreshOnly, nil
}

func samePR(a, b *PullRequest) bool {
	return a != nil && b != nil && a.Repo == b.Repo && a.Number == b.Number
}

// snapshotCache reads the snapshots of one state's versions once each,
// with the resources asked for (plandiff.ReadSnapshot), at most left of
// them: past that get returns nil and sets spent.
type snapshotCache struct {
	e         *Engine
	state     string
	resources []string
	left      int
	spent     bool
	read      map[int64]*plandiff.Snapshot
}

func (c *snapshotCache) get(ctx context.Context, serial int64) (*plandiff.Snapshot, error) {
	if s, ok := c.read[serial]; ok {
		return s, nil
	}
	if c.left <= 0 {
		c.spent = true
		return nil, nil
	}
	c.left--
	raw, err := c.e.Store.Snapshot(ctx, c.state, serial)
	if err != nil {
		return nil, fmt.Errorf("reading version %d of state %s: %w", serial, c.state, err)
	}
	s, err := plandiff.ReadSnapshot(raw, c.resources)
	if err != nil {
		return nil, fmt.Errorf("reading version %d of state %s: %w", serial, c.state, err)
	}
	if c.read == nil {
		c.read = map[int64]*plandiff.Snapshot{}
	}
	c.read[serial] = s
	return s, nil
}

// SincePlanReadDetails bounds how many read-changed versions of one
// since-plan get their read attributes compared (ReadChanges), oldest
// first: each costs one snapshot read.
const SincePlanReadDetails = 10

// readChanges fills the ReadChanges of sp's read-changed entries (at most
// SincePlanReadDetails, oldest first): the read resources a version
// changed, compared between the version before it and that version —
// each version's own change, so it is credited to that version's run and
// pull request alone (ADR 0046 decision 2; plandiff.Compare, masked).
// Store errors are returned.
func (e *Engine) readChanges(ctx context.Context, state string, sp *SincePlan) error {
	var idx []int
	var resources []string
	seen := map[Address]bool{}
	for i, en := range sp.Entries {
		if en.Class != ClassReadChanged || en.OwnApply || len(idx) == SincePlanReadDetails {
			continue
		}
		idx = append(idx, i)
		for _, a := range en.Addresses {
			if !seen[a] {
				seen[a] = true
				resources = append(resources, string(a))
			}
		}
	}
	if len(idx) == 0 {
		return nil
	}
	snaps := &snapshotCache{e: e, state: state, resources: resources, left: 2 * len(idx)}
	for _, i := range idx {
		en := &sp.Entries[i]
		before, err := snaps.get(ctx, en.Serial-1)
		if err != nil {
			return err
		}
		v, err := snaps.get(ctx, en.Serial)
		if err != nil {
			return err
		}
		en.ReadChanges, _ = plandiff.Compare(before, v, en.Addresses.Strings())
		if en.ReadChanges == nil {
			en.ReadChanges = []plandiff.Resource{}
		}
	}
	return nil
}

// readChangesOrLog is readChanges for the apply's preflight: what changed
// in what the plan reads explains a re-plan, and does not decide it, so a
// store error is logged, not returned.
func (e *Engine) readChangesOrLog(ctx context.Context, state string, sp *SincePlan) {
	if err := e.readChanges(ctx, state, sp); err != nil {
		e.log().Warn("reading what changed in what the plan reads", "plan", sp.PlanRun, "err", err)
	}
}

// touches reports whether a version's changed set overlaps the planned
// instance inst (of resource res): its resource, for a version recorded at
// resource level, or the instance itself (ADR 0065).
func touches(changed AddressSet, inst, res string) bool {
	a, err := ParseInstanceAddress(inst)
	if err != nil {
		a = Address(res)
	}
	return len(changed.Overlapping(AddressSet{a})) > 0
}
