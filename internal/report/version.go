package report

import (
	"fmt"
	"io"
	"time"

	buildversion "github.com/kilolock/kilolock/internal/version"
)

// SchemaVersion is the schema of the `kl version --json` document (the
// view named "version", not a store's schema version).
const SchemaVersion = "kilolock/version/v1"

// Version renders `kl version` and `klbot version` (program is "kl" or
// "klbot"): the release version, the commit built (with "(modified)" when
// the tree had uncommitted changes; "unknown" when the build recorded
// none), its time, the Go release and platform, and the store's schema
// version and compatibility level this binary speaks.
func Version(w io.Writer, program string, info buildversion.Info, o Options) error {
	return emit(w, o, func() *doc {
		d := &doc{tone: toneInfo, title: words(program + " " + info.Version)}
		c := words(code(info.Commit))
		switch {
		case info.Commit == "":
			c = words(toned(toneDim, "unknown (the build recorded none)"))
		case info.Modified:
			c = c.add(toned(toneWarn, " (modified)"))
		}
		f := fields{}.addField("commit", c)
		if !info.CommitTime.IsZero() {
			f = f.addField("committed", words(info.CommitTime.Format(time.RFC3339)))
		}
		f = f.addField("go", words(info.Go+" "+info.Platform))
		f = f.addField("store", words(fmt.Sprintf("schema version %d, compatibility level %d", info.Store.Schema, info.Store.CompatLevel)))
		d.summary = append(d.summary, f)
		return d
	}, func() any {
		j := versionDocument{Schema: SchemaVersion, Program: program, Version: info.Version, Commit: info.Commit,
			Modified: info.Modified, Go: info.Go, Platform: info.Platform,
			Store: jStoreFacts{Schema: info.Store.Schema, CompatLevel: info.Store.CompatLevel}}
		if !info.CommitTime.IsZero() {
			t := jtime(info.CommitTime)
			j.CommitTime = &t
		}
		return j
	})
}

type versionDocument struct {
	Schema     string      `json:"schema"`
	Program    string      `json:"program"`
	Version    string      `json:"version"`
	Commit     string      `json:"commit,omitempty"`
	Modified   bool        `json:"modified,omitempty"`
	CommitTime *jtime      `json:"commit_time,omitempty"`
	Go         string      `json:"go"`
	Platform   string      `json:"platform"`
	Store      jStoreFacts `json:"store"`
}

type jStoreFacts struct {
	Schema      int64 `json:"schema_version"`
	CompatLevel int   `json:"compat_level"`
}
