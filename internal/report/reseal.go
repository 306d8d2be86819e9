package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/kilolock/kilolock/internal/store"
)

// SchemaReseal is the JSON document of `kl store reseal` (docs/json.md).
const SchemaReseal = "kilolock/reseal/v1"

// resealKind is one kind of blob in a reseal document.
type resealKind struct {
	Kind      string `json:"kind"`
	Read      int    `json:"read"`
	Resealed  int    `json:"resealed"`
	Unchanged int    `json:"unchanged"`
}

// resealDocument is `kl store reseal --json`.
type resealDocument struct {
	Schema    string       `json:"schema"`
	Key       string       `json:"key"`
	Kinds     []resealKind `json:"kinds"`
	Retired   []string     `json:"retired"`
	Compacted bool         `json:"compacted"`
	Text      string       `json:"text"`
}

// Reseal renders `kl store reseal`: the key everything is now sealed
// with, per kind of blob (artifacts, versions) how many were read,
// re-sealed and already sealed with it, and the key ids retired.
func Reseal(w io.Writer, res store.ResealResult, o Options) error {
	n := 0
	for _, k := range store.ResealKinds {
		n += res.Resealed[k]
	}
	title := words(toned(toneGood, "Re-sealed"), fmt.Sprintf(" %s with key %s", plural(n, "blob", "blobs"), res.Key))
	kinds := make([]resealKind, 0, len(store.ResealKinds))
	for _, k := range store.ResealKinds {
		kinds = append(kinds, resealKind{Kind: k, Read: res.Read[k], Resealed: res.Resealed[k], Unchanged: res.Unchanged[k]})
	}
	retired := res.Retired
	if retired == nil {
		retired = []string{}
	}
	return emit(w, o, func() *doc {
		d := &doc{tone: toneGood, title: title}
		t := table{head: []string{"kind", "read", "re-sealed", "already sealed with " + res.Key}}
		for _, k := range kinds {
			t.rows = append(t.rows, []sentence{words(k.Kind), words(fmt.Sprint(k.Read)), words(fmt.Sprint(k.Resealed)), words(fmt.Sprint(k.Unchanged))})
		}
		d.summary = append(d.summary, t)
		if len(retired) > 0 {
			d.summary = append(d.summary, para(words("Retired key "+strings.Join(retired, ", ")+
				": nothing is sealed with it any more; remove it from KL_ENCRYPTION_KEY (and KLBOT_ENCRYPTION_KEY). A kl whose first key is a retired one is refused.")))
		} else {
			d.summary = append(d.summary, para(words("No other key to retire.")))
		}
		if res.Compacted {
			d.summary = append(d.summary, para(words("The SQLite file was rewritten (VACUUM) and its WAL truncated: no copy of a blob as it was before stays in them.")))
		}
		return d
	}, func() any {
		return resealDocument{Schema: SchemaReseal, Key: res.Key, Kinds: kinds, Retired: retired, Compacted: res.Compacted, Text: title.plain()}
	})
}
