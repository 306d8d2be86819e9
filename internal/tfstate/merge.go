package tfstate

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	version "github.com/hashicorp/go-version"
)

// ErrLineageMismatch: the head, the plan's base snapshot and the run's
// result are not one state (different lineages); nothing can be merged.
var ErrLineageMismatch = errors.New("lineage mismatch")

// MergeReport says where each address of a merged state came from. All
// lists are sorted resource-level addresses (or "output.NAME"), and
// instance addresses for a resource the run wrote at instance level
// (ADR 0065: MergeWith).
type MergeReport struct {
	// Merged: addresses whose entries were taken from the result (or dropped
	// because the result has none): every written address, plus the
	// unplanned ones the head had not changed since the plan.
	Merged []string
	// Kept: unplanned changes NOT merged, because the head changed the
	// address since the plan's base; the head's entries stay (no lost update).
	Kept []string
	// Unplanned: addresses changed between base and result but not in the
	// written list — refresh, a partial apply, dependencies Terraform
	// rewrote. Unplanned = (Merged ∖ written) ∪ Kept.
	Unplanned []string
	// Overwritten: written addresses whose head entries differed from both
	// the base's and the result's, i.e. another commit changed them after
	// the plan and this merge replaced that change. The since-plan check
	// refuses such applies (write-changed), so a non-empty list means a lost
	// update to report.
	Overwritten []string
	// Changed: addresses whose entries differ between head and the merged
	// state — the new version's changed set (engine.Version.Changed), equal
	// to Changed(head, merged) less the re-encoded addresses taken.
	Changed []string
	// Reencoded: addresses whose entries differ between base and result
	// only by Terraform's re-encoding (Reencoded: a provider's raised
	// schema version rewrote them; the plan changed nothing there, the
	// refresh found nothing). Neither Unplanned nor Changed: representation
	// is not change. Each is taken, in its new encoding, where the head has
	// not moved since the plan (and it is not to be kept); elsewhere the
	// head's stays, and nothing is lost.
	Reencoded []string
}

// Merge commits a terraform-lane run by snapshot-merge (docs/terraform.md
// "Snapshot-merge"; docs/design.md apply step 6). head is the state's current
// head, base the snapshot the run's plan was made from, result the state
// Terraform wrote when applying it, written the run's write set, serial the
// serial of the new version (head + 1).
//
// The merged state is a copy of head where:
//   - for every written address (resource-level, or "output.NAME") ALL head
//     entries of that address — every module instance — are replaced by the
//     result's entries for it, as Terraform wrote them (instances,
//     dependencies, sensitive_attributes, private); none in the result drops
//     them (a destroy, or the old address of a move);
//   - for every address in Changed(base, result) that is not written (an
//     unplanned change: refresh, a failed partial apply, rewritten
//     dependencies) the result's entries are taken only if head's entries
//     for it still equal base's (or already equal the result's); otherwise
//     head's stay and the address is reported in MergeReport.Kept;
//   - serial is serial, lineage is head's, check_results is null,
//     terraform_version is the newer of head's and result's (an unparsable
//     one loses; both unparsable: head's).
//
// Resources come out in Terraform's own order (module, mode, type, name:
// statefile's normalize), so the head's unchanged entries keep their places.
// head, base and result are not modified; the merged state shares their
// raw entries.
//
// written may be empty: then only the unplanned-change rule applies, which
// is the safe merge when the run's reservations were lost before commit.
//
// Errors: ErrLineageMismatch (wrapped) when the three lineages differ; a
// written address that is a prefix ("module.x.*", "*") or empty, an
// instance address that does not parse, names a module instance only or is
// not as Terraform writes it; a nil state.
func Merge(head, base, result *State, written []string, serial int64) (*State, MergeReport, error) {
	return MergeKeeping(head, base, result, written, nil, serial)
}

// MergeKeeping is Merge with a set of addresses that unplanned changes must
// not take even where the head has not moved since the plan: addresses other
// runs hold reservations on, when this run's own reservations lapsed (their
// holders may commit over them, or read them, at any moment). Such changes
// stay at the head and are reported in MergeReport.Kept. keep does not
// affect written addresses.
func MergeKeeping(head, base, result *State, written, keep []string, serial int64) (*State, MergeReport, error) {
	return MergeWith(MergeInput{Head: head, Base: base, Result: result, Written: written, Keep: keep, Serial: serial})
}

// MergeInput is what MergeWith merges: Merge's head, base, result,
// written and serial, MergeKeeping's keep, and the base as Terraform
// upgraded it.
type MergeInput struct {
	Head, Base, Result *State
	// Upgraded is Base as Terraform upgraded it to the providers' current
	// schemas before refreshing: the saved plan's "tfstate-prev" entry
	// (Terraform's PrevRunState). With it, the merge tells Terraform's
	// re-encoding from change (MergeReport.Reencoded), and a head entry
	// equal to it has not moved since the plan. Nil when unknown: every
	// difference then counts.
	Upgraded *State
	Written  []string
	Keep     []string
	Serial   int64
}

// MergeWith is MergeKeeping with the base as Terraform upgraded it
// (MergeInput.Upgraded). Errors are Merge's.
//
// A written instance address (`x.y["a"]`, `module.m["k"].x.y`; ADR 0065)
// merges its resource per instance (instances.go): the written instances
// from the result, the resource's other instances by the unplanned-change
// rule, each judged alone — so the head keeps the instances another run
// committed since the plan. The report then names instances for that
// resource.
func MergeWith(in MergeInput) (*State, MergeReport, error) {
	w, split, err := checkMergeInputs(in.Head, in.Base, in.Result, in.Written)
	if err != nil {
		return nil, MergeReport{}, err
	}
	take, rep := chooseTaken(in, w, split)
	if len(split) == 0 {
		return mergedState(in.Head, in.Result, take, in.Serial), rep, nil
	}
	result := *in.Result
	result.Resources = make([]Resource, 0, len(in.Result.Resources))
	for _, r := range in.Result.Resources {
		if _, ok := split[r.Address()]; !ok {
			result.Resources = append(result.Resources, r)
		}
	}
	for _, res := range mapKeysT(split) {
		entries, ir, err := mergeInstances(in, res, split[res])
		if err != nil {
			return nil, MergeReport{}, fmt.Errorf("merging run state into head: %w", err)
		}
		result.Resources = append(result.Resources, entries...)
		take[res] = true
		rep.Merged = append(rep.Merged, ir.Merged...)
		rep.Kept = append(rep.Kept, ir.Kept...)
		rep.Unplanned = append(rep.Unplanned, ir.Unplanned...)
		rep.Overwritten = append(rep.Overwritten, ir.Overwritten...)
		rep.Changed = append(rep.Changed, ir.Changed...)
		rep.Reencoded = append(rep.Reencoded, ir.Reencoded...)
	}
	sortEntries(result.Resources)
	for _, l := range []*[]string{&rep.Merged, &rep.Kept, &rep.Unplanned, &rep.Overwritten, &rep.Changed, &rep.Reencoded} {
		slices.Sort(*l)
	}
	return mergedState(in.Head, &result, take, in.Serial), rep, nil
}

func mapKeysT(m map[string][]Target) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkMergeInputs refuses a nil state, three lineages that differ
// (ErrLineageMismatch) and a written address checkWritten or
// instanceWrites refuses; it returns the written resource-level addresses
// and outputs as a set, and the written instance addresses by resource.
func checkMergeInputs(head, base, result *State, written []string) (map[string]bool, map[string][]Target, error) {
	if head == nil || base == nil || result == nil {
		return nil, nil, errors.New("merging run state into head: nil state")
	}
	if head.Lineage != base.Lineage || head.Lineage != result.Lineage {
		return nil, nil, fmt.Errorf("merging run state into head: %w: head %q, plan base %q, apply result %q",
			ErrLineageMismatch, head.Lineage, base.Lineage, result.Lineage)
	}
	w, split, err := instanceWrites(written)
	if err != nil {
		return nil, nil, fmt.Errorf("merging run state into head: %w", err)
	}
	for a := range w {
		if err := checkWritten(a); err != nil {
			return nil, nil, fmt.Errorf("merging run state into head: %w", err)
		}
	}
	return w, split, nil
}

// chooseTaken decides which addresses the merged state takes from result:
// every written one (w), and each unplanned change (changed between base
// and result) the head has not moved since the plan, or already holds as
// result does, unless it is in keep; a re-encoding (chooser.reencoded) is
// taken the same way but is no change. It returns them with the report.
func chooseTaken(in MergeInput, w map[string]bool, skip map[string][]Target) (map[string]bool, MergeReport) {
	var rep MergeReport
	keepSet := make(map[string]bool, len(in.Keep))
	for _, a := range in.Keep {
		keepSet[a] = true
		if strings.IndexByte(a, '[') >= 0 {
			// An instance another run holds: its resource's entries
			// (resource-level merge) must stay too.
			if t, err := ParseTarget(a); err == nil && t.Resource != nil {
				keepSet[targetResource(t)] = true
			}
		}
	}
	changed := changedSet(in.Base, in.Result, true)
	for a := range skip {
		delete(changed, a) // merged per instance (mergeInstances)
	}
	c := newChooser(in, changed, w)
	take := make(map[string]bool, len(w)+len(changed))
	for a := range w {
		take[a] = true
		if !c.unmoved(a) && !c.headIs(a, c.result, c.rg) {
			rep.Overwritten = append(rep.Overwritten, a)
		}
	}
	reencoded := map[string]bool{}
	for a := range changed {
		if w[a] {
			continue
		}
		switch {
		case c.isData(a):
			// What Terraform read (a data source: merged, never changed,
			// unplanned or kept — changedSet): fresher than the head's
			// copy if the head has not moved since the plan; else the
			// head's stays.
			take[a] = !keepSet[a] && c.unmoved(a)
		case c.reencoded(a):
			// Representation only: the new encoding where the head has
			// not moved; elsewhere the head's copy is as true.
			reencoded[a] = true
			take[a] = !keepSet[a] && (c.unmoved(a) || c.headIs(a, c.result, c.rg))
		default:
			rep.Unplanned = append(rep.Unplanned, a)
			// Take it if the head has not moved since the plan, or
			// already holds exactly what the run wrote — unless it is to
			// be kept.
			take[a] = !keepSet[a] && (c.unmoved(a) || c.headIs(a, c.result, c.rg))
			if !take[a] {
				rep.Kept = append(rep.Kept, a)
			}
		}
	}
	for a, t := range take {
		if !t {
			delete(take, a)
		} else if !c.headIs(a, c.result, c.rg) && !c.isData(a) && !reencoded[a] {
			rep.Changed = append(rep.Changed, a)
		}
	}
	rep.Merged = sortedKeys(take)
	rep.Reencoded = sortedKeys(reencoded)
	slices.Sort(rep.Overwritten)
	slices.Sort(rep.Unplanned)
	slices.Sort(rep.Kept)
	slices.Sort(rep.Changed)
	return take, rep
}

// chooser holds the entries of the addresses a merge may take, in head,
// base, result and the upgraded base (one pass over each, hashing only
// addresses of interest), and answers chooseTaken's questions about them.
type chooser struct {
	head, base, result, upgraded *State
	hg, bg, rg, ug               map[string][]*Resource
}

func newChooser(in MergeInput, changed, w map[string]bool) chooser {
	interest := maps.Clone(changed)
	maps.Copy(interest, w)
	c := chooser{head: in.Head, base: in.Base, result: in.Result, upgraded: in.Upgraded,
		hg: groupsOf(in.Head, interest), bg: groupsOf(in.Base, interest), rg: groupsOf(in.Result, interest)}
	if in.Upgraded != nil {
		c.ug = groupsOf(in.Upgraded, interest)
	}
	return c
}

// headIs reports whether the head's entries of a (or its output) equal
// other's (og: other's groups).
func (c chooser) headIs(a string, other *State, og map[string][]*Resource) bool {
	if name, ok := strings.CutPrefix(a, OutputPrefix); ok {
		h, inHead := c.head.Outputs[name]
		o, inOther := other.Outputs[name]
		return inHead == inOther && (!inHead || rawEqual(h.Raw, o.Raw))
	}
	return groupsEqual(c.hg[a], og[a])
}

// unmoved reports whether the head has not changed a since the plan: its
// entries equal the base's, or the base's as Terraform upgraded them (a
// commit that kept a re-encoding moved nothing).
func (c chooser) unmoved(a string) bool {
	return c.headIs(a, c.base, c.bg) || c.upgraded != nil && c.headIs(a, c.upgraded, c.ug)
}

// reencoded reports whether a managed resource's change between base and
// result is only Terraform's re-encoding: result's entries are the base's
// as Terraform upgraded them (not refreshed, not applied). Outputs never
// are.
func (c chooser) reencoded(a string) bool {
	if c.upgraded == nil || strings.HasPrefix(a, OutputPrefix) {
		return false
	}
	return len(c.rg[a]) > 0 && groupsEqual(c.ug[a], c.rg[a])
}

// isData reports whether a is a data source's address.
func (c chooser) isData(a string) bool {
	for _, g := range [][]*Resource{c.hg[a], c.bg[a], c.rg[a]} {
		if len(g) > 0 {
			return g[0].Mode == ModeData
		}
	}
	return false
}

// mergedState is head with the entries of the addresses in take (resources
// and outputs) replaced by result's, or dropped where result has none; its
// serial is serial, its lineage and extra fields head's.
func mergedState(head, result *State, take map[string]bool, serial int64) *State {
	out := &State{
		TerraformVersion: newerVersion(head.TerraformVersion, result.TerraformVersion),
		Serial:           serial,
		Lineage:          head.Lineage,
		Outputs:          make(map[string]Output, len(head.Outputs)),
		Resources:        mergedResources(head, result, take),
		Extra:            maps.Clone(head.Extra),
	}
	maps.Copy(out.Outputs, head.Outputs)
	for a := range take {
		name, ok := strings.CutPrefix(a, OutputPrefix)
		if !ok {
			continue
		}
		if o, ok := result.Outputs[name]; ok {
			out.Outputs[name] = o
		} else {
			delete(out.Outputs, name)
		}
	}
	return out
}

// mergedResources returns head's resource entries outside take and
// result's inside it, in Terraform's order.
func mergedResources(head, result *State, take map[string]bool) []Resource {
	res := make([]Resource, 0, len(head.Resources)+len(take))
	// Head's kept entries and result's taken ones, each in Terraform's
	// order, merged like two sorted runs (no sort in the normal case).
	var kept, taken []*Resource
	for _, r := range sortedView(head) {
		if !take[r.Address()] {
			kept = append(kept, r)
		}
	}
	for _, r := range sortedView(result) {
		if take[r.Address()] {
			taken = append(taken, r)
		}
	}
	for len(kept) > 0 || len(taken) > 0 {
		if len(taken) == 0 || (len(kept) > 0 && compareEntries(kept[0], taken[0]) <= 0) {
			res = append(res, *kept[0])
			kept = kept[1:]
		} else {
			res = append(res, *taken[0])
			taken = taken[1:]
		}
	}
	return res
}

// groupsOf returns the entries of s whose address is in set.
func groupsOf(s *State, set map[string]bool) map[string][]*Resource {
	out := make(map[string][]*Resource, len(set))
	for i := range s.Resources {
		r := &s.Resources[i]
		if r.noInstances {
			continue
		}
		if a := r.Address(); set[a] {
			out[a] = append(out[a], r)
		}
	}
	return out
}

// checkWritten rejects what the engine never writes: prefixes, instance
// addresses, empty strings.
func checkWritten(a string) error {
	switch {
	case a == "":
		return errors.New("empty written address")
	case a == "*" || strings.HasSuffix(a, ".*"):
		return fmt.Errorf("written address %q is a prefix: snapshot-merge needs the exact resource-level addresses the run wrote", a)
	case strings.ContainsAny(a, "[]\" \t\n"):
		return fmt.Errorf("written address %q is not resource-level: drop instance keys (engine.ParseAddress)", a)
	}
	return nil
}

// sortEntries sorts entries in Terraform's order (compareEntries), keeping
// the relative order of equal keys; already sorted input costs one pass.
func sortEntries(rs []Resource) {
	for i := 1; i < len(rs); i++ {
		if compareEntries(&rs[i-1], &rs[i]) > 0 {
			sort.SliceStable(rs, func(i, j int) bool { return compareEntries(&rs[i], &rs[j]) < 0 })
			return
		}
	}
}

// newerVersion returns the newer of two Terraform versions; an unparsable
// one loses, and with both unparsable the head's (a) wins.
func newerVersion(a, b string) string {
	va, errA := version.NewVersion(a)
	vb, errB := version.NewVersion(b)
	switch {
	case errB != nil:
		return a
	case errA != nil:
		return b
	case vb.GreaterThan(va):
		return b
	}
	return a
}
