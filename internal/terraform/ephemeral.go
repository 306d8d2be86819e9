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
	return variableFlags(dir, "ephemeral")
}

// variableFlags returns the names of the input variables of the module
// directory dir whose argument flag ("ephemeral", "sensitive") is the
// literal true, the last file that sets it deciding (variableBlocks).
func variableFlags(dir, flag string) (map[string]bool, error) {
	schema := &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: flag}}}
	out := map[string]bool{}
	err := variableBlocks(dir, func(name string, body hcl.Body) {
		c, _, diags := body.PartialContent(schema)
		if diags.HasErrors() {
			return
		}
		if a, ok := c.Attributes[flag]; ok {
			v, diags := a.Expr.Value(nil)
			out[name] = !diags.HasErrors() && v.Type() == cty.Bool && v.IsKnown() && !v.IsNull() && v.True()
		}
	})
	if err != nil {
		return nil, err
	}
	for name, set := range out {
		if !set {
			delete(out, name)
		}
	}
	return out, nil
}

// variableBlocks calls f with each variable block of the module directory
// dir: its .tf and .tf.json files in lexical order, then its override files
// (isOverrideConfigFile), as Terraform merges them. Errors: a directory or
// file that cannot be read or parsed.
func variableBlocks(dir string, f func(name string, body hcl.Body)) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading module dir: %w", err)
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
	p := hclparse.NewParser()
	for _, n := range append(primary, override...) {
		path := filepath.Join(dir, n)
		file, err := parseConfigFile(p, path)
		if err != nil {
			return err
		}
		content, _, diags := file.Body.PartialContent(variableSchema)
		if diags.HasErrors() {
			return fmt.Errorf("reading %s: %w", path, diags)
		}
		for _, b := range content.Blocks {
			f(b.Labels[0], b.Body)
		}
	}
	return nil
}
