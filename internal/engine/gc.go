package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Bounded growth (ADR 0063). What an apply stores of the state Terraform
// wrote (ArtifactApplyResult, ArtifactApplyCheckpoint) is what `kl run
// recover` commits; once the run's version is committed nothing reads it,
// so Store.Commit deletes it in the commit's transaction. The saved plan,
// configuration archive and -var values of a closed plan (GCPlanArtifacts)
// are never given to Terraform again; the store's gc deletes them once the
// plan has been closed for longer than the retention. What a report shows
// of a run (its story, diff, apply log, intent) is never deleted.

// DefaultRetention is how long the saved plan, configuration archive and
// -var values of a closed plan are kept (KL_RETENTION, KLBOT_RETENTION):
// 30 days from the plan's finish.
const DefaultRetention = 30 * 24 * time.Hour

// GCStateArtifacts are the artifacts of an apply run that hold what
// Terraform wrote, read only by a recovery (Engine.Recover) and the views
// that offer one: deleted once the run committed (by Store.Commit, or by
// the gc for runs committed before ADR 0063), and by retention from a run
// that did not commit once it holds no fence and no live reservation.
var GCStateArtifacts = []string{ArtifactApplyResult, ArtifactApplyCheckpoint}

// GCPlanArtifacts are the artifacts of a plan run given to Terraform
// only, by its apply or re-plan: deleted by retention once the plan is
// closed (not RunStatus.Open) and no fence or live reservation of the apply
// that claimed it (Run.ApplyRun) stands. The intent and the diff stay: the
// plan's story shows them.
var GCPlanArtifacts = []string{ArtifactPlanFile, ArtifactConfig, ArtifactWholeConfig, ArtifactVars}

// GC reasons (GCDeleted.Why).
const (
	// GCCommitted: the apply run committed its version; what Terraform
	// wrote is in it.
	GCCommitted = "committed"
	// GCRetention: the run has been closed for longer than the retention.
	GCRetention = "retention"
)

// GCRequest is one garbage collection of a store (`kl gc`, klbot's
// periodic gc).
type GCRequest struct {
	// Retention is how long after a run closed its plan artifacts, and
	// the state artifacts of an apply that did not commit, are kept; 0
	// keeps them forever (KL_RETENTION=off): only the state artifacts of
	// committed runs are deleted then.
	Retention time.Duration
	// DryRun lists what would be deleted and deletes nothing.
	DryRun bool
}

// GCDeleted is one artifact a gc deleted (or, dry, would delete).
type GCDeleted struct {
	Run  string  `json:"run"`
	Kind RunKind `json:"kind"`
	Name string  `json:"artifact"`
	// Bytes is its stored size.
	Bytes int64 `json:"bytes"`
	// Why is GCCommitted or GCRetention.
	Why string `json:"why"`
}

// GCResult is what a gc deleted, ordered by run and artifact name.
type GCResult struct {
	DryRun  bool        `json:"dry_run"`
	Deleted []GCDeleted `json:"deleted"`
	// Runs is how many runs lost artifacts; Bytes their total size.
	Runs  int   `json:"runs"`
	Bytes int64 `json:"bytes"`
}

// Collector is a store that collects its garbage (both adapters):
// GC deletes, run by run, each in one transaction under the run's row
// lock, the artifacts the rules above no longer need — so a concurrent
// claim of a plan (Store.UpdateRun from planned) or a commit sees either
// the artifacts or a closed run, never a claimed plan without its saved
// plan. A run that retention deleted artifacts of gains a
// MarkerArtifactsDeleted. Errors: the store's; ErrInvalid for a negative
// retention.
type Collector interface {
	GC(ctx context.Context, req GCRequest) (GCResult, error)
}

// ParseRetention parses KL_RETENTION / KLBOT_RETENTION: "" is
// DefaultRetention; "off" keeps closed plans' artifacts forever (0); a Go
// duration ("720h", "90m") or a whole number of days ("30d"), positive.
// "0" is refused as ambiguous (forever, or at once?), as is anything else,
// with ErrInvalid naming the variable.
func ParseRetention(name, s string) (time.Duration, error) {
	switch v := strings.TrimSpace(s); {
	case v == "":
		return DefaultRetention, nil
	case strings.EqualFold(v, "off"):
		return 0, nil
	case v == "0" || v == "0d" || v == "0s":
		return 0, Errorf(ErrInvalid, "%s=%s is ambiguous: say off to keep closed plans' artifacts forever, or a positive retention such as 30d or 720h", name, s)
	default:
		if days, ok := strings.CutSuffix(v, "d"); ok {
			n, err := strconv.Atoi(days)
			if err != nil || n <= 0 || n > 100*365 {
				return 0, Errorf(ErrInvalid, "%s=%s: want a whole number of days from 1 to 36500 (30d), a Go duration (720h) or off", name, s)
			}
			return time.Duration(n) * 24 * time.Hour, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, Errorf(ErrInvalid, "%s=%s: want a positive Go duration (720h, 90m), a whole number of days (30d) or off", name, s)
		}
		return d, nil
	}
}

// deletedByRetention returns the marker saying the gc deleted artifact
// name of run r by retention, if it did.
func deletedByRetention(ms []Marker, name string) (Marker, bool) {
	for _, m := range ms {
		if m.Kind != MarkerArtifactsDeleted {
			continue
		}
		for _, n := range strings.Split(m.Extra["artifacts"], ",") {
			if n == name {
				return m, true
			}
		}
	}
	return Marker{}, false
}

// retentionNote is how a refusal names the retention that deleted
// artifact name of run id, "" when it did not.
func (e *Engine) retentionNote(ctx context.Context, id, name string) string {
	ms, err := e.Store.Markers(ctx, id)
	if err != nil {
		return ""
	}
	m, ok := deletedByRetention(ms, name)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s of run %s was deleted by retention (%s) on %s", name, id, m.Extra["retention"], m.At.UTC().Format("2006-01-02 15:04:05Z"))
}

// GC runs the store's gc (Collector) after the lease sweep, so that a run
// whose holder died is judged ended, not in progress. ErrInvalid when the
// store has no gc.
func (e *Engine) GC(ctx context.Context, req GCRequest) (GCResult, error) {
	c, ok := e.Store.(Collector)
	if !ok {
		return GCResult{}, Errorf(ErrInvalid, "this store (%T) has no gc", e.Store)
	}
	if !req.DryRun {
		e.expireLeases(ctx)
	}
	return c.GC(ctx, req)
}

// RetentionName is a retention in words as KL_RETENTION takes it: "off"
// for 0, whole days as "30d", else the Go duration.
func RetentionName(d time.Duration) string {
	switch {
	case d == 0:
		return "off"
	case d%(24*time.Hour) == 0:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
	return d.String()
}
