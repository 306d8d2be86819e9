// Package engine is Kilolock's domain: states and their versions, plan and
// apply runs, envelopes, footprints, reservations, markers, since-plan
// classification, allowed-because facts and commit provenance, plus the
// orchestration of a plan and an apply over them.
//
// The package owns the interfaces it consumes — Store (persistence) and
// Terraform (running the binary) — and never imports an adapter. The words
// used here are the field terms of docs/design.md; every rule cites the
// decision of ADR 0033 ("Conflict visibility and causal run history",
// D1–D8) or the Terraform behaviour it follows.
package engine
