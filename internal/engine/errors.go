package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors. Adapters map their own errors onto these (docs/style.md 7) so
// callers test with errors.Is.
var (
	// ErrNotFound: no such state, version, run or artifact.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request collides with existing data or a concurrent
	// holder (a state that exists, a run in another status, a reservation).
	ErrConflict = errors.New("conflict")
	// ErrStalePlan: a version committed after the plan changed its write set
	// (or, with --strict-since-plan, its read set); re-plan.
	ErrStalePlan = errors.New("stale plan")
	// ErrInvalid: the input is malformed (not a state v4 document, a corrupted
	// saved plan, an unknown address form).
	ErrInvalid = errors.New("invalid input")
	// ErrIntentChanged: a re-plan against the head plans something else than
	// the reviewed plan; the new plan needs review.
	ErrIntentChanged = errors.New("intent changed")
	// ErrBehindHead: a re-plan against the head would also change what the
	// plan reads — the configuration is behind the head there (docs/design.md
	// apply step 3; replan.go). It is an ErrIntentChanged too: a re-plan
	// stopped the apply.
	ErrBehindHead error = behindHeadError{}
	// ErrOutsideFootprint: a re-plan against the head would also change
	// addresses outside the reviewed footprint; applying it would apply
	// them unreviewed (docs/design.md apply step 3). An ErrIntentChanged too.
	ErrOutsideFootprint error = replanStopError("changes outside the reviewed footprint")
	// ErrBeyondReservations: a re-plan against the head needs reservations
	// the apply does not hold. An ErrIntentChanged too.
	ErrBeyondReservations error = replanStopError("reservations beyond those held")
	// ErrLeaseLost: the run's reservations expired before it committed, or
	// the lease sweep ended the run while this process still worked on it.
	ErrLeaseLost = errors.New("lease lost")
	// ErrReadOnly: the store refuses this binary's writes — a newer binary
	// raised its compatibility level, so this one does not follow its rules
	// (ADR 0048) — but may still be read.
	ErrReadOnly = errors.New("store is read-only for this binary")
	// ErrForbidden: the caller may not do this with the access it has — a
	// read-only token releasing anything but its own plan's read lock
	// (BackendUnlockInput.ReadOnly; ADR 0059). HTTP's 403.
	ErrForbidden = errors.New("forbidden")
)

// KindError is an error of a kind: errors.Is(err, Kind) holds, and its
// text is Err's alone — the kind is not words ("invalid input", "conflict"
// are labels), so a message says what happened without a label a reader
// must skip. Errorf makes one; KindOf reads the kind back.
type KindError struct {
	Kind error // a sentinel: ErrInvalid, ErrNotFound, ErrConflict, ErrLeaseLost, ErrStalePlan
	Err  error
}

func (e *KindError) Error() string { return e.Err.Error() }

// Unwrap returns the kind and the error, so errors.Is and errors.As see
// both (a wrapped *StatusError stays reachable).
func (e *KindError) Unwrap() []error { return []error{e.Kind, e.Err} }

// Errorf is fmt.Errorf of format and args (which may wrap with %w) as an
// error of kind: "plan P was made against lineage L" that errors.Is
// ErrInvalid, without ": invalid input" in its text.
func Errorf(kind error, format string, args ...any) error {
	return &KindError{Kind: kind, Err: fmt.Errorf(format, args...)}
}

// KindOf names the sentinel kind err wraps ("" for none): invalid,
// not-found, conflict or lease-lost (End.Kind, the JSON error document).
func KindOf(err error) ErrKind { return kindOf(err) }

// behindHeadError is ErrBehindHead: "configuration behind the head", the
// words the reports use, and errors.Is ErrIntentChanged.
type behindHeadError struct{}

func (behindHeadError) Error() string { return "configuration behind the head" }

// Is makes errors.Is(ErrBehindHead, ErrIntentChanged) true.
func (behindHeadError) Is(target error) bool { return target == ErrIntentChanged }

// replanStopError is a re-plan that stopped an apply for review
// (ErrOutsideFootprint, ErrBeyondReservations): its text is its words, and
// errors.Is ErrIntentChanged.
type replanStopError string

func (e replanStopError) Error() string { return string(e) }

// Is makes errors.Is(err, ErrIntentChanged) true.
func (replanStopError) Is(target error) bool { return target == ErrIntentChanged }

// ConflictError is a refusal to reserve: the blocking runs and the
// addresses they hold (docs/style.md 8: a refusal is a value the user can read).
type ConflictError struct {
	State    string
	Run      string
	Blockers []Blocker
}

func (e *ConflictError) Error() string {
	var parts []string
	for _, b := range e.Blockers {
		if b.Backend != nil {
			// Terraform's own lock through the http backend: name the
			// operator and the operation (issue 14 §3), not a bare run.
			parts = append(parts, blockerPhrase(b))
			continue
		}
		who := "run " + b.Run
		if b.PR != nil {
			who += " (" + b.PR.String() + ")"
		}
		parts = append(parts, fmt.Sprintf("%s holds %s", who, strings.Join(b.Addresses.Strings(), ", ")))
	}
	return fmt.Sprintf("reservations for run %s on state %s conflict: %s", e.Run, e.State, strings.Join(parts, "; "))
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// FencedError is a reservation request refused because some of its
// blockers are fences (Blocker.Fenced, ADR 0035): applies whose holders
// died while their Terraform ran. It unwraps to the *ConflictError (and so
// to ErrConflict); unlike a live conflict, waiting cannot resolve it. Its
// text names, per ADR 0035 decision 2, each fenced run ("run A fences X",
// never "holds": its holder is dead), when its Terraform started, the
// addresses, and both commands that lift the fence with the run's id; a
// live blocker beside it "holds" its addresses.
type FencedError struct {
	*ConflictError
}

func (e *FencedError) Error() string {
	var parts, lifts []string
	for _, b := range e.Blockers {
		who := "run " + b.Run
		if b.PR != nil {
			who += " (" + b.PR.String() + ")"
		}
		addrs := strings.Join(b.Addresses.Strings(), ", ")
		if !b.Fenced {
			parts = append(parts, fmt.Sprintf("%s holds %s", who, addrs))
			continue
		}
		started := ""
		if !b.TerraformStarted.IsZero() {
			started = ", started at " + b.TerraformStarted.UTC().Format(time.RFC3339)
		}
		parts = append(parts, fmt.Sprintf("%s fences %s (its holder died while its Terraform ran%s)", who, addrs, started))
		lifts = append(lifts, fmt.Sprintf("`kl run recover %s` commits what its Terraform last wrote, or, after checking the real objects, "+
			"`kl run unfence %s --reason TEXT` lifts the fence", b.Run, b.Run))
	}
	return fmt.Sprintf("reservations for run %s on state %s refused: %s; %s",
		e.Run, e.State, strings.Join(parts, "; "), strings.Join(lifts, "; "))
}

// Unwrap returns the conflict.
func (e *FencedError) Unwrap() error { return e.ConflictError }

// StatusError is a run found in a status that forbids the requested
// transition (applying a run twice, applying an apply run).
type StatusError struct {
	Run    string
	Kind   RunKind
	Status RunStatus
	Want   []RunStatus
	// By is the run that holds or consumed it (ApplyRun of a plan), if any.
	By string
	// End is how the run ended and At when it closed (set by the engine's
	// own refusals, not by the stores): a discarded plan (End's cause
	// discarded) is refused as discarded, by whom, when and why.
	End *End
	At  time.Time
}

func (e *StatusError) Error() string {
	if e.Kind == KindPlan {
		switch e.Status {
		case StatusApplied:
			return fmt.Sprintf("plan run %s was already applied by run %s; a plan applies at most once: plan again", e.Run, e.By)
		case StatusApplying:
			return fmt.Sprintf("plan run %s is being applied by run %s right now; a plan applies at most once", e.Run, e.By)
		case StatusSuperseded:
			if d := e.End; d.Is(CauseDiscarded) {
				msg := fmt.Sprintf("plan run %s was discarded by %s", e.Run, d.By)
				if !e.At.IsZero() {
					msg += " at " + e.At.UTC().Format(time.RFC3339)
				}
				if d.Why != "" {
					msg += " (" + d.Why + ")"
				}
				return msg + " and cannot be applied: plan again"
			}
			fallthrough
		case StatusStale, StatusFailed:
			return fmt.Sprintf("plan run %s is %s and cannot be applied (see `kl why %s`): plan again", e.Run, e.Status, e.Run)
		}
	}
	want := make([]string, len(e.Want))
	for i, w := range e.Want {
		want[i] = string(w)
	}
	msg := fmt.Sprintf("%s run %s is %s", e.Kind, e.Run, e.Status)
	if e.By != "" {
		msg += " (by run " + e.By + ")"
	}
	if len(want) > 0 {
		msg += "; it must be " + strings.Join(want, " or ")
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *StatusError) Unwrap() error { return ErrConflict }

// StaleError is a refusal by the since-plan check: the versions that changed
// what the plan intended to write (or read, under strict policy).
type StaleError struct {
	Run     string
	PlanRun string
	Entries []SincePlanEntry
	Strict  bool
}

// staleAddressesShown is how many addresses StaleError names per version.
const staleAddressesShown = 8

func (e *StaleError) Error() string {
	var parts []string
	for _, v := range e.Entries {
		p := fmt.Sprintf("version %d", v.Serial)
		var in []string
		if v.Backend != "" {
			in = append(in, "a push through the backend: "+TerraformCommand(v.Backend))
		}
		if v.Run != "" {
			r := "run " + v.Run
			if v.PR != nil {
				r += ", " + v.PR.String()
			}
			in = append(in, r)
		}
		if len(in) > 0 {
			p += " (" + strings.Join(in, ", ") + ")"
		}
		// A write set names instances (ADR 0065): a version may have
		// changed hundreds of them; the rest are in `kl history --since-plan`.
		as := v.Addresses.Strings()
		more := ""
		if len(as) > staleAddressesShown {
			as, more = as[:staleAddressesShown], fmt.Sprintf(" and %d more", len(as)-staleAddressesShown)
		}
		p += " changed " + strings.Join(as, ", ") + more
		parts = append(parts, p)
	}
	what := "planned target changed"
	if e.Strict {
		what = "plan input or planned target changed (strict since-plan)"
	}
	return fmt.Sprintf("plan %s is stale: %s: %s; re-plan", e.PlanRun, what, strings.Join(parts, "; "))
}

// Unwrap makes errors.Is(err, ErrStalePlan) true.
func (e *StaleError) Unwrap() error { return ErrStalePlan }

// RunError attaches the run an error happened in, so that a caller can show
// that run's story (`kl run show`) beside the error.
type RunError struct {
	Run string
	Err error
}

func (e *RunError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *RunError) Unwrap() error { return e.Err }
