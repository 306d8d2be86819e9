package terraform

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
)

// Which TF_VAR_* an apply needs. A saved plan holds the value of every
// input variable it was made with, and `terraform apply PLANFILE` ignores
// TF_VAR_* for those — but when one differs from the plan's, Terraform
// 1.11 warns "Ignoring variable when applying a saved plan" quoting both
// values, sensitive ones included (measured with 1.11.4). An ephemeral
// variable (`ephemeral = true`, Terraform 1.10+) is not saved in the plan:
// "The ephemeral input variable … was set during the plan phase, and so
// must also be set during the apply phase". So an apply is given only the
// TF_VAR_* of the root module's ephemeral variables.

// variableSchema finds the variable blocks of a configuration file.
var variableSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "variable", LabelNames: []string{"name"}}}}

// ephemeralSchema finds a variable block's ephemeral argument.
var ephemeralSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "ephemeral"}}}

// isOverrideConfigFile reports whether name is an override file of its
// module (override.tf, *_override.tf and their .tf.json forms), which
// Terraform reads after the other files, in lexical order, each argument
// it sets replacing the one declared before.
func isOverrideConfigFile(name string) bool {
	base, ok := strings.CutSuffix(name, ".tf.json")
	if !ok {
		if base, ok = strings.CutSuffix(name, ".tf"); !ok {
			return false
		}
	}
	if strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") ||
		(strings.HasPrefix(name, "#") && strings.HasSuffix(name, "#")) {
		return false
	}
	return base == "override" || strings.HasSuffix(base, "_override")
}

// ephemeralVariables returns the names of the input variables declared
// `ephemeral = true` in the module directory dir (its .tf and .tf.json
// files, override files last, as Terraform merges them). An ephemeral
// argument that is not a literal bool is refused by Terraform itself and
// counts as not set. Errors: a directory or file that cannot be read or
// parsed.
func ephemeralVariables(dir string) (map[string]bool, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading module dir: %w", err)
	}
	var primary, override []string
	for _, e := range ents {
		switch n := e.Name(); {
		case e.IsDir():
		case isPrimaryConfigFile(n, false):
			primary = append(primary, n)
		case isOverrideConfigFile(n):
			override = append(override, n)
		}
	}
	sort.Strings(primary)
	sort.Strings(override)
	out := map[string]bool{}
	p := hclparse.NewParser()
	for _, n := range append(primary, override...) {
		path := filepath.Join(dir, n)
		f, err := parseConfigFile(p, path)
		if err != nil {
			return nil, err
		}
		content, _, diags := f.Body.PartialContent(variableSchema)
		if diags.HasErrors() {
			return nil, fmt.Errorf("reading %s: %w", path, diags)
		}
		for _, b := range content.Blocks {
			c, _, diags := b.Body.PartialContent(ephemeralSchema)
			if diags.HasErrors() {
				continue
			}
			if a, ok := c.Attributes["ephemeral"]; ok {
				v, diags := a.Expr.Value(nil)
				out[b.Labels[0]] = !diags.HasErrors() && v.Type() == cty.Bool && v.IsKnown() && !v.IsNull() && v.True()
			}
		}
	}
	for name, eph := range out {
		if !eph {
			delete(out, name)
		}
	}
	return out, nil
}
