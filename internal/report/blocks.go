package report

import (
	"fmt"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// Blocks shared by several views, built from the words of words.go and
// events.go.

// scopeWords lists a plan's scope selectors (ADR D1): dir, -target
// addresses, -replace addresses (forced replacements), changed files,
// workspace and var files.
func scopeWords(sc engine.Scope) sentence {
	parts := []sentence{words("dir ", code(sc.Dir))}
	if len(sc.Targets) > 0 {
		parts = append(parts, words("targets ", codes(sc.Targets)))
	}
	if len(sc.Replace) > 0 {
		parts = append(parts, words("forced replacements ", codes(sc.Replace)))
	}
	if len(sc.ChangedFiles) > 0 {
		parts = append(parts, words("changed files ", codes(sc.ChangedFiles)))
	}
	if sc.Workspace != "" && sc.Workspace != "default" {
		parts = append(parts, words("workspace ", code(sc.Workspace)))
	}
	if len(sc.VarFiles) > 0 {
		parts = append(parts, words("var files ", codes(sc.VarFiles)))
	}
	return join(append(parts, optionsWords(sc.Options)...), "; ")
}

// optionsWords are the plan options of a scope (ADR 0045): "terraform
// options `-destroy`, `-parallelism=4`" and "-var `region`, `token`
// (values kept with the plan's secrets)" — the names of -var options only,
// never their values. None for Terraform's default plan.
func optionsWords(o engine.PlanOptions) []sentence {
	var out []sentence
	if f := o.Flags(); len(f) > 0 {
		out = append(out, words("terraform options ", codes(f)))
	}
	if len(o.Vars) > 0 {
		out = append(out, words("-var ", codes(o.Vars), " (values kept with the plan's secrets)"))
	}
	return out
}

func codes(ss []string) sentence {
	var out sentence
	for i, s := range ss {
		if i > 0 {
			out = out.add(txt(", "))
		}
		out = out.add(code(s))
	}
	return out
}

// prField is a run's PR and commit: "acme/infra#42 at abc1234".
func prField(pr *engine.PullRequest, sha string) sentence {
	switch {
	case pr == nil && sha == "":
		return nil
	case pr == nil:
		return words("commit ", code(sha))
	}
	s := words(prWords(pr))
	if sha == "" {
		sha = pr.HeadSHA
	}
	if sha != "" {
		s = s.add(txt(" at "), code(sha))
	}
	return s
}

// addField appends a field unless its value is empty.
func (f fields) addField(key string, val sentence) fields {
	if len(val) == 0 {
		return f
	}
	return append(f, field{key, val})
}

// envelopeFields is a plan's envelope (ADR D1).
func envelopeFields(r engine.Run, env *engine.Envelope) fields {
	var f fields
	f = f.addField("state", words(strong(env.State), fmt.Sprintf(" at source serial %d (lineage %s)", env.SourceSerial, env.Lineage)))
	f = f.addField("actor", words(env.Actor))
	f = f.addField("holder", words(env.Holder.String()))
	f = f.addField("planned", words(fmtTime(env.StartedAt)+" → "+fmtTime(env.FinishedAt)))
	f = f.addField("scope", scopeWords(env.Scope))
	f = f.addField("lane", laneWords(env))
	if sl := env.Slice; sl != nil && len(sl.Checks) > 0 {
		f = f.addField("closure proof", proofWords(sl.Checks))
	}
	digest := words(code(env.PlanDigest))
	if env.TerraformVersion != "" {
		digest = digest.add(txt(" (Terraform " + env.TerraformVersion + ")"))
	}
	f = f.addField("plan digest", digest)
	f = f.addField("PR", envelopePRField(env))
	f = f.addField("review", atMergeWords(env))
	f = f.addField("changes", changesWords(env.Summary))
	if r.ReplanOf != "" {
		f = f.addField("re-plan of", words(runSpan(r.ReplanOf)))
	}
	return f
}

// laneWords is the envelope's lane line (ADR 0033 D1, D7): the lane, the
// native lane's slice — how it was scoped, its roots, the resources of its
// closure against the state's, its blocks, whether it was proved — and
// why the plan took its lane when it was not simply asked for.
func laneWords(env *engine.Envelope) sentence {
	lane := words(string(env.Lane))
	if sl := env.Slice; sl != nil {
		proved := "not proved"
		if sl.Proved {
			proved = "proved sufficient"
		}
		scoped := "scoped to " + strings.ReplaceAll(sl.Scoped, "-", " ")
		if sl.Scoped == "" {
			scoped = "slice"
		}
		lane = lane.add(txt(fmt.Sprintf(" (%s: %s; closure of %s, %d of the state's %d resource entries, %s; %s)",
			scoped, plural(len(sl.Roots), "root", "roots"), plural(len(sl.Closure), "address", "addresses"),
			sl.Entries, sl.StateResources, plural(sl.Blocks, "block", "blocks"), proved)))
	}
	if env.LaneReason != "" {
		lane = lane.add(txt(" — " + env.LaneReason))
	}
	return lane
}

// proofWords are the closure proof's checks: each passed, or what failed
// it.
func proofWords(cs []engine.SliceCheck) sentence {
	var parts []string
	for _, c := range cs {
		if c.Passed {
			parts = append(parts, c.Name+" passed")
		} else {
			parts = append(parts, c.Name+" failed: "+c.Found)
		}
	}
	return words(strings.Join(parts, "; "))
}

// changesWords is a change summary labelled as counted per resource
// instance, where it sits beside write-set counts per resource address.
func changesWords(sum engine.PlanSummary) sentence {
	if sum.Empty() {
		return summaryWords(sum)
	}
	return words("per instance: ", summaryWords(sum))
}

// writeSetWords counts a write set by resource, its instances apart, plus
// root outputs (countWords), beside the instances the plan changes, which the
// change summary counts: "18 resources, 1 output (286 instances change)".
func writeSetWords(write engine.AddressSet, sum engine.PlanSummary) sentence {
	if len(write) == 0 {
		return words("nothing")
	}
	s := countWords(write)
	var counts []string
	if n := sum.Add + sum.Change + sum.Destroy + sum.Replace + sum.Forget; n > 0 {
		counts = append(counts, plural(n, "instance changes", "instances change"))
	}
	if sum.Move > 0 {
		counts = append(counts, plural(sum.Move, "instance moves", "instances move"))
	}
	if sum.Import > 0 {
		counts = append(counts, plural(sum.Import, "instance imported", "instances imported"))
	}
	if sum.Refresh > 0 {
		counts = append(counts, plural(sum.Refresh, "instance refreshed", "instances refreshed"))
	}
	if len(counts) > 0 {
		s += " (" + strings.Join(counts, ", ") + ")"
	}
	return words(s)
}

// readSetWords counts a read set (countWords) and its widened prefixes,
// and says when it is unverified (engine.Footprint.Unverified).
func readSetWords(fp engine.Footprint) sentence {
	s := countWords(fp.Read)
	if n := len(fp.Widened); n > 0 {
		s += fmt.Sprintf(" (%d widened)", n)
	}
	if fp.Unverified != "" {
		return words(s+", ", toned(toneWarn, "unverified"))
	}
	return words(s)
}

// unverifiedWords says why a read set is unverified: what was not read and
// what plan JSON leaves out (engine.Footprint.Unverified).
func unverifiedWords(fp engine.Footprint) sentence {
	return words(toned(toneWarn, "read set unverified"), ": "+fp.Unverified)
}

// footprintSections adds the write set, the read set (widened prefixes
// marked with their reason) and the reservation counts (ADR D1).
func footprintSections(d *doc, fp engine.Footprint, rs []engine.Reservation) {
	wrows := groupedRows(fp.Write)
	widened := map[engine.Address][]engine.Widening{}
	for _, w := range fp.Widened {
		widened[w.Address] = append(widened[w.Address], w)
	}
	rrows := make([]addrRow, len(fp.Read))
	for i, a := range fp.Read {
		rrows[i] = addrRow{addr: string(a)}
		for j, w := range widened[a] {
			if j > 0 {
				rrows[i].note = rrows[i].note.add(txt("; "))
			}
			rrows[i].note = words(rrows[i].note, toned(toneWarn, "widened"), ": "+w.From+": "+w.Reason)
		}
	}
	d.section(words(fmt.Sprintf("Write set (%d)", len(fp.Write))), nonEmpty(addrList{rows: wrows}, words("nothing")))
	title := fmt.Sprintf("Read set (%d)", len(fp.Read))
	if len(fp.Widened) > 0 {
		title = fmt.Sprintf("Read set (%d, %d widened)", len(fp.Read), len(fp.Widened))
	}
	read := []block{nonEmpty(addrList{rows: rrows}, words("nothing"))}
	if fp.Unverified != "" {
		read = append(read, para(unverifiedWords(fp)))
	}
	d.section(words(title), read...)
	if rs != nil {
		d.section(words("Reservation set"), para(words(reservationWords(rs),
			": the write set in write mode, the rest of the read set in read mode")))
	}
}

// groupedRows are the rows of a write set with the instances of one
// resource grouped (issue 16 §3): a resource with two or more instances
// in the set is one row, its address and "N instances: KEYS", each
// instance spelt by its key where only the resource's own key differs
// (`["api"]`), whole otherwise (module instance keys); every other
// address is its own row. The rows keep the set's order.
func groupedRows(set engine.AddressSet) []addrRow {
	byRes := map[engine.Address][]engine.Address{}
	for _, a := range set {
		if a.IsInstance() {
			byRes[a.Resource()] = append(byRes[a.Resource()], a)
		}
	}
	var rows []addrRow
	done := map[engine.Address]bool{}
	for _, a := range set {
		r := a.Resource()
		insts := byRes[r]
		if !a.IsInstance() || len(insts) < 2 {
			rows = append(rows, addrRow{addr: string(a)})
			continue
		}
		if done[r] {
			continue
		}
		done[r] = true
		keys := make([]string, len(insts))
		for i, in := range insts {
			keys[i] = string(in)
			if rest, ok := strings.CutPrefix(string(in), string(r)); ok && strings.HasPrefix(rest, "[") {
				keys[i] = rest
			}
		}
		rows = append(rows, addrRow{addr: string(r), note: words(fmt.Sprintf("%d instances: %s", len(insts), strings.Join(keys, ", ")))})
	}
	return rows
}

// nonEmpty returns l, or a paragraph saying empty when l has no rows.
func nonEmpty(l addrList, empty sentence) block {
	if len(l.rows) == 0 {
		return para(empty)
	}
	return l
}

// sincePlanTable lists the versions since a plan, one row each with its
// class mark — "*" for the version the plan's own apply committed
// (engine.SincePlanEntry.OwnApply) — then the legend of the marks used
// (ADR D3, D8).
func sincePlanTable(sp *engine.SincePlan) []block {
	if len(sp.Entries) == 0 {
		return []block{para(words(headUnchanged(sp.SourceSerial)))}
	}
	t := table{head: []string{"", "version", "class", "produced by", "addresses that matter"}}
	used := map[string]bool{}
	for _, e := range sp.Entries {
		m := entryMark(e)
		used[m.sym] = true
		matter := addrs(e.Addresses)
		if len(e.Addresses) == 0 {
			matter = words(toned(toneDim, "none (it changed "+countWords(e.Changed)+")"))
		}
		if m == markOwnApply {
			matter = words(toned(toneDim, "it changed "+countWords(e.Changed)))
		}
		t.rows = append(t.rows, []sentence{
			{markSpan(m)},
			{txt(fmt.Sprint(e.Serial))},
			{classLabel(m)},
			producedBy(e),
			matter,
		})
	}
	return []block{t, marksIn(used)}
}

// producedBy names the run of a since-plan entry, and the day-2
// operation it was, if one (ADR 0055): "run X (alice), a state rm".
func producedBy(e engine.SincePlanEntry) sentence {
	s := who(e.Run, e.Actor, e.PR)
	switch {
	case e.Backend != "":
		s = s.add(txt(", a push through the backend: " + engine.TerraformCommand(e.Backend)))
	case e.Mode.Operation():
		s = s.add(txt(", a " + modeName(e.Mode)))
	}
	return s
}

// classLabel is a class's words; a planned target changed is also bold,
// so that it stands out in Markdown, which has no colour.
func classLabel(m mark) span {
	if m == markWriteChange {
		return strongT(m.tone, m.label)
	}
	return toned(m.tone, m.label)
}

// overlapTable lists overlapping open plans: one row per way they overlap,
// then one line per way that appears saying what it means at apply time.
func overlapTable(ovs []engine.Overlap) []block {
	if len(ovs) == 0 {
		return nil
	}
	t := table{head: []string{"run", "PR", "actor", "how", "addresses"}}
	used := map[string]bool{}
	for _, o := range ovs {
		pr := sentence{}
		if o.PR != nil {
			pr = words(prWords(o.PR))
		}
		for _, r := range overlapRows(o) {
			used[r.how] = true
			t.rows = append(t.rows, []sentence{{runSpan(o.Run)}, pr, words(o.Actor), words(r.how), addrs(r.addrs)})
		}
	}
	out := []block{t}
	for _, how := range []string{howBothWrite, howYouWrite, howItWrites} {
		if used[how] {
			out = append(out, para(overlapConsequence(how)))
		}
	}
	return out
}

// provenanceFields is a committed version's provenance (ADR D5). ms are
// the markers of the story that holds it: the committed marker says which
// head it merged onto, and the apply's "replanned: intent unchanged"
// marker, if any, the re-plan that re-checked the reviewed plan. When
// Terraform applied the re-plan, both digests are shown.
func provenanceFields(v *engine.Version, ms []engine.Marker) fields {
	p := v.Provenance
	var f fields
	f = f.addField("version", commitWords(p, mergedOnto(v, ms)))
	f = f.addField("committed", words(fmtTime(v.CreatedAt)))
	if p.Run != "" {
		f = f.addField("applied by", who(p.Run, p.Actor, p.PR))
	}
	if p.PlanRun != "" {
		f = f.addField("plan", appliedPlanWords(reviewedNoun(p.PlannedAtMerge), p.PlanRun, replanCheck(ms, p.Run), p.AppliedPlanRun, p.AppliedSourceSerial))
	}
	if p.PlanDigest != "" {
		d := words(code(p.PlanDigest))
		if p.AppliedPlanRun != "" {
			d = d.add(txt(" (the reviewed plan)"))
		}
		f = f.addField("plan digest", d)
	}
	if p.AppliedPlanRun != "" {
		f = f.addField("applied plan digest", words(code(p.AppliedPlanDigest), " (the re-plan ", runSpan(p.AppliedPlanRun), ", which Terraform applied)"))
	}
	f = f.addField("commit mode", words(string(p.Mode)))
	f = f.addField("matches plan", matchWords(p))
	if overwritten(p.Deviation) {
		f = f.addField("WARNING", overwrittenWarning(p))
	}
	if p.Partial {
		f = f.addField("partial", words(toned(toneBad, "yes"), ": the apply stopped part-way; this version holds what Terraform wrote"))
	}
	var lost []engine.LostWrite
	if p.Deviation != nil {
		lost = p.Deviation.Lost
	}
	for _, l := range lost {
		f = f.addField("not in the state", lostWords(l))
	}
	if len(v.Changed) == 0 && len(lost) > 0 {
		// Kept on purpose: the provenance of an apply that ran.
		f = f.addField("changed", words("nothing: the head kept every address this apply wrote; this version records that the apply ran and where its changes went"))
		return f
	}
	f = f.addField("changed", words(countWords(v.Changed)+reencodedWords(p.Reencoded)+"; the snapshot holds "+plural(v.Resources, "resource", "resources")))
	return f
}

// lostWords tells one address the head kept after the apply's lease
// lapsed, or in a recovery (engine.LostWrite): "terraform_data.a: the head
// keeps version 7 by run X (alice), which changed it after the snapshot
// this apply's Terraform applied to;
// what this apply did to it is in no version: check the real object, then
// import or remove it".
func lostWords(l engine.LostWrite) sentence {
	s := words(code(string(l.Address)), ": the head keeps ")
	switch {
	case l.Serial > 0:
		s = s.add(strong(fmt.Sprintf("version %d", l.Serial)))
		if l.Run != "" {
			s = words(s, " by ", who(l.Run, l.Actor, l.PR))
		}
		s = s.add(txt(", which changed it after the snapshot this apply's Terraform applied to"))
	case l.Run != "":
		s = words(s, "it: ", who(l.Run, l.Actor, l.PR), " holds it")
	default:
		s = s.add(txt("it"))
	}
	return s.add(toned(toneBad, "; what this apply did to it is in no version (the object may be orphaned): check the real object, then import or remove it"))
}

// appliedPlanWords says which plan an apply applied and why that was safe:
// "reviewed P; re-planned against head N, intent unchanged: applied the
// re-plan R" when Terraform applied re-plan applied (made against head
// serial) in place of the reviewed plan, whose inputs had changed (engine
// replan.go); "reviewed P" when it applied the reviewed plan. An apply
// recorded before re-plans were applied (a check marker, no applied
// re-plan) applied the reviewed plan to its own snapshot: "…; applied the
// reviewed plan". noun is reviewedNoun's: a plan made at merge is named
// as what it is, never "reviewed".
func appliedPlanWords(noun, plan string, check *engine.Marker, applied string, serial int64) sentence {
	s := words(noun, runSpan(plan))
	switch {
	case applied != "":
		return words(s, "; "+replannedHead(check, applied, serial)+", intent unchanged: applied the re-plan ", runSpan(applied))
	case check == nil:
		return s
	}
	return words(s, "; re-checked by re-plan ", runSpan(check.Other), fmt.Sprintf(" against head %d: intent unchanged; applied the reviewed plan", check.Serial))
}

// replannedHead says what re-plan rp planned, against head serial:
// "re-planned the merge commit C against head N" when its "replanned"
// marker m (nil: unknown) names the pull request's merge commit (ADR 0062),
// else "re-planned against head N".
func replannedHead(m *engine.Marker, rp string, serial int64) string {
	if m != nil && m.Other == rp && m.Commit != "" {
		return fmt.Sprintf("re-planned the merge commit %s against head %d", shortSHA(m.Commit), serial)
	}
	return fmt.Sprintf("re-planned against head %d", serial)
}

// reviewedNoun names the plan an apply applies: "reviewed P", or for a
// plan made at merge (Envelope.PlannedAtMerge: the GitHub Action's
// on-missing-plan: plan-and-apply) "planned at merge, not reviewed: P" —
// a word must never claim more than happened (issue 15 §4).
func reviewedNoun(atMerge bool) string {
	if atMerge {
		return "planned at merge, not reviewed: "
	}
	return "reviewed "
}

// replanTaken is the re-plan apply run a applies (or applied) in place of
// its reviewed plan, with the head it was made against: the one its
// version's provenance names, else its "apply-started" marker, else a
// re-plan of the story it claimed; "" when it applies the reviewed plan.
func replanTaken(s *engine.RunStory, a *engine.Run) (string, int64) {
	if v := s.Version; v != nil && v.Provenance.Run == a.ID && v.Provenance.AppliedPlanRun != "" {
		return v.Provenance.AppliedPlanRun, v.Provenance.AppliedSourceSerial
	}
	if m := lastOf(s.Markers, a.ID, engine.MarkerApplyStarted); m != nil && m.Other != "" {
		return m.Other, m.Serial
	}
	for _, rp := range s.Replans {
		if rp.ApplyRun == a.ID && rp.Envelope != nil {
			return rp.ID, rp.Envelope.SourceSerial
		}
	}
	return "", 0
}

// replanCheck returns the last "replanned: intent unchanged" marker of
// apply run id: the re-check its committed version went through.
func replanCheck(ms []engine.Marker, id string) *engine.Marker {
	var out *engine.Marker
	for _, m := range ofKind(ms, id, engine.MarkerReplanned) {
		if outcomeOf(m) == replanUnchanged {
			mm := m
			out = &mm
		}
	}
	return out
}

// deviationSections lists a deviation's addresses in full.
func deviationSections(d *doc, dr *engine.Deviation) {
	if dr == nil {
		return
	}
	for _, g := range []struct {
		title string
		set   engine.AddressSet
	}{
		{"Deviation: OVERWRITTEN (planned writes merged over changes the head made after the plan)", dr.Overwritten},
		{"Deviation: tainted (" + taintedMeaning(len(dr.Tainted)) + ")", dr.Tainted},
		{"Deviation: changed but not planned", dr.Unplanned},
		{"Deviation: planned but unchanged", dr.Unchanged},
		{"Deviation: kept at head (the head changed them since the plan)", dr.Kept},
	} {
		if len(g.set) > inlineMax {
			rows := make([]addrRow, len(g.set))
			for i, a := range g.set {
				rows[i] = addrRow{addr: string(a)}
			}
			d.section(words(fmt.Sprintf("%s (%d)", g.title, len(g.set))), addrList{rows: rows})
		}
	}
}

// refusalFields is one refusal: rule, version, producing run and PR, and
// the addresses; for a re-plan, the re-plan as it is now and what it went
// over.
func refusalFields(r refusal) fields {
	var f fields
	f = f.addField("rule", words(r.policy))
	switch r.rule {
	case ruleStale, ruleStaleStrict:
		f = f.addField("version", words(strong(fmt.Sprint(r.serial))))
		f = f.addField("produced by", who(r.run, r.actor, r.pr))
		f = f.addField("addresses", addrs(r.addrs))
	case ruleIntent, ruleBehindHead, ruleOutside, ruleBeyond:
		f = f.addField("re-plan", words(runSpan(r.run), fmt.Sprintf(" against head %d", r.serial)))
		f = f.addField("plan input changed in", changedIn(r.changed))
		switch r.outcome {
		case replanRead:
			f = f.addField("would change", words(addrs(r.addrs), ", which this plan reads: applying would revert what ", versionsWords(r.changed), " changed there"))
		case replanWrite:
			f = f.addField("intent changed", addrs(r.addrs))
		case replanOutside:
			f = f.addField("would also change", words(addrs(r.addrs), ", outside this plan's footprint"))
		case replanBeyond:
			f = f.addField("needs", words(r.unreserved))
		default:
			f = f.addField("differs on", addrs(r.addrs))
		}
		f = f.addField("re-plan status", replanStatusWords(r.replan))
	case ruleConflict:
		held := r.holder
		if held == nil {
			held = who(r.run, r.actor, r.pr)
		}
		f = f.addField("held by", held)
		f = f.addField("addresses", addrs(r.addrs))
	case ruleFenced:
		f = f.addField("fenced by", who(r.run, r.actor, r.pr))
		f = f.addField("addresses", addrs(r.addrs))
	case ruleValidation:
		f = f.addField("validation plan", words(runSpan(r.run), fmt.Sprintf(" (terraform lane, whole configuration) against head %d", r.serial)))
		f = f.addField("intent changed", addrs(r.addrs))
		f = f.addField("native intent", intentSpans(r.intents[0]))
		f = f.addField("terraform lane intent", intentSpans(r.intents[1]))
	}
	f = f.addField("next", r.next)
	return f
}

// intentSpans is a validation marker's intent lines ("ADDRESS: ACTIONS
// DIGEST" a line), each in code, separated by "; ".
func intentSpans(lines string) sentence {
	var s sentence
	for i, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		if i > 0 {
			s = s.add(txt("; "))
		}
		s = s.add(code(l))
	}
	return s
}

// roles names the runs of a story for its timeline: plan, re-plan, apply.
func roles(s *engine.RunStory) map[string]string {
	out := map[string]string{}
	if s.Plan != nil {
		out[s.Plan.ID] = "plan"
		if s.Plan.ReplanOf != "" {
			out[s.Plan.ID] = "re-plan"
		}
	}
	for _, rp := range s.Replans {
		out[rp.ID] = "re-plan"
	}
	if s.Apply != nil {
		out[s.Apply.ID] = "apply"
	}
	if s.Run.Kind == engine.KindApply {
		out[s.Run.ID] = "apply"
		if s.Run.PlanRun == "" {
			out[s.Run.ID] = "operation" // a day-2 operation (ADR 0055)
		}
		if backendRun(s.Run) {
			out[s.Run.ID] = "backend lock" // ADR 0056
		}
	}
	return out
}

// statuses maps the runs of a story to their status now, so that the
// marker that ended a run is told by how it ended (markerWordsOf).
func statuses(s *engine.RunStory) map[string]engine.RunStatus {
	out := map[string]engine.RunStatus{s.Run.ID: s.Run.Status}
	for _, r := range []*engine.Run{s.Plan, s.Apply} {
		if r != nil {
			out[r.ID] = r.Status
		}
	}
	for _, rp := range s.Replans {
		out[rp.ID] = rp.Status
	}
	return out
}

// timeline is every marker of a story in time order, each with the role of
// the run it belongs to.
func timeline(s *engine.RunStory) []block {
	if len(s.Markers) == 0 {
		return []block{para(words("no markers"))}
	}
	rl := roles(s)
	st := statuses(s)
	t := table{head: []string{"time", "run", "event"}}
	for _, m := range s.Markers {
		role := rl[m.Run]
		if role == "" {
			role = m.Run
		}
		t.rows = append(t.rows, []sentence{{txt(fmtTime(m.At))}, {txt(role)}, markerWordsOf(m, st[m.Run])})
	}
	var parts []sentence
	if id := idOf(s.Plan); id != "" {
		parts = append(parts, words(rl[id]+" ", runSpan(id)))
	}
	seen := map[string]bool{}
	for _, rp := range s.Replans {
		if !seen[rp.ID] {
			seen[rp.ID] = true
			parts = append(parts, words("re-plan ", runSpan(rp.ID)))
		}
	}
	if id := applyID(s); id != "" {
		parts = append(parts, words(rl[id]+" ", runSpan(id)))
	}
	return []block{para(words(toned(toneDim, "runs: "), join(parts, ", "))), t}
}

func idOf(r *engine.Run) string {
	if r == nil {
		return ""
	}
	return r.ID
}

func applyID(s *engine.RunStory) string {
	if s.Run.Kind == engine.KindApply {
		return s.Run.ID
	}
	return idOf(s.Apply)
}
