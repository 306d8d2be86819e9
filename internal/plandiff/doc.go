// Package plandiff turns Terraform's plan JSON (`terraform show -json
// PLANFILE`, decoded by terraform-json) into the diff of the plan: per
// resource instance its action (create, update, delete, replace and why,
// read, forget; import and move besides), and per changed attribute its old
// and new value, nested objects and arrays diffed element by element, as
// Terraform's own renderer shows them (docs/design.md "diff"; ADR 0044).
//
// It is pure: no exec, no I/O, no logging. Build makes a Diff from a plan
// and the state it was made against; Marshal and Unmarshal store it (the
// engine keeps it as the plan run's "diff.json" artifact); internal/report
// renders it as text and Markdown and carries it in the JSON documents.
//
// Sensitive values never reach a Diff. A value is masked — kept only as
// "sensitive", never as its value — when the plan JSON marks it
// (before_sensitive, after_sensitive, a sensitive output), when the state's
// sensitive_attributes mark it, and wherever the same value appears
// unmarked: Terraform copies a sensitive terraform_data input into its
// output without the mark and prints it (docs/terraform.md), and a
// provider may do the same with a computed attribute. The values it masks
// by equality are every leaf of a marked value, of a sensitive output and
// of a sensitive root variable (the plan JSON's "variables" holds them in
// clear). So a Diff is safe to print, log and store outside the artifacts
// that hold secrets.
//
// The plan JSON does not say whether an array is a list, a set or a tuple,
// nor whether an object is a map or an object: that is in the providers'
// schemas, which Kilolock does not read. Arrays are diffed by longest
// common subsequence of equal elements, a removed and an added object at
// the same place paired as one updated object; objects and maps key by key.
package plandiff
