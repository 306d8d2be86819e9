//go:build !(kltest_newer && kltest_raise)

package store

// compatLevel is CompatLevel: 3, per-resource storage (ADR 0068).
const compatLevel = 3
