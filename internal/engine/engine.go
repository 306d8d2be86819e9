package engine

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
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
	// DefaultLease is how long reservations live without renewal; a holder
	// renews every Lease/3 while Terraform runs.
	DefaultLease = 2 * time.Minute
	// DefaultPoll is how often a waiting apply retries its reservations.
	DefaultPoll = 250 * time.Millisecond
)

// Artifact names stored per plan run (they hold secrets: server-side only).
const (
	ArtifactPlanFile    = "plan.tfplan"
	ArtifactConfig      = "config.tar.gz"
	ArtifactIntent      = "intent.json"
	ArtifactApplyResult = "apply-result.tfstate"
)

// Engine orchestrates plans and applies over a Store and a Terraform.
// It is safe for concurrent use; every call is one run.
type Engine struct {
	Store     Store
	Terraform Terraform
	Log       *slog.Logger
	// Holder identifies this process on the reservations it takes.
	Holder Holder
	// Lease is the reservation lease (DefaultLease if zero).
	Lease time.Duration
	// Poll is the retry interval while waiting (DefaultPoll if zero).
	Poll time.Duration
	// LockMode is LockReservations unless set.
	LockMode LockMode
	// Now returns the current time (time.Now if nil).
	Now func() time.Time
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

var stateNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$`)

// ValidateStateName checks a state name: 1–200 characters of letters,
// digits, '.', '_', '/', '-', starting with a letter or digit
// ("acme/infra/prod").
func ValidateStateName(name string) error {
	if !stateNameRE.MatchString(name) {
		return fmt.Errorf("%w: state name %q: use 1-200 letters, digits, '.', '_', '/', '-', starting with a letter or digit", ErrInvalid, name)
	}
	return nil
}

// background returns a context for finishing work (commit, release, status
// updates) after ctx was cancelled: it keeps ctx's values, drops its
// cancellation, and bounds the work to a minute.
func background(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
}
