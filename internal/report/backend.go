package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// Backend locks (Terraform's http backend on a state, ADR 0056) in words:
// the one place their LockInfo, markers and provenance become English.

// backendRun reports whether r is a backend lock's run (Run.Backend, set
// by the engine's views).
func backendRun(r engine.Run) bool { return r.Backend != nil }

// lockWords: "backend write lock by bob (terraform apply, Terraform
// 1.11.4)", "backend read lock by …" (f nil: "backend lock by …").
func lockWords(actor string, i engine.LockInfo, f *engine.LockFacts) sentence {
	what := []string{engine.TerraformCommand(i.Operation)}
	if i.Version != "" {
		what = append(what, "Terraform "+i.Version)
	}
	kind := "backend lock"
	if f != nil {
		kind = "backend " + lockMode(f)
	}
	return words(fmt.Sprintf("%s by %s (%s)", kind, orWords(actor, "an unknown actor"), strings.Join(what, ", ")))
}

// lockSince: "10:02 UTC, 2026-12-02".
func lockSince(t time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return t.UTC().Format("15:04 UTC, 2006-01-02")
}

// blockerLockText names a blocker that is a backend lock: "backend lock by
// bob: terraform apply (OperationTypeApply) since 10:02 UTC, 2026-12-02
// (run X, Terraform 1.11.4 on bob@laptop)".
func blockerLockText(b engine.Blocker) string {
	i := b.Backend
	s := fmt.Sprintf("backend lock by %s: %s", orWords(b.Actor, "an unknown actor"), engine.TerraformCommand(i.Operation))
	if i.Operation != "" && engine.TerraformCommand(i.Operation) != i.Operation {
		s += " (" + i.Operation + ")"
	}
	s += " since " + lockSince(b.BackendSince)
	in := []string{"run " + b.Run}
	if i.Version != "" {
		in = append(in, "Terraform "+i.Version)
	}
	if i.Who != "" {
		in = append(in, "on "+i.Who)
	}
	return s + " (" + strings.Join(in, ", ") + ")"
}

// backendProvWords says what a push through the backend was, from its
// provenance: "push through the backend: terraform apply (3 writes,
// Terraform 1.11.4 on bob@laptop)", and how it ended when Terraform did
// not unlock it itself, and an adoption.
func backendProvWords(p engine.Provenance) sentence {
	b := p.Backend
	in := []string{plural(b.Writes, "write", "writes")}
	if b.Version != "" {
		in = append(in, "Terraform "+b.Version)
	}
	if b.Who != "" {
		in = append(in, "on "+b.Who)
	}
	s := words(fmt.Sprintf("push through the backend: %s (%s)", engine.TerraformCommand(b.Operation), strings.Join(in, ", ")))
	if p.Adopted {
		s = s.add(txt(fmt.Sprintf("; adopted: the document's lineage and serial %d replaced the empty version of `kl state init` (lineage %s)", p.CommittedSerial, p.PriorLineage)))
	}
	switch {
	case b.ForceUnlockedBy != "":
		s = s.add(txt("; force-unlocked by "+b.ForceUnlockedBy+": its last write, "), toned(toneBad, "partial"),
			txt(" (its Terraform may have done more)"))
	case b.Recovered:
		s = s.add(txt("; its lease ran out: "), toned(toneBad, "partial"), txt(", recovered from its last write"))
	}
	return s
}

// pushNote names a since-plan entry's push through the backend: " (a
// push through the backend: terraform state rm)"; otherwise modeNote.
func pushNote(e engine.SincePlanEntry) string {
	if e.Backend != "" {
		return " (a push through the backend: " + engine.TerraformCommand(e.Backend) + ")"
	}
	return modeNote(e.Mode)
}

// lockMarkerWords puts a backend lock's markers into words; ok false for
// any other marker.
func lockMarkerWords(m engine.Marker, v func(string) span) (sentence, bool) {
	switch m.Kind {
	case engine.MarkerBackendLock:
		i := engine.LockInfoOf(m)
		var in []string
		if i.Version != "" {
			in = append(in, "Terraform "+i.Version)
		}
		if i.Who != "" {
			in = append(in, "on "+i.Who)
		}
		in = append(in, "lock ID "+i.ID)
		return words(v("locked"), fmt.Sprintf(" the whole state (%s) for %s by %s (%s)",
			m.Extra["mode"], engine.TerraformCommand(i.Operation), orWords(m.By, "an unknown actor"), strings.Join(in, ", "))), true
	case engine.MarkerBackendWrite:
		s := words(v("wrote"), fmt.Sprintf(" a checkpoint: a document at serial %d (%s)", m.Serial, plural(m.Count, "resource", "resources")))
		if m.Extra["adopt"] == "true" {
			s = s.add(txt("; lineage " + m.Extra["lineage"] + ", adopted at UNLOCK"))
		}
		return s, true
	case engine.MarkerBackendRefused:
		return words(v("refused a write"), ": ", refusedWords(m)), true
	case engine.MarkerUnlocked:
		if engine.ForceUnlocked(m) {
			return words(v("force-unlocked"), " by "+m.By+" (terraform force-unlock)"), true
		}
		return words(v("unlocked"), " by "+m.By), true
	case engine.MarkerApplyStarted:
		if m.Extra["backend"] == "true" {
			// Recorded at LOCK for a terraform apply, at the first write
			// otherwise: what the lease means from here, not that
			// Terraform wrote (a lock may end having written nothing).
			return words(v("fences"), fmt.Sprintf(" the state if its lease runs out before UNLOCK (head serial %d), never frees it", m.Serial)), true
		}
	}
	return nil, false
}

// refusedWords says why a POST was refused (Terraform showed only "HTTP
// error: 409" or 423).
func refusedWords(m engine.Marker) sentence {
	switch m.Extra["refusal"] {
	case engine.RefusalReadLock:
		return words("a read lock (terraform plan) does not write")
	case engine.RefusalLineage:
		return words(fmt.Sprintf("the document has lineage %s, the state has lineage %s (serial %d onto head %d)",
			m.Extra["lineage"], m.Extra["state_lineage"], m.Serial, m.FromSerial))
	case engine.RefusalSerial:
		return words(fmt.Sprintf("the document's serial %d is below the head's %d: an older copy", m.Serial, m.FromSerial))
	case engine.RefusalNotState:
		return words("not a Terraform state v4 document" + reasonSuffix(m.Reason).plain())
	case engine.RefusalTooLarge:
		return words("its body was over the server's body cap (KL_MAX_BODY_MIB, KLBOT_MAX_BODY_MIB)" + reasonSuffix(m.Reason).plain())
	case engine.RefusalContentMD5:
		return words("its Content-MD5 header did not match its body" + reasonSuffix(m.Reason).plain())
	case engine.RefusalLockID:
		if m.Extra["lock_id"] == "" {
			return words("it named no lock (no ?ID=) while a write lock held the state" + reasonSuffix(m.Reason).plain())
		}
		return words("its ?ID=" + m.Extra["lock_id"] + " names no write lock holding the state" + reasonSuffix(m.Reason).plain())
	}
	return words(orWords(m.Extra["refusal"], "refused") + reasonSuffix(m.Reason).plain())
}

// unlockedText is EndText of a lock that ended with nothing to commit.
func unlockedText(end *engine.End) string {
	if end.By != "" {
		return "force-unlocked by " + end.By + " (terraform force-unlock): nothing written, nothing committed"
	}
	return "unlocked: nothing written beyond the head, nothing committed"
}

// lockFields are a backend lock's facts in `kl status`: the lock, its
// lease end, its writes and its last refused write.
func lockFields(f fields, a engine.ActiveRun, o Options) fields {
	f = f.addField("lock", lockWords(a.Run.Actor, *a.Run.Backend, a.Run.Lock))
	f = f.addField("lease until", words(fmtTime(a.LeaseUntil)+" (not renewed: Terraform never renews an http lock)"))
	if !a.Run.Lock.Read() { // a read lock writes nothing (its POSTs are refused)
		f = f.addField("writes", words(plural(a.Writes, "checkpoint", "checkpoints")+", committed as one version at UNLOCK"))
	}
	if a.Refused != nil {
		f = f.addField("refused write", words(fmtTime(a.Refused.At)+": ", refusedWords(*a.Refused)))
	}
	return f
}

// jLock is a backend lock's LockInfo (docs/json.md).
type jLock struct {
	ID        string `json:"id"`
	Operation string `json:"operation"`
	Command   string `json:"command"`
	Who       string `json:"who,omitempty"`
	Version   string `json:"terraform_version,omitempty"`
	Info      string `json:"info,omitempty"`
	Created   *jtime `json:"created,omitempty"`
	Path      string `json:"path,omitempty"`
	// Mode is the lock's reservation: read (terraform plan) or write.
	Mode string `json:"mode,omitempty"`
}

func toLock(i *engine.LockInfo) *jLock {
	if i == nil {
		return nil
	}
	j := &jLock{ID: i.ID, Operation: i.Operation, Command: engine.TerraformCommand(i.Operation), Who: i.Who, Version: i.Version, Info: i.Info, Path: i.Path}
	if !i.Created.IsZero() {
		t := jtime(i.Created)
		j.Created = &t
	}
	return j
}

// jBackendPush is Provenance.Backend (docs/json.md).
type jBackendPush struct {
	Operation       string `json:"operation"`
	Command         string `json:"command"`
	Who             string `json:"who,omitempty"`
	Version         string `json:"terraform_version,omitempty"`
	LockID          string `json:"lock_id"`
	Writes          int    `json:"writes"`
	ForceUnlockedBy string `json:"force_unlocked_by,omitempty"`
	Recovered       bool   `json:"recovered,omitempty"`
}

func toBackendPush(b *engine.BackendPush) *jBackendPush {
	if b == nil {
		return nil
	}
	return &jBackendPush{Operation: b.Operation, Command: engine.TerraformCommand(b.Operation), Who: b.Who, Version: b.Version,
		LockID: b.LockID, Writes: b.Writes, ForceUnlockedBy: b.ForceUnlockedBy, Recovered: b.Recovered}
}

// lockStatus is the status a view shows for run r (ADR 0056): a backend
// lock released at UNLOCK with no version reads "released" (it applied
// nothing: not "applied"), a read lock that holds "reading"; any other
// run, and any other lock, its stored status.
func lockStatus(r engine.Run) string {
	switch {
	case !backendRun(r):
	case engine.LockReleased(r):
		return "released"
	case r.InProgress() && r.Lock.Read():
		return "reading"
	}
	return string(r.Status)
}

// runStatusTone colours lockStatus(r).
func runStatusTone(r engine.Run) tone {
	if engine.LockReleased(r) || (backendRun(r) && r.InProgress()) {
		return toneInfo
	}
	return statusTone(r.Status)
}

// lockMode: "read lock" (terraform plan) or "write lock".
func lockMode(f *engine.LockFacts) string {
	if f.Read() {
		return "read lock"
	}
	return "write lock"
}

// lockOp: "terraform plan (OperationTypePlan)".
func lockOp(i engine.LockInfo) string {
	c := engine.TerraformCommand(i.Operation)
	if i.Operation != "" && c != i.Operation {
		c += " (" + i.Operation + ")"
	}
	return c
}

// lockRunText is the end of backend lock run r in words, ok false when
// r is not a backend lock or its end is not one of a lock's own (released
// at UNLOCK; its lease ran out): "the read lock of terraform plan
// (OperationTypePlan) ended at UNLOCK by bob: …", "the backend lock's
// lease (KL_BACKEND_LOCK_TTL) ran out at T without an UNLOCK …".
func lockRunText(r engine.Run) (string, bool) {
	if !backendRun(r) || r.End == nil {
		return "", false
	}
	switch {
	case engine.LockReleased(r):
		return releasedText(r), true
	case r.End.Is(engine.CauseLeaseExpired):
		return lapsedText(r), true
	}
	return "", false
}

// releasedText says how a backend lock ended at UNLOCK with no version.
func releasedText(r engine.Run) string {
	f := r.Lock
	if f == nil {
		f = &engine.LockFacts{}
	}
	by := r.End.By
	if by == "" && f.Unlocked != nil {
		by = f.Unlocked.By
	}
	how := "at UNLOCK by " + orWords(by, "an unknown actor")
	if r.End.By != "" || (f.Unlocked != nil && engine.ForceUnlocked(*f.Unlocked)) {
		how = "when " + orWords(by, "an unknown actor") + " force-unlocked it (terraform force-unlock)"
	}
	s := fmt.Sprintf("the %s of %s ended %s", lockMode(f), lockOp(*r.Backend), how)
	if f.Read() {
		return s + ": a read lock writes nothing, so no version was committed"
	}
	s += " with no version written"
	switch {
	case f.Writes == 0 && len(f.Refused) > 0:
		s += ": Kilolock refused " + refusedList(f.Refused)
	case f.Writes == 0:
		s += ": it wrote nothing"
	default:
		s += ": its " + plural(f.Writes, "write", "writes") + " hold only what the head holds"
		if len(f.Refused) > 0 {
			s += "; Kilolock refused " + refusedList(f.Refused)
		}
	}
	return s
}

// refusedList: "its write (Terraform showed HTTP error: 409): the
// document has lineage …", "its 2 writes (…): A; B".
func refusedList(ms []engine.Marker) string {
	var why []string
	for _, m := range ms {
		w := refusedWords(m).plain()
		if !slices.Contains(why, w) {
			why = append(why, w)
		}
	}
	what := "its write"
	if len(ms) > 1 {
		what = fmt.Sprintf("its %d writes", len(ms))
	}
	return what + " (Terraform showed only an HTTP error): " + strings.Join(why, "; ")
}

// lapsedText says how a backend lock's lease ran out (ADR 0056 decision
// 3: Terraform never renews an http lock, so nobody "stopped renewing"),
// what it fences, and what lifts the fence — or that its own UNLOCK came
// after and committed.
func lapsedText(r engine.Run) string {
	end, f := r.End, r.Lock
	if f == nil {
		f = &engine.LockFacts{}
	}
	s := "the backend lock's lease (KL_BACKEND_LOCK_TTL, never renewed: Terraform never renews an http lock) ran out"
	if !end.LeaseEnd.IsZero() {
		s += " at " + leaseTime(end.LeaseEnd)
	}
	s += fmt.Sprintf(" without an UNLOCK, while %s by %s", lockOp(*r.Backend), orWords(r.Actor, "an unknown actor"))
	if r.Backend.Who != "" {
		s += " on " + r.Backend.Who
	}
	s += " held it"
	late := ""
	if f.Unlocked != nil {
		late = "; its UNLOCK arrived after the lease ran out, at " + leaseTime(f.Unlocked.At)
	}
	fenced := abbreviate(end.Fenced.Strings(), 8)
	switch {
	case len(end.Fenced) == 0:
		return s + late + "; it fenced nothing (it wrote nothing, and its Terraform does not apply): its reservation was dropped"
	case end.Lifted == "":
		return s + late + "; " + fenced + " stays fenced — its Terraform may have changed real objects — until " + lockLift(r.ID, f.Writes)
	case end.Lifted == engine.LiftCommitted && r.CommittedSerial > 0:
		return s + late + fmt.Sprintf(" and committed its last checkpoint as version %d, which lifted the fence on %s: nothing more is needed", r.CommittedSerial, fenced)
	case end.Lifted == engine.LiftRecovered && r.CommittedSerial > 0:
		return s + late + fmt.Sprintf("; its last checkpoint was committed as version %d (partial), which lifted the fence on %s", r.CommittedSerial, fenced)
	case end.Lifted == engine.LiftUnfenced:
		return s + late + "; the fence on " + fenced + " was lifted without a commit (its fence-lifted marker says by whom and why): what its Terraform did there is in no version"
	}
	return s + late + "; the fence on " + fenced + " was lifted"
}

// lockLift is what lifts the fence of lapsed backend lock run id that
// wrote writes checkpoints (ADR 0035, ADR 0056 decision 6): its last
// checkpoint recovered, or an unfence after checking the real objects —
// with no checkpoint there is nothing to recover.
func lockLift(id string, writes int) string {
	if writes == 0 {
		return "someone checks the real objects: it wrote no checkpoint, so there is nothing to recover; then `" + unfenceCommand(id) + "`"
	}
	return fmt.Sprintf("`%s` commits its last checkpoint (%s), or, after checking the real objects, `%s`",
		recoverCommand(id), plural(writes, "write", "writes"), unfenceCommand(id))
}

// lockLiftWords is lockLift as a sentence of command spans.
func lockLiftWords(id string, pr *engine.PullRequest, writes int) sentence {
	u := cmdSpan(unfenceCommand(id), command{verb: verbUnfence, run: id, pr: pr})
	if writes == 0 {
		return words("it wrote no checkpoint, so there is nothing to recover: after checking the real objects, ", u)
	}
	return words(cmdSpan(recoverCommand(id), command{verb: verbRecover, run: id, pr: pr}),
		" commits its last checkpoint ("+plural(writes, "write", "writes")+"), or, after checking the real objects, ", u)
}

// lockShort is whatWords' brief end of a backend lock run ("" for none).
func lockShort(r engine.Run) string {
	if !backendRun(r) {
		return ""
	}
	f := r.Lock
	switch {
	case engine.LockReleased(r) && f.Read():
		return "released at UNLOCK: a read lock writes nothing"
	case engine.LockReleased(r) && f != nil && f.Writes == 0 && len(f.Refused) > 0:
		return "released with no version written: " + plural(len(f.Refused), "write", "writes") + " refused"
	case engine.LockReleased(r):
		return "released with no version written"
	case r.End.Is(engine.CauseLeaseExpired) && r.CommittedSerial > 0 && r.End.Lifted == engine.LiftRecovered:
		// kl run recover committed the fence's checkpoint: no UNLOCK came.
		return "lease ran out without an UNLOCK; its last checkpoint recovered (kl run recover)"
	case r.End.Is(engine.CauseLeaseExpired) && r.CommittedSerial > 0:
		return "its UNLOCK arrived after its lease ran out"
	case r.End.Is(engine.CauseLeaseExpired) && len(r.End.Fenced) > 0 && r.End.Lifted == "":
		return "lease ran out without an UNLOCK (fenced)"
	case r.End.Is(engine.CauseLeaseExpired):
		return "lease ran out without an UNLOCK"
	}
	return ""
}

// runKind is a run's kind in JSON: "backend-lock" for a backend lock
// (stored as an apply run without a plan, ADR 0056: it applies no plan),
// else the stored kind.
func runKind(r engine.Run) string {
	if backendRun(r) {
		return "backend-lock"
	}
	return string(r.Kind)
}

// RunEndText is EndText of run r's end, in a backend lock's own words
// when it is one (lockRunText).
func RunEndText(r engine.Run) string {
	if s, ok := lockRunText(r); ok {
		return s
	}
	return EndText(r.ID, r.End)
}

// fencedLockWords is fencedWords of a backend lock whose lease ran out
// (ADR 0056 decision 6): "run X (bob) is fenced: the backend lock's lease
// (KL_BACKEND_LOCK_TTL) ran out at T without an UNLOCK (terraform apply
// (OperationTypeApply) on bob@laptop, 0 checkpoints written); it fences *
// — what lifts it".
func fencedLockWords(f engine.FencedRun, fenced engine.AddressSet) sentence {
	r := f.Run
	s := words(who(r.ID, r.Actor, r.PR), " ", toned(toneBad, "is fenced"), ": the backend lock's lease (KL_BACKEND_LOCK_TTL) ran out")
	if r.End != nil && !r.End.LeaseEnd.IsZero() {
		s = s.add(txt(" at " + leaseTime(r.End.LeaseEnd)))
	}
	writes := 0
	if r.Lock != nil {
		writes = r.Lock.Writes
	}
	in := lockOp(*r.Backend)
	if r.Backend.Who != "" {
		in += " on " + r.Backend.Who
	}
	s = s.add(txt(" without an UNLOCK (" + in + ", " + plural(writes, "checkpoint", "checkpoints") + " written)"))
	return words(s, "; it fences ", heldWords(fenced), " — ", lockLiftWords(r.ID, r.PR, writes))
}

// waitedWho names run id that a run waited on (pr its pull request): a
// backend lock by its operator, Terraform's operation and Who — "backend
// lock run X by bob (terraform apply (OperationTypeApply), Terraform
// 1.11.4, on bob@laptop)", as a refusal names it — else the run.
func waitedWho(id string, pr *engine.PullRequest, lock *engine.LockInfo, actor string) sentence {
	if lock == nil {
		return who(id, "", pr)
	}
	in := []string{lockOp(*lock)}
	if lock.Version != "" {
		in = append(in, "Terraform "+lock.Version)
	}
	if lock.Who != "" {
		in = append(in, "on "+lock.Who)
	}
	return words("backend lock ", runSpan(id), " by "+orWords(actor, "an unknown actor")+" ("+strings.Join(in, ", ")+")")
}

// lockLapsedMarkerText is a backend lock's "lease-expired" marker in
// words: its lease ran out without an UNLOCK, and what stays fenced (the
// run's end says what lifts it).
func lockLapsedMarkerText(m engine.Marker) string {
	s := "the backend lock's lease (KL_BACKEND_LOCK_TTL) ran out without an UNLOCK"
	switch {
	case m.End != nil && len(m.End.Fenced) > 0:
		s += ": " + abbreviate(m.End.Fenced.Strings(), 8) + " stays fenced (its Terraform may have changed real objects)"
	case len(m.Addresses) > 0:
		s += ": its reservation on " + abbreviate(m.Addresses.Strings(), 8) + " was dropped"
	}
	return s
}
