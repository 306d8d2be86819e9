package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/cli"
	"github.com/kilolock/kilolock/internal/version"
)

// TestVersionCommand: kl version and kl --version print this build's
// facts whatever the environment says (a bad KL_* variable must not hide
// the version one asks for when a setup fails), --json is the
// kilolock/version/v1 document, and an argument is refused naming it.
// The built binaries' output is checked in internal/version.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	info, err := version.Get()
	if err != nil {
		t.Fatal(err)
	}
	badEnv := []string{"KL_LEASE=banana", "KL_LOG_LEVEL=loud", "KL_STORE=/nonexistent/kl.db"}
	klRun := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := cli.Run(context.Background(), args, badEnv, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
		return out.String(), errOut.String(), err
	}
	text, _, err := klRun("version")
	store := fmt.Sprintf("schema version %d, compatibility level %d\n", info.Store.Schema, info.Store.CompatLevel)
	if err != nil || !strings.HasPrefix(text, "kl "+info.Version+"\n") || !strings.HasSuffix(text, store) {
		t.Errorf("kl version: %v\n%s", err, text)
	}
	flag, _, err := klRun("--version")
	if err != nil || flag != text {
		t.Errorf("kl --version: %v\n%s\nwant what kl version prints:\n%s", err, flag, text)
	}
	js, _, err := klRun("version", "--json")
	var doc struct {
		Schema, Program, Version string
		Store                    struct {
			SchemaVersion int64 `json:"schema_version"`
			CompatLevel   int   `json:"compat_level"`
		}
	}
	if err != nil || json.Unmarshal([]byte(js), &doc) != nil || doc.Schema != "kilolock/version/v1" || doc.Program != "kl" ||
		doc.Version != info.Version || doc.Store.SchemaVersion != info.Store.Schema || doc.Store.CompatLevel != info.Store.CompatLevel {
		t.Errorf("kl version --json: %v, %+v\n%s", err, doc, js)
	}
	out, _, err := klRun("version", "extra")
	if err == nil || out != "" || !strings.Contains(cli.Message(err), `unknown command "extra" for "kl version"`) {
		t.Errorf("kl version extra: %v, stdout %q", err, out)
	}
}
