package engine

import (
	"context"
	"fmt"
)

// Whether a plan's undo of an earlier version's change is deliberate
// (ADR 0046 decision 7): klbot asks GitHub how the plan's branch stands
// against its base branch, and whether that base holds each change the
// plan would undo, and records the answers with the plan. The engine only
// stores them and says what they prove; it asks no one.

// BranchStatus is how a plan's branch stood against its base branch
// when the plan was made, as GitHub's compare API answered it (GET
// /repos/{o}/{r}/compare/{base}...{head}), and, for each version the plan
// would undo (Envelope.Reverts), whether that base held the version's
// change. klbot records it (Engine.RecordBranch); kl, which asks no one,
// records none: the views then ask "Is the branch behind the base?".
type BranchStatus struct {
	// Base is the pull request's base branch ("main"), BaseSHA the
	// commit of it GitHub compared with (the compare's base_commit).
	Base    string `json:"base"`
	BaseSHA string `json:"base_sha,omitempty"`
	// HeadSHA is the commit planned.
	HeadSHA string `json:"head_sha"`
	// AheadBy counts the head's commits the base lacks, BehindBy the
	// base's commits the head lacks: 0 means the branch holds everything
	// its base has.
	AheadBy  int `json:"ahead_by"`
	BehindBy int `json:"behind_by"`
	// Versions says, for versions the plan would undo, whether Base holds
	// the version's change; a version not listed is not known (GitHub
	// could not tell, or nothing ties the version to a commit).
	Versions []VersionInBase `json:"versions,omitempty"`
}

// VersionInBase is whether a plan's base branch holds what a version
// changed: for a version of a pull request of the same repository, whether
// that pull request is merged into the base; for another version, whether
// its plan's commit (Envelope.CommitSHA) is on the base.
type VersionInBase struct {
	Serial int64 `json:"serial"`
	Holds  bool  `json:"holds"`
	// Commit is the version's plan's commit when it was asked about
	// (a version made outside a pull request); "" when the version's
	// pull request was.
	Commit string `json:"commit,omitempty"`
}

// InBase says whether b records that its base holds version serial's
// change (holds) and whether it knows at all (known).
func (b *BranchStatus) InBase(serial int64) (v VersionInBase, known bool) {
	if b == nil {
		return VersionInBase{}, false
	}
	for _, x := range b.Versions {
		if x.Serial == serial {
			return x, true
		}
	}
	return VersionInBase{}, false
}

// Deliberate says whether revert rv of plan envelope e is shown to be
// deliberate (ADR 0046 decision 7): the branch was up to date with its
// base when the plan was made, and the base held the change rv undoes —
// so the branch had that change and its configuration sets it back. Not
// known (no BranchStatus, or the version not asked about) is not
// deliberate.
func (e *Envelope) Deliberate(rv Revert) bool {
	if e == nil || e.Branch == nil || e.Branch.BehindBy != 0 {
		return false
	}
	v, ok := e.Branch.InBase(rv.Serial)
	return ok && v.Holds
}

// RevertsInDoubt are the reverts of e not shown to be Deliberate: the ones
// the views warn about and on_revert: fail refuses (ADR 0046 decision 5).
func (e *Envelope) RevertsInDoubt() []Revert {
	if e == nil {
		return nil
	}
	var out []Revert
	for _, rv := range e.Reverts {
		if !e.Deliberate(rv) {
			out = append(out, rv)
		}
	}
	return out
}

// RecordBranch stores b as plan run plan's Envelope.Branch (klbot, at plan
// time: ADR 0046 decision 7) and returns the run. The plan must be open
// (planned; else a *StatusError). ErrInvalid for an empty Base or HeadSHA,
// a negative count, or a version that is not one the plan would undo.
func (e *Engine) RecordBranch(ctx context.Context, plan string, b BranchStatus) (Run, error) {
	switch {
	case b.Base == "":
		return Run{}, Errorf(ErrInvalid, "recording the branch of plan %s: the base branch is required", plan)
	case b.HeadSHA == "":
		return Run{}, Errorf(ErrInvalid, "recording the branch of plan %s: the head commit is required", plan)
	case b.AheadBy < 0 || b.BehindBy < 0:
		return Run{}, Errorf(ErrInvalid, "recording the branch of plan %s: ahead by %d, behind by %d: counts cannot be negative", plan, b.AheadBy, b.BehindBy)
	}
	r, err := e.Store.UpdateRun(ctx, plan, []RunStatus{StatusPlanned}, func(r *Run) error {
		if r.Kind != KindPlan || r.Envelope == nil {
			return Errorf(ErrInvalid, "run %s is not a plan with an envelope", plan)
		}
		undone := map[int64]bool{}
		for _, rv := range r.Envelope.Reverts {
			undone[rv.Serial] = true
		}
		for _, v := range b.Versions {
			if !undone[v.Serial] {
				return Errorf(ErrInvalid, "version %d is not one the plan would undo", v.Serial)
			}
		}
		r.Envelope.Branch = &b
		return nil
	})
	if err != nil {
		return Run{}, fmt.Errorf("recording the branch of plan %s: %w", plan, err)
	}
	return r, nil
}
