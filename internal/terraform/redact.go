package terraform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/kilolock/kilolock/internal/plandiff"
)

// Masking TF_VAR_* values in what Kilolock takes from Terraform. Terraform
// prints input variable values in some diagnostics — a failed validation
// shows "var.s is \"…\"" even for a sensitive variable (measured with
// 1.11.4) — and Kilolock logs Terraform's warnings and keeps its error
// diagnostics and stderr in the run's end, which every report shows. The
// values Kilolock itself handed Terraform through TF_VAR_* are masked in
// all of it: the Runner's logs (terraform-exec's too) and every
// *CommandError a Plan or Apply returns.

// minMaskedLen is the shortest value masked, in bytes. A shorter one would
// garble every message it occurs in (a "1" in each line number, a "prod"
// in "production"); GitLab's masked CI/CD variables have the same floor of
// 8 characters.
const minMaskedLen = 8

// masker replaces each TF_VAR_* value of at least minMaskedLen bytes by
// "(value of TF_VAR_NAME)". The zero value (no values) masks nothing.
type masker struct{ r *strings.Replacer }

// newMasker returns the masker of vars (TF_VAR_NAME → value). Longer values
// are matched first, so a value that holds another is masked whole.
func newMasker(vars map[string]string) masker {
	names := make([]string, 0, len(vars))
	for k, v := range vars {
		if len(v) >= minMaskedLen {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return masker{}
	}
	sort.Slice(names, func(i, j int) bool {
		vi, vj := vars[names[i]], vars[names[j]]
		if len(vi) != len(vj) {
			return len(vi) > len(vj)
		}
		return names[i] < names[j]
	})
	values := make([]maskedValue, len(names))
	for i, k := range names {
		values[i] = maskedValue{value: vars[k], label: "(value of " + k + ")"}
	}
	return maskerOf(values)
}

// newSensitiveMasker returns the masker of values that Terraform or a
// state marks sensitive (plandiff.Secrets): each of at least minMaskedLen
// bytes is replaced by Terraform's own "(sensitive value)", in every form
// Terraform may print it (encodings). Longer values are matched first.
func newSensitiveMasker(values []string) masker {
	var vs []maskedValue
	for _, v := range values {
		if len(v) >= minMaskedLen {
			vs = append(vs, maskedValue{value: v, label: "(sensitive value)"})
		}
	}
	sort.SliceStable(vs, func(i, j int) bool { return len(vs[i].value) > len(vs[j].value) })
	return maskerOf(vs)
}

// maskedValue is a value to mask and what replaces it.
type maskedValue struct{ value, label string }

// maskerOf masks each value by its label, in every encoding; a form two
// values share takes the label of the first. None: the zero masker.
func maskerOf(values []maskedValue) masker {
	if len(values) == 0 {
		return masker{}
	}
	type form struct{ text, label string }
	var forms []form
	seen := map[string]bool{}
	for _, v := range values {
		for _, f := range encodings(v.value) {
			if !seen[f] {
				seen[f] = true
				forms = append(forms, form{f, v.label})
			}
		}
	}
	// Longest first: strings.Replacer tries its pairs in argument order at
	// each position, so a value that holds another is masked whole.
	sort.SliceStable(forms, func(i, j int) bool { return len(forms[i].text) > len(forms[j].text) })
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f.text, f.label)
	}
	return masker{r: strings.NewReplacer(pairs...)}
}

// encodings are the forms in which Terraform may print value v
// (plandiff.Encodings): as it is, inside a quoted string (Terraform quotes
// values in diagnostics as "var.x is \"…\"", escaping quotes, backslashes
// and control characters as Go and JSON do), as a JSON string with and
// without < > & escaped (jsonencode escapes them as \u003c \u003e
// \u0026), and those forms JSON-escaped once more (a diagnostic inside
// -json output read raw). A JSON credential, the usual secret passed as
// TF_VAR_*, holds quotes, and passwords hold < > &: the raw form alone
// would slip through.
func encodings(v string) []string { return plandiff.Encodings(v) }

// string masks s.
func (m masker) string(s string) string {
	if m.r == nil {
		return s
	}
	return m.r.Replace(s)
}

// error masks err: a *CommandError in it in place (its stderr, its
// diagnostics' summaries and details, its cause's text: what a run's end
// keeps, through TerraformFailure), and err's own text, which a wrapping
// error may have fixed before (then err comes back as a *maskedError
// around it).
func (m masker) error(err error) error {
	if m.r == nil || err == nil {
		return err
	}
	var ce *CommandError
	if errors.As(err, &ce) {
		ce.Stderr = m.string(ce.Stderr)
		for i := range ce.Diagnostics {
			d := &ce.Diagnostics[i]
			d.Summary, d.Detail = m.string(d.Summary), m.string(d.Detail)
		}
		if ce.Err != nil {
			if s := ce.Err.Error(); m.string(s) != s {
				ce.Err = &maskedError{msg: m.string(s), err: ce.Err}
			}
		}
	}
	if s := err.Error(); m.string(s) != s {
		return &maskedError{msg: m.string(s), err: err}
	}
	return err
}

// maskedError is an error whose text was masked; errors.Is and errors.As
// still see the original.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// logger returns log with every message and attribute masked (maskHandler),
// or log itself when there is nothing to mask.
func (m masker) logger(log *slog.Logger) *slog.Logger {
	if m.r == nil {
		return log
	}
	return slog.New(maskHandler{inner: log.Handler(), m: m})
}

// maskHandler is a slog.Handler that masks a record's message and its
// attributes' values (strings, errors, Stringers, string slices, in groups
// too) before handing it on.
type maskHandler struct {
	inner slog.Handler
	m     masker
}

func (h maskHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h maskHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.m.string(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h maskHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		masked[i] = h.attr(a)
	}
	return maskHandler{inner: h.inner.WithAttrs(masked), m: h.m}
}

func (h maskHandler) WithGroup(name string) slog.Handler {
	return maskHandler{inner: h.inner.WithGroup(name), m: h.m}
}

func (h maskHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.m.string(v.String()))
	case slog.KindGroup:
		g := v.Group()
		masked := make([]any, len(g))
		for i, ga := range g {
			masked[i] = h.attr(ga)
		}
		return slog.Group(a.Key, masked...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.m.string(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, h.m.string(x.String()))
		case []string:
			masked := make([]string, len(x))
			for i, s := range x {
				masked[i] = h.m.string(s)
			}
			return slog.Any(a.Key, masked)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
