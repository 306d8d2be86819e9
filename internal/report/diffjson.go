package report

import (
	"encoding/json"
	"strings"

	"github.com/kilolock/kilolock/internal/plandiff"
)

// The "diff" object of the plan and run documents (docs/json.md, ADR
// 0044): the report's own types, so that the stored encoding
// (plandiff.Format) can change without changing the documents.

type jDiff struct {
	// Text is the summary line ("2 to add, 1 to destroy — ⚠ 1 to destroy").
	Text        string          `json:"text"`
	Counts      jDiffCounts     `json:"counts"`
	Destructive []string        `json:"destructive"`
	Resources   []jDiffResource `json:"resources"`
	Outputs     []jDiffNode     `json:"outputs"`
}

type jDiffCounts struct {
	Add     int `json:"add"`
	Change  int `json:"change"`
	Destroy int `json:"destroy"`
	Replace int `json:"replace"`
	Read    int `json:"read"`
	Forget  int `json:"forget"`
	Import  int `json:"import"`
	Move    int `json:"move"`
	Outputs int `json:"outputs"`
	Refresh int `json:"refresh,omitempty"`
}

type jDiffResource struct {
	Address         string          `json:"address"`
	PreviousAddress string          `json:"previous_address,omitempty"`
	Deposed         string          `json:"deposed,omitempty"`
	Mode            string          `json:"mode"`
	Type            string          `json:"type"`
	Name            string          `json:"name"`
	Action          string          `json:"action"`
	CreateFirst     bool            `json:"create_first,omitempty"`
	Reason          string          `json:"reason,omitempty"`
	Text            string          `json:"text"`
	Import          *jImport        `json:"import,omitempty"`
	ReplacePaths    []plandiff.Path `json:"replace_paths,omitempty"`
	Changes         []jDiffNode     `json:"changes"`
	Unchanged       int             `json:"unchanged"`
	Drift           bool            `json:"drift,omitempty"`
}

// jImport is an import: its id ("" when Terraform imports by identity).
type jImport struct {
	ID string `json:"id"`
}

type jDiffNode struct {
	Key               *string     `json:"key,omitempty"`
	Index             *int        `json:"index,omitempty"`
	Action            string      `json:"action"`
	Kind              string      `json:"kind,omitempty"`
	Before            *jDiffValue `json:"before,omitempty"`
	After             *jDiffValue `json:"after,omitempty"`
	Changes           []jDiffNode `json:"changes,omitempty"`
	Unchanged         int         `json:"unchanged,omitempty"`
	ForcesReplacement bool        `json:"forces_replacement,omitempty"`
}

type jDiffValue struct {
	Value     json.RawMessage `json:"value,omitempty"`
	Unknown   bool            `json:"unknown,omitempty"`
	Sensitive bool            `json:"sensitive,omitempty"`
}

// toDiff converts a diff for a document; nil for none.
func toDiff(d *plandiff.Diff) *jDiff {
	if d == nil {
		return nil
	}
	c := d.Counts()
	j := &jDiff{
		Text: diffCountsWords(c).plain(),
		Counts: jDiffCounts{Add: c.Add, Change: c.Change, Destroy: c.Destroy, Replace: c.Replace, Read: c.Read,
			Forget: c.Forget, Import: c.Import, Move: c.Move, Outputs: c.Outputs, Refresh: c.Refresh},
		Destructive: []string{}, Resources: make([]jDiffResource, 0, len(d.Resources)), Outputs: toDiffNodes(d.Outputs),
	}
	if j.Outputs == nil {
		j.Outputs = []jDiffNode{}
	}
	for _, r := range d.Resources {
		if r.Destructive() {
			j.Destructive = append(j.Destructive, r.Address)
		}
		jr := jDiffResource{
			Address: r.Address, PreviousAddress: r.PreviousAddress, Deposed: r.Deposed, Mode: r.Mode, Type: r.Type,
			Name: r.Name, Action: string(r.Action), CreateFirst: r.CreateFirst, Reason: r.Reason,
			Text: headlineText(r), ReplacePaths: r.ReplacePaths, Changes: toDiffNodes(r.Changes), Unchanged: r.Unchanged,
			Drift: r.Drift,
		}
		if r.Import != nil {
			jr.Import = &jImport{ID: r.Import.ID}
		}
		if jr.Changes == nil {
			jr.Changes = []jDiffNode{}
		}
		j.Resources = append(j.Resources, jr)
	}
	return j
}

// headlineText is a resource's headline as one line: "ADDR will be
// destroyed (because ADDR is not in configuration)".
func headlineText(r plandiff.Resource) string {
	subject, verb, notes := resourceHeadline(r)
	return strings.Join(append([]string{subject, verb}, notes...), " ")
}

func toDiffNodes(ns []plandiff.Node) []jDiffNode {
	if len(ns) == 0 {
		return nil
	}
	out := make([]jDiffNode, len(ns))
	for i, n := range ns {
		out[i] = jDiffNode{Key: n.Key, Index: n.Index, Action: string(n.Action), Kind: n.Kind,
			Before: toDiffValue(n.Before), After: toDiffValue(n.After), Changes: toDiffNodes(n.Changes),
			Unchanged: n.Unchanged, ForcesReplacement: n.ForcesReplacement}
	}
	return out
}

func toDiffValue(v *plandiff.Value) *jDiffValue {
	if v == nil {
		return nil
	}
	if v.Sensitive {
		return &jDiffValue{Sensitive: true} // never a value
	}
	return &jDiffValue{Value: v.JSON, Unknown: v.Unknown}
}
