package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// Words for allowed-because facts (ADR D2) and markers (ADR D4).

// factWords puts one allowed-because fact into words. A waited-for fact
// names its own wait (engine.Fact.Waited); facts stored before it existed
// fall back to the run's total wait (its "reserved" marker) when the run
// waited for that one run only.
func factWords(f engine.Fact, waited engine.Duration, waits int) sentence {
	switch f.Kind {
	case engine.FactDisjointWrites:
		s := words("disjoint write sets with ", who(f.Run, "", f.PR), ": you write ", addrs(f.OwnWrite))
		if len(f.OtherWrite) == 0 {
			return s.add(txt("; it writes nothing (it holds reads only)"))
		}
		return words(s, "; it writes ", addrs(f.OtherWrite))
	case engine.FactReadRead:
		return words("read/read on ", addrs(f.Addresses), " with ", who(f.Run, "", f.PR), ": compatible")
	case engine.FactStalenessPassed:
		switch {
		case len(f.Serials) > 0:
			return words(fmt.Sprintf("staleness check passed over %s (%s)",
				plural(len(f.Serials), "independent version", "independent versions"), serials(f.Serials)))
		case f.HeadSerial == f.SourceSerial:
			return words(headUnchanged(f.SourceSerial))
		}
		return words(fmt.Sprintf("staleness check passed: no version between serial %d and head %d changed a planned target",
			f.SourceSerial, f.HeadSerial))
	case engine.FactReplanApplied:
		s := words(fmt.Sprintf("re-planned against head %d as ", f.HeadSerial), runSpan(f.Run))
		if f.Commit != "" {
			s = words(fmt.Sprintf("re-planned the merge commit %s against head %d as ", shortSHA(f.Commit), f.HeadSerial), runSpan(f.Run))
		}
		if len(f.Serials) > 0 {
			s = s.add(txt(fmt.Sprintf(" (plan input changed in %s %s)", versionWord(len(f.Serials)), serials(f.Serials))))
		}
		return s.add(txt(": intent unchanged, nothing outside this plan's footprint or that it reads would change, and the reservations held cover it, so the re-plan could be applied in place of the reviewed plan"))
	case engine.FactReplanUnchanged:
		s := words("re-checked by re-plan ", runSpan(f.Run), fmt.Sprintf(" against head %d", f.HeadSerial))
		if len(f.Serials) > 0 {
			s = s.add(txt(fmt.Sprintf(" (plan input changed in %s %s)", versionWord(len(f.Serials)), serials(f.Serials))))
		}
		return s.add(txt(": intent unchanged and nothing this plan reads would change, so the reviewed plan could be applied"))
	case engine.FactWaitedFor:
		s := words("waited ")
		switch {
		case f.Waited > 0:
			s = words("waited ", durationWords(f.Waited), " ")
		case waits == 1 && waited > 0:
			s = words("waited ", durationWords(waited), " ")
		}
		return words(s, "for ", waitedWho(f.Run, f.PR, f.Backend, f.Actor), " over ", addrs(f.Addresses), freedWords(f.OtherEnd))
	case engine.FactSliceClosure:
		return words("state-engine slice closure proved sufficient", addrsSuffix(" over ", f.Addresses))
	}
	s := words(string(f.Kind))
	if f.Run != "" {
		s = words(s, " with ", who(f.Run, "", f.PR))
	}
	return words(s, addrsSuffix(" on ", f.Addresses))
}

// freedWords says how the run a waited-for fact names let go: ", which
// released it" (after its commit or refusal), or, when its holder died
// before its Terraform started, that its lease ran out — never "released"
// for a run that did not.
func freedWords(end *engine.End) string {
	switch {
	case end.Is(engine.CauseLeaseExpired):
		return ", whose holder stopped renewing: its lease ran out and the reservations were dropped"
	case end.Is(engine.CauseApplied) || end.Is(engine.CauseLeaseLost):
		return ", which committed and released it"
	}
	return ", which released it"
}

// factShort is a fact compressed for a history "why" line.
func factShort(f engine.Fact) sentence {
	switch f.Kind {
	case engine.FactDisjointWrites:
		return words("disjoint writes with ", runSpan(f.Run))
	case engine.FactReadRead:
		return words("read/read with ", runSpan(f.Run))
	case engine.FactStalenessPassed:
		switch {
		case len(f.Serials) > 0:
			return words(fmt.Sprintf("staleness passed over %s %s (independent)", versionWord(len(f.Serials)), serials(f.Serials)))
		case f.HeadSerial == f.SourceSerial:
			// At preflight: the version may have merged onto a later head.
			return words(fmt.Sprintf("head unchanged at preflight (serial %d)", f.SourceSerial))
		}
		return words("staleness passed")
	case engine.FactReplanApplied:
		if f.Commit != "" {
			return words("re-planned merge commit "+shortSHA(f.Commit)+" as ", runSpan(f.Run), ": intent unchanged, re-plan applied")
		}
		return words("re-planned as ", runSpan(f.Run), ": intent unchanged, re-plan applied")
	case engine.FactReplanUnchanged:
		return words("re-checked by re-plan ", runSpan(f.Run), ": intent unchanged")
	case engine.FactWaitedFor:
		if f.Waited > 0 {
			return words("waited "+durationWords(f.Waited)+" for ", runSpan(f.Run))
		}
		return words("waited for ", runSpan(f.Run))
	case engine.FactSliceClosure:
		return words("slice closure proved")
	}
	return words(string(f.Kind))
}

func versionWord(n int) string {
	if n == 1 {
		return "version"
	}
	return "versions"
}

func addrsSuffix(prefix string, set engine.AddressSet) sentence {
	if len(set) == 0 {
		return nil
	}
	return words(prefix, addrs(set))
}

// allowedWords puts every fact of a run into words.
func allowedWords(facts []engine.Fact, reserved *engine.Marker) []sentence {
	var waited engine.Duration
	if reserved != nil {
		waited = reserved.Waited
	}
	waits := 0
	for _, f := range facts {
		if f.Kind == engine.FactWaitedFor {
			waits++
		}
	}
	out := make([]sentence, len(facts))
	for i, f := range facts {
		out[i] = factWords(f, waited, waits)
	}
	return out
}

// markerTone colours a marker by what it means for the run.
func markerTone(m engine.Marker) tone {
	switch m.Kind {
	case engine.MarkerStalenessFailed, engine.MarkerFailed, engine.MarkerLeaseExpired:
		return toneBad
	case engine.MarkerDeviation:
		if overwritten(m.Deviation) {
			return toneBad
		}
		return toneWarn
	case engine.MarkerWaited, engine.MarkerWidened, engine.MarkerFellBack, engine.MarkerProviders:
		return toneWarn
	case engine.MarkerReplanned:
		if m.IntentChanged != nil && *m.IntentChanged {
			return toneBad
		}
		return toneWarn
	case engine.MarkerValidated:
		if m.IntentChanged != nil && *m.IntentChanged {
			return toneBad
		}
		return toneGood
	case engine.MarkerStalenessPassed, engine.MarkerCommitted, engine.MarkerReserved:
		return toneGood
	case engine.MarkerRecovered, engine.MarkerFenceLifted:
		return toneWarn // a partial version; or a fence gone, what Terraform did perhaps untracked
	}
	return toneNone
}

// markerWordsOf puts a marker of a run in status into words: the "failed"
// marker the engine records when a run ends says how it ended — "refused:
// …" for a refusal (engine apply.go abort), "interrupted …", "superseded:
// …", "discarded by ACTOR: WHY" — instead of "failed". status "" reads the
// marker alone.
func markerWordsOf(m engine.Marker, status engine.RunStatus) sentence {
	if m.Kind != engine.MarkerFailed {
		return markerWords(m)
	}
	switch status {
	case engine.StatusRefused:
		return words(toned(toneBad, "refused"), reasonSuffix(markerText(m)))
	case engine.StatusSuperseded:
		if m.End.Is(engine.CauseDiscarded) {
			// A discard (`kl run discard`): who, and why when given.
			return words(toned(markerTone(m), "discarded"), strings.TrimPrefix(discardWords(m.End), "discarded"))
		}
		return endWords(status, markerText(m), markerTone(m))
	case engine.StatusInterrupted, engine.StatusLeaseExpired:
		return endWords(status, markerText(m), markerTone(m))
	}
	return markerWords(m)
}

// endWords is how a run ended, in words: "interrupted during terraform
// apply: …" when the reason names the status itself, else "STATUS: reason".
func endWords(status engine.RunStatus, reason string, t tone) sentence {
	word := strings.ReplaceAll(string(status), "-", " ")
	if reason == "" {
		return words(toned(t, word))
	}
	if rest, ok := strings.CutPrefix(reason, word); ok && (rest == "" || rest[0] == ' ' || rest[0] == ':') {
		return words(toned(t, word), rest)
	}
	return words(toned(t, word), ": "+reason)
}

// markerWords puts one marker into words; the verb carries its tone.
func markerWords(m engine.Marker) sentence {
	v := func(s string) span { return toned(markerTone(m), s) }
	if s, ok := lockMarkerWords(m, v); ok {
		return s
	}
	switch m.Kind {
	case engine.MarkerPlanned:
		return words(v("planned"), fmt.Sprintf(" against serial %d; an apply takes %s", m.Serial, plural(m.Count, "reservation", "reservations")))
	case engine.MarkerReserved:
		s := words(v("reserved"), " "+plural(m.Count, "reservation", "reservations"))
		if m.Waited > 0 {
			s = s.add(txt(" after waiting " + durationWords(m.Waited)))
		}
		return s
	case engine.MarkerWaited:
		s := words(v("waiting"), " on ", waitedWho(m.Other, m.OtherPR, m.OtherBackend, m.OtherActor), " over ", addrs(m.Addresses))
		if m.Waited > 0 {
			s = s.add(txt(" for " + durationWords(m.Waited)))
		}
		return s
	case engine.MarkerPreflight:
		s := words(v("since-plan preflight"))
		if m.SincePlan != nil {
			s = words(s, ": ", countsWords(*m.SincePlan, ""))
		}
		return s
	case engine.MarkerStalenessPassed:
		s := words(v("staleness check passed"))
		if sp := m.SincePlan; sp != nil {
			s = s.add(txt(fmt.Sprintf(" (serial %d → head %d)", sp.SourceSerial, sp.HeadSerial)))
		}
		return s
	case engine.MarkerStalenessFailed:
		return stalenessFailedWords(m, v)
	case engine.MarkerReplanned:
		return replannedWords(m, v)
	case engine.MarkerWidened:
		return words(v("read set widened"), " to ", addrs(m.Addresses), reasonSuffix(m.Reason))
	case engine.MarkerFellBack:
		return words(v("fell back"), " from the native lane to the terraform lane", reasonSuffix(m.Reason))
	case engine.MarkerValidated:
		return validatedWords(m, v)
	case engine.MarkerApplyStarted:
		if m.Other != "" {
			return words(v("terraform apply started"), ": the re-plan ", runSpan(m.Other), fmt.Sprintf(" on the snapshot of serial %d, which it was made against", m.Serial))
		}
		return words(v("terraform apply started"), fmt.Sprintf(" on the snapshot of serial %d", m.Serial))
	case engine.MarkerApplied:
		return appliedWords(m, v)
	case engine.MarkerCommitted:
		return committedWords(m, v)
	case engine.MarkerDeviation:
		return words(v("deviation"), ": ", deviationWords(m.Deviation))
	case engine.MarkerReleased:
		return words(v("released"), " "+plural(m.Count, "reservation", "reservations"))
	case engine.MarkerLeaseExpired:
		return leaseExpiredWords(m, v)
	case engine.MarkerFenceLifted:
		return fenceLiftedWords(m, v)
	case engine.MarkerFailed:
		return words(v("failed"), reasonSuffix(markerText(m)))
	case engine.MarkerOperation:
		return words(v("asked"), " ", operationMarkerWords(m), " by "+m.By, reasonSuffix(m.Reason))
	case engine.MarkerAfterMerge:
		return afterMergeWords(m, v)
	case engine.MarkerArtifactsDeleted:
		return artifactsDeletedWords(m, v)
	case engine.MarkerRecovered:
		return recoveredMarkerWords(m, v)
	}
	s := words(v(string(m.Kind)))
	if m.Other != "" {
		s = words(s, " ", who(m.Other, "", m.OtherPR))
	}
	return words(s, addrsSuffix(" ", m.Addresses), reasonSuffix(markerText(m)))
}

// stalenessFailedWords puts a "staleness-failed" marker into words: the
// version, its run, and what it changed of the footprint.
func stalenessFailedWords(m engine.Marker, v func(string) span) sentence {
	what := "planned target"
	if m.Class == engine.ClassReadChanged {
		what = "plan input"
	}
	return words(v("staleness check failed"), fmt.Sprintf(": version %d, by ", m.Serial), who(m.Other, "", m.OtherPR),
		", changed "+what+" ", addrs(m.Addresses))
}

// afterMergeWords puts an "after-merge" marker into words: "after merge:
// acme/infra#42 had merged as C".
func afterMergeWords(m engine.Marker, v func(string) span) sentence {
	s := words(v("after merge"), ": ", prWords(m.OtherPR), " had merged")
	if m.Commit != "" {
		s = words(s, " as ", code(shortSHA(m.Commit)))
	}
	return s
}

// committedWords puts a "committed" marker into words: merged onto the
// head by an apply, or a day-2 operation's edit of it (ADR 0055).
func committedWords(m engine.Marker, v func(string) span) sentence {
	if m.Mode.Operation() {
		return words(v("committed"), " ", strong(fmt.Sprintf("version %d", m.Serial)),
			fmt.Sprintf(" onto head %d (%s; %s)", m.FromSerial, modeName(m.Mode), plural(m.Count, "address changed", "addresses changed")))
	}
	return words(v("committed"), " ", strong(fmt.Sprintf("version %d", m.Serial)),
		fmt.Sprintf(" merged onto head %d (%s; %s)", m.FromSerial, m.Mode, plural(m.Count, "address changed", "addresses changed")))
}

// leaseExpiredWords puts a "lease-expired" marker into words: the run's
// own lease (no addresses: it held no reservation), its reservations
// dropped, or its write set kept as fences (ADR 0035).
func leaseExpiredWords(m engine.Marker, v func(string) span) sentence {
	if len(m.Addresses) == 0 {
		return words(v("lease expired"), reasonSuffix(markerText(m)))
	}
	if m.Lock != nil {
		return words(v("lease ran out"), ": "+lockLapsedMarkerText(m))
	}
	if m.End != nil && len(m.End.Fenced) > 0 {
		s := words(v("lease expired mid-apply (fenced)"), ": ", addrs(m.End.Fenced), " stay fenced")
		if dropped := m.Addresses.Minus(m.End.Fenced); len(dropped) > 0 {
			s = words(s, "; reservations on ", addrs(dropped), " dropped")
		}
		return s
	}
	return words(v("lease expired"), ": reservations on ", addrs(m.Addresses), " dropped")
}

// fenceLiftedWords puts a "fence-lifted" marker into words (ADR 0035):
// "fence lifted by ACTOR: WHY" for an unfence, else by whose commit.
func fenceLiftedWords(m engine.Marker, v func(string) span) sentence {
	switch m.Lift {
	case engine.LiftUnfenced:
		return words(v("fence lifted"), " by "+m.By, " on ", addrs(m.Addresses), reasonSuffix(m.Reason),
			": nothing committed; what its Terraform did there is in no version")
	case engine.LiftRecovered:
		return words(v("fence lifted"), " on ", addrs(m.Addresses), ": the recovery committed what its Terraform last wrote")
	}
	if m.Lock != nil {
		return words(v("fence lifted"), " on ", addrs(m.Addresses), ": its Terraform's UNLOCK came after the lease ran out and committed its last checkpoint")
	}
	return words(v("fence lifted"), " on ", addrs(m.Addresses), ": its holder came back and committed what its Terraform did")
}

// replannedWords puts a "replanned" marker into words, by how the re-check
// ended; v tones the verb.
func replannedWords(m engine.Marker, v func(string) span) sentence {
	head := fmt.Sprintf(" against head %d", m.Serial)
	if m.Commit != "" {
		head = fmt.Sprintf(" of merge commit %s against head %d", shortSHA(m.Commit), m.Serial)
	}
	switch outcomeOf(m) {
	case replanUnchanged:
		return words(v("re-checked"), " by re-plan ", runSpan(m.Other), head, ": intent unchanged")
	case replanOutside:
		return words(v("re-checked"), " by re-plan ", runSpan(m.Other), head, ": it would also change ", addrs(m.Addresses),
			", ", strong("outside this plan's footprint"), "; stopped: review and apply ", runSpan(m.Other))
	case replanBeyond:
		s := words(v("re-checked"), " by re-plan ", runSpan(m.Other), head, ": it ", strong("needs reservations beyond those held"))
		if len(m.Addresses) > 0 {
			s = words(s, " (on ", addrs(m.Addresses), ")")
		}
		return words(s, "; stopped: review and apply ", runSpan(m.Other))
	case replanWrite:
		return words(v("re-checked"), " by re-plan ", runSpan(m.Other), head, ": ", strong("intent changed"),
			addrsSuffix(" for ", m.Addresses), "; stopped: review and apply ", runSpan(m.Other))
	case replanRead:
		return words(v("re-checked"), " by re-plan ", runSpan(m.Other), head, ": it would also change ", addrs(m.Addresses),
			", which this plan reads (", strong("configuration behind the head"), "); stopped")
	case replanDiffers:
		return words(v("re-checked"), " by re-plan ", runSpan(m.Other), head, ": it differs from the reviewed plan",
			addrsSuffix(" on ", m.Addresses), "; stopped")
	}
	return words(v("re-planned"), " as ", runSpan(m.Other), head)
}

// validatedWords puts a "validated" marker into words (ADR 0069 §9): the
// terraform lane's plan of the whole configuration agreed with the native
// intent on the write set, or it did not, with both intents.
func validatedWords(m engine.Marker, v func(string) span) sentence {
	by := words(" by the terraform lane's plan ", runSpan(m.Other), fmt.Sprintf(" of the whole configuration against head %d", m.Serial))
	if m.IntentChanged == nil || !*m.IntentChanged {
		return words(v("validated"), ": native intent unchanged", by)
	}
	return words(v("validation changed the trusted native intent"), addrsSuffix(" for ", m.Addresses), by,
		txt("; native: "+strings.ReplaceAll(m.Extra["native"], "\n", "; ")+"; terraform lane: "+strings.ReplaceAll(m.Extra["terraform"], "\n", "; ")),
		"; stopped: review and apply ", runSpan(m.Other))
}

// appliedWords puts an "applied" marker into words: what Terraform
// changed, and how it stopped when it did not finish; v tones the verb.
func appliedWords(m engine.Marker, v func(string) span) sentence {
	if m.End.Is(engine.CauseNothingToApply) {
		// Terraform was not run (a plan without changes).
		return words(v("nothing applied"), ": the plan has no changes: Terraform was not run")
	}
	changed := plural(m.Count, "address", "addresses")
	if len(m.Addresses) > 0 {
		changed = countWords(m.Addresses)
	}
	s := words(v("terraform apply"), " changed "+changed)
	if t := markerText(m); t != "" {
		s = s.add(txt(" before it stopped: " + t))
	}
	return s
}

func reasonSuffix(r string) sentence {
	if r == "" {
		return nil
	}
	return words(": " + r)
}

// recoveredFrom says which state `kl run recover` committed from
// (engine.Recover): the artifact of a "recovered" marker or of
// engine.Recoverable.
func recoveredFrom(artifact string) string {
	switch artifact {
	case engine.ArtifactApplyCheckpoint:
		return "from the last state Terraform wrote while it applied (its checkpoint)"
	case engine.ArtifactApplyResult:
		return "from the state Terraform left when it returned"
	case "":
		return "from what Terraform wrote"
	}
	return "from what Terraform wrote (" + artifact + ")"
}

// artifactWords names the artifacts of an "artifacts-deleted" marker
// (comma separated) in words, the saved plan first: "the saved plan
// (plan.tfplan), the configuration archive (config.tar.gz)", ….
func artifactWords(list string) string {
	what := map[string]string{
		engine.ArtifactPlanFile:        "the saved plan",
		engine.ArtifactConfig:          "the configuration archive",
		engine.ArtifactWholeConfig:     "the whole configuration's archive",
		engine.ArtifactVars:            "the -var values",
		engine.ArtifactApplyResult:     "the state Terraform returned",
		engine.ArtifactApplyCheckpoint: "the last checkpoint of the state Terraform wrote",
	}
	names := strings.Split(list, ",")
	order := []string{engine.ArtifactPlanFile, engine.ArtifactConfig, engine.ArtifactWholeConfig, engine.ArtifactVars, engine.ArtifactApplyResult, engine.ArtifactApplyCheckpoint}
	rank := func(n string) int {
		if i := slices.Index(order, n); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(names, func(a, b string) int { return rank(a) - rank(b) })
	var out []string
	for _, n := range names {
		if n == "" {
			continue
		}
		if w, ok := what[n]; ok {
			out = append(out, w+" ("+n+")")
		} else {
			out = append(out, n)
		}
	}
	return strings.Join(out, ", ")
}

// retentionWords is a retention as stored ("720h0m0s") in words: whole
// days as "30 days", else the duration as given.
func retentionWords(s string) string {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return s
	}
	if d%(24*time.Hour) == 0 {
		return plural(int(d/(24*time.Hour)), "day", "days")
	}
	return d.String()
}

// artifactsDeletedWords puts an "artifacts-deleted" marker into words
// (ADR 0063): what the gc deleted by retention, when, and the retention.
func artifactsDeletedWords(m engine.Marker, v func(string) span) sentence {
	return words(v("deleted by retention"), " on "+m.At.UTC().Format("2006-01-02 15:04:05Z"), ": "+artifactWords(m.Extra["artifacts"]),
		" (kept "+retentionWords(m.Extra["retention"])+" after the run closed: KL_RETENTION, ADR 0063)")
}

// recoveredMarkerWords puts a "recovered" marker into words: the version `kl
// run recover` committed, from which artifact, and what it kept at the
// head.
func recoveredMarkerWords(m engine.Marker, v func(string) span) sentence {
	s := words(v("recovered"), ": committed ", strong(fmt.Sprintf("version %d", m.Serial)), " "+recoveredFrom(m.Extra["artifact"]))
	if len(m.Addresses) > 0 {
		s = words(s, "; kept at the head (changed there since the plan, or held by another run): ", addrs(m.Addresses))
	}
	return words(s, uncheckedHolderWords(m))
}

// uncheckedHolderWords is what a "recovered" marker says of a holder kl
// could not check (engine.ExtraUncheckedHolder, ADR 0071); nothing else.
func uncheckedHolderWords(m engine.Marker) sentence {
	h := m.Extra[engine.ExtraUncheckedHolder]
	if h == "" {
		return nil
	}
	return words(toned(toneWarn, "; its holder "+h+" runs on another host: kl could not check that it had stopped"),
		", only that its lease had run out (if it still runs, its result is kept for `kl run recover`)")
}
