package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/kilolock/kilolock/internal/engine"
)

// The storage format of runs.body and markers.body, apart from the domain
// types: a row carries its encoding version ("v") and its own field names,
// so renaming a field of engine.Run or engine.Marker cannot silently break
// stored rows (testdata/run-row-v2.json pins the encoding: a change to it
// fails TestRowGolden and needs a new row version and its migration).
//
//	v absent (1)  the whole engine.Run / engine.Marker as JSON, with the end
//	              of a run as English in "reason" (kl before typed ends)
//	v 2           runRow / markerRow below: the end typed (engine.End)
//
// Rows of version 1 are rewritten once by migration 4 (TypedEndsMigration),
// the one place that reads their English reasons for meaning: what it can
// tell becomes a typed end; what it cannot is kept as engine.End.Legacy and
// shown as stored. Reading still accepts version 1, so a row written by an
// older binary after the migration (a rolling upgrade) reads too.

// RowVersion is the runs.body and markers.body encoding this binary writes.
const RowVersion = 2

// runRow is runs.body, version 2.
type runRow struct {
	V               int                 `json:"v"`
	ID              string              `json:"id"`
	Kind            engine.RunKind      `json:"kind"`
	State           string              `json:"state"`
	Actor           string              `json:"actor"`
	Holder          engine.Holder       `json:"holder"`
	Status          engine.RunStatus    `json:"status"`
	End             *engine.End         `json:"end,omitempty"`
	PR              *engine.PullRequest `json:"pr,omitempty"`
	CreatedAt       time.Time           `json:"created_at"`
	UpdatedAt       time.Time           `json:"updated_at"`
	FinishedAt      *time.Time          `json:"finished_at,omitempty"`
	LeaseUntil      time.Time           `json:"lease_until,omitzero"`
	Envelope        *engine.Envelope    `json:"envelope,omitempty"`
	ApplyRun        string              `json:"apply_run,omitempty"`
	ReplanOf        string              `json:"replan_of,omitempty"`
	PlanRun         string              `json:"plan_run,omitempty"`
	CommittedSerial int64               `json:"committed_serial,omitempty"`
	AllowedBecause  []engine.Fact       `json:"allowed_because,omitempty"`
	SincePlan       *engine.SincePlan   `json:"since_plan,omitempty"`
}

// legacyRun is the part of a version-1 runs.body that differs from
// version 2: the end in words, and who discarded a plan.
type legacyRun struct {
	Reason      string `json:"reason"`
	DiscardedBy string `json:"discarded_by"`
	DiscardWhy  string `json:"discard_why"`
}

// EncodeRun is runs.body for r (version RowVersion).
func EncodeRun(r engine.Run) (string, error) {
	b, err := json.Marshal(runRow{
		V: RowVersion, ID: r.ID, Kind: r.Kind, State: r.State, Actor: r.Actor, Holder: r.Holder, Status: r.Status,
		End: r.End, PR: r.PR, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt,
		LeaseUntil: r.LeaseUntil, Envelope: r.Envelope, ApplyRun: r.ApplyRun, ReplanOf: r.ReplanOf,
		PlanRun: r.PlanRun, CommittedSerial: r.CommittedSerial, AllowedBecause: r.AllowedBecause, SincePlan: r.SincePlan,
	})
	if err != nil {
		return "", fmt.Errorf("encoding run %s: %w", r.ID, err)
	}
	return string(b), nil
}

// DecodeRun decodes a runs.body of version 1 or 2. A version-1 row's
// reason becomes its typed end where LegacyEnd can tell it, else
// End.Legacy. A version newer than RowVersion is refused (the binary is
// older than the store: a new row version raises the compatibility level
// and its read level, ADR 0048, so Open says so first).
func DecodeRun(body string) (engine.Run, error) {
	var row runRow
	if err := json.Unmarshal([]byte(body), &row); err != nil {
		return engine.Run{}, fmt.Errorf("decoding run: %w", err)
	}
	if row.V > RowVersion {
		return engine.Run{}, engine.Errorf(engine.ErrInvalid, "decoding run %s: row version %d is newer than this binary's %d: upgrade", row.ID, row.V, RowVersion)
	}
	r := engine.Run{
		ID: row.ID, Kind: row.Kind, State: row.State, Actor: row.Actor, Holder: row.Holder, Status: row.Status,
		End: row.End, PR: row.PR, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, FinishedAt: row.FinishedAt,
		LeaseUntil: row.LeaseUntil, Envelope: row.Envelope, ApplyRun: row.ApplyRun, ReplanOf: row.ReplanOf,
		PlanRun: row.PlanRun, CommittedSerial: row.CommittedSerial, AllowedBecause: row.AllowedBecause, SincePlan: row.SincePlan,
	}
	if row.V < 2 {
		var old legacyRun
		if err := json.Unmarshal([]byte(body), &old); err != nil {
			return engine.Run{}, fmt.Errorf("decoding run %s: %w", row.ID, err)
		}
		r.End = LegacyEnd(r, old.Reason, old.DiscardedBy, old.DiscardWhy)
	}
	return r, nil
}

// markerRow is markers.body, version 2.
type markerRow struct {
	V             int                      `json:"v"`
	Seq           int64                    `json:"seq"`
	At            time.Time                `json:"at"`
	Kind          engine.MarkerKind        `json:"kind"`
	Other         string                   `json:"other_run,omitempty"`
	OtherPR       *engine.PullRequest      `json:"other_pr,omitempty"`
	Addresses     engine.AddressSet        `json:"addresses,omitempty"`
	Serial        int64                    `json:"serial,omitempty"`
	FromSerial    int64                    `json:"from_serial,omitempty"`
	Mode          engine.CommitMode        `json:"commit_mode,omitempty"`
	Count         int                      `json:"count,omitempty"`
	SincePlan     *engine.SincePlanSummary `json:"since_plan,omitempty"`
	Class         engine.SincePlanClass    `json:"class,omitempty"`
	IntentChanged *bool                    `json:"intent_changed,omitempty"`
	Deviation     *engine.Deviation        `json:"deviation,omitempty"`
	Waited        engine.Duration          `json:"waited,omitempty"`
	Serials       []int64                  `json:"serials,omitempty"`
	Commit        string                   `json:"commit,omitempty"`
	End           *engine.End              `json:"end,omitempty"`
	Reason        string                   `json:"reason,omitempty"`
	Extra         map[string]string        `json:"extra,omitempty"`
	Lift          engine.Lift              `json:"lift,omitempty"`
	By            string                   `json:"by,omitempty"`
}

// EncodeMarker is markers.body for m (version RowVersion).
func EncodeMarker(m engine.Marker) (string, error) {
	b, err := json.Marshal(markerRow{
		V: RowVersion, Seq: m.Seq, At: m.At, Kind: m.Kind, Other: m.Other, OtherPR: m.OtherPR, Addresses: m.Addresses,
		Serial: m.Serial, FromSerial: m.FromSerial, Mode: m.Mode, Count: m.Count, SincePlan: m.SincePlan, Class: m.Class,
		IntentChanged: m.IntentChanged, Deviation: m.Deviation, Waited: m.Waited, Serials: m.Serials, Commit: m.Commit, End: m.End, Reason: m.Reason, Extra: m.Extra,
		Lift: m.Lift, By: m.By,
	})
	if err != nil {
		return "", fmt.Errorf("encoding %s marker: %w", m.Kind, err)
	}
	return string(b), nil
}

// DecodeMarker decodes a markers.body of version 1 or 2; a version-1
// marker's reason becomes its typed end where LegacyMarkerEnd can tell it.
func DecodeMarker(body string) (engine.Marker, error) {
	var row markerRow
	if err := json.Unmarshal([]byte(body), &row); err != nil {
		return engine.Marker{}, fmt.Errorf("decoding marker: %w", err)
	}
	if row.V > RowVersion {
		return engine.Marker{}, engine.Errorf(engine.ErrInvalid, "decoding marker: row version %d is newer than this binary's %d: upgrade", row.V, RowVersion)
	}
	m := engine.Marker{
		Seq: row.Seq, At: row.At, Kind: row.Kind, Other: row.Other, OtherPR: row.OtherPR, Addresses: row.Addresses,
		Serial: row.Serial, FromSerial: row.FromSerial, Mode: row.Mode, Count: row.Count, SincePlan: row.SincePlan, Class: row.Class,
		IntentChanged: row.IntentChanged, Deviation: row.Deviation, Waited: row.Waited, Serials: row.Serials, Commit: row.Commit, End: row.End, Reason: row.Reason, Extra: row.Extra,
		Lift: row.Lift, By: row.By,
	}
	if row.V < 2 {
		m.End, m.Reason = LegacyMarkerEnd(m.Kind, m.Reason)
		if m.Kind == legacyDriftKind {
			m.Kind = engine.MarkerDeviation
		}
		var old legacyDeviation
		if err := json.Unmarshal([]byte(body), &old); err != nil {
			return engine.Marker{}, fmt.Errorf("decoding marker: %w", err)
		}
		if m.Deviation == nil {
			m.Deviation = old.Drift
		}
	}
	return m, nil
}

// legacyDriftKind is the kind a "deviation" marker had before the rename
// (one word, one meaning: "drift" is Terraform's, changes made outside it).
const legacyDriftKind engine.MarkerKind = "drift"

// legacyDeviation is where a deviation was stored before the rename: a
// version-1 marker's or any provenance's "drift" member.
type legacyDeviation struct {
	Drift *engine.Deviation `json:"drift"`
}

// DecodeProvenance decodes a versions.provenance document; one written
// before the rename holds its deviation under "drift", which migration 4
// rewrites and this still reads.
func DecodeProvenance(doc string) (engine.Provenance, error) {
	var p engine.Provenance
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		return engine.Provenance{}, err
	}
	if p.Deviation == nil {
		var old legacyDeviation
		if err := json.Unmarshal([]byte(doc), &old); err != nil {
			return engine.Provenance{}, err
		}
		p.Deviation = old.Drift
	}
	return p, nil
}

// Version-1 reasons the migration recognizes (kl before typed ends wrote
// them with exactly these words).
const (
	legacyNothingToApply = "the plan has no changes: nothing applied, nothing committed"
	legacyNotRun         = "the plan has no changes: Terraform was not run"
	legacyDiscarded      = "discarded by "
	legacySuperseded     = "superseded: "
)

// LegacyEnd is the typed end of a version-1 run from its stored words: an
// applied apply without a reason, a plan without changes, a discard (by and
// why were stored apart), a superseded plan (the caller's words), and the
// reasons legacyTyped knows; any other reason is kept as End.Legacy, shown
// as stored. nil for a run that had no reason and is not an applied apply.
// Only the row migration reads reasons.
func LegacyEnd(r engine.Run, reason, discardedBy, discardWhy string) *engine.End {
	switch {
	case r.Kind == engine.KindApply && r.Status == engine.StatusApplied && reason == "":
		return &engine.End{Cause: engine.CauseApplied}
	case reason == "":
		return nil
	case r.Status == engine.StatusApplied && reason == legacyNothingToApply:
		return &engine.End{Cause: engine.CauseNothingToApply}
	case r.Kind == engine.KindPlan && r.Status == engine.StatusSuperseded && discardedBy != "":
		return &engine.End{Cause: engine.CauseDiscarded, By: discardedBy, Why: discardWhy}
	case r.Kind == engine.KindPlan && r.Status == engine.StatusSuperseded && r.ApplyRun == "" && !strings.HasPrefix(reason, "re-check for apply run ") && !strings.HasPrefix(reason, "not applicable: "):
		return &engine.End{Cause: engine.CauseSuperseded, Why: reason}
	}
	if e := legacyTyped(reason, r.CommittedSerial); e != nil {
		return e
	}
	return &engine.End{Legacy: reason}
}

// Version-1 reasons legacyTyped recognizes, exactly as kl wrote them.
var (
	legacyHint           = regexp.MustCompile("^Terraform had started applying: `kl run recover (\\S+)` commits what it last wrote$")
	legacyLeaseExpired   = regexp.MustCompile(`^its holder (\S+):(\d+) stopped renewing(?: while (planning|waiting for reservations|applying))?: (?:the lease on its reservations|its lease) ran out at (\S+?)(; Terraform had started applying: ` + "`kl run recover \\S+`" + ` commits what it last wrote)?$`)
	legacyApplyLapsed    = regexp.MustCompile(`^apply run (\S+) lost its lease before it committed \(holder (\S+):(\d+) stopped renewing; its lease ran out at (\S+?)\)(; Terraform had started applying: .* then re-plan|: Terraform may have changed infrastructure; re-plan)$`)
	legacyApplyPartial   = regexp.MustCompile(`^apply run (\S+) failed part-way; its partial result is version (\d+): re-plan$`)
	legacyApplyLeaseLost = regexp.MustCompile(`^apply run (\S+) lost its lease before its commit; version (\d+) holds what the head could take: re-plan$`)
	legacyApplyRecovered = regexp.MustCompile("^apply run (\\S+) stopped part-way; `kl run recover` committed what Terraform had written as version (\\d+): re-plan$")
	legacyReplanChecked  = regexp.MustCompile(`^re-check for apply run (\S+): intent unchanged; the reviewed plan (\S+) (?:was applied|goes ahead)$`)
	legacyReplanReverts  = regexp.MustCompile(`^not applicable: it would revert changes of newer versions to what plan (\S+) reads$`)
	legacyApplyEnded     = regexp.MustCompile(`^apply run (\S+): (.+)$`)
)

// legacyTyped types the version-1 reasons whose words a view builds on:
// interruptions (committed is the run's committed serial: 0 when nothing
// was), lease expiries with or without the recovery hint, the ends of a
// plan that an apply found stale, failed or lost, and re-plan closes. nil
// for any other reason.
func legacyTyped(reason string, committed int64) *engine.End {
	switch reason {
	case "interrupted during terraform apply: committed what Terraform wrote":
		return &engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseTerraformApply, Serial: committed}
	case "interrupted while waiting for reservations":
		return &engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseWaiting}
	}
	if m := legacyHint.FindStringSubmatch(reason); m != nil {
		return &engine.End{Cause: engine.CauseLeaseExpired, Recoverable: committed == 0}
	}
	if m := legacyLeaseExpired.FindStringSubmatch(reason); m != nil {
		phase := map[string]engine.Phase{"planning": engine.PhasePlanning, "waiting for reservations": engine.PhaseWaiting, "applying": engine.PhaseApplying}[m[3]]
		return &engine.End{Cause: engine.CauseLeaseExpired, Holder: legacyHolder(m[1], m[2]), LeaseEnd: legacyTime(m[4]), Phase: phase,
			Recoverable: m[5] != "" && committed == 0}
	}
	if m := legacyApplyLapsed.FindStringSubmatch(reason); m != nil {
		return &engine.End{Cause: engine.CauseApplyLeaseExpired, Run: m[1], Holder: legacyHolder(m[2], m[3]), LeaseEnd: legacyTime(m[4]),
			Recoverable: strings.HasPrefix(m[5], "; ")}
	}
	for cause, re := range map[engine.Cause]*regexp.Regexp{
		engine.CauseApplyPartial: legacyApplyPartial, engine.CauseApplyLeaseLost: legacyApplyLeaseLost, engine.CauseApplyRecovered: legacyApplyRecovered,
	} {
		if m := re.FindStringSubmatch(reason); m != nil {
			serial, _ := strconv.ParseInt(m[2], 10, 64)
			return &engine.End{Cause: cause, Run: m[1], Serial: serial}
		}
	}
	if m := legacyReplanChecked.FindStringSubmatch(reason); m != nil {
		return &engine.End{Cause: engine.CauseReplanChecked, Run: m[1], Plan: m[2]}
	}
	if m := legacyReplanReverts.FindStringSubmatch(reason); m != nil {
		return &engine.End{Cause: engine.CauseReplanReverts, Plan: m[1]}
	}
	if m := legacyApplyEnded.FindStringSubmatch(reason); m != nil {
		then := legacyTyped(m[2], 0)
		if then == nil {
			then = &engine.End{Legacy: m[2]}
		}
		return &engine.End{Cause: engine.CauseApplyEnded, Run: m[1], Then: then}
	}
	return nil
}

// legacyHolder is the holder "host:pid" of a legacy reason.
func legacyHolder(host, pid string) engine.Holder {
	n, _ := strconv.Atoi(pid) // the pattern holds digits only
	return engine.Holder{Host: host, PID: n}
}

// legacyTime is a legacy reason's RFC 3339 lease end (zero if it does not
// parse: the words then say no time).
func legacyTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// LegacyMarkerEnd is the typed end of a version-1 marker from its reason,
// and the reason left (the widened and fell-back markers keep theirs): a
// discard's or a supersede's "failed" marker, an "applied" marker of a
// plan without changes; any other "failed" or "lease-expired" reason is
// kept as End.Legacy.
func LegacyMarkerEnd(kind engine.MarkerKind, reason string) (*engine.End, string) {
	switch {
	case reason == "":
		return nil, ""
	case kind == engine.MarkerApplied && reason == legacyNotRun:
		return &engine.End{Cause: engine.CauseNothingToApply}, ""
	case kind == engine.MarkerFailed:
		rest := strings.TrimPrefix(reason, legacySuperseded)
		if by, ok := strings.CutPrefix(rest, legacyDiscarded); ok {
			who, why, _ := strings.Cut(by, ": ")
			return &engine.End{Cause: engine.CauseDiscarded, By: who, Why: why}, ""
		}
		if rest != reason {
			return &engine.End{Cause: engine.CauseSuperseded, Why: rest}, ""
		}
		fallthrough
	case kind == engine.MarkerLeaseExpired, kind == engine.MarkerApplied:
		// A marker knows no committed serial: an interruption's words
		// there say only where it stopped.
		if e := legacyTyped(reason, 0); e != nil && !(kind == engine.MarkerFailed && e.Cause == engine.CauseInterrupted && e.Phase == engine.PhaseTerraformApply) {
			return e, ""
		}
		return &engine.End{Legacy: reason}, ""
	}
	return nil, reason
}

// TypedEndsVersion is the schema version of TypedEndsMigration.
const TypedEndsVersion = 4

// TypedEndsMigration is schema migration 4 of both stores: it rewrites
// every version-1 runs.body and markers.body as version 2 (DecodeRun,
// DecodeMarker), in goose's transaction. ph renders the driver's n-th
// placeholder ("?" for SQLite, "$n" for PostgreSQL). Down is a no-op:
// version-2 rows read as they are.
func TypedEndsMigration(ph func(n int) string) *goose.Migration {
	up := func(ctx context.Context, tx *sql.Tx) error {
		if err := rewriteRows(ctx, tx, `SELECT id, body FROM runs`, `UPDATE runs SET body = `+ph(1)+` WHERE id = `+ph(2), func(body string) (string, error) {
			r, err := DecodeRun(body)
			if err != nil {
				return "", err
			}
			return EncodeRun(r)
		}); err != nil {
			return fmt.Errorf("rewriting runs: %w", err)
		}
		if err := rewriteRows(ctx, tx, `SELECT run || '/' || seq, body FROM markers`,
			`UPDATE markers SET body = `+ph(1)+` WHERE run || '/' || seq = `+ph(2), func(body string) (string, error) {
				m, err := DecodeMarker(body)
				if err != nil {
					return "", err
				}
				return EncodeMarker(m)
			}); err != nil {
			return fmt.Errorf("rewriting markers: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE markers SET kind = `+ph(1)+` WHERE kind = `+ph(2), string(engine.MarkerDeviation), string(legacyDriftKind)); err != nil {
			return fmt.Errorf("renaming drift markers: %w", err)
		}
		if err := rewriteProvenance(ctx, tx, ph); err != nil {
			return fmt.Errorf("rewriting provenance: %w", err)
		}
		return nil
	}
	return goose.NewGoMigration(TypedEndsVersion, &goose.GoFunc{RunTx: up}, &goose.GoFunc{RunTx: func(context.Context, *sql.Tx) error { return nil }})
}

// rewriteProvenance rewrites the provenance of every version that holds
// its deviation under the old name "drift".
func rewriteProvenance(ctx context.Context, tx *sql.Tx, ph func(n int) string) error {
	rows, err := tx.QueryContext(ctx, `SELECT state, serial, provenance FROM versions`)
	if err != nil {
		return err
	}
	type row struct {
		state  string
		serial int64
		doc    string
	}
	var old []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.state, &r.serial, &r.doc); err != nil {
			rows.Close()
			return err
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal([]byte(r.doc), &members); err != nil {
			rows.Close()
			return fmt.Errorf("version %d of %s: %w", r.serial, r.state, err)
		}
		if _, ok := members["drift"]; ok {
			old = append(old, r)
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for _, r := range old {
		p, err := DecodeProvenance(r.doc)
		if err != nil {
			return fmt.Errorf("version %d of %s: %w", r.serial, r.state, err)
		}
		doc, err := json.Marshal(p)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE versions SET provenance = `+ph(1)+` WHERE state = `+ph(2)+` AND serial = `+ph(3), string(doc), r.state, r.serial); err != nil {
			return fmt.Errorf("version %d of %s: %w", r.serial, r.state, err)
		}
	}
	return rows.Err()
}

// rewriteRows rewrites with conv every (key, body) row of query whose body
// is not of version RowVersion, through update (body, key).
func rewriteRows(ctx context.Context, tx *sql.Tx, query, update string, conv func(string) (string, error)) error {
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	type row struct{ key, body string }
	var old []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.key, &r.body); err != nil {
			rows.Close()
			return err
		}
		var v struct {
			V int `json:"v"`
		}
		if err := json.Unmarshal([]byte(r.body), &v); err != nil {
			rows.Close()
			return fmt.Errorf("row %s: %w", r.key, err)
		}
		if v.V != RowVersion {
			old = append(old, r)
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, r := range old {
		body, err := conv(r.body)
		if err != nil {
			return fmt.Errorf("row %s: %w", r.key, err)
		}
		if _, err := tx.ExecContext(ctx, update, body, r.key); err != nil {
			return fmt.Errorf("row %s: %w", r.key, err)
		}
	}
	return nil
}
