package terraform

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	tfjson "github.com/hashicorp/terraform-json"
	"github.com/zclconf/go-cty/cty"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/plandiff"
)

// Masking a plan's diagnostics (ADR 0047, decision on masking). Terraform
// quotes values in clear in a plan's diagnostics — the unmarked copy of a
// value the state marks sensitive (`cannot convert "…" to number`), a
// sensitive variable in a failed validation (`var.pw is "…"`, and the var
// file's line in its plain output), a check block's error_message — and a
// failed plan writes no plan JSON to learn the plan's marks from. So a
// plan masks with what it knows without one: the values the snapshot
// marks sensitive, the values the root module's var files and defaults
// give the variables it declares sensitive, and the TF_VAR_* and -var
// values; a plan that succeeded adds the marks of its plan JSON.

// maskPlan masks, in what a plan's stream (nil for a plain plan) and its
// error hold, the values that planSecrets finds and, with plan (nil when
// the plan failed), those the plan JSON marks (plandiff.Secrets), after
// the TF_VAR_* and -var values (the plan's masker, "(value of …)"): the
// stream's diagnostics — the warnings logged — and the *CommandError in
// err (its diagnostics and stderr: what the run's end keeps). When the
// values cannot be read, every diagnostic's detail and the stderr are
// withheld, as maskApply does.
func (r *Runner) maskPlan(w workDir, req engine.PlanRequest, varFiles []string, plan *tfjson.Plan, stream *uiStream, err error, log *slog.Logger) {
	var ce *CommandError
	errors.As(err, &ce)
	if (stream == nil || len(stream.diags) == 0) && (ce == nil || (ce.Stderr == "" && len(ce.Diagnostics) == 0)) {
		return
	}
	vars, verr := sensitiveVarValues(w, varFiles)
	values, serr := plandiff.Secrets(plan, plandiff.Options{PriorState: req.Snapshot, Secrets: vars})
	merr := errors.Join(verr, serr)
	if merr != nil {
		log.Warn("reading which values are sensitive failed: the details of Terraform's diagnostics are withheld", "error", merr)
	}
	base, sens := r.maskFor(req.Vars), newSensitiveMasker(values)
	maskDiagnostics(stream, ce, func(s string) string { return sens.string(base.string(s)) }, merr != nil)
}

// maskDiagnostics masks with mask the diagnostics of stream (nil: none)
// and those and the stderr of ce (nil: none): summary, detail and snippet
// context. With withhold, every detail is dropped first (Withheld) and the
// stderr too: nothing is kept that may hold a value not masked.
func maskDiagnostics(stream *uiStream, ce *CommandError, mask func(string) string, withhold bool) {
	var diags [][]Diagnostic
	if stream != nil {
		diags = append(diags, stream.diags)
	}
	if ce != nil {
		diags = append(diags, ce.Diagnostics)
		if withhold {
			ce.Stderr = ""
		}
		ce.Stderr = mask(ce.Stderr)
	}
	for _, ds := range diags {
		for i := range ds {
			d := &ds[i]
			d.Summary, d.Context = mask(d.Summary), mask(d.Context)
			if withhold && d.Detail != "" {
				d.Detail, d.Withheld = "", true
			}
			d.Detail = mask(d.Detail)
		}
	}
}

// sensitiveVarValues returns the values the root module copy in w gives
// the input variables it declares `sensitive = true` (variableFlags): each
// string and number leaf of such a variable's default, and of its value in
// the var files Terraform reads — terraform.tfvars, terraform.tfvars.json,
// *.auto.tfvars and *.auto.tfvars.json of the root module (Terraform's
// order, lexical), then varFiles (the -var-file files, archive names).
// Values that are not literals (Terraform refuses them in a var file) are
// not found. Errors: a configuration or var file that cannot be read or
// parsed.
func sensitiveVarValues(w workDir, varFiles []string) ([]string, error) {
	sens, err := variableFlags(w.Root, "sensitive")
	if err != nil || len(sens) == 0 {
		return nil, err
	}
	var out []string
	defaults := &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "default"}}}
	err = variableBlocks(w.Root, func(name string, body hcl.Body) {
		if c, _, diags := body.PartialContent(defaults); sens[name] && !diags.HasErrors() && c.Attributes["default"] != nil {
			out = appendLeaves(out, c.Attributes["default"].Expr)
		}
	})
	if err != nil {
		return nil, err
	}
	files, err := autoVarFiles(w.Root)
	if err != nil {
		return nil, err
	}
	for _, vf := range varFiles {
		files = append(files, filepath.Join(w.Cfg, filepath.FromSlash(vf)))
	}
	p := hclparse.NewParser()
	for _, path := range files {
		f, err := parseConfigFile(p, path)
		if err != nil {
			return nil, err
		}
		attrs, diags := f.Body.JustAttributes()
		if diags.HasErrors() {
			return nil, engine.Errorf(engine.ErrInvalid, "reading var file %s: %v", filepath.Base(path), diags)
		}
		for name, a := range attrs {
			if sens[name] {
				out = appendLeaves(out, a.Expr)
			}
		}
	}
	return out, nil
}

// autoVarFiles are the var files Terraform reads by itself in the root
// module dir: terraform.tfvars, terraform.tfvars.json, then *.auto.tfvars
// and *.auto.tfvars.json in lexical order.
func autoVarFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out, auto []string
	for _, e := range ents {
		switch n := e.Name(); {
		case e.IsDir():
		case n == "terraform.tfvars" || n == "terraform.tfvars.json":
			out = append(out, filepath.Join(dir, n))
		case strings.HasSuffix(n, ".auto.tfvars") || strings.HasSuffix(n, ".auto.tfvars.json"):
			auto = append(auto, filepath.Join(dir, n))
		}
	}
	return append(out, auto...), nil // os.ReadDir sorts by name
}

// appendLeaves appends to out the string and number leaves of the literal
// value of expr (none when it is not a literal).
func appendLeaves(out []string, expr hcl.Expression) []string {
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		return out
	}
	_ = cty.Walk(v, func(_ cty.Path, v cty.Value) (bool, error) {
		switch {
		case !v.IsKnown() || v.IsNull():
			return false, nil
		case v.Type() == cty.String:
			out = append(out, v.AsString())
		case v.Type() == cty.Number:
			out = append(out, v.AsBigFloat().Text('f', -1))
		}
		return true, nil
	})
	return out
}
