// Package closure computes the native lane's closure and writes its sliced
// configuration (issue 17 §1–§4, docs/adr/0067-native-lane-closure.md).
//
// It is pure and independent of the engine and the store: it reads a root
// module directory (Load), scopes a plan to targets (TargetScope) or to a
// pull request's changed files against the base's directory (FileScope),
// computes the dependency closure of the targets (Compute), writes a
// configuration holding only the closure's blocks with hclwrite
// (Closure.WriteSlice) and restricts a state to the closure's entries
// (Closure.SliceState). The closure proof checks (Validates, WithinSlice,
// NoCreateOutside, TargetsPlanned) each return a named Check the engine
// records as a marker; any failure, like any *Fallback this package
// returns, sends the run to the terraform lane (ADR 0033 D2, D4).
//
// Configuration is parsed with hashicorp/hcl/v2 (hclparse, hclsyntax), as
// the read set of internal/terraform parses it; the slice is written from
// hclwrite's tokens of the same files, so every block is copied byte for
// byte. Addresses are resource-level strings as tfstate.ResourceAddress
// spells them (module path without instance keys).
package closure
