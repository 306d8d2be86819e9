// Package queue judges a merge group of GitHub's merge queue (ADR 0058,
// ADR 0060): it finds the group's pull requests from GitHub (Walk: first
// parents from the group's head to the base, and the commit→PR lookup of
// each commit) and judges their plans in queue order (Judge: each against
// the state's head and the write sets of the plans ahead of it). klbot
// (internal/bot, plans read from its project rows) and kl (kl github
// check, plans read from the store) use this one implementation; what each
// knows of a plan is handed over as a Plan.
package queue
