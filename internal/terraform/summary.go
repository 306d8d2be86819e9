package terraform

import (
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/kilolock/kilolock/internal/engine"
)

// Summarize counts a plan's changes per resource instance
// (engine.PlanSummary): Add for create, Change for update, Destroy for
// delete, Replace for delete+create in either order, Read for a data source
// read, Move for every entry with previous_address (counted besides its
// action), Outputs for root output changes that are not no-op. Targets is
// true when Terraform said the plan is incomplete ("complete": false, from
// Terraform 1.8; a targeted plan, docs/terraform.md "Plan JSON"). Forget
// counts "forget" (removed blocks that keep the object), Import every entry
// with change.importing (counted besides its action). Refresh-only changes (resource_drift)
// are not counted: the JSON does not say a plan is refresh-only, and the
// Runner counts them as Refresh for one that is (countDrift, ADR 0045). A
// nil plan is empty.
func Summarize(plan *tfjson.Plan) engine.PlanSummary {
	var s engine.PlanSummary
	if plan == nil {
		return s
	}
	for _, rc := range plan.ResourceChanges {
		if rc == nil {
			continue
		}
		if rc.PreviousAddress != "" {
			s.Move++
		}
		if rc.Change == nil {
			continue
		}
		if rc.Change.Importing != nil {
			s.Import++
		}
		a := rc.Change.Actions
		switch {
		case a.Create():
			s.Add++
		case a.Update():
			s.Change++
		case a.Delete():
			s.Destroy++
		case a.Replace():
			s.Replace++
		case a.Read():
			s.Read++
		case a.Forget():
			s.Forget++
		}
	}
	for _, ch := range plan.OutputChanges {
		if ch == nil || !ch.Actions.NoOp() {
			s.Outputs++
		}
	}
	s.Targets = plan.Complete != nil && !*plan.Complete
	return s
}

// RefreshOnlyView is plan as a refresh-only plan is applied: its
// resource_drift entries as its resource_changes. Terraform's JSON of a
// `plan -refresh-only` has no resource_changes at all (measured with
// 1.11.4) and lists in resource_drift each object the refresh found
// changed ("update") or gone ("delete") outside Terraform; applying the
// plan records exactly those in the state. The JSON does not say the plan
// is refresh-only: the caller knows (engine.PlanOptions.RefreshOnly).
// plan itself is not changed; a nil plan is returned as it is.
func RefreshOnlyView(plan *tfjson.Plan) *tfjson.Plan {
	if plan == nil {
		return nil
	}
	view := *plan
	view.ResourceChanges = nil
	for _, rc := range plan.ResourceDrift {
		if rc != nil && rc.Change != nil && !rc.Change.Actions.NoOp() {
			view.ResourceChanges = append(view.ResourceChanges, rc)
		}
	}
	return &view
}

// DriftCount counts plan's resource_drift entries that are not no-op:
// the objects its refresh found changed or gone outside Terraform, which
// a refresh-only plan's apply records (PlanSummary.Refresh).
func DriftCount(plan *tfjson.Plan) int {
	return len(RefreshOnlyView(plan).ResourceChanges)
}
