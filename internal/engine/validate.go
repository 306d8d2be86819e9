package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ArtifactWholeConfig is the archive of a native-lane plan's whole
// configuration (its ArtifactConfig is the slice's): what its validation
// re-plan plans (ADR 0069 §9). Deleted with the plan's other artifacts
// by retention (GCPlanArtifacts).
const ArtifactWholeConfig = "config-whole.tar.gz"

// ConfigArchiver is implemented by a Terraform that can archive a
// configuration without planning it, as its Plan archives PlanRequest.Dir
// (internal/terraform's Runner): a native-lane plan keeps its whole
// configuration beside the slice for a validation re-plan. Errors are the
// archive's (ErrInvalid for a tree it refuses).
type ConfigArchiver interface {
	ArchiveConfig(dir string, varFiles []string) ([]byte, error)
}

// ErrValidationChanged: a native-lane plan's validation re-plan — the
// terraform lane's plan of the whole configuration — plans something else
// on its write set than the native plan (ADR 0033 D4, ADR 0069 §9). An
// ErrIntentChanged too: the validation plan is left open for review.
var ErrValidationChanged error = replanStopError("validation changed the trusted native intent")

// CauseValidationChanged: validation re-plan Run against head Serial plans
// something else than native-lane plan Plan for Replan.Addresses; the
// apply was refused before Terraform ran and Run is left open for review
// (ADR 0069 §9).
const CauseValidationChanged Cause = "validation-changed"

// CauseValidationPassed: this terraform-lane plan validated native-lane
// plan Plan for apply run Run — the same intent on Plan's write set — and
// Plan was applied, not this plan.
const CauseValidationPassed Cause = "validation-passed"

// MarkerValidated is a native-lane apply's validation re-plan (ADR 0069
// §9): Other (the validation plan), Serial (the head it planned against),
// IntentChanged (false: "validated: native intent unchanged"; true: it
// refused the apply), Addresses (the write set's instances whose intent
// differs) and Extra["native"], Extra["terraform"] (both intents of those
// instances, one "ADDRESS: ACTIONS DIGEST" a line).
const MarkerValidated MarkerKind = "validated"

// validate is a native-lane apply's validation re-plan (ApplyInput.Validate;
// kl apply --validate, klbot's validate:): it plans the plan's whole
// configuration — the merge commit's at merge — in the terraform lane
// against the head and compares its intent with the applied plan's on the
// write set. Unchanged: a "validated" marker, the validation plan closed,
// the native plan goes ahead. Changed: the apply is refused with both
// intents, the native plan superseded by the validation plan, left open
// for review. A terraform-lane plan has nothing to validate.
func (a *applier) validate(ctx context.Context) error {
	if !a.in.Validate || a.pf.run.Envelope.Lane != LaneNative {
		return nil
	}
	whole, err := a.e.Store.GetArtifact(ctx, a.plan.ID, ArtifactWholeConfig)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			err = Errorf(ErrInvalid, "plan %s keeps no whole configuration to validate against (an older kl made it, or retention deleted it): plan again", a.plan.ID)
		}
		return a.fail(ctx, StatusPlanned, Failed(StepReadArtifact, err).withArtifact(ArtifactWholeConfig), fmt.Errorf("validating run %s: %w", a.run.ID, err))
	}
	vp, res, head, err := a.makeReplan(ctx, whole)
	if err != nil {
		return err
	}
	fp := a.pf.run.Envelope.Footprint
	cmp := CompareReplan(a.pf.intent, res.Intent, fp)
	if len(cmp.Write) == 0 {
		a.e.closeReplan(ctx, vp.ID, StatusSuperseded, &End{Cause: CauseValidationPassed, Run: a.run.ID, Plan: a.plan.ID})
		unchanged := false
		if err := a.e.Store.AddMarkers(ctx, a.run.ID, Marker{Kind: MarkerValidated, Other: vp.ID, Serial: head, IntentChanged: &unchanged}); err != nil {
			return a.fail(ctx, StatusPlanned, Failed(StepRecordPreflight, err), fmt.Errorf("recording the validation of run %s: %w", a.run.ID, err))
		}
		return nil
	}
	changed := true
	end := &End{Cause: CauseValidationChanged, Run: vp.ID, Plan: a.plan.ID, Serial: head, Replan: &ReplanFacts{Addresses: cmp.Write}}
	m := Marker{Kind: MarkerValidated, Other: vp.ID, Serial: head, IntentChanged: &changed, Class: ClassWriteChanged,
		Addresses: instanceAddresses(cmp.Write), End: end,
		Extra: map[string]string{"native": intentLines(a.pf.intent, cmp.Write), "terraform": intentLines(res.Intent, cmp.Write)}}
	sp := a.sp
	a.abortWith(ctx, StatusRefused, end, StatusSuperseded, func(r *Run) { r.SincePlan = &sp }, m)
	return fmt.Errorf("applying run %s: %w: the terraform lane's plan %s of the whole configuration against head %d plans something else for %s of the write set (`kl run show %s` shows both intents); review plan %s (`kl run show %s`) and apply it",
		a.run.ID, ErrValidationChanged, vp.ID, head, instances(len(cmp.Write)), a.run.ID, vp.ID, vp.ID)
}

// intentLines are intent's changes at keys, one "ADDRESS: ACTIONS
// DIGEST" a line ("ADDRESS: no change" where it plans none), sorted.
func intentLines(in Intent, keys []string) string {
	ks := append([]string(nil), keys...)
	sort.Strings(ks)
	var out []string
	for _, k := range ks {
		c, ok := in.Changes[k]
		if !ok {
			out = append(out, k+": no change")
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s %s", k, strings.Join(c.Actions, ","), c.AfterDigest))
	}
	return strings.Join(out, "\n")
}
