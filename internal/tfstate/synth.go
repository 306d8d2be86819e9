package tfstate

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"strings"
)

// TerraformDataProvider is the provider address Terraform writes for the
// built-in terraform_data resource (no provider download needed —
// docs/terraform.md "Running many Terraform processes on one state safely").
const TerraformDataProvider = `provider["terraform.io/builtin/terraform"]`

// SynthesizeTerraformData returns a state of n terraform_data resources, a
// test and benchmark aid (the project's bench tooling uses 2,000 and 10,000).
// It is exactly what Terraform writes after applying the configuration
// SynthesizeTerraformDataConfig(n, modules) returns, up to the random ids:
// a plan of that configuration against this state reports no changes.
//
// Layout: resource i (0 ≤ i < n) is named "r%05d" and has input = output =
// its own name as a string. With modules = 0 all live in the root module;
// with modules = M > 0 they are dealt round-robin over the root and M module
// calls m00 … m<M-1>: i%(M+1) == 0 → root, otherwise module.m%02d with
// index i%(M+1)-1. Ids are UUID-shaped, derived from lineage and address, so
// the same arguments give the same bytes. The state has no outputs;
// terraform_version is "1.11.4".
func SynthesizeTerraformData(n, modules int, lineage string, serial int64) *State {
	s := Empty(lineage, serial, "1.11.4")
	s.Resources = make([]Resource, 0, n)
	var b []byte
	for i := 0; i < n; i++ {
		mod, name := synthPlace(i, modules)
		r := Resource{Module: mod, Mode: ModeManaged, Type: "terraform_data", Name: name, Provider: TerraformDataProvider}
		r.addr = ResourceAddress(mod, ModeManaged, "terraform_data", name)
		sum := sha256.Sum256([]byte(lineage + "\x00" + r.addr))
		id := fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])

		b = append(b[:0], '{')
		if mod != "" {
			b = append(b, `"module":`...)
			b = appendString(b, mod)
			b = append(b, ',')
		}
		b = append(b, `"mode":"managed","type":"terraform_data","name":`...)
		b = appendString(b, name)
		b = append(b, `,"provider":`...)
		b = appendString(b, TerraformDataProvider)
		b = append(b, `,"instances":[{"schema_version":0,"attributes":{"id":`...)
		b = appendString(b, id)
		b = append(b, `,"input":{"value":`...)
		b = appendString(b, name)
		b = append(b, `,"type":"string"},"output":{"value":`...)
		b = appendString(b, name)
		b = append(b, `,"type":"string"},"triggers_replace":null},"sensitive_attributes":[]}]}`...)
		r.Raw = bytes.Clone(b)
		r.markChecked()
		s.Resources = append(s.Resources, r)
	}
	// Terraform's order: root entries first ("" sorts lowest), then modules.
	sortEntries(s.Resources)
	return s
}

// SynthesizeTerraformDataConfig returns the configuration whose apply gives
// SynthesizeTerraformData(n, modules, …): file name → contents, "main.tf"
// for the root and "m00/main.tf" … for the module calls (sources
// "./m00" …). Write the files into an empty directory to use them.
func SynthesizeTerraformDataConfig(n, modules int) map[string][]byte {
	files := map[string]*strings.Builder{"main.tf": {}}
	for k := 0; k < modules; k++ {
		dir := fmt.Sprintf("m%02d", k)
		files[dir+"/main.tf"] = &strings.Builder{}
		fmt.Fprintf(files["main.tf"], "module %q {\n  source = \"./%s\"\n}\n\n", dir, dir)
	}
	for i := 0; i < n; i++ {
		mod, name := synthPlace(i, modules)
		file := "main.tf"
		if mod != "" {
			file = strings.TrimPrefix(mod, "module.") + "/main.tf"
		}
		fmt.Fprintf(files[file], "resource \"terraform_data\" %q {\n  input = %q\n}\n\n", name, name)
	}
	out := make(map[string][]byte, len(files))
	for f, b := range files {
		out[f] = []byte(b.String())
	}
	return out
}

// synthPlace returns the module path and name of synthetic resource i.
func synthPlace(i, modules int) (module, name string) {
	name = fmt.Sprintf("r%05d", i)
	if modules <= 0 {
		return "", name
	}
	if k := i % (modules + 1); k > 0 {
		return fmt.Sprintf("module.m%02d", k-1), name
	}
	return "", name
}
