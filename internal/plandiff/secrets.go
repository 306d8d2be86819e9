package plandiff

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strconv"

	tfjson "github.com/hashicorp/terraform-json"
)

// Secrets returns the values Build masks wherever they appear, for masking
// text that is not a plan — Terraform's diagnostics of an apply, which
// quote configuration and command output in clear (ADR 0047): every value
// of at least 8 bytes that plan marks sensitive (before_sensitive,
// after_sensitive of every resource change and drift, sensitive outputs,
// sensitive root variables' values and defaults), that the
// sensitive_attributes of opts.PriorState mark or that are its sensitive
// outputs' values, and opts.Secrets. Shorter values are left out: masked
// in free text they would garble it (Build masks them only where they are
// marked). Longest first, then in byte order; no duplicates.
//
// plan may be nil: then only opts.PriorState and opts.Secrets count (a
// state Terraform wrote after the plan). Errors: a PriorState that is not a
// Terraform state v4 document (tfstate.Parse's error).
func Secrets(plan *tfjson.Plan, opts Options) ([]string, error) {
	b := &builder{sec: &secrets{min: minContained}}
	for _, v := range opts.Secrets {
		b.sec.addLeaf(v)
	}
	if err := b.readState(opts.PriorState); err != nil {
		return nil, err
	}
	if plan != nil {
		b.collect(plan)
	}
	out := append([]string(nil), b.sec.values...)
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out, nil
}

// Encodings are the forms in which value v may appear inside a longer
// string, each without its surrounding quotes, no duplicates, v first:
//   - v as it is;
//   - Go's and Terraform's diagnostic quoting ("var.x is \"…\"": quotes,
//     backslashes and control characters escaped: strconv.Quote);
//   - v as a JSON string, with < > & escaped as \u003c \u003e \u0026
//     (encoding/json's Marshal, and Terraform's jsonencode, which escapes
//     them the same way: measured with Terraform 1.11.4) and without
//     (json.Encoder.SetEscapeHTML(false));
//   - each of these JSON-escaped once more: the quoted diagnostic inside
//     a -json line read raw, or jsonencode(jsonencode(…)).
//
// A secret holding none of " \ < > & or control characters has the one
// form v.
func Encodings(v string) []string {
	goq := strconv.Quote(v)
	goq = goq[1 : len(goq)-1]
	html, plain := jsonInner(v, true), jsonInner(v, false)
	var out []string
	for _, f := range []string{v, goq, html, plain, jsonInner(goq, false), jsonInner(html, true), jsonInner(plain, false)} {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// jsonInner is s as a JSON string without its quotes, < > & escaped when
// html.
func jsonInner(s string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	_ = enc.Encode(s) // a string always encodes
	q := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	return string(q[1 : len(q)-1])
}
