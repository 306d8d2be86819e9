// Package bench measures Kilolock's headline figures and prints them
// beside a baseline measured in the same process, interleaved, with medians
// (docs/style.md 16: ratios are printed, never asserted; figure 5 fails
// only when its correctness checks do):
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
//     2b. the same with a real provider (Overhead with OverheadOptions.Mirror:
//     Kilolock's test provider built from source, 2,000 kltest_object
//     resources whose every API call takes 20 ms, read from a fake cloud
//     API during the refresh; both plugin caches filled first).
//  3. Commit (Commit): the snapshot-merge benchmarks of internal/tfstate on a
//     10,000-resource state (go test -bench, -benchmem), medians per metric.
//  4. Growth (Growth): the bytes of a store per version, over three
//     `kl plan` + `kl apply` cycles of a one-resource change on a
//     2,000-resource state — a SQLite store's used pages and, side by side,
//     a PostgreSQL store's pg_total_relation_size of its tables (a
//     throwaway cluster, as the store tests start one) — and how much of it
//     the closed plans' saved plans and archives hold until KL_RETENTION
//     deletes them (ADR 0063).
//  5. Native lane (Native; issue 17, ADR 0069): on 10,000 kltest_object
//     resources (20 ms per Read, default -parallelism), (a) one changed
//     resource planned and applied in the native lane (`kl plan --lane
//     native --target ADDR`) beside the terraform lane, each on a fresh
//     store, then a full `terraform plan` of `kl state pull` that must show
//     no changes; (b) 8 disjoint native-lane plans on that state applied at
//     once beside 8 on 8 tiny separate states.
//
// Run ties them together and prints a compact Markdown table (Summary) that
// the README quotes. cmd/klbench is the command `make bench` runs. Every
// temporary directory is removed before Run returns.
package bench
