package engine

import (
	"context"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// LockMode selects how an apply reserves the state.
type LockMode string

// Lock modes.
const (
	// LockReservations reserves the plan's footprint only (Kilolock's model).
	LockReservations LockMode = "reservations"
	// LockWholeState reserves "*" for write: one apply at a time, as every
	// global-lock tool does. It exists to measure the difference (make bench).
	LockWholeState LockMode = "whole-state"
)

// Default timings.
const (
	// DefaultLease is how long reservations, and a run in progress
	// (Run.LeaseUntil), live without renewal; the holder renews every
	// Lease/3 from the run's creation to its end (keepAlive).
	DefaultLease = 2 * time.Minute
	// DefaultPoll is how often a waiting apply retries its reservations.
	DefaultPoll = 250 * time.Millisecond
)

// Artifact names stored per run (they hold secrets: server-side only).
const (
	// Of a plan run.
	ArtifactPlanFile = "plan.tfplan"
	ArtifactConfig   = "config.tar.gz"
	ArtifactIntent   = "intent.json"
	// ArtifactDiff is the plan's diff (plandiff.Marshal): what it does
	// per resource instance and attribute, sensitive values masked (ADR
	// 0044). It holds no secret, but is kept with the plan's other
	// artifacts: it is large, and read only to be shown.
	ArtifactDiff = "diff.json"
	// ArtifactVars is the plan's -var values (MarshalVars), present when
	// its scope names -var options: secrets, read by its re-plans and its
	// apply (ADR 0045).
	ArtifactVars = "vars.json"
	// ArtifactApplyResult (apply run) is the state Terraform left when it
	// returned, stored before the commit.
	ArtifactApplyResult = "apply-result.tfstate"
	// ArtifactApplyCheckpoint (apply run) is the state Terraform had
	// written to the run's snapshot file the last time Kilolock looked
	// while it applied (ApplyRequest.Checkpoint), overwritten each time:
	// what survives a holder killed mid-apply (Engine.Recover).
	ArtifactApplyCheckpoint = "apply-checkpoint.tfstate"
)

// Engine orchestrates plans and applies over a Store and a Terraform.
// It is safe for concurrent use; every call is one run.
type Engine struct {
	Store     Store
	Terraform Terraform
	// WorkDirs removes the work dir a killed run left (Engine.Recover);
	// nil: Terraform, if it is a WorkDirRemover. A command that runs no
	// Terraform (kl run recover) sets it without a Terraform binary.
	WorkDirs WorkDirRemover
	Log      *slog.Logger
	// Holder identifies this process on the reservations it takes.
	Holder Holder
	// Lease is the lease of reservations and of runs in progress
	// (DefaultLease if zero).
	Lease time.Duration
	// Poll is the retry interval while waiting (DefaultPoll if zero).
	Poll time.Duration
	// BackendLockTTL is the lease of a backend lock (LockBackend; issue
	// 14 §3: Terraform never renews an http lock, so it is not renewed):
	// DefaultBackendLockTTL if zero. `kl serve` reads KL_BACKEND_LOCK_TTL.
	BackendLockTTL time.Duration
	// LockMode is LockReservations unless set.
	LockMode LockMode
	// Now returns the current time (time.Now if nil).
	Now func() time.Time

	// live are the runs calls of this process work on (RemoveLeftWorkDirs).
	live liveRuns
}

// New returns an Engine with this process as holder and default timings.
func New(store Store, tf Terraform, log *slog.Logger) *Engine {
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Engine{Store: store, Terraform: tf, Log: log, Holder: Holder{Host: host, PID: os.Getpid()}}
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now().UTC()
	}
	return time.Now().UTC()
}

func (e *Engine) lease() time.Duration {
	if e.Lease > 0 {
		return e.Lease
	}
	return DefaultLease
}

func (e *Engine) poll() time.Duration {
	if e.Poll > 0 {
		return e.Poll
	}
	return DefaultPoll
}

func (e *Engine) log() *slog.Logger {
	if e.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Log
}

// NewRunID returns a new sortable run id (a ULID: 26 characters, ordered by
// creation time to the millisecond).
func NewRunID() string { return ulid.Make().String() }

// MaxStateName is the longest state name, in bytes (all ASCII).
const MaxStateName = 200

// stateSegmentRE is one '/'-separated segment of a state name.
var stateSegmentRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ValidateStateName checks a state name ("acme/infra/prod"): at most
// MaxStateName characters in segments separated by single '/', each segment
// one or more ASCII letters, digits, '.', '_' or '-', starting with a letter
// or digit and not ending in '.'. So there is no empty segment ("a//b",
// "a/", "/a") and no "." or ".." segment ("a/./b", "a/../b"): a name means
// one state however it is later joined into a path or a key; and no segment
// ends in '.' ("a..", "a."), which Windows drops from file names. A last
// segment "timeline" or "timeline.svg" after another is reserved: the web
// pages serve /states/NAME/timeline[.svg] (ADR 0064). Errors wrap
// ErrInvalid.
func ValidateStateName(name string) error {
	ok := name != "" && len(name) <= MaxStateName
	for _, seg := range strings.Split(name, "/") {
		if !ok {
			break
		}
		ok = stateSegmentRE.MatchString(seg) && !strings.HasSuffix(seg, ".")
	}
	if !ok {
		return Errorf(ErrInvalid, "state name %q: use 1-%d characters: segments separated by single '/', each of ASCII letters, digits, '.', '_', '-', "+
			"starting with a letter or digit and not ending in '.' (e.g. acme/infra/prod)", name, MaxStateName)
	}
	if i := strings.LastIndexByte(name, '/'); i > 0 && (name[i+1:] == "timeline" || name[i+1:] == "timeline.svg") {
		return Errorf(ErrInvalid, "state name %q: a last segment %q is reserved: /states/%s/%s is the page of state %s's timeline (ADR 0064)",
			name, name[i+1:], name[:i], name[i+1:], name[:i])
	}
	return nil
}

// background returns a context for finishing work (commit, release, status
// updates) after ctx was cancelled: it keeps ctx's values, drops its
// cancellation, and bounds the work to a minute.
func background(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
}
