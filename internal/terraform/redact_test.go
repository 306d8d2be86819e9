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

// TestMaskerJSONEncodedForms: a value holding < > & " \ is masked in its
// JSON string encodings too — encoding/json's Marshal and Terraform's
// jsonencode escape < > & as \u003c \u003e \u0026, an Encoder without
// HTML escaping does not — inner text without the quotes, once and
// twice encoded (review of issue 12, defect 3).
func TestMaskerJSONEncodedForms(t *testing.T) {
	t.Parallel()
	const v = `P&ss<w0rd>"Secret42\z`
	plain := func(s string) string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	html := func(s string) string {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	inner := func(q string) string { return q[1 : len(q)-1] }
	for _, m := range []masker{newMasker(map[string]string{"TF_VAR_x": v}), newSensitiveMasker([]string{v})} {
		for _, enc := range []string{html(v), plain(v), html(html(v)), plain(html(v)), html("[" + html(v) + "]")} {
			msg := "input is " + enc + "; inner " + inner(enc) + " end"
			if got := m.string(msg); strings.Contains(got, "Secret42") {
				t.Errorf("masked %q = %q; want the value gone", msg, got)
			}
		}
	}
}
