// Package storebench measures the two engine.Store adapters side by side
// (docs/style.md 16: figures and ratios, never asserted): the since-plan read
// (VersionsAfter) and a history page (History) on a state with 100,000
// versions and 1,000,000 changed-address rows, as p50 and p99 latencies, and
// reservation throughput — acquire and release by 32 concurrent holders —
// in operations per second. `make bench` runs it:
//
//	go test -run '^$' -bench Store -benchtime 3s ./internal/store/storebench/
//
// PostgreSQL comes from internal/store/pgtest (TEST_DATABASE_URL, or a
// throwaway cluster). The package has benchmarks only.
package storebench
