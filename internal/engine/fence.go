package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Fences (ADR 0035). When the lease of an apply runs out after its
// Terraform started and before it committed, the lease sweep keeps its
// write reservations as fences (Reservation.FencedAt): the real objects may
// have changed in ways no version records, so no other apply may write
// them, or read them to decide a write, until someone acts. Three things
// lift a fence: `kl run recover` (Recover: commits what Terraform last
// wrote), the run's own holder committing after all (it lived, paused past
// its lease), and `kl run unfence` (Unfence: an operator who has checked
// the real objects, with a reason). Plans and views are not blocked: a plan
// made over a fence says so (PlanOutcome.Fences).

// UnfenceInput is one `kl run unfence RUN --reason TEXT`.
type UnfenceInput struct {
	Run string
	// By is who lifts the fence (the actor); Why is their reason, stored
	// and shown in the run's story. Both required.
	By, Why string
}

// UnfenceOutcome is what Unfence lifted.
type UnfenceOutcome struct {
	Run    Run        `json:"run"`
	Lifted AddressSet `json:"lifted"`
}

// Unfence lifts the fences of apply run in.Run without committing
// anything: the operator has checked the real objects (ADR 0035). The run
// keeps its status and end (still recoverable, if it was: what its
// Terraform wrote can still be committed, by the lease-lost rule, as no
// fence keeps others off it now); its story gains a "fence-lifted" marker
// naming who and why. Errors: ErrInvalid for an empty By or Why, or a plan
// run; ErrNotFound for an unknown run or one that holds no fence (with
// what it is instead).
func (e *Engine) Unfence(ctx context.Context, in UnfenceInput) (*UnfenceOutcome, error) {
	if strings.TrimSpace(in.Why) == "" {
		return nil, Errorf(ErrInvalid, "unfencing run %s: --reason is required: say what you checked on the real objects", in.Run)
	}
	if strings.TrimSpace(in.By) == "" {
		return nil, Errorf(ErrInvalid, "unfencing run %s: no actor (set KL_ACTOR)", in.Run)
	}
	e.expireLeases(ctx) // a holder that died just now is fenced by now
	run, err := e.getRun(ctx, in.Run)
	if err != nil {
		return nil, err
	}
	if run.Kind != KindApply {
		return nil, Errorf(ErrInvalid, "run %s is a plan run: only an apply run can hold a fence", in.Run)
	}
	lifted, err := e.Store.LiftFence(ctx, in.Run, in.By, in.Why)
	if errors.Is(err, ErrNotFound) {
		what := fmt.Sprintf("it is %s", run.Status)
		if run.InProgress() {
			what += fmt.Sprintf(" and its holder %s renews its lease: nothing is fenced while it lives", run.Holder)
		}
		return nil, Errorf(ErrNotFound, "run %s holds no fence (%s): nothing to lift", in.Run, what)
	}
	if err != nil {
		return nil, err
	}
	out := &UnfenceOutcome{Lifted: lifted}
	if out.Run, err = e.getRun(ctx, in.Run); err != nil {
		return nil, err
	}
	return out, nil
}

// Fence is a fence a plan was made over (PlanOutcome.Fences): the dead
// apply run, and the fenced addresses the plan writes or reads.
type Fence struct {
	Run       string       `json:"run"`
	PR        *PullRequest `json:"pr,omitempty"`
	Addresses AddressSet   `json:"addresses"`
}

// fencesOver returns the fences on plan's state that meet its footprint:
// what it writes, or reads (a fence is a write). An apply of the plan is
// refused while they stand. A failure to read them is an error: a plan
// must not say "nothing fenced" when it could not look.
func (e *Engine) fencesOver(ctx context.Context, plan Run) ([]Fence, error) {
	if plan.Envelope == nil {
		return nil, nil
	}
	res, err := e.Store.Reservations(ctx, plan.State)
	if err != nil {
		return nil, fmt.Errorf("reading reservations of state %s: %w", plan.State, err)
	}
	var out []Fence
	idx := map[string]int{}
	for _, r := range res {
		if !r.Fenced() {
			continue
		}
		var met []Address
		for _, w := range plan.Envelope.Reservations {
			if w.ConflictsWith(r) {
				met = append(met, w.Address)
			}
		}
		if len(met) == 0 {
			continue
		}
		i, ok := idx[r.Run]
		if !ok {
			i = len(out)
			idx[r.Run] = i
			out = append(out, Fence{Run: r.Run})
			if o, err := e.Store.GetRun(ctx, r.Run); err == nil {
				out[i].PR = o.PR
			}
		}
		out[i].Addresses = out[i].Addresses.Union(NewAddressSet(met...))
	}
	return out, nil
}

// terraformKilled reports whether a Terraform apply that returned applyErr
// was killed (TerraformFailure.Killed: it did not stop within its
// interrupt grace, or the system killed it) instead of exiting by itself.
func terraformKilled(applyErr error) bool {
	var tf TerraformFailer
	return errors.As(applyErr, &tf) && tf.TerraformFailure() != nil && tf.TerraformFailure().Killed
}

// giveUpLease is how short a lease an apply whose Terraform was killed
// renews itself for before the lease sweep (fenceKilled).
const giveUpLease = time.Millisecond

// fenceKilled ends an apply whose Terraform was killed (terraformKilled)
// as a dead holder's, by the fence rule (ADR 0035, ADR 0043): killed in the
// middle of its resource operations, Terraform persisted nothing of them,
// and a provider may have finished one after — what it last wrote is not
// what the real objects are. So nothing is committed and nothing released:
// the run stops renewing its leases, gives them up (renewed for
// giveUpLease), and the lease sweep fences its write set, ends it
// lease-expired with End.Fenced and recoverable (`kl run recover` commits
// the checkpoint the Runner stored of what Terraform last wrote) and fails
// its plan. The run's end keeps why as Then (the interrupted end, with
// Terraform killed). If the store fails here, the leases still run out by
// themselves (nothing renews them) and any later sweep fences the run the
// same way. The error says what happened; out holds the run.
func (a *applier) fenceKilled(ctx context.Context, applyErr error) (*ApplyOutcome, error) {
	e := a.e
	a.ka.Stop()
	bctx, cancel := background(ctx)
	defer cancel()
	killed := terraformEnd(ctx, applyErr)
	if err := e.Store.AddMarkers(bctx, a.run.ID, Marker{Kind: MarkerFailed, End: killed}); err != nil {
		e.log().Error("recording the kill of terraform apply", "run", a.run.ID, "err", err)
	}
	for _, renew := range []func(context.Context, string, time.Duration) error{e.Store.Renew, e.Store.RenewRun} {
		if err := renew(bctx, a.run.ID, giveUpLease); err != nil && !errors.Is(err, ErrLeaseLost) {
			e.log().Error("giving up the lease of a killed apply (it lapses by itself)", "run", a.run.ID, "err", err)
		}
	}
	time.Sleep(2 * giveUpLease)
	e.expireLeases(bctx)
	run, err := e.Store.UpdateRun(bctx, a.run.ID, []RunStatus{StatusLeaseExpired}, func(r *Run) error {
		if r.End != nil && r.End.Then == nil {
			r.End.Then = killed
		}
		return nil
	})
	if err != nil {
		e.log().Error("recording why the killed apply's lease ended", "run", a.run.ID, "err", err)
		if run, err = e.Store.GetRun(bctx, a.run.ID); err != nil {
			run = a.run
		}
	}
	return &ApplyOutcome{Run: run}, fmt.Errorf("applying run %s: terraform was killed mid-apply: its write set is fenced until `kl run recover %s` or `kl run unfence %s`: %w",
		a.run.ID, a.run.ID, a.run.ID, applyErr)
}
