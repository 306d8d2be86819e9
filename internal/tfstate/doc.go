// Package tfstate reads, compares, merges and writes Terraform state v4
// documents — the JSON files Terraform 0.12 and later keep in a backend.
//
// It is pure: no exec, no network, no file I/O. The engine uses it to
//
//   - check and index a snapshot (Parse, Addresses, ResourceCount);
//   - find what a run changed (Changed): the resource-level addresses whose
//     state entries differ between the snapshot a plan was made from and the
//     state Terraform wrote;
//   - commit a terraform-lane run by snapshot-merge (Merge, docs/terraform.md
//     "Snapshot-merge"): copy the head, replace the entries of the addresses the
//     run wrote with the run's, and take unplanned changes only where the head
//     has not moved since the plan (no lost update).
//
// Every resource entry and output is kept as its raw JSON, compacted, so a
// Parse → Marshal round trip loses nothing: unknown fields, private data,
// sensitive_attributes and dependencies pass through untouched. Marshal
// writes Terraform's own layout (two-space indent, its field order, resources
// sorted by module, mode, type and name, a trailing newline), so a state
// Terraform wrote comes back byte for byte.
//
// Addresses are resource-level strings as engine.Address spells them
// ("module.app.module.db.terraform_data.main", "data.terraform_remote_state.net",
// "output.NAME"); this package returns plain strings and must not import the
// engine, which imports it.
//
// States hold secrets in plain text (docs/terraform.md "Snapshot-merge"): nothing
// here logs or prints attribute values, and errors name addresses only.
package tfstate
