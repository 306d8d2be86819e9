package report

import (
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// The JSON documents' shared parts (docs/json.md). They are the report's
// own types, not the engine's, so that the store's encoding can change
// without breaking v1: snake_case names, times as RFC 3339 in UTC, serials
// as numbers, addresses as strings, durations in milliseconds, and the
// words of each fact and marker in a "text" field.

// jtime is a time encoded as RFC 3339 in UTC (with fractional seconds when
// it has them).
type jtime time.Time

func (t jtime) MarshalText() ([]byte, error) {
	return []byte(time.Time(t).UTC().Format(time.RFC3339Nano)), nil
}

func (t jtime) IsZero() bool { return time.Time(t).IsZero() }

func jtimePtr(t *time.Time) *jtime {
	if t == nil || t.IsZero() {
		return nil
	}
	j := jtime(*t)
	return &j
}

type jPR struct {
	Repo    string `json:"repo"`
	Number  int    `json:"number"`
	Ref     string `json:"ref"`
	HeadSHA string `json:"head_sha,omitempty"`
	URL     string `json:"url,omitempty"`
}

func toPR(p *engine.PullRequest) *jPR {
	if p == nil {
		return nil
	}
	return &jPR{Repo: p.Repo, Number: p.Number, Ref: p.String(), HeadSHA: p.HeadSHA, URL: p.URL}
}

// strs returns the addresses as strings; never null.
func strs(set engine.AddressSet) []string {
	out := make([]string, len(set))
	for i, a := range set {
		out[i] = string(a)
	}
	return out
}

// optStrs is strs, but nil (omitted) when empty.
func optStrs(set engine.AddressSet) []string {
	if len(set) == 0 {
		return nil
	}
	return strs(set)
}

type jRun struct {
	ID              string `json:"id"`
	Kind            string `json:"kind"`
	State           string `json:"state"`
	Actor           string `json:"actor"`
	Holder          string `json:"holder,omitempty"`
	Status          string `json:"status"`
	Cause           string `json:"cause,omitempty"`
	Reason          string `json:"reason,omitempty"`
	PR              *jPR   `json:"pr,omitempty"`
	CreatedAt       jtime  `json:"created_at"`
	UpdatedAt       jtime  `json:"updated_at,omitzero"`
	FinishedAt      *jtime `json:"finished_at,omitempty"`
	PlanRun         string `json:"plan_run,omitempty"`
	ApplyRun        string `json:"apply_run,omitempty"`
	ReplanOf        string `json:"replan_of,omitempty"`
	DiscardedBy     string `json:"discarded_by,omitempty"`
	DiscardWhy      string `json:"discard_why,omitempty"`
	CommittedSerial int64  `json:"committed_serial,omitempty"`
	// BackendLock: Terraform's lock of a backend lock's run (ADR 0056).
	BackendLock *jLock `json:"backend_lock,omitempty"`
}

func toRun(r *engine.Run) *jRun {
	if r == nil {
		return nil
	}
	j := &jRun{
		ID: r.ID, Kind: runKind(*r), State: r.State, Actor: r.Actor, Status: lockStatus(*r), Reason: RunEndText(*r),
		PR: toPR(r.PR), CreatedAt: jtime(r.CreatedAt), UpdatedAt: jtime(r.UpdatedAt), FinishedAt: jtimePtr(r.FinishedAt),
		PlanRun: r.PlanRun, ApplyRun: r.ApplyRun, ReplanOf: r.ReplanOf,
		CommittedSerial: r.CommittedSerial, BackendLock: toLock(r.Backend),
	}
	if r.Holder.Host != "" {
		j.Holder = r.Holder.String()
	}
	if j.BackendLock != nil && r.Lock != nil {
		j.BackendLock.Mode = string(r.Lock.Mode)
	}
	if r.End != nil {
		j.Cause = string(r.End.Cause)
		if r.End.Legacy != "" && r.End.Cause == "" {
			j.Cause = "legacy"
		}
		if r.End.Cause == engine.CauseDiscarded {
			j.DiscardedBy, j.DiscardWhy = r.End.By, r.End.Why
		}
	}
	return j
}

type jSummary struct {
	Add      int    `json:"add"`
	Change   int    `json:"change"`
	Destroy  int    `json:"destroy"`
	Replace  int    `json:"replace"`
	Move     int    `json:"move"`
	Read     int    `json:"read"`
	Outputs  int    `json:"outputs"`
	Import   int    `json:"import"`
	Forget   int    `json:"forget"`
	Refresh  int    `json:"refresh,omitempty"`
	Targeted bool   `json:"targeted"`
	Text     string `json:"text"`
}

func toSummary(s engine.PlanSummary) jSummary {
	return jSummary{Add: s.Add, Change: s.Change, Destroy: s.Destroy, Replace: s.Replace, Move: s.Move, Read: s.Read,
		Outputs: s.Outputs, Import: s.Import, Forget: s.Forget, Refresh: s.Refresh, Targeted: s.Targets, Text: summaryWords(s).plain()}
}

type jScope struct {
	Dir          string   `json:"dir"`
	Targets      []string `json:"targets"`
	Replace      []string `json:"replace"`
	ChangedFiles []string `json:"changed_files"`
	Workspace    string   `json:"workspace,omitempty"`
	VarFiles     []string `json:"var_files"`
	Options      jOptions `json:"options"`
}

// jOptions are a scope's Terraform plan options (engine.PlanOptions, ADR
// 0045); Flags spells them as Terraform's flags, without -var.
type jOptions struct {
	Destroy     bool     `json:"destroy"`
	RefreshOnly bool     `json:"refresh_only"`
	Refresh     bool     `json:"refresh"`
	Parallelism int      `json:"parallelism,omitempty"`
	Vars        []string `json:"vars"`
	Flags       []string `json:"flags"`
}

func toOptions(o engine.PlanOptions) jOptions {
	return jOptions{Destroy: o.Destroy, RefreshOnly: o.RefreshOnly, Refresh: !o.NoRefresh, Parallelism: o.Parallelism,
		Vars: orEmpty(o.Vars), Flags: orEmpty(o.Flags())}
}

func orEmpty(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

type jSlice struct {
	Roots          []string      `json:"roots"`
	Closure        []string      `json:"closure"`
	Proved         bool          `json:"proved"`
	Scoped         string        `json:"scoped,omitempty"`
	Outputs        []string      `json:"outputs"`
	Blocks         int           `json:"blocks"`
	Entries        int           `json:"entries"`
	StateResources int           `json:"state_resources"`
	Checks         []jSliceCheck `json:"checks"`
}

type jSliceCheck struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Found  string `json:"found,omitempty"`
}

type jEnvelope struct {
	Actor            string  `json:"actor"`
	Holder           string  `json:"holder"`
	StartedAt        jtime   `json:"started_at"`
	FinishedAt       jtime   `json:"finished_at"`
	State            string  `json:"state"`
	Lineage          string  `json:"lineage"`
	SourceSerial     int64   `json:"source_serial"`
	Scope            jScope  `json:"scope"`
	Lane             string  `json:"lane"`
	LaneReason       string  `json:"lane_reason,omitempty"`
	Slice            *jSlice `json:"slice,omitempty"`
	PlanDigest       string  `json:"plan_digest"`
	TerraformVersion string  `json:"terraform_version,omitempty"`
	PR               *jPR    `json:"pr,omitempty"`
	CommitSHA        string  `json:"commit_sha,omitempty"`
	// PlannedAtMerge: made at merge, not reviewed (issue 15 §1).
	PlannedAtMerge bool `json:"planned_at_merge,omitempty"`
	// Reverts: what the plan would undo (ADR 0046); left out when nothing.
	Reverts []jRevert `json:"reverts,omitempty"`
	// Branch: how the branch stood against its base (klbot, ADR 0046
	// decision 7); left out when no one asked.
	Branch *jBranch `json:"branch,omitempty"`
}

func toEnvelope(e *engine.Envelope) *jEnvelope {
	if e == nil {
		return nil
	}
	j := &jEnvelope{
		Actor: e.Actor, Holder: e.Holder.String(), StartedAt: jtime(e.StartedAt), FinishedAt: jtime(e.FinishedAt),
		State: e.State, Lineage: e.Lineage, SourceSerial: e.SourceSerial,
		Scope: jScope{Dir: e.Scope.Dir, Targets: orEmpty(e.Scope.Targets), Replace: orEmpty(e.Scope.Replace), ChangedFiles: orEmpty(e.Scope.ChangedFiles),
			Workspace: e.Scope.Workspace, VarFiles: orEmpty(e.Scope.VarFiles), Options: toOptions(e.Scope.Options)},
		Lane: string(e.Lane), LaneReason: e.LaneReason, PlanDigest: e.PlanDigest, TerraformVersion: e.TerraformVersion, PR: toPR(e.PR), CommitSHA: e.CommitSHA,
		PlannedAtMerge: e.PlannedAtMerge, Reverts: toReverts(e), Branch: toBranch(e.Branch),
	}
	if e.Slice != nil {
		sl := e.Slice
		j.Slice = &jSlice{Roots: strs(sl.Roots), Closure: strs(sl.Closure), Proved: sl.Proved, Scoped: sl.Scoped, Outputs: orEmpty(sl.Outputs),
			Blocks: sl.Blocks, Entries: sl.Entries, StateResources: sl.StateResources, Checks: []jSliceCheck{}}
		for _, c := range sl.Checks {
			j.Slice.Checks = append(j.Slice.Checks, jSliceCheck(c))
		}
	}
	return j
}

type jWidening struct {
	Address string `json:"address"`
	From    string `json:"from"`
	Reason  string `json:"reason"`
}

type jResCounts struct {
	Total int `json:"total"`
	Write int `json:"write"`
	Read  int `json:"read"`
}

func toResCounts(rs []engine.Reservation) jResCounts {
	w, r := reservationCounts(rs)
	return jResCounts{Total: len(rs), Write: w, Read: r}
}

type jFootprint struct {
	Write        []string    `json:"write"`
	Read         []string    `json:"read"`
	Widened      []jWidening `json:"widened"`
	Unverified   string      `json:"unverified,omitempty"`
	Reservations jResCounts  `json:"reservations"`
}

func toFootprint(fp engine.Footprint, rs []engine.Reservation) jFootprint {
	j := jFootprint{Write: strs(fp.Write), Read: strs(fp.Read), Widened: []jWidening{}, Unverified: fp.Unverified, Reservations: toResCounts(rs)}
	for _, w := range fp.Widened {
		j.Widened = append(j.Widened, jWidening{Address: string(w.Address), From: w.From, Reason: w.Reason})
	}
	return j
}

type jOverlap struct {
	Run        string   `json:"run"`
	Actor      string   `json:"actor"`
	PR         *jPR     `json:"pr,omitempty"`
	WriteWrite []string `json:"write_write"`
	WriteRead  []string `json:"write_read"`
	ReadWrite  []string `json:"read_write"`
	Text       string   `json:"text"`
}

func toOverlaps(ovs []engine.Overlap) []jOverlap {
	out := []jOverlap{}
	for _, o := range ovs {
		out = append(out, jOverlap{Run: o.Run, Actor: o.Actor, PR: toPR(o.PR), WriteWrite: strs(o.WriteWrite),
			WriteRead: strs(o.WriteRead), ReadWrite: strs(o.ReadWrite), Text: overlapWords(o).plain()})
	}
	return out
}

type jFact struct {
	Kind         string   `json:"kind"`
	Text         string   `json:"text"`
	Run          string   `json:"run,omitempty"`
	PR           *jPR     `json:"pr,omitempty"`
	Addresses    []string `json:"addresses,omitempty"`
	Serials      []int64  `json:"serials,omitempty"`
	SourceSerial int64    `json:"source_serial,omitempty"`
	HeadSerial   int64    `json:"head_serial,omitempty"`
	Commit       string   `json:"commit,omitempty"`
	WaitedMS     int64    `json:"waited_ms,omitempty"`
	OwnWrite     []string `json:"own_write,omitempty"`
	OtherWrite   []string `json:"other_write,omitempty"`
}

func toFacts(facts []engine.Fact, reserved *engine.Marker) []jFact {
	out := []jFact{}
	texts := allowedWords(facts, reserved)
	for i, f := range facts {
		out = append(out, jFact{Kind: string(f.Kind), Text: texts[i].plain(), Run: f.Run, PR: toPR(f.PR),
			Addresses: optStrs(f.Addresses), Serials: f.Serials, SourceSerial: f.SourceSerial, HeadSerial: f.HeadSerial, Commit: f.Commit,
			WaitedMS: time.Duration(f.Waited).Milliseconds(), OwnWrite: optStrs(f.OwnWrite), OtherWrite: optStrs(f.OtherWrite)})
	}
	return out
}

type jCounts struct {
	SourceSerial int64 `json:"source_serial"`
	HeadSerial   int64 `json:"head_serial"`
	Independent  int   `json:"independent"`
	ReadChanged  int   `json:"read_changed"`
	WriteChanged int   `json:"write_changed"`
	OwnApply     int   `json:"own_apply"`
}

func toCounts(s engine.SincePlanSummary) jCounts {
	return jCounts{SourceSerial: s.SourceSerial, HeadSerial: s.HeadSerial, Independent: s.Independent,
		ReadChanged: s.ReadChanged, WriteChanged: s.WriteChanged, OwnApply: s.OwnApply}
}

type jDeviation struct {
	Unplanned   []string `json:"unplanned"`
	Unchanged   []string `json:"unchanged"`
	Kept        []string `json:"kept"`
	Overwritten []string `json:"overwritten"`
	Tainted     []string `json:"tainted"`
	Lost        []jLost  `json:"lost,omitempty"`
	// InputsChanged: versions committed after the snapshot Terraform
	// applied to that changed the plan's footprint (ADR 0072).
	InputsChanged []jEntry `json:"inputs_changed,omitempty"`
}

// jLost is one engine.LostWrite: an address the head kept after the run's
// lease lapsed, what this apply did to it being in no version.
type jLost struct {
	Address string `json:"address"`
	Serial  int64  `json:"serial,omitempty"`
	Run     string `json:"run,omitempty"`
	Actor   string `json:"actor,omitempty"`
	PR      *jPR   `json:"pr,omitempty"`
	Held    bool   `json:"held,omitempty"`
}

func toDeviation(d *engine.Deviation) *jDeviation {
	if d == nil {
		return nil
	}
	j := &jDeviation{Unplanned: strs(d.Unplanned), Unchanged: strs(d.Unchanged), Kept: strs(d.Kept), Overwritten: strs(d.Overwritten),
		Tainted: strs(d.Tainted)}
	for _, l := range d.Lost {
		j.Lost = append(j.Lost, jLost{Address: string(l.Address), Serial: l.Serial, Run: l.Run, Actor: l.Actor, PR: toPR(l.PR), Held: l.Held})
	}
	for _, e := range d.InputsChanged {
		j.InputsChanged = append(j.InputsChanged, toEntry(e))
	}
	return j
}

type jMarker struct {
	Run           string            `json:"run,omitempty"`
	Role          string            `json:"role,omitempty"`
	Seq           int64             `json:"seq"`
	At            jtime             `json:"at"`
	Kind          string            `json:"kind"`
	Text          string            `json:"text"`
	OtherRun      string            `json:"other_run,omitempty"`
	OtherPR       *jPR              `json:"other_pr,omitempty"`
	Addresses     []string          `json:"addresses,omitempty"`
	Serial        int64             `json:"serial,omitempty"`
	FromSerial    int64             `json:"from_serial,omitempty"`
	CommitMode    string            `json:"commit_mode,omitempty"`
	Count         int               `json:"count,omitempty"`
	SincePlan     *jCounts          `json:"since_plan,omitempty"`
	Class         string            `json:"class,omitempty"`
	IntentChanged *bool             `json:"intent_changed,omitempty"`
	Deviation     *jDeviation       `json:"deviation,omitempty"`
	WaitedMS      int64             `json:"waited_ms,omitempty"`
	Commit        string            `json:"commit,omitempty"`
	Reason        string            `json:"reason,omitempty"`
	Extra         map[string]string `json:"extra,omitempty"`
}

// toMarker encodes marker m of a run in status ("" when unknown), which
// words the marker that ended the run (markerWordsOf).
func toMarker(m engine.Marker, role string, status engine.RunStatus) jMarker {
	j := jMarker{Run: m.Run, Role: role, Seq: m.Seq, At: jtime(m.At), Kind: string(m.Kind), Text: markerWordsOf(m, status).plain(),
		OtherRun: m.Other, OtherPR: toPR(m.OtherPR), Addresses: optStrs(m.Addresses), Serial: m.Serial, FromSerial: m.FromSerial,
		CommitMode: string(m.Mode), Count: m.Count, Class: string(m.Class), IntentChanged: m.IntentChanged, Deviation: toDeviation(m.Deviation),
		WaitedMS: time.Duration(m.Waited).Milliseconds(), Commit: m.Commit, Reason: markerText(m), Extra: m.Extra}
	if m.SincePlan != nil {
		c := toCounts(*m.SincePlan)
		j.SincePlan = &c
	}
	return j
}

// toMarkers encodes markers with the role and status of the run each
// belongs to (either map may be nil).
func toMarkers(ms []engine.Marker, roles map[string]string, statuses map[string]engine.RunStatus) []jMarker {
	out := []jMarker{}
	for _, m := range ms {
		out = append(out, toMarker(m, roles[m.Run], statuses[m.Run]))
	}
	return out
}

type jVerdict struct {
	Action string `json:"action"`
	Text   string `json:"text"`
}

type jEntry struct {
	Serial      int64    `json:"serial"`
	Class       string   `json:"class"`
	Label       string   `json:"label"`
	Mark        string   `json:"mark"`
	OwnApply    bool     `json:"own_apply"`
	Addresses   []string `json:"addresses"`
	Changed     []string `json:"changed"`
	Run         string   `json:"run,omitempty"`
	PlanRun     string   `json:"plan_run,omitempty"`
	Actor       string   `json:"actor,omitempty"`
	PR          *jPR     `json:"pr,omitempty"`
	CommittedAt jtime    `json:"committed_at"`
	CommitMode  string   `json:"commit_mode"`
	// ReadChanges: for a read-changed entry, the read resources' changed
	// attributes from the source version to this one (ADR 0046).
	ReadChanges []jDiffResource `json:"read_changes,omitempty"`
}

type jSincePlan struct {
	PlanRun      string    `json:"plan_run"`
	SourceSerial int64     `json:"source_serial"`
	HeadSerial   int64     `json:"head_serial"`
	Live         bool      `json:"live"`
	AtCommit     bool      `json:"at_commit,omitempty"`
	Counts       jCounts   `json:"counts"`
	Entries      []jEntry  `json:"entries"`
	Verdict      *jVerdict `json:"verdict,omitempty"`
}

// toSincePlan encodes a since-plan classification; with verdict and plan
// it adds what an apply of plan would do now under the default policy.
// The version the plan's own apply committed is the engine's
// (engine.SincePlanEntry.OwnApply), counted apart from the classes.
// toEntry encodes one since-plan entry.
func toEntry(e engine.SincePlanEntry) jEntry {
	return jEntry{Serial: e.Serial, Class: string(e.Class), Label: e.Class.Label(), Mark: entryMark(e).sym,
		OwnApply: e.OwnApply, Addresses: strs(e.Addresses), Changed: strs(e.Changed), Run: e.Run, PlanRun: e.PlanRun,
		Actor: e.Actor, PR: toPR(e.PR), CommittedAt: jtime(e.CommittedAt), CommitMode: string(e.Mode),
		ReadChanges: toReadChanges(e.ReadChanges)}
}

func toSincePlan(sp *engine.SincePlan, plan *engine.Run, live, verdict bool) *jSincePlan {
	if sp == nil {
		return nil
	}
	j := &jSincePlan{PlanRun: sp.PlanRun, SourceSerial: sp.SourceSerial, HeadSerial: sp.HeadSerial, Live: live, AtCommit: sp.AtCommit,
		Counts: toCounts(sp.Summary()), Entries: []jEntry{}}
	for _, e := range sp.Entries {
		j.Entries = append(j.Entries, toEntry(e))
	}
	if plan != nil && verdict {
		action, v := sincePlanVerdict(sp, *plan)
		j.Verdict = &jVerdict{Action: action, Text: v.words.plain()}
	}
	return j
}

type jProvenance struct {
	Run                 string      `json:"run,omitempty"`
	PlanRun             string      `json:"plan_run,omitempty"`
	SourceSerial        int64       `json:"source_serial"`
	CommittedSerial     int64       `json:"committed_serial"`
	PlanDigest          string      `json:"plan_digest,omitempty"`
	PlannedAtMerge      bool        `json:"planned_at_merge,omitempty"`
	AppliedPlanRun      string      `json:"applied_plan_run,omitempty"`
	AppliedPlanDigest   string      `json:"applied_plan_digest,omitempty"`
	AppliedSourceSerial int64       `json:"applied_source_serial,omitempty"`
	CommitMode          string      `json:"commit_mode"`
	Exact               bool        `json:"exact"`
	Deviation           *jDeviation `json:"deviation,omitempty"`
	Partial             bool        `json:"partial"`
	Reencoded           []string    `json:"reencoded,omitempty"`
	Origin              string      `json:"origin,omitempty"`
	Actor               string      `json:"actor,omitempty"`
	PR                  *jPR        `json:"pr,omitempty"`
	// A day-2 operation's (ADR 0055).
	Reason         string   `json:"reason,omitempty"`
	RestoredSerial int64    `json:"restored_serial,omitempty"`
	PushedSerial   int64    `json:"pushed_serial,omitempty"`
	Forced         bool     `json:"forced,omitempty"`
	Removed        []string `json:"removed,omitempty"`
	MovedFrom      string   `json:"moved_from,omitempty"`
	MovedTo        string   `json:"moved_to,omitempty"`
	Moved          int      `json:"moved,omitempty"`
	// A push through the http backend's (ADR 0056).
	Backend      *jBackendPush `json:"backend,omitempty"`
	Adopted      bool          `json:"adopted,omitempty"`
	PriorLineage string        `json:"prior_lineage,omitempty"`
}

type jVersion struct {
	State      string      `json:"state"`
	Serial     int64       `json:"serial"`
	Lineage    string      `json:"lineage"`
	CreatedAt  jtime       `json:"created_at"`
	Changed    []string    `json:"changed"`
	Resources  int         `json:"resources"`
	SizeBytes  int64       `json:"size_bytes"`
	Provenance jProvenance `json:"provenance"`
}

func toVersion(v *engine.Version) *jVersion {
	if v == nil {
		return nil
	}
	p := v.Provenance
	return &jVersion{State: v.State, Serial: v.Serial, Lineage: v.Lineage, CreatedAt: jtime(v.CreatedAt),
		Changed: strs(v.Changed), Resources: v.Resources, SizeBytes: v.Size,
		Provenance: jProvenance{Run: p.Run, PlanRun: p.PlanRun, SourceSerial: p.SourceSerial,
			CommittedSerial: p.CommittedSerial, PlanDigest: p.PlanDigest, PlannedAtMerge: p.PlannedAtMerge, AppliedPlanRun: p.AppliedPlanRun, AppliedPlanDigest: p.AppliedPlanDigest,
			AppliedSourceSerial: p.AppliedSourceSerial, CommitMode: string(p.Mode), Exact: p.Exact,
			Deviation: toDeviation(p.Deviation), Partial: p.Partial, Reencoded: optStrs(p.Reencoded), Origin: p.Origin, Actor: p.Actor, PR: toPR(p.PR),
			Reason: p.Reason, RestoredSerial: p.RestoredSerial, PushedSerial: p.PushedSerial, Forced: p.Forced, Removed: p.Removed,
			MovedFrom: p.MovedFrom, MovedTo: p.MovedTo, Moved: p.Moved,
			Backend: toBackendPush(p.Backend), Adopted: p.Adopted, PriorLineage: p.PriorLineage}}
}

type jRefusal struct {
	Rule         string   `json:"rule"`
	Policy       string   `json:"policy"`
	Text         string   `json:"text"`
	Serial       int64    `json:"serial,omitempty"`
	Run          string   `json:"run,omitempty"`
	Actor        string   `json:"actor,omitempty"`
	PR           *jPR     `json:"pr,omitempty"`
	Addresses    []string `json:"addresses"`
	ReplanStatus string   `json:"replan_status,omitempty"`
	ReplanReason string   `json:"replan_reason,omitempty"`
	ChangedIn    []int64  `json:"changed_in,omitempty"`
	Next         string   `json:"next,omitempty"`
	NextCommand  string   `json:"next_command,omitempty"`
	Reason       string   `json:"reason,omitempty"`
}

func toRefusals(rs []refusal) []jRefusal {
	out := []jRefusal{}
	for _, r := range rs {
		j := jRefusal{Rule: r.rule, Policy: r.policy, Text: r.words.plain(), Serial: r.serial, Run: r.run,
			Actor: r.actor, PR: toPR(r.pr), Addresses: strs(r.addrs), Next: r.next.plain(), NextCommand: r.nextCmd}
		if replanRule(r.rule) {
			j.ChangedIn = engine.Serials(r.changed)
			j.Reason = r.reason
			if r.replan != nil {
				j.ReplanStatus, j.ReplanReason = string(r.replan.Status), EndText(r.replan.ID, r.replan.End)
			}
		}
		out = append(out, j)
	}
	return out
}

// jRecoverable is what a stopped apply's Terraform wrote that no version
// holds yet (engine.Recoverable).
type jRecoverable struct {
	Run         string   `json:"run"`
	Artifact    string   `json:"artifact"`
	BaseSerial  int64    `json:"base_serial"`
	Changed     []string `json:"changed"`
	Text        string   `json:"text"`
	NextCommand string   `json:"next_command"`
	// LateAfter, HolderAlive: engine.Recoverable's (ADR 0071).
	LateAfter   int64  `json:"late_after,omitempty"`
	HolderAlive string `json:"holder_alive,omitempty"`
}

func toRecoverable(r *engine.Recoverable) *jRecoverable {
	if r == nil {
		return nil
	}
	j := &jRecoverable{Run: r.Run, Artifact: r.Artifact, BaseSerial: r.BaseSerial, Changed: strs(r.Changed),
		Text: recoverWords(r, nil).plain(), NextCommand: recoverCommand(r.Run), LateAfter: r.LateAfter}
	if r.HolderAlive != nil {
		j.HolderAlive = r.HolderAlive.String()
	}
	return j
}
