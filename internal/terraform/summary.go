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
// Terraform 1.8; a targeted plan, shared/TERRAFORM.md "Plan JSON"). Forget
// counts "forget" (removed blocks that keep the object), Import every entry
// with change.importing (counted besides its action). Refresh-only changes (resource_drift)
// are not counted. A nil plan is empty.
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
