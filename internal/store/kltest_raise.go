//go:build kltest_newer && kltest_raise

package store

// compatLevel is CompatLevel of the kltest_newer,kltest_raise build (see
// kltest_newer.go): 4, one above the release before.
const compatLevel = 4
