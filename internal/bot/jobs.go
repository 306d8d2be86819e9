package bot

import (
	"github.com/riverqueue/river"

	"github.com/kilolock/kilolock/internal/engine"
)

// Job kinds (River's kind column).
const (
	KindPlan    = "klbot_plan"
	KindApply   = "klbot_apply"
	KindReply   = "klbot_reply"
	KindRefresh = "klbot_refresh"
)

// JobTrigger is what asked for a plan or an apply job (PlanArgs.Trigger,
// ApplyArgs.Trigger; stored in River's args as its string).
type JobTrigger string

// Job triggers. A plan job is asked by TriggerPush, TriggerComment or
// TriggerRerequest; an apply job by TriggerComment, TriggerButton,
// TriggerMerge or TriggerClose.
const (
	TriggerPush      JobTrigger = "push"      // pull_request opened, synchronize, reopened, ready_for_review
	TriggerComment   JobTrigger = "comment"   // a "/kl plan" or "/kl apply" comment
	TriggerRerequest JobTrigger = "rerequest" // a re-run of a plan check run
	TriggerButton    JobTrigger = "button"    // the Apply button of a plan check run
	TriggerMerge     JobTrigger = "merge"     // pull_request closed with merged
	TriggerClose     JobTrigger = "close"     // pull_request closed without merging
)

// JobResult is how a job ended, as klbot_jobs_total's result label and the
// "job done" log line say.
type JobResult string

// Job results: a job's work returns ResultOK, ResultRefused or
// ResultSkipped; runJob counts ResultError (River retries the job) and
// ResultCancelled (an error retrying cannot cure, finalReason).
const (
	ResultOK        JobResult = "ok"        // done
	ResultRefused   JobResult = "refused"   // a rule refused it; reported, not an error
	ResultSkipped   JobResult = "skipped"   // nothing to do (closed, superseded, a draft, no project touched)
	ResultError     JobResult = "error"     // failed; River retries it (or discards it after its last attempt)
	ResultCancelled JobResult = "cancelled" // failed for good; not retried
	ResultSnoozed   JobResult = "snoozed"   // an attempt that waited (queued, or for reservations); the job runs again
	ResultJoined    JobResult = "joined"    // the command joined a job already doing it; answered so
)

// Keys of push plans (PlanArgs.Key), from the delivery's pull_request.draft.
const (
	KeyPush  = "push"  // a pull request ready for review
	KeyDraft = "draft" // a draft pull request
)

// PlanArgs plans the projects of a pull request at a head commit: on a push
// (TriggerPush: the touched projects), a "/kl plan" comment (TriggerComment:
// the touched projects, or Project), or a re-run of a plan check run
// (TriggerRerequest: Project, or the touched projects for the "kl plan" and
// "kl config" runs). Unique on (repo, PR, head SHA, key). For pushes the
// key is KeyPush, or KeyDraft when the delivery's pull request is a draft:
// GitHub sends synchronize and ready_for_review for one push
// (docs/github.md) and they stay one job, while the ready_for_review of
// a former draft is a job of its own, so a draft skipped under kl.yaml
// plan_drafts: false is planned once it is ready at the same head. For
// comments and re-runs the key is the delivery id, so an explicit request
// always plans again. Whether a draft is planned is decided by the pull
// request as fetched when the job runs (Bot.plan).
type PlanArgs struct {
	JobBase
	HeadSHA string     `json:"head_sha" river:"unique"` // "" for comments: the PR's head when the job runs
	Key     string     `json:"key" river:"unique"`
	Trigger JobTrigger `json:"trigger"`
	Project string     `json:"project,omitempty"`
	// Options are the Terraform plan options of a "/kl plan -- …" (ADR
	// 0045): every project the job plans is planned with them.
	Options engine.PlanOptions `json:"options,omitzero"`
}

// Kind is KindPlan.
func (PlanArgs) Kind() string { return KindPlan }

// InsertOpts makes plan jobs unique by their tagged args.
func (PlanArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: MaxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// ApplyArgs applies the open plans of a pull request: Trigger
// TriggerComment ("/kl apply"), TriggerButton (the plan check run's Apply
// button; HeadSHA is the check run's), TriggerMerge (pull_request closed
// with merged: projects whose apply_trigger is merge) or TriggerClose
// (closed unmerged: open plans are superseded). Project "" means every project of the PR.
type ApplyArgs struct {
	JobBase
	Trigger JobTrigger `json:"trigger"`
	Project string     `json:"project,omitempty"`
	HeadSHA string     `json:"head_sha,omitempty"`
}

// Kind is KindApply.
func (ApplyArgs) Kind() string { return KindApply }

// InsertOpts sets the attempts.
func (ApplyArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: MaxAttempts} }

// ReplyArgs answers "/kl why", "/kl history", "/kl help" and anything that
// does not parse, in a reply comment of its own (edited in place on a retry).
type ReplyArgs struct {
	JobBase
	Command Command `json:"command"`
}

// Kind is KindReply.
func (ReplyArgs) Kind() string { return KindReply }

// InsertOpts sets the attempts.
func (ReplyArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: MaxAttempts} }

// RefreshArgs re-renders the sticky comment of an open pull request after
// another run committed version Serial of State, so that what changed
// since its plans is visible before anyone applies (ADR D3). Unique on
// (repo, PR, state, serial).
type RefreshArgs struct {
	JobBase
	State  string `json:"state" river:"unique"`
	Serial int64  `json:"serial" river:"unique"`
}

// Kind is KindRefresh.
func (RefreshArgs) Kind() string { return KindRefresh }

// InsertOpts makes refresh jobs unique by their tagged args.
func (RefreshArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: MaxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}
