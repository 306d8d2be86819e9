// Package terraform adapts the Terraform CLI (terraform-exec) and its JSON
// formats (terraform-json) to the engine: isolated work dirs, plan/apply,
// envelope extraction.
//
// The extraction half is pure: ParsePlanJSON reads `terraform show -json
// PLANFILE` output, ExtractFootprint derives a plan's write set and read set
// (shared/DESIGN.md "Words", shared/TERRAFORM.md "Plan JSON"), ExtractIntent
// what a re-plan is compared on (DESIGN.md "intent"), and Summarize the
// counts a report shows. Footprint chains them for `kl footprint PLAN.json`.
package terraform
