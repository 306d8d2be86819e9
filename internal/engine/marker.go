package engine

import "time"

// MarkerKind is the type of a marker: a timestamped event on a run that
// changes the meaning of the run and is therefore shown first-class (ADR D4).
type MarkerKind string

// Marker kinds (docs/design.md "marker").
const (
	MarkerPlanned         MarkerKind = "planned"          // plan run stored its envelope
	MarkerReserved        MarkerKind = "reserved"         // all reservations acquired
	MarkerWaited          MarkerKind = "waited"           // blocked on Other over Addresses
	MarkerPreflight       MarkerKind = "preflight"        // since-plan summary
	MarkerStalenessPassed MarkerKind = "staleness-passed" // since-plan allowed the apply
	MarkerStalenessFailed MarkerKind = "staleness-failed" // since-plan refused the apply
	MarkerReplanned       MarkerKind = "replanned"        // re-plan against the head; IntentChanged says how it ended
	MarkerWidened         MarkerKind = "widened"          // narrow lane → broader scope
	MarkerFellBack        MarkerKind = "fell-back"        // native lane → full snapshot
	MarkerApplyStarted    MarkerKind = "apply-started"    // terraform apply about to run on snapshot Serial
	MarkerApplied         MarkerKind = "applied"          // terraform apply finished
	MarkerCommitted       MarkerKind = "committed"        // version Serial written
	MarkerDeviation       MarkerKind = "deviation"        // committed ≠ planned
	MarkerReleased        MarkerKind = "released"         // reservations released
	MarkerLeaseExpired    MarkerKind = "lease-expired"    // holder stopped renewing
	MarkerFailed          MarkerKind = "failed"           // Reason says why
	MarkerRecovered       MarkerKind = "recovered"        // `kl run recover` committed version Serial from what Terraform last wrote
	MarkerFenceLifted     MarkerKind = "fence-lifted"     // the run's fences were lifted (Lift says how)
	MarkerOperation       MarkerKind = "operation"        // a day-2 operation was asked (Mode says which; ADR 0055)
	MarkerProviders       MarkerKind = "providers"        // how the run's providers were installed, when worth telling (Reason; ADR 0061)
	MarkerAfterMerge      MarkerKind = "after-merge"      // the apply runs after its pull request OtherPR merged (Commit: the merge commit, when known; ADR 0062)
	// MarkerArtifactsDeleted: the store's gc deleted artifacts of the run
	// by retention (ADR 0063): Extra["artifacts"] names them (comma
	// separated), Extra["retention"] the retention it applied; At is when.
	MarkerArtifactsDeleted MarkerKind = "artifacts-deleted"
)

// providerMarkers are the "providers" markers of a Terraform call's notes
// (PlanResult.Notes, ApplyResult.Notes), one each.
func providerMarkers(notes []string) []Marker {
	var ms []Marker
	for _, n := range notes {
		ms = append(ms, Marker{Kind: MarkerProviders, Reason: n})
	}
	return ms
}

// Lift is how a fence was lifted (a "fence-lifted" marker, ADR 0035).
type Lift string

// Lifts.
const (
	// LiftRecovered: `kl run recover` committed what the run's Terraform
	// last wrote.
	LiftRecovered Lift = "recovered"
	// LiftCommitted: the run's own holder, back after its lease lapsed,
	// committed what its Terraform did.
	LiftCommitted Lift = "committed"
	// LiftUnfenced: an operator lifted it without a commit (`kl run
	// unfence`), By, with Reason in their words.
	LiftUnfenced Lift = "unfenced"
)

// Marker is one typed, timestamped event on a run (ADR D4). Which fields are
// set depends on Kind:
//
//	reserved          Addresses (all reserved), Count of reservations
//	waited            Other (holding run), OtherPR, Addresses (overlap); written when the wait starts (the
//	                  reserved marker and the waited-for facts say how long it lasted)
//	preflight         SincePlan (source/head serials and the three class counts)
//	staleness-passed  SincePlan
//	staleness-failed  Serial (offending version), Other (its run), OtherPR, Class, Addresses (what it changed in the footprint)
//	replanned         Other (the re-plan run), Serial (head planned against), IntentChanged (false: the re-plan
//	                  is what gets applied; true: it stopped the apply), Serials (the read-changed versions it
//	                  re-checked); when it stopped the apply, End (how: intent changed, behind the head, outside
//	                  the footprint, beyond the reservations), Class (where the re-plan differed: write-changed =
//	                  the intent, read-changed = what the plan reads, independent = outside the footprint),
//	                  Addresses (those differences), Extra["outside"] (instances it changes outside the footprint)
//	apply-started     Serial (the snapshot Terraform applies the plan to: the applied plan's source serial),
//	                  Other (the re-plan Terraform applies in place of the reviewed plan; "" for the reviewed
//	                  plan itself); written just before Terraform runs, so a run without it never ran Terraform
//	applied           Count (resources Terraform changed), Addresses; with Count 0 and a Reason, Terraform
//	                  was not run (a plan without changes)
//	committed         Serial (committed), FromSerial (the head it merged onto), Mode, Count (changed addresses);
//	                  Reason (a day-2 operation: the operator's words)
//	deviation             Deviation
//	released          Count
//	lease-expired     Addresses (the reservations whose lease ran out), End (End.Fenced: those kept as fences,
//	                  ADR 0035); or, when the run's own lease (Run.LeaseUntil) ran out while it held none
//	                  (planning, waiting), no addresses and End
//	fence-lifted      Addresses (the fences lifted), Lift (recovered, committed, unfenced), By and Reason
//	                  (unfenced: who, in their words)
//	failed            Reason
//	operation         Mode (the commit mode it commits: rollback, push, state-rm, state-mv), By (the actor),
//	                  Reason (their words, when given), Serial (rollback: the version to restore; push: the
//	                  document's serial), Extra["addresses"] (state-rm: the addresses, one a line),
//	                  Extra["from"] and Extra["to"] (state-mv), Extra["force"] ("true": push --force);
//	                  the first marker of the run
//	providers         Reason: how the run's providers were installed when that is worth telling (no lock
//	                  file: not from the plugin cache; a cached package moved aside and reinstalled; ADR 0061)
//	recovered         Serial (the version committed), Count (addresses it changed), Addresses (changes
//	                  kept at the head, not merged), Extra["artifact"] (the artifact recovered from:
//	                  apply-result.tfstate or apply-checkpoint.tfstate), Reason
//	after-merge       OtherPR (the pull request that merged), Commit (its merge commit, "" when unknown): the
//	                  apply runs after that merge (ApplyInput.AfterMerge); the first marker of the run
type Marker struct {
	// Run is the run the marker belongs to; set on read by the engine's
	// views (the store keys markers by run).
	Run           string            `json:"run,omitempty"`
	Seq           int64             `json:"seq"`
	At            time.Time         `json:"at"`
	Kind          MarkerKind        `json:"kind"`
	Other         string            `json:"other_run,omitempty"`
	OtherPR       *PullRequest      `json:"other_pr,omitempty"`
	Addresses     AddressSet        `json:"addresses,omitempty"`
	Serial        int64             `json:"serial,omitempty"`
	FromSerial    int64             `json:"from_serial,omitempty"`
	Mode          CommitMode        `json:"commit_mode,omitempty"`
	Count         int               `json:"count,omitempty"`
	SincePlan     *SincePlanSummary `json:"since_plan,omitempty"`
	Class         SincePlanClass    `json:"class,omitempty"`
	IntentChanged *bool             `json:"intent_changed,omitempty"`
	Deviation     *Deviation        `json:"deviation,omitempty"`
	Waited        Duration          `json:"waited,omitempty"`
	// Serials: the read-changed versions a "replanned" marker re-checked.
	Serials []int64 `json:"serials,omitempty"`
	// Commit is the merge commit a "replanned" marker's re-plan planned
	// instead of the reviewed configuration (ApplyInput.MergeCommit, ADR
	// 0062); "" when it re-planned the reviewed configuration.
	Commit string `json:"commit,omitempty"`
	// End is how the run ended, on the "failed" marker that records it
	// (and "lease-expired" of a run's own lease, "applied" of a Terraform
	// that stopped part-way or was not run).
	End *End `json:"end,omitempty"`
	// Reason is the marker's own words where they come from outside the
	// engine's decisions (a widening's construct and why, from the
	// footprint extractor), or the legacy text of a marker stored before
	// ends were typed.
	Reason string            `json:"reason,omitempty"`
	Extra  map[string]string `json:"extra,omitempty"`
	// Lift and By: how a "fence-lifted" marker's fence was lifted, and who
	// lifted it when an operator did.
	Lift Lift   `json:"lift,omitempty"`
	By   string `json:"by,omitempty"`
	// OtherBackend and OtherActor: when Other is a backend lock (a
	// "waited" marker's blocker, ADR 0056), its Terraform LockInfo and its
	// actor, set on read by the engine's views; never stored.
	OtherBackend *LockInfo `json:"-"`
	OtherActor   string    `json:"-"`
	// Lock is the LockInfo of the backend lock whose marker this is (its
	// run's Backend), set on read by the engine's views; never stored.
	Lock *LockInfo `json:"-"`
}

// Duration is a time.Duration that marshals as Go's duration string
// ("1.5s") so stored and printed JSON reads naturally.
type Duration time.Duration

// MarshalText renders the duration as "1m2.5s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// FactKind is the type of an allowed-because fact (ADR D2).
type FactKind string

// Fact kinds.
const (
	// FactDisjointWrites: Run held reservations when this run acquired its
	// own, and their write sets are disjoint (and no write meets a read).
	FactDisjointWrites FactKind = "disjoint-write-sets"
	// FactReadRead: this run and Run both read Addresses; read/read is compatible.
	FactReadRead FactKind = "compatible-read-read"
	// FactStalenessPassed: the since-plan check passed over the versions in
	// Serials, all independent of the footprint (or none: head unchanged).
	FactStalenessPassed FactKind = "staleness-passed"
	// FactReplanApplied: read-changed versions (Serials) were re-checked by
	// re-planning (Run) against head HeadSerial: the intent did not change,
	// nothing outside the footprint or that the plan reads would change,
	// and the held reservations cover the re-plan's — so the re-plan was
	// applied in place of the reviewed plan (docs/design.md apply step 3).
	FactReplanApplied FactKind = "replan-applied"
	// FactReplanUnchanged: as FactReplanApplied, but stored by Kilolock
	// before issue 10 §2, when the reviewed plan was then applied to its own
	// snapshot; it is no longer written.
	FactReplanUnchanged FactKind = "replan-intent-unchanged"
	// FactWaitedFor: the run waited for Run over Addresses, which released
	// them before this run proceeded.
	FactWaitedFor FactKind = "waited-for"
	// FactSliceClosure: the native lane proved the fetched slice sufficient.
	FactSliceClosure FactKind = "slice-closure-proved"
)

// Fact is one stored reason why a run could proceed beside others (ADR D2).
// It is decided and stored when the decision is made, never re-derived from
// logs.
type Fact struct {
	Kind         FactKind     `json:"kind"`
	Run          string       `json:"run,omitempty"`
	PR           *PullRequest `json:"pr,omitempty"`
	Addresses    AddressSet   `json:"addresses,omitempty"`
	Serials      []int64      `json:"serials,omitempty"`
	SourceSerial int64        `json:"source_serial,omitempty"`
	HeadSerial   int64        `json:"head_serial,omitempty"`
	// Commit: the merge commit a replan-applied fact's re-plan planned
	// (Marker.Commit); "" for the reviewed configuration.
	Commit string `json:"commit,omitempty"`
	// Waited is how long this run waited for Run (waited-for facts).
	Waited Duration `json:"waited,omitempty"`
	// OtherWrite and OwnWrite are the two write sets a disjointness fact compared.
	OtherWrite AddressSet `json:"other_write,omitempty"`
	OwnWrite   AddressSet `json:"own_write,omitempty"`
	// OtherEnd is how Run had ended when this run got what it waited for
	// (waited-for facts): a release after its commit or refusal, or a lease
	// that ran out (its holder died) — so that the words say which. Nil
	// when Run was still in progress (it gave up the addresses otherwise).
	OtherEnd *End `json:"other_end,omitempty"`
	// Backend and Actor: when Run is a backend lock (ADR 0056), its
	// Terraform LockInfo and actor, set on read by the engine's views;
	// never stored.
	Backend *LockInfo `json:"-"`
	Actor   string    `json:"-"`
}
