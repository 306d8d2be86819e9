package terraform

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/plandiff"
)

// What Terraform said it did in an apply (engine.ApplyLog, ADR 0047), from
// its -json UI stream, measured with Terraform 1.11.4:
//
//   - planned_change lists every instance the apply will change before it
//     starts (action create, update, delete, replace, read; also remove —
//     a removed block that forgets — which no hook follows, and no message
//     at all for a pure move);
//   - apply_start, apply_progress (every 10 s), apply_complete and
//     apply_errored follow per operation, a replacement being two (delete
//     and create, in either order); apply_complete carries id_key/id_value
//     and elapsed_seconds in whole seconds, so Elapsed comes from the
//     @timestamp of each message (microseconds);
//   - a data source read that fails ends with an error diagnostic naming
//     its address and no apply_errored;
//   - change_summary ("Apply complete! Resources: 1 added, 0 changed, 0
//     destroyed.") is written only when the apply succeeds;
//   - diagnostics quote values in clear: a failed local-exec provisioner's
//     detail holds its command and output with the sensitive values they
//     interpolate, even where Terraform suppressed the output it streamed
//     ("output suppressed due to sensitive value in config"). So the
//     diagnostics are masked (maskApply) before anything keeps them.

// hookedActions are the planned_change actions Terraform applies with
// hooks (apply_start …): an instance planned with one of them and never
// started was not started. Others (remove, import, a newer one) are
// listed only when a hook names them.
var hookedActions = map[string]bool{"create": true, "update": true, "delete": true, "replace": true, "read": true}

// applyRecord collects, from an apply's UI stream, what happened to each
// resource instance, and Terraform's totals line.
type applyRecord struct {
	resources map[string]*resourceRecord
	totals    *engine.ChangeTotals
}

// resourceRecord is what the stream said of one instance.
type resourceRecord struct {
	action          string // planned_change's ("" when none was seen)
	starts, ends    int    // apply_start; apply_complete and apply_errored
	errored         bool   // apply_errored
	first, last     time.Time
	lastElapsed     float64 // Terraform's elapsed_seconds of the last message with one
	idKey, idValue  string
	plannedOrHooked bool
}

func (a *applyRecord) get(addr string) *resourceRecord {
	r := a.resources[addr]
	if r == nil {
		r = &resourceRecord{}
		a.resources[addr] = r
	}
	return r
}

// planned records a planned_change.
func (a *applyRecord) planned(addr, action string) {
	r := a.get(addr)
	r.action = action
	r.plannedOrHooked = r.plannedOrHooked || hookedActions[action]
}

// hook records an apply hook message of m's address, written at at (zero
// when Terraform gave no readable @timestamp). Refresh hooks say nothing
// of the apply.
func (a *applyRecord) hook(m *uiMessage, at time.Time) {
	switch m.Type {
	case "apply_start", "apply_progress", "apply_complete", "apply_errored":
	default:
		return
	}
	r := a.get(m.Hook.Resource.Addr)
	r.plannedOrHooked = true
	if r.first.IsZero() && !at.IsZero() && m.Type == "apply_start" {
		r.first = at
	}
	if !at.IsZero() {
		r.last = at
	}
	if m.Hook.ElapsedSeconds > 0 {
		r.lastElapsed = m.Hook.ElapsedSeconds
	}
	switch m.Type {
	case "apply_start":
		r.starts++
	case "apply_complete":
		r.ends++
		if m.Hook.IDValue != "" {
			r.idKey, r.idValue = m.Hook.IDKey, m.Hook.IDValue
		}
	case "apply_errored":
		r.ends++
		r.errored = true
	}
}

// parseUITime parses a message's @timestamp (RFC 3339 with fractional
// seconds); zero when it is missing or unreadable.
func parseUITime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// applyLog is what the stream said, as an engine.ApplyLog: the instances
// by address, every diagnostic once in Terraform's order, the totals. An
// instance an error diagnostic names has errored (a failed data source
// read has no apply_errored).
func (s *uiStream) applyLog() *engine.ApplyLog {
	l := &engine.ApplyLog{Resources: []engine.ResourceApply{}, Totals: s.record.totals}
	named := map[string]bool{}
	seen := map[Diagnostic]bool{}
	for _, d := range s.diags {
		if seen[d] {
			continue
		}
		seen[d] = true
		l.Diagnostics = append(l.Diagnostics, engine.Diagnostic(d))
		if d.Severity == "error" && d.Address != "" {
			named[d.Address] = true
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(s.record.resources)) {
		r := s.record.resources[addr]
		if !r.plannedOrHooked {
			continue
		}
		l.Resources = append(l.Resources, r.result(addr, s.planned[addr], named[addr]))
	}
	return l
}

// result is the instance's engine.ResourceApply; steps is how many
// operations its planned change takes (two for a replacement; 0 unknown).
func (r *resourceRecord) result(addr string, steps int, named bool) engine.ResourceApply {
	out := engine.ResourceApply{Address: addr, Action: r.action, IDKey: r.idKey, IDValue: r.idValue}
	switch {
	case r.errored || named:
		out.Outcome = engine.ResourceErrored
		out.IDKey, out.IDValue = "", ""
	case r.starts == 0:
		out.Outcome = engine.ResourceNotStarted
	case r.ends >= r.starts && r.ends >= max(steps, 1):
		out.Outcome = engine.ResourceApplied
	default:
		out.Outcome = engine.ResourceStarted
	}
	switch {
	case !r.first.IsZero() && r.last.After(r.first):
		out.Elapsed = engine.Duration(r.last.Sub(r.first))
	case r.first.IsZero() && r.lastElapsed > 0:
		out.Elapsed = engine.Duration(time.Duration(r.lastElapsed * float64(time.Second)))
	}
	return out
}

// maskTimeout bounds the `terraform show -json` that reads which values
// to mask (0.1–2 s measured, 1 to 2,000 resources: docs/terraform.md), which
// runs also after an interrupt.
const maskTimeout = 30 * time.Second

// maskApply masks, in what an apply's stream and error hold, the values the
// plan and the states mark sensitive (sensitiveMasker), then the TF_VAR_*
// and -var values (base: the apply's masker): in the stream's diagnostics — what the
// apply log keeps and the warnings logged — and in the *CommandError in
// err (its diagnostics and stderr: what the run's end keeps). Terraform
// quotes such values in clear (a failed local-exec provisioner's command
// and output: see the top of this file). It runs a Terraform process
// only when there is something to mask. When the values cannot be read,
// every diagnostic's detail is dropped (Withheld) and the stderr too:
// nothing is kept that may hold one.
func (r *Runner) maskApply(ctx context.Context, tf *tfexec.Terraform, w workDir, snapshot []byte, stream *uiStream, err error, base masker, log *slog.Logger) {
	var ce *CommandError
	errors.As(err, &ce)
	if len(stream.diags) == 0 && (ce == nil || ce.Stderr == "") {
		return
	}
	sens, merr := r.sensitiveMasker(ctx, tf, w, snapshot, log)
	if merr != nil {
		log.Warn("reading which values are sensitive failed: the details of Terraform's diagnostics are withheld", "error", merr)
	}
	maskDiagnostics(stream, ce, func(s string) string { return sens.string(base.string(s)) }, merr != nil)
}

// sensitiveMasker is the masker of the values this apply's plan and its
// states mark sensitive (plandiff.Secrets): those of the saved plan in w
// (`terraform show -json`, with the snapshot it was made against as the
// prior state, and the TF_VAR_* values), and those the state Terraform
// wrote marks (objects the apply created carry marks the plan did not
// know). The show runs with a context of its own (maskTimeout): an
// interrupted apply is masked too.
func (r *Runner) sensitiveMasker(ctx context.Context, tf *tfexec.Terraform, w workDir, snapshot []byte, log *slog.Logger) (masker, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), maskTimeout)
	defer cancel()
	raw, decoded, err := showPlan(sctx, tf, w, nil, log)
	if err != nil {
		return masker{}, err
	}
	plan, err := parsePlanJSON(raw, decoded)
	if err != nil {
		return masker{}, err
	}
	values, err := plandiff.Secrets(plan, plandiff.Options{PriorState: snapshot, Secrets: slices.Collect(maps.Values(r.vars))})
	if err != nil {
		return masker{}, err
	}
	st, err := w.readState(slog.New(slog.DiscardHandler)) // Apply reads it again, and says so
	if err != nil {
		return masker{}, err
	}
	if st != nil {
		more, err := plandiff.Secrets(nil, plandiff.Options{PriorState: st})
		if err != nil {
			return masker{}, err
		}
		values = append(values, more...)
	}
	sort.Strings(values) // newSensitiveMasker orders by length
	return newSensitiveMasker(slices.Compact(values)), nil
}
