// Package bot is klbot's work: the webhook Sink and the River workers that
// plan, apply and report for pull requests (docs/design.md "klbot").
//
// A delivery flows: internal/webhook verifies and parses it and calls
// Bot.Accept, which — in ONE transaction on the shared PostgreSQL pool —
// records the delivery id in klbot_deliveries (a redelivery is a
// Duplicate) and inserts its River job(s); GitHub gets its 2xx once that
// commits. Jobs, one kind per file:
//
//	klbot_plan     plan.go    push / "/kl plan" / re-run: tarball → kl.yaml → touched projects → engine.Plan
//	                          → "kl plan · PROJECT" check runs (Apply button) → sticky comment
//	klbot_apply    apply.go   "/kl apply" / Apply button / merge / close: the bot's rules, then engine.Apply
//	                          → "kl apply · PROJECT" check run → sticky comment → refresh of other PRs
//	klbot_reply    reply.go   "/kl why", "/kl history", "/kl help": a reply comment of its own
//	klbot_refresh  sticky.go  re-render an open PR's sticky comment after another run committed
//	klbot_reconcile reconcile.go  periodic (River's leader): lease sweep → ended applies reported → closed PRs closed
//	klbot_queue    queue.go   merge_group (GitHub's merge queue): the group's PRs along first parents → judge
//	                          in queue order (judge.go) → the group's "kl" check run; destroyed → nothing pending
//
// Every pull request head also gets the aggregate "kl" check run
// (aggregate.go, ADR 0058), the check to require.
//
// Each replica also removes the work dirs its crashed runs left
// (workdir.go) when it starts and every reconcile interval (ADR 0042).
//
// Jobs of one pull request take turns by what they touch, across replicas,
// with advisory locks taken by try-lock (lock.go, ADR 0041); a job that
// must wait — for another job, or for reservations (its apply parked,
// turns.go) — is snoozed, holding no worker, and keeps what it did in its
// River metadata (jobrun.go). Its check runs are in progress while it runs
// and completed with the run's story (live.go). Every write to GitHub is
// idempotent on a retry: a job's check runs are kept in its metadata and
// recorded per (repo, head SHA, name) in klbot_check_runs, comments are
// upserted sticky comments. A refusal by a rule is reported and the job
// succeeds; a transient failure returns an error and River retries the job
// with backoff. The repository configuration is kl.yaml, read by
// internal/klyaml (docs/kl-yaml.md); repository tarballs are extracted by
// internal/tarball, which refuses anything leaving the checkout.
package bot
