package engine

import (
	"fmt"
	"time"
)

// State is one Terraform state Kilolock owns (docs/design.md "state"), named by
// the user ("acme/infra/prod"). Its lineage is Terraform's: a saved plan only
// applies to a snapshot of the same lineage (docs/terraform.md "Staleness").
type State struct {
	Name       string    `json:"name"`
	Lineage    string    `json:"lineage"`
	HeadSerial int64     `json:"head_serial"`
	CreatedAt  time.Time `json:"created_at"`
}

// CommitMode says how a version was produced (ADR D5).
type CommitMode string

// Commit modes.
const (
	// CommitInit is the first version of a state: empty, or adopted from a file.
	CommitInit CommitMode = "init"
	// CommitSnapshotMerge merges a run's written resources into the head
	// (terraform lane, docs/terraform.md "Snapshot-merge").
	CommitSnapshotMerge CommitMode = "snapshot-merge"
	// CommitDelta commits only a slice's changed resources (native lane).
	CommitDelta CommitMode = "delta"
	// CommitRollback is `kl state rollback`: the content of an earlier
	// version (Provenance.RestoredSerial) as the new head (ADR 0055).
	CommitRollback CommitMode = "rollback"
	// CommitPush is a whole state written by an operator: `kl state push`
	// (Provenance.PushedSerial, Forced; ADR 0055).
	CommitPush CommitMode = "push"
	// CommitStateRm is `kl state rm`: the head without the resource
	// instances Provenance.Removed (ADR 0055).
	CommitStateRm CommitMode = "state-rm"
	// CommitStateMv is `kl state mv`: the head with Provenance.MovedFrom
	// moved to MovedTo (ADR 0055).
	CommitStateMv CommitMode = "state-mv"
)

// Operation reports whether m is a day-2 operation's (ADR 0055): a
// version an operator wrote under a whole-state reservation, from no plan.
func (m CommitMode) Operation() bool {
	switch m {
	case CommitRollback, CommitPush, CommitStateRm, CommitStateMv:
		return true
	}
	return false
}

// Version is an immutable snapshot of a state. Serial grows by exactly one
// per commit; the newest version is the head. Changed lists the addresses
// this version changed relative to the previous one — the input of every
// since-plan classification (ADR D3) — naming instances where the
// committing run's write set did (ADR 0065), resources elsewhere.
type Version struct {
	State      string     `json:"state"`
	Serial     int64      `json:"serial"`
	Lineage    string     `json:"lineage"`
	CreatedAt  time.Time  `json:"created_at"`
	Changed    AddressSet `json:"changed"`
	Provenance Provenance `json:"provenance"`
	// Resources counts the resource entries of the snapshot; Size is the
	// snapshot's length in bytes (uncompressed).
	Resources int   `json:"resources"`
	Size      int64 `json:"size_bytes"`
}

// Provenance links a version to the run and plan that produced it (ADR D5):
// apply run, reviewed plan run, the serial it was made against, committed
// serial, plan digest, commit mode, and whether the committed changes
// matched the plan exactly. When the reviewed plan's inputs had changed
// and Terraform applied its re-plan instead (docs/design.md apply step 3), the
// Applied* fields name that re-plan: the reviewed plan's digest and the
// applied one are both kept.
type Provenance struct {
	Run             string `json:"run,omitempty"`
	PlanRun         string `json:"plan_run,omitempty"`
	SourceSerial    int64  `json:"source_serial"`
	CommittedSerial int64  `json:"committed_serial"`
	// PlanDigest is the reviewed plan's ("sha256:<hex>" of its saved plan).
	PlanDigest string `json:"plan_digest,omitempty"`
	// PlannedAtMerge: that plan was made at merge, not reviewed
	// (Envelope.PlannedAtMerge).
	PlannedAtMerge bool `json:"planned_at_merge,omitempty"`
	// AppliedPlanRun, AppliedPlanDigest and AppliedSourceSerial: the
	// re-plan Terraform applied in place of the reviewed plan, its digest
	// and the head it was made against (the snapshot Terraform applied
	// to). Empty when Terraform applied the reviewed plan itself.
	AppliedPlanRun      string     `json:"applied_plan_run,omitempty"`
	AppliedPlanDigest   string     `json:"applied_plan_digest,omitempty"`
	AppliedSourceSerial int64      `json:"applied_source_serial,omitempty"`
	Mode                CommitMode `json:"commit_mode"`
	// Exact is true when the addresses Terraform changed equal the planned
	// write set; otherwise Deviation lists the difference.
	Exact bool `json:"exact"`
	// Deviation: addresses changed but not planned (Unplanned) and planned but not
	// changed (Unchanged).
	Deviation *Deviation `json:"deviation,omitempty"`
	// Partial is true when the apply failed or was interrupted and this
	// version holds only what Terraform wrote before it stopped.
	Partial bool `json:"partial"`
	// Reencoded lists the resources Terraform only stored anew — their
	// planned action was no-op, the refresh found nothing, and a provider's
	// raised schema version rewrote them (tfstate.Reencoded) — neither
	// changed nor a deviation; the head keeps the new encoding where it had
	// not moved since the plan (ADR 0038).
	Reencoded AddressSet `json:"reencoded,omitempty"`
	// Origin says how an init version began: "empty" or "file" (adopted).
	Origin string       `json:"origin,omitempty"`
	Actor  string       `json:"actor,omitempty"`
	PR     *PullRequest `json:"pr,omitempty"`

	// What a day-2 operation (Mode.Operation, ADR 0055) did; SourceSerial
	// is the head it edited. Reason is the operator's words (--reason).
	Reason string `json:"reason,omitempty"`
	// RestoredSerial: the version whose content a rollback restored.
	RestoredSerial int64 `json:"restored_serial,omitempty"`
	// PushedSerial: the serial in the document a push wrote (the version
	// has serial CommittedSerial all the same: one per commit); Forced:
	// --force took a serial not above the head's.
	PushedSerial int64 `json:"pushed_serial,omitempty"`
	Forced       bool  `json:"forced,omitempty"`
	// Removed: the resource instances a state-rm removed, sorted.
	Removed []string `json:"removed,omitempty"`
	// MovedFrom, MovedTo: a state-mv's addresses, as Terraform spells them;
	// Moved: how many resource instances moved.
	MovedFrom string `json:"moved_from,omitempty"`
	MovedTo   string `json:"moved_to,omitempty"`
	Moved     int    `json:"moved,omitempty"`

	// Backend: a push written through Terraform's http backend (ADR
	// 0056): the lock's Terraform facts and how the lock ended. Adopted:
	// the push replaced the empty version of `kl state init NAME` with a
	// state of another lineage (its lineage and serial taken; the state's
	// lineage was PriorLineage).
	Backend      *BackendPush `json:"backend,omitempty"`
	Adopted      bool         `json:"adopted,omitempty"`
	PriorLineage string       `json:"prior_lineage,omitempty"`
}

// BackendPush is what a version committed from a backend lock's last
// checkpoint says of Terraform (Provenance.Backend, ADR 0056): its
// operation (LockInfo.Operation: "OperationTypeApply", "state-rm", …), who
// and which Terraform version, its lock id, how many documents it wrote
// under the lock, and how the lock ended when Terraform did not unlock it
// itself — ForceUnlockedBy (`terraform force-unlock` by that actor) or
// Recovered (`kl run recover` of a lock whose lease ran out).
type BackendPush struct {
	Operation       string `json:"operation"`
	Who             string `json:"who,omitempty"`
	Version         string `json:"terraform_version,omitempty"`
	LockID          string `json:"lock_id"`
	Writes          int    `json:"writes"`
	ForceUnlockedBy string `json:"force_unlocked_by,omitempty"`
	Recovered       bool   `json:"recovered,omitempty"`
}

// Deviation is the difference between a plan's write set and what the apply
// really changed (docs/design.md apply step 5).
type Deviation struct {
	Unplanned AddressSet `json:"unplanned,omitempty"`
	Unchanged AddressSet `json:"unchanged,omitempty"`
	// Kept lists unplanned changes NOT merged because the head had changed
	// them since the plan's source serial (the head wins: no lost update).
	Kept AddressSet `json:"kept,omitempty"`
	// Overwritten lists planned writes merged over a change the head made
	// after the plan's source serial. Reservations and the since-plan check
	// exist to keep it empty; it is recorded if they ever failed to.
	Overwritten AddressSet `json:"overwritten,omitempty"`
	// Tainted lists written resources Terraform left tainted: created, but
	// their creation did not finish (a failed provisioner, an interruption).
	Tainted AddressSet `json:"tainted,omitempty"`
	// Lost lists, for a commit made after the run's lease had lapsed (its
	// reservations expired before the commit), each address of Kept with
	// why the head kept it: another run changed it since the plan (that
	// version and run) or holds it now. What this run's Terraform did to
	// it is in no version: the real object may be untracked (orphaned)
	// until someone checks it and imports or removes it.
	Lost []LostWrite `json:"lost,omitempty"`
	// InputsChanged lists the versions committed after the snapshot
	// Terraform applied to that changed what the applied plan read or
	// wrote (its footprint) — possible only once the run's lease had
	// lapsed and its read reservations were dropped (ADR 0072): Terraform
	// applied values computed from inputs the head no longer holds.
	InputsChanged []SincePlanEntry `json:"inputs_changed,omitempty"`
}

// LostWrite is one address a run's Terraform wrote that its commit left
// to the head because the run's lease had lapsed (Deviation.Lost).
type LostWrite struct {
	Address Address `json:"address"`
	// Serial, Run, Actor and PR name the version that changed the address
	// at the head since the plan, and its run; Serial is 0 when none did
	// and Run holds a reservation on it instead (Held).
	Serial int64        `json:"serial,omitempty"`
	Run    string       `json:"run,omitempty"`
	Actor  string       `json:"actor,omitempty"`
	PR     *PullRequest `json:"pr,omitempty"`
	Held   bool         `json:"held,omitempty"`
}

// empty reports whether the commit matched the plan exactly.
func (d *Deviation) empty() bool {
	return len(d.Unplanned)+len(d.Unchanged)+len(d.Kept)+len(d.Overwritten)+len(d.Tainted)+len(d.InputsChanged) == 0
}

// PullRequest identifies the pull request a run belongs to, when any.
type PullRequest struct {
	Repo    string `json:"repo"` // "owner/name"
	Number  int    `json:"number"`
	HeadSHA string `json:"head_sha,omitempty"`
	URL     string `json:"url,omitempty"`
}

// String renders "owner/name#N".
func (p *PullRequest) String() string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf("%s#%d", p.Repo, p.Number)
}

// Holder is the process holding a run's reservations (docs/design.md
// "actor / holder"), renewed by lease.
type Holder struct {
	Host string `json:"host"`
	PID  int    `json:"pid"`
}

// String renders "host:pid".
func (h Holder) String() string { return fmt.Sprintf("%s:%d", h.Host, h.PID) }

// RunKind is plan or apply (docs/design.md "run": one plan or one apply).
type RunKind string

// Run kinds.
const (
	KindPlan  RunKind = "plan"
	KindApply RunKind = "apply"
)

// RunStatus is where a run is in its life.
type RunStatus string

// Plan run statuses.
const (
	StatusPlanning RunStatus = "planning" // terraform plan in progress
	StatusPlanned  RunStatus = "planned"  // open: may be applied
	// StatusApplying: an apply run has claimed this plan (plan) or holds
	// reservations and runs Terraform (apply).
	StatusApplying   RunStatus = "applying"
	StatusApplied    RunStatus = "applied"    // plan: consumed by a committed apply; apply: committed
	StatusStale      RunStatus = "stale"      // plan: a later version changed its write set; re-plan
	StatusSuperseded RunStatus = "superseded" // plan: replaced by a re-plan with a different intent
)

// Apply run statuses (and failure statuses shared by both kinds).
const (
	StatusWaiting      RunStatus = "waiting"       // apply: blocked on another run's reservations
	StatusRefused      RunStatus = "refused"       // apply: a rule stopped it before Terraform ran
	StatusFailed       RunStatus = "failed"        // Terraform or Kilolock failed; see End
	StatusInterrupted  RunStatus = "interrupted"   // cancelled (Ctrl-C); what Terraform wrote is committed
	StatusLeaseExpired RunStatus = "lease-expired" // its holder stopped renewing; reservations dropped
)

// Open reports whether the run is still in progress or, for a plan, still
// applicable.
func (s RunStatus) Open() bool {
	switch s {
	case StatusPlanning, StatusPlanned, StatusApplying, StatusWaiting:
		return true
	}
	return false
}

// InProgress reports whether r's holder is working on it now: a plan run
// planning, an apply run waiting or applying. Only such a run has a lease of
// its own (LeaseUntil) that its holder renews. A plan run claimed by an
// apply (applying) is not in progress itself: its apply run is.
func (r Run) InProgress() bool {
	switch r.Kind {
	case KindPlan:
		return r.Status == StatusPlanning
	case KindApply:
		return r.Status == StatusWaiting || r.Status == StatusApplying
	}
	return false
}

// Run is one plan or one apply. IDs are ULIDs: sortable by creation time.
type Run struct {
	ID     string    `json:"id"`
	Kind   RunKind   `json:"kind"`
	State  string    `json:"state"`
	Actor  string    `json:"actor"`
	Holder Holder    `json:"holder"`
	Status RunStatus `json:"status"`
	// End is how the run ended (refused, failed, superseded, …), or why an
	// open apply waits: typed facts (end.go); nil while it runs normally.
	End        *End         `json:"end,omitempty"`
	PR         *PullRequest `json:"pr,omitempty"`
	CreatedAt  time.Time    `json:"created_at"`
	UpdatedAt  time.Time    `json:"updated_at"`
	FinishedAt *time.Time   `json:"finished_at,omitempty"`
	// LeaseUntil is the run's own lease (docs/design.md "holder": renewed by
	// lease): while the run is in progress (InProgress) its holder promises
	// to be alive until then, and renews it every Lease/3 (Store.RenewRun,
	// by the store's clock). Once it has passed, and the run holds no live
	// reservation, the lease sweep (Store.ExpireLeases, Store.Acquire) ends
	// the run lease-expired — a holder killed while planning or waiting
	// leaves no run open forever. Zero for runs stored by a kl without run
	// leases: the sweep leaves those alone.
	LeaseUntil time.Time `json:"lease_until,omitzero"`

	// Plan runs.
	Envelope *Envelope `json:"envelope,omitempty"`
	ApplyRun string    `json:"apply_run,omitempty"` // the apply that claimed this plan
	ReplanOf string    `json:"replan_of,omitempty"` // the reviewed plan this re-plan re-checks

	// Apply runs.
	PlanRun         string `json:"plan_run,omitempty"` // the reviewed plan
	CommittedSerial int64  `json:"committed_serial,omitempty"`
	// AllowedBecause holds the facts, decided and stored at apply time, that
	// let this run proceed beside others (ADR D2).
	AllowedBecause []Fact `json:"allowed_because,omitempty"`
	// SincePlan is the preflight classification this run acted on (ADR D3).
	SincePlan *SincePlan `json:"since_plan,omitempty"`

	// Backend is Terraform's LockInfo of a backend lock's run (an apply
	// run without a plan whose first marker is "backend-lock", ADR 0056),
	// set on read by the engine's views from that marker: the store does
	// not keep it in the run (the marker is the record). Nil otherwise.
	Backend *LockInfo `json:"backend_lock,omitempty"`
	// Lock is what the views know of a backend lock's run beyond its
	// LockInfo (its mode, writes, refusals, unlock), set with Backend on
	// read; never stored (the markers are the record).
	Lock *LockFacts `json:"-"`
}

// Scope holds the plan scope selectors (ADR D1).
type Scope struct {
	Dir          string   `json:"dir"`
	Targets      []string `json:"targets,omitempty"`
	Replace      []string `json:"replace,omitempty"`
	ChangedFiles []string `json:"changed_files,omitempty"`
	Workspace    string   `json:"workspace,omitempty"`
	VarFiles     []string `json:"var_files,omitempty"`
	// Options are the Terraform plan options the plan was made with
	// (ADR 0045): -destroy, -refresh-only, -refresh=false, -parallelism,
	// and the names of its -var options (their values are in the plan's
	// ArtifactVars only).
	Options PlanOptions `json:"options,omitzero"`
}

// Lane is the execution path of a run (docs/design.md "lane").
type Lane string

// Lanes.
const (
	LaneTerraform Lane = "terraform"
	LaneNative    Lane = "native"
)

// Envelope is what a plan run believed it was doing (ADR D1): who, when,
// which state at which serial, its scope, its footprint, the reservations an
// apply of it takes, and the digest of the saved plan.
type Envelope struct {
	Actor        string        `json:"actor"`
	Holder       Holder        `json:"holder"`
	StartedAt    time.Time     `json:"started_at"`
	FinishedAt   time.Time     `json:"finished_at"`
	State        string        `json:"state"`
	Lineage      string        `json:"lineage"`
	SourceSerial int64         `json:"source_serial"`
	Scope        Scope         `json:"scope"`
	Footprint    Footprint     `json:"footprint"`
	Reservations []Reservation `json:"reservations"` // Run/Holder/lease unset: the set an apply takes
	Lane         Lane          `json:"lane"`
	// LaneReason says why the plan took its lane when it was not simply
	// asked for: --lane auto's choice, or the native lane's fall-back
	// ("fell back from the native lane: …"); "" otherwise.
	LaneReason       string       `json:"lane_reason,omitempty"`
	Slice            *Slice       `json:"slice,omitempty"`
	PlanDigest       string       `json:"plan_digest"` // "sha256:<hex>" of the saved plan file
	Summary          PlanSummary  `json:"summary"`
	TerraformVersion string       `json:"terraform_version,omitempty"`
	PR               *PullRequest `json:"pr,omitempty"`
	CommitSHA        string       `json:"commit_sha,omitempty"`
	// PlannedAtMerge: the plan was made when its pull request merged (the
	// GitHub Action's on-missing-plan: plan-and-apply), so nobody reviewed
	// it; reports say "planned at merge, not reviewed" (issue 15 §1).
	PlannedAtMerge bool `json:"planned_at_merge,omitempty"`
	// Reverts are the instances this plan writes whose planned value would
	// undo an earlier version's change (ADR 0046), found when it was
	// stored; by address. Attribute names only, never values.
	Reverts []Revert `json:"reverts,omitempty"`
	// Branch is how the plan's branch stood against its base, and whether
	// that base held what the plan would undo, as klbot asked GitHub
	// (Engine.RecordBranch, ADR 0046 decision 7); nil when no one asked
	// (kl) or GitHub could not say.
	Branch *BranchStatus `json:"branch,omitempty"`
}

// Slice is the native lane's state-engine slice metadata (ADR D1, D7;
// docs/adr/0069-native-lane.md): Roots are the scope's targets (a module
// target as its tree, "module.app.*"); Closure the resource-level
// addresses of every resource and data source the closure holds — the
// entries the slice's state holds, read with Store.Slice; Proved that
// every check of the closure proof passed (Checks).
type Slice struct {
	Roots   AddressSet `json:"roots"`
	Closure AddressSet `json:"closure"`
	Proved  bool       `json:"proved"`
	// Scoped is how the roots were found: "targets" (--target) or
	// "changed-files" (--changed-file, klbot's pull request files).
	Scoped string `json:"scoped,omitempty"`
	// Outputs are the root outputs the sliced configuration declares: the
	// only outputs its state holds.
	Outputs []string `json:"outputs,omitempty"`
	// Blocks counts the configuration blocks of the closure (resources,
	// data sources, variables, locals, outputs, module calls, providers).
	Blocks int `json:"blocks,omitempty"`
	// Entries counts the resource entries the slice's state held at the
	// source serial; StateResources the head's, for "3 of 10,000".
	Entries        int `json:"entries"`
	StateResources int `json:"state_resources"`
	// Checks are the closure proof's checks, in order.
	Checks []SliceCheck `json:"checks,omitempty"`
}

// SliceCheck is one check of the closure proof (internal/closure's Check:
// slice-validates, plan-within-slice, no-create-outside-slice,
// targets-planned): passed, or what failed it in plain words.
type SliceCheck struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Found  string `json:"found,omitempty"`
}

// PlanSummary counts a plan's changes by kind.
type PlanSummary struct {
	Add     int `json:"add"`
	Change  int `json:"change"`
	Destroy int `json:"destroy"`
	Replace int `json:"replace"`
	Move    int `json:"move"`
	Read    int `json:"read"`
	Outputs int `json:"outputs"`
	Import  int `json:"import,omitempty"`
	Forget  int `json:"forget,omitempty"`
	// Refresh counts, in a refresh-only plan (PlanOptions.RefreshOnly),
	// the objects the refresh found changed or gone outside Terraform,
	// whose refreshed values its apply records in the state (ADR 0045).
	Refresh int  `json:"refresh,omitempty"`
	Targets bool `json:"targeted"` // Terraform's "complete" was false
}

// Empty reports whether the plan changes nothing.
func (s PlanSummary) Empty() bool {
	return s.Add+s.Change+s.Destroy+s.Replace+s.Move+s.Read+s.Outputs+s.Import+s.Forget+s.Refresh == 0
}

// Footprint is a plan's write set and read set (docs/design.md "footprint").
//
// Write: every resource_changes entry whose actions are not no-op, both
// addresses of a move, and root outputs that change, each as the instance
// Terraform names (`x.y["k"]`; ADR 0065; a run stored before names
// resources). Read: resource-level addresses the
// planned changes depend on; never narrower than the truth — where the
// extractor could not resolve a reference it widened to a module prefix and
// said so in Widened. Unverified is empty when every configuration the read
// set depends on was read (or widened to its prefix); otherwise it says why
// the read set may still miss references plan JSON leaves out (a plan read
// without its configuration: `kl footprint` without --config-dir). `kl plan`
// always reads the configuration: its footprints are never unverified.
type Footprint struct {
	Write      AddressSet `json:"write"`
	Read       AddressSet `json:"read"`
	Widened    []Widening `json:"widened,omitempty"`
	Unverified string     `json:"unverified,omitempty"`
}

// All returns write ∪ read.
func (f Footprint) All() AddressSet { return f.Write.Union(f.Read) }

// Reservations returns the reservation set of the footprint: the write set
// in write mode, the read set minus the write set in read mode (docs/design.md
// plan step 3). Run, holder and lease are left for the store to fill.
func (f Footprint) Reservations() []Reservation {
	out := make([]Reservation, 0, len(f.Write)+len(f.Read))
	for _, a := range f.Write {
		out = append(out, Reservation{Address: a, Mode: ModeWrite})
	}
	for _, a := range f.Read.Minus(f.Write) {
		out = append(out, Reservation{Address: a, Mode: ModeRead})
	}
	return out
}

// Widening records one place where the read set was widened to a prefix
// because the reference could not be resolved exactly.
type Widening struct {
	Address Address `json:"address"` // the prefix that was added
	From    string  `json:"from"`    // the reference or construct, e.g. "local.subnets in module.app"
	Reason  string  `json:"reason"`
}

// ReservationMode is read or write. Read/read coexist; write conflicts with
// anything on an overlapping address (docs/design.md "reservation").
type ReservationMode string

// Reservation modes.
const (
	ModeRead  ReservationMode = "read"
	ModeWrite ReservationMode = "write"
)

// Reservation is one (state, address, mode, holder run, lease) claim.
//
// FencedAt, when set, makes it a fence (ADR 0035): the write reservation of
// an apply whose lease ran out after its Terraform started and before it
// committed. The lease sweep keeps it — live whatever ExpiresAt says — from
// that moment until the run's recovery, its holder's own commit, or an
// operator's unfence lifts it: the real objects are in a state nobody has
// recorded, so no other run may write them, or read them to plan a write.
type Reservation struct {
	State      string          `json:"state,omitempty"`
	Address    Address         `json:"address"`
	Mode       ReservationMode `json:"mode"`
	Run        string          `json:"run,omitempty"`
	Holder     Holder          `json:"holder,omitzero"`
	AcquiredAt time.Time       `json:"acquired_at,omitzero"`
	ExpiresAt  time.Time       `json:"expires_at,omitzero"`
	FencedAt   time.Time       `json:"fenced_at,omitzero"`
}

// Fenced reports whether r is a fence (FencedAt set).
func (r Reservation) Fenced() bool { return !r.FencedAt.IsZero() }

// ConflictsWith reports whether r and o cannot be held at once by different
// runs: overlapping addresses and at least one write.
func (r Reservation) ConflictsWith(o Reservation) bool {
	if r.Mode == ModeRead && o.Mode == ModeRead {
		return false
	}
	return r.Address.Overlaps(o.Address)
}

// Conflicts returns, for the requested reservations want, the held
// reservations that block them (held by other runs), grouped by holding
// run in the order first seen.
func Conflicts(run string, want, held []Reservation) []Blocker {
	var out []Blocker
	idx := map[string]int{}
	for _, h := range held {
		if h.Run == run {
			continue
		}
		var blocked []Address
		for _, w := range want {
			if w.ConflictsWith(h) {
				blocked = append(blocked, w.Address)
			}
		}
		if len(blocked) == 0 {
			continue
		}
		i, ok := idx[h.Run]
		if !ok {
			i = len(out)
			idx[h.Run] = i
			out = append(out, Blocker{Run: h.Run, Holder: h.Holder})
		}
		out[i].Addresses = out[i].Addresses.Union(NewAddressSet(blocked...))
		out[i].Held = append(out[i].Held, h)
		out[i].Fenced = out[i].Fenced || h.Fenced()
	}
	return out
}

// Blocker is one run whose reservations block a request: the requested
// addresses it blocks and its own conflicting reservations.
//
// Fenced is set when any of them is a fence (Reservation.Fenced): the run
// is an apply whose holder died while its Terraform ran, and only `kl run
// recover` or `kl run unfence` frees them — no wait does. TerraformStarted
// is when its Terraform started (its "apply-started" marker), for the
// refusal's words.
type Blocker struct {
	Run              string        `json:"run"`
	PR               *PullRequest  `json:"pr,omitempty"`
	Actor            string        `json:"actor,omitempty"`
	Holder           Holder        `json:"holder"`
	Addresses        AddressSet    `json:"addresses"`
	Held             []Reservation `json:"held"`
	Fenced           bool          `json:"fenced,omitempty"`
	TerraformStarted time.Time     `json:"terraform_started,omitzero"`
	// Backend is the blocking run's Terraform LockInfo when it is a
	// backend lock (ADR 0056), set by the engine when it refuses or
	// reads a run (never stored: a blocker's run keeps it in its marker).
	// BackendSince is when that lock was taken.
	Backend      *LockInfo `json:"-"`
	BackendSince time.Time `json:"-"`
	// Lock is the blocking backend lock's facts (mode, writes, …), set
	// with Backend; never stored.
	Lock *LockFacts `json:"-"`
}
