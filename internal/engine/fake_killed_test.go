package engine_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// killedApply is the error the Runner returns for a Terraform apply that
// did not stop within its interrupt grace and was killed (the adapter's
// CommandError with Killed set).
type killedApply struct{ cause error }

func (k killedApply) Error() string { return "terraform apply: signal: killed: " + k.cause.Error() }
func (k killedApply) Unwrap() error { return k.cause }
func (killedApply) TerraformFailure() *engine.TerraformFailure {
	return &engine.TerraformFailure{Command: "apply", Cause: "signal: killed", Killed: true}
}

// TestFakeApplyKilled: an apply whose Terraform was killed after the
// interrupt (klbot's shutdown, ADR 0043) — or by the system, without one —
// commits nothing of what it last wrote and releases nothing: it gives up
// its lease and the sweep fences its write set at once (ADR 0035), its end
// keeping the kill; Recover then commits the checkpoint and lifts the
// fence.
func TestFakeApplyKilled(t *testing.T) {
	t.Parallel()
	const base = 1
	for name, interrupted := range map[string]bool{"after the interrupt": true, "by the system": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := fakeSetup(t)
			plan := h.plan("a", "b")
			ctx, cancel := context.WithCancel(h.ctx)
			defer cancel()
			written := tfDoc(t, fakeLineage, base+1, map[string]string{"a": "a1", "b": "b0"})
			h.tf.ApplyResult, h.tf.Checkpoints = &engine.ApplyResult{State: written, Changed: 1}, [][]byte{written}
			h.tf.ApplyErr = killedApply{cause: errors.New("exit")}
			if interrupted {
				h.tf.ApplyErr = killedApply{cause: context.Canceled}
				h.tf.CancelOnApply = cancel
			}
			out, err := h.eng.Apply(ctx, engine.ApplyInput{PlanRun: plan.ID, State: testState, Actor: "alice"})
			if err == nil || runErrorID(err) == "" {
				t.Fatalf("Apply = %v, want an error naming the apply run", err)
			}
			var tf engine.TerraformFailer
			if !errors.As(err, &tf) || !tf.TerraformFailure().Killed {
				t.Errorf("Apply error %v does not keep Terraform's kill", err)
			}
			run := h.run(runErrorID(err))
			if out == nil || out.Version != nil || out.Run.ID != run.ID {
				t.Errorf("outcome %+v: want the run, no version", out)
			}
			if run.Status != engine.StatusLeaseExpired || run.End == nil || !run.End.Recoverable || !sameSet(run.End.Fenced, addrs("a", "b")) ||
				run.End.Then == nil || run.End.Then.Terraform == nil || !run.End.Then.Terraform.Killed || run.CommittedSerial != 0 {
				t.Fatalf("apply run: %s, end %+v; want lease-expired, recoverable, a and b fenced, the kill kept as Then, nothing committed", run.Status, run.End)
			}
			if got, want := run.End.Then.Cause == engine.CauseInterrupted, interrupted; got != want {
				t.Errorf("Then %+v: interrupted %v, want %v", run.End.Then, got, want)
			}
			want := []engine.MarkerKind{engine.MarkerReserved, engine.MarkerPreflight, engine.MarkerStalenessPassed,
				engine.MarkerApplyStarted, engine.MarkerFailed, engine.MarkerLeaseExpired}
			if got := kinds(h.markers(run.ID)); !slices.Equal(got, want) {
				t.Errorf("markers\n got %v\nwant %v", got, want)
			}
			var fenced []string
			for _, r := range h.reservations() {
				if r.Run == run.ID && r.Fenced() {
					fenced = append(fenced, string(r.Address))
				}
			}
			if slices.Sort(fenced); !slices.Equal(fenced, []string{"terraform_data.a", "terraform_data.b"}) {
				t.Errorf("fenced %v, want terraform_data.a and .b", fenced)
			}
			if p := h.run(plan.ID); p.Status != engine.StatusFailed || p.End == nil || !p.End.Recoverable {
				t.Errorf("plan: %s, end %+v; want failed, recoverable", p.Status, p.End)
			}
			if s := h.headSerial(); s != base {
				t.Errorf("head serial %d, want %d: a killed apply commits nothing", s, base)
			}
			// Another apply of a or b is refused at once, naming the fence.
			other := h.plan("b")
			var fe *engine.FencedError
			if _, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: other.ID, State: testState, Actor: "bob"}); !errors.As(err, &fe) {
				t.Errorf("apply over the fence = %v, want a *FencedError", err)
			}
			rec, err := h.eng.Recover(h.ctx, run.ID)
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			if rec.Version == nil || rec.Version.Serial != base+1 || !rec.Version.Provenance.Partial {
				t.Errorf("recovered version %+v, want %d, partial", rec.Version, base+1)
			}
			if got := h.head(); !maps.Equal(got, map[string]string{"a": "a1", "b": "b0"}) {
				t.Errorf("head after Recover = %v, want what Terraform last wrote", got)
			}
			if rs := h.reservations(); len(rs) != 0 {
				t.Errorf("reservations after Recover: %v, want the fence lifted", rs)
			}
		})
	}
}
