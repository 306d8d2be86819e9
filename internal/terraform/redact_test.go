package terraform

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// TestMaskerEscapedForms: a TF_VAR_* value is masked however Terraform
// prints it — as it is, quoted in a diagnostic (quotes, backslashes and
// newlines escaped: `cannot convert "QUOTE\"SECRET\"VALUE_1" to number`),
// and that quoted form JSON-escaped once more. Found by a new user: a JSON
// credential passed as TF_VAR_x was printed and stored escaped.
func TestMaskerEscapedForms(t *testing.T) {
	t.Parallel()
	for name, v := range map[string]string{
		"plain":     "PLAINSECRET_1",
		"quotes":    `QUOTE"SECRET"VALUE_1`,
		"newline":   "MULTI\nLINESECRET_1",
		"backslash": `C:\secret\path_1`,
		"json":      `{"type":"service_account","private_key":"-----BEGIN\nKEY-----"}`,
		"unicode":   "ÜNÏCØDE\tSECRET",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := newMasker(map[string]string{"TF_VAR_x": v})
			q := strconv.Quote(v)
			jq, _ := json.Marshal(q)
			for _, msg := range []string{
				"var.x is " + v,
				"cannot convert " + q + " to number",
				`{"summary":"Invalid value","detail":` + string(jq) + `}`,
			} {
				got := m.string(msg)
				inner := q[1 : len(q)-1]
				if strings.Contains(got, v) || strings.Contains(got, inner) || !strings.Contains(got, "(value of TF_VAR_x)") {
					t.Errorf("masked %q = %q; want the value gone in every form", msg, got)
				}
			}
		})
	}
	if got := newMasker(map[string]string{"TF_VAR_x": "short"}).string("a short word"); got != "a short word" {
		t.Errorf("a value under %d bytes was masked: %q", minMaskedLen, got)
	}
}
