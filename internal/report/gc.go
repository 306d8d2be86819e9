package report

import (
	"fmt"
	"io"

	"github.com/dustin/go-humanize"

	"github.com/kilolock/kilolock/internal/engine"
)

// SchemaGC is the JSON document of `kl gc` (docs/json.md).
const SchemaGC = "kilolock/gc/v1"

// gcDocument is `kl gc --json`: what was deleted (or, dry, would be).
type gcDocument struct {
	Schema    string             `json:"schema"`
	DryRun    bool               `json:"dry_run"`
	Retention string             `json:"retention"`
	Deleted   []engine.GCDeleted `json:"deleted"`
	Runs      int                `json:"runs"`
	Bytes     int64              `json:"bytes"`
	Text      string             `json:"text"`
}

// GC renders `kl gc`: how many artifacts of how many runs were deleted
// (dry: would be) and the bytes freed, then one row per artifact (run,
// kind, artifact, size, why). retention is the retention applied (0: off).
func GC(w io.Writer, res engine.GCResult, retention string, o Options) error {
	verb, tn := "Deleted", toneGood
	if res.DryRun {
		verb, tn = "Would delete", toneInfo
	}
	title := words(toned(tn, verb), fmt.Sprintf(" %s of %s: %s", plural(len(res.Deleted), "artifact", "artifacts"),
		plural(res.Runs, "run", "runs"), humanize.IBytes(uint64(res.Bytes))))
	if !res.DryRun {
		title = words(title, " freed")
	}
	return emit(w, o, func() *doc {
		d := &doc{tone: tn, title: title}
		d.summary = append(d.summary, para(words("Retention: "+retention+" (KL_RETENTION). "+
			"An apply's state artifacts go once its version is committed; a closed plan's saved plan, configuration archive and -var values once it has been closed that long (ADR 0063).")))
		if len(res.Deleted) == 0 {
			d.summary = append(d.summary, para(words("nothing to delete")))
			return d
		}
		t := table{head: []string{"run", "kind", "artifact", "size", "why"}}
		for _, x := range res.Deleted {
			t.rows = append(t.rows, []sentence{{code(x.Run)}, words(string(x.Kind)), {code(x.Name)}, words(humanize.IBytes(uint64(x.Bytes))), words(x.Why)})
		}
		d.summary = append(d.summary, t)
		return d
	}, func() any {
		return gcDocument{Schema: SchemaGC, DryRun: res.DryRun, Retention: retention, Deleted: res.Deleted, Runs: res.Runs, Bytes: res.Bytes, Text: title.plain()}
	})
}
