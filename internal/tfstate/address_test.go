package tfstate_test

import (
	"fmt"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/tfstate"
)

// TestResourceAddressAgreesWithEngine checks ResourceAddress against
// engine.ParseAddress, the one definition of an address: parsing the
// instance address Terraform would print (module keys, instance key) must
// give ResourceAddress's result, and that result must parse to itself.
func TestResourceAddressAgreesWithEngine(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		module, mode, typ, name string
		instanceKey             string // as Terraform prints it, "" for none
		want                    string
	}{
		"root":                  {"", "managed", "terraform_data", "web", "", "terraform_data.web"},
		"root count":            {"", "managed", "terraform_data", "web", "[3]", "terraform_data.web"},
		"data source":           {"", "data", "terraform_remote_state", "net", "", "data.terraform_remote_state.net"},
		"data in module":        {`module.a["x"]`, "data", "terraform_remote_state", "net", "", "module.a.data.terraform_remote_state.net"},
		"nested":                {"module.app.module.db", "managed", "terraform_data", "main", "", "module.app.module.db.terraform_data.main"},
		"nested keys":           {`module.app["x"].module.db[0]`, "managed", "terraform_data", "main", `["k"]`, "module.app.module.db.terraform_data.main"},
		"dots and brackets":     {`module.a["x.y[0]"]`, "managed", "terraform_data", "n", `["a.b[1]"]`, "module.a.terraform_data.n"},
		"escaped quote":         {`module.a["q\"uote"]`, "managed", "terraform_data", "n", "", "module.a.terraform_data.n"},
		"escaped backslash end": {`module.a["back\\"].module.b`, "managed", "terraform_data", "n", "", "module.a.module.b.terraform_data.n"},
		"quote then bracket":    {`module.a["\"]"]`, "managed", "terraform_data", "n", "", "module.a.terraform_data.n"},
		"template escapes":      {`module.a["$${x}%%{y}"]`, "managed", "terraform_data", "n", "", "module.a.terraform_data.n"},
		"unicode key":           {`module.a["é\u00e9"]`, "managed", "terraform_data", "n", "", "module.a.terraform_data.n"},
		"dashes":                {"module.my-mod[12]", "managed", "terraform_data", "my-res", "", "module.my-mod.terraform_data.my-res"},
		"empty key":             {`module.a[""]`, "managed", "terraform_data", "n", "", "module.a.terraform_data.n"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := tfstate.ResourceAddress(tt.module, tt.mode, tt.typ, tt.name)
			if got != tt.want {
				t.Fatalf("ResourceAddress = %q, want %q", got, tt.want)
			}
			a, err := engine.ParseAddress(got)
			if err != nil || string(a) != got {
				t.Errorf("engine.ParseAddress(%q) = %q, %v; want itself", got, a, err)
			}
			inst := tt.typ + "." + tt.name + tt.instanceKey
			if tt.mode == "data" {
				inst = "data." + inst
			}
			if tt.module != "" {
				inst = tt.module + "." + inst
			}
			a, err = engine.ParseAddress(inst)
			if err != nil || string(a) != got {
				t.Errorf("engine.ParseAddress(%q) = %q, %v; want %q", inst, a, err, got)
			}
		})
	}
}

func TestOutputAddressAgreesWithEngine(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"a", "web_url", "with-dash"} {
		got := tfstate.OutputAddress(name)
		a, err := engine.ParseAddress(got)
		if err != nil || string(a) != got || !a.IsOutput() {
			t.Errorf("engine.ParseAddress(%q) = %q, %v; want itself, an output", got, a, err)
		}
	}
}

// TestParsedModulesAgreeWithEngine runs real module paths through Parse and
// checks every entry's address with the engine.
func TestParsedModulesAgreeWithEngine(t *testing.T) {
	t.Parallel()
	mods := []string{"", "module.a", `module.a["x.y[0]"]`, `module.a["q\"uote"].module.b[7]`, `module.a["\\"]`}
	var d doc
	for i, m := range mods {
		d.entries = append(d.entries, td(m, fmt.Sprintf("n%d", i), "v"))
	}
	s := d.state(t)
	for _, r := range s.Resources {
		inst := r.Type + "." + r.Name
		if r.Module != "" {
			inst = r.Module + "." + inst
		}
		a, err := engine.ParseAddress(inst)
		if err != nil || string(a) != r.Address() {
			t.Errorf("module %q: engine.ParseAddress(%q) = %q, %v; Address() = %q", r.Module, inst, a, err, r.Address())
		}
	}
}

func TestResourceAddressMalformedModule(t *testing.T) {
	t.Parallel()
	// Parse rejects these; ResourceAddress keeps the text rather than guess.
	for _, m := range []string{"module.", "mod.a", `module.a["x`, "module.a[x]", "module.a[1]b"} {
		if got, want := tfstate.ResourceAddress(m, "managed", "t", "n"), m+".t.n"; got != want {
			t.Errorf("ResourceAddress(%q) = %q, want %q", m, got, want)
		}
	}
}
