package store

// CompatLevel is the store compatibility level this binary follows: the
// version of the rules a writer must follow to write to a store
// (reservations, fences, commits), kept beside the schema version. It is
// raised whenever those rules change, so that an older binary, which
// follows the old rules, is refused instead of writing (issue 13 §3).
// `kl version` and `klbot version` print it.
//
// Placeholder of the store's compatibility work (wt-i13b), which replaces
// this file with the level, where it is stored and how it is checked.
const CompatLevel = 1
