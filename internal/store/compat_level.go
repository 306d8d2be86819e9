//go:build !(kltest_newer && kltest_raise)

package store

// compatLevel is CompatLevel: 2, instance-level reservations (ADR 0065).
const compatLevel = 2
