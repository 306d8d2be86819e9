package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// Backend locks (Terraform's http backend on a state, ADR 0056) in words:
// the one place their LockInfo, markers and provenance become English.

// backendRun reports whether r is a backend lock's run (Run.Backend, set
// by the engine's views).
func backendRun(r engine.Run) bool { return r.Backend != nil }

// lockWords: "backend lock by bob (terraform apply, Terraform 1.11.4)".
func lockWords(actor string, i engine.LockInfo) sentence {
	what := []string{engine.TerraformCommand(i.Operation)}
	if i.Version != "" {
		what = append(what, "Terraform "+i.Version)
	}
	return words(fmt.Sprintf("backend lock by %s (%s)", orWords(actor, "an unknown actor"), strings.Join(what, ", ")))
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
			return words(v("Terraform writes"), fmt.Sprintf(" through the backend on the head, serial %d: a lapsed lease fences the state", m.Serial)), true
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
	f = f.addField("lock", lockWords(a.Run.Actor, *a.Run.Backend))
	f = f.addField("lease until", words(fmtTime(a.LeaseUntil)+" (not renewed: Terraform never renews an http lock)"))
	f = f.addField("writes", words(plural(a.Writes, "checkpoint", "checkpoints")+", committed as one version at UNLOCK"))
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
