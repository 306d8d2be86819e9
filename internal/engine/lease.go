package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// keepAlive is the holder's promise to be alive (docs/design.md "holder":
// renewed by lease) for one run, in ONE goroutine: every Lease/3 it renews
// the run's own lease (Run.LeaseUntil, Store.RenewRun) — and that of a
// re-plan the run makes — and, once the run holds reservations, their lease
// too (Store.Renew). A holder killed with kill -9 stops renewing; the lease
// sweep then ends its runs lease-expired and hands its plan back
// (Store.ExpireLeases), so nothing stays open forever.
//
// A lease that is lost (ErrLeaseLost: the run finished, or the sweep ended
// it because this process stalled past its lease) is no longer renewed; the
// run's own later updates then fail on their status preconditions, and the
// commit on its reservation check (commit.go's lease-lost fallback).
type keepAlive struct {
	e *Engine

	mu       sync.Mutex
	runs     []string // runs whose own lease it renews
	reserved string   // run whose reservations it renews; "" until reserved
	all      []string // every run added: live in this process until Stop (Engine.live)

	stop context.CancelFunc
	done chan struct{}
}

// keepAlive renews run's own lease once now — by the store's clock, which
// the sweep compares it with (the engine stamped LeaseUntil at creation with
// its own) — and then every Lease/3 until Stop. It outlives ctx's
// cancellation: an interrupted run still has its end to record.
func (e *Engine) keepAlive(ctx context.Context, run string) *keepAlive {
	k := &keepAlive{e: e, done: make(chan struct{})}
	k.add(ctx, run)
	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	k.stop = stop
	go k.loop(lctx)
	return k
}

// Stop ends the renewals and waits for the goroutine. The leases then run
// out on their own unless the run ended first.
func (k *keepAlive) Stop() {
	k.stop()
	<-k.done
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, id := range k.all {
		k.e.live.done(id)
	}
	k.all = nil
}

// add renews run's own lease now and with the others from then on.
func (k *keepAlive) add(ctx context.Context, run string) {
	k.e.live.add(run)
	k.mu.Lock()
	k.runs = append(k.runs, run)
	k.all = append(k.all, run)
	k.mu.Unlock()
	k.renewRun(ctx, run)
}

// remove stops renewing run's own lease (it is no longer in progress).
func (k *keepAlive) remove(run string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.runs = slices.DeleteFunc(k.runs, func(r string) bool { return r == run })
}

// reservations starts renewing run's reservations (it holds them now).
func (k *keepAlive) reservations(run string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reserved = run
}

func (k *keepAlive) loop(ctx context.Context) {
	defer close(k.done)
	t := time.NewTicker(k.e.lease() / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			k.renew(ctx)
		}
	}
}

// renew is one round: the reservations, then each run's own lease.
func (k *keepAlive) renew(ctx context.Context) {
	k.mu.Lock()
	runs := slices.Clone(k.runs)
	reserved := k.reserved
	k.mu.Unlock()
	if reserved != "" {
		err := k.e.Store.Renew(ctx, reserved, k.e.lease())
		switch {
		case err == nil || ctx.Err() != nil:
		case errors.Is(err, ErrLeaseLost):
			// Released by the commit, or expired: the commit's own
			// reservation check decides what that means.
			k.e.log().Debug("reservations no longer held", "run", reserved)
			k.mu.Lock()
			if k.reserved == reserved {
				k.reserved = ""
			}
			k.mu.Unlock()
		default:
			k.e.log().Warn("renewing reservations", "run", reserved, "err", err)
		}
	}
	for _, id := range runs {
		k.renewRun(ctx, id)
	}
}

func (k *keepAlive) renewRun(ctx context.Context, run string) {
	err := k.e.Store.RenewRun(ctx, run, k.e.lease())
	switch {
	case err == nil || ctx.Err() != nil:
	case errors.Is(err, ErrLeaseLost):
		// It finished (the renewal raced its end), or the lease sweep ended
		// it: either way there is nothing left to renew.
		k.e.log().Debug("run no longer in progress: its lease is not renewed", "run", run, "err", err)
		k.remove(run)
	default:
		k.e.log().Warn("renewing the lease of run", "run", run, "err", err)
	}
}

// expireLeases runs the lease sweep (Store.ExpireLeases) before a view or a
// decision reads run statuses, so that a run whose holder died reads as
// lease-expired, not as in progress — and settles the re-plans such a run
// had claimed (settleReplans). A failure is logged: the caller goes on
// with what is stored.
func (e *Engine) expireLeases(ctx context.Context) {
	if _, err := e.Store.ExpireLeases(ctx); err != nil && ctx.Err() == nil {
		e.log().Warn("expiring leases", "err", err)
	}
	e.settleReplans(ctx)
}

// inProgress are the statuses of a run in progress (Run.InProgress): the
// "from" of the engine's own updates of a run it is working on, so that an
// update made after the lease sweep ended the run fails instead of
// overwriting lease-expired.
var inProgress = []RunStatus{StatusPlanning, StatusWaiting, StatusApplying}

// leaseLost turns the *StatusError of an update of run id into
// ErrLeaseLost when the lease sweep had ended the run: this process stalled
// past its lease (or was presumed dead), and what the run was doing is
// void.
func leaseLost(id string, err error) error {
	var se *StatusError
	if errors.As(err, &se) && se.Run == id && se.Status == StatusLeaseExpired {
		return Errorf(ErrLeaseLost, "the lease sweep ended run %s (this process did not renew its lease in time): %w", id, err)
	}
	return err
}
