// Package bench measures Kilolock's three headline figures and prints them
// beside a baseline measured in the same process, interleaved, with medians
// (docs/style.md 16: ratios are printed, never asserted):
//
//  1. Concurrency (Concurrency): N plans with disjoint write sets on one
//     state, each apply slowed by a local-exec sleep, applied at once through
//     the engine in-process (sqlite store, real Terraform processes) with
//     Kilolock's reservations and with one whole-state lock
//     (engine.LockWholeState: what global-lock tools do).
//  2. Overhead (Overhead): `kl plan` + `kl apply` against bare
//     `terraform init` + `plan -out` + `apply PLAN` on a synthetic
//     2,000-resource state with one resource changed, with a breakdown of
//     kl's time from its own debug logs.
//  3. Commit (Commit): the snapshot-merge benchmarks of internal/tfstate on a
//     10,000-resource state (go test -bench, -benchmem), medians per metric.
//
// Run ties them together and prints a compact Markdown table (Summary) that
// the README quotes. cmd/klbench is the command `make bench` runs. Every
// temporary directory is removed before Run returns.
package bench
