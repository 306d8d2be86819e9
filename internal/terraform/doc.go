// Package terraform adapts the Terraform CLI (terraform-exec) and its JSON
// formats (terraform-json) to the engine: isolated work dirs, plan/apply,
// envelope extraction.
//
// The extraction half is pure: ParsePlanJSON reads `terraform show -json
// PLANFILE` output, ExtractFootprint derives a plan's write set and read set
// (docs/design.md "Words", docs/terraform.md "Plan JSON"), ExtractIntent
// what a re-plan is compared on (docs/design.md "intent"), and Summarize the
// counts a report shows. Footprint chains them for `kl footprint PLAN.json`.
//
// Linking this package makes a program the Runner's TF_VAR shim: on Unix
// its init execs Terraform in place of the program when
// KL_TERRAFORM_SHIM_EXEC is set (shim.go, ADR 0037).
package terraform
