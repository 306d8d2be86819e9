//go:build !(kltest_newer && kltest_raise)

package store

// compatLevel is CompatLevel: 1, the first release's rules.
const compatLevel = 1
