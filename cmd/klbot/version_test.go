package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestPrintVersion: klbot version, klbot --version and klbot version
// --json print the build's facts; other words are left to run (which
// refuses arguments), and arguments after version are refused naming them.
// The built binary's output is checked in internal/version.
func TestPrintVersion(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args  []string
		asked bool
		out   string // stdout starts with this
		err   string // the error says this
	}{
		"version":          {args: []string{"version"}, asked: true, out: "klbot "},
		"--version":        {args: []string{"--version"}, asked: true, out: "klbot "},
		"json":             {args: []string{"version", "--json"}, asked: true, out: "{\n  \"schema\": \"kilolock/version/v1\",\n  \"program\": \"klbot\","},
		"no arguments":     {args: nil},
		"other":            {args: []string{"serve"}},
		"version extra":    {args: []string{"version", "now"}, asked: true, err: `klbot version: unknown arguments ["now"] (its only flag is --json)`},
		"--version --json": {args: []string{"--version", "--json"}, asked: true, err: `klbot --version takes no arguments (got ["--json"])`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			asked, err := printVersion(tc.args, &out)
			switch {
			case asked != tc.asked:
				t.Fatalf("printVersion(%q) asked = %v", tc.args, asked)
			case tc.err != "":
				if err == nil || err.Error() != tc.err || out.Len() != 0 {
					t.Errorf("printVersion(%q) = %v, stdout %q; want the error %q", tc.args, err, out.String(), tc.err)
				}
			case err != nil || !strings.HasPrefix(out.String(), tc.out):
				t.Errorf("printVersion(%q) = %v:\n%s\nwant it to start with %q", tc.args, err, out.String(), tc.out)
			}
			if name == "json" && !json.Valid(out.Bytes()) {
				t.Errorf("klbot version --json is not JSON:\n%s", out.String())
			}
		})
	}
}
