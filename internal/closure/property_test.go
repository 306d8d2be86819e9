package closure_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/kilolock/kilolock/internal/closure"
	"github.com/kilolock/kilolock/internal/tfstate"
)

// genConfig is a random small configuration of terraform_data resources:
// root variables and locals, root resources (some with count or for_each)
// referencing earlier ones, and a local module called with inputs whose
// output later root resources read; some with depends_on (a resource, or
// the module). Two versions of it differ in some
// variable defaults and resource literals, so a plan of the second against
// the state of the first changes some resources.
type genConfig struct {
	vars, locals        int
	rootRes, modRes     int
	split               int            // root resources before the module call
	repeat              map[int]string // root resource → "count" | "for_each"
	dependsOn           map[int]string // root resource → what its depends_on names
	refs                map[string][]string
	modRefs             map[int][]string
	inputFrom, outputOf string
}

func generate(r *rand.Rand) *genConfig {
	g := &genConfig{vars: 1 + r.IntN(3), locals: 1 + r.IntN(3), rootRes: 3 + r.IntN(5), modRes: 1 + r.IntN(3),
		repeat: map[int]string{}, dependsOn: map[int]string{}, refs: map[string][]string{}, modRefs: map[int][]string{}}
	g.split = 1 + r.IntN(g.rootRes-1)
	for i := 0; i < g.rootRes; i++ {
		switch r.IntN(4) {
		case 0:
			g.repeat[i] = "count"
		case 1:
			g.repeat[i] = "for_each"
		}
	}
	ref := func(i int) string {
		switch g.repeat[i] {
		case "count":
			return fmt.Sprintf("terraform_data.r%d[1].output", i)
		case "for_each":
			return fmt.Sprintf("terraform_data.r%d[\"b\"].output", i)
		}
		return fmt.Sprintf("terraform_data.r%d.output", i)
	}
	pick := func(upTo int, withModule bool) []string {
		var out []string
		for k := r.IntN(3); k > 0; k-- {
			switch c := r.IntN(4); {
			case c == 0:
				out = append(out, fmt.Sprintf("var.v%d", r.IntN(g.vars)))
			case c == 1:
				out = append(out, fmt.Sprintf("local.l%d", r.IntN(g.locals)))
			case withModule && c == 2:
				out = append(out, "module.m.out")
			case upTo > 0:
				out = append(out, ref(r.IntN(upTo)))
			}
		}
		return out
	}
	for l := 0; l < g.locals; l++ {
		if r.IntN(2) == 0 {
			g.refs[fmt.Sprintf("l%d", l)] = []string{fmt.Sprintf("var.v%d", r.IntN(g.vars))}
		}
	}
	for i := 0; i < g.rootRes; i++ {
		g.refs[fmt.Sprintf("r%d", i)] = pick(min(i, g.split), i >= g.split)
		if i >= g.split {
			g.refs[fmt.Sprintf("r%d", i)] = append(pick(i, true), g.refs[fmt.Sprintf("r%d", i)]...)
		}
	}
	for i := 1; i < g.rootRes; i++ {
		switch {
		case r.IntN(4) != 0:
		case i >= g.split && r.IntN(2) == 0:
			g.dependsOn[i] = "module.m"
		case i < g.split:
			g.dependsOn[i] = fmt.Sprintf("terraform_data.r%d", r.IntN(i))
		}
	}
	g.inputFrom = ref(r.IntN(g.split))
	for j := 0; j < g.modRes; j++ {
		if j > 0 && r.IntN(2) == 0 {
			g.modRefs[j] = []string{fmt.Sprintf("terraform_data.m%d.output", r.IntN(j))}
		} else {
			g.modRefs[j] = []string{"var.in"}
		}
	}
	g.outputOf = fmt.Sprintf("m%d", r.IntN(g.modRes))
	return g
}

// files renders the configuration with the literals of ver: a map from
// "v0", "r3", "m1" to a version number (default 0).
func (g *genConfig) files(ver map[string]int) map[string]string {
	interp := func(name string, refs []string) string {
		parts := []string{name + "-" + strconv.Itoa(ver[name])}
		for _, x := range refs {
			parts = append(parts, "${"+x+"}")
		}
		return `"` + strings.Join(parts, "/") + `"` // no strconv.Quote: a template's ${…} takes no escaped quotes
	}
	var root, mod strings.Builder
	for v := 0; v < g.vars; v++ {
		name := fmt.Sprintf("v%d", v)
		fmt.Fprintf(&root, "variable %q {\n  default = %q\n}\n\n", name, name+"-"+strconv.Itoa(ver[name]))
	}
	root.WriteString("locals {\n")
	for l := 0; l < g.locals; l++ {
		name := fmt.Sprintf("l%d", l)
		fmt.Fprintf(&root, "  %s = %s\n", name, interp(name, g.refs[name]))
	}
	root.WriteString("}\n\n")
	for i := 0; i < g.rootRes; i++ {
		name := fmt.Sprintf("r%d", i)
		fmt.Fprintf(&root, "resource \"terraform_data\" %q {\n", name)
		switch g.repeat[i] {
		case "count":
			root.WriteString("  count = 2\n")
		case "for_each":
			root.WriteString("  for_each = toset([\"a\", \"b\"])\n")
		}
		if d, ok := g.dependsOn[i]; ok {
			fmt.Fprintf(&root, "  depends_on = [%s]\n", d)
		}
		fmt.Fprintf(&root, "  input = %s\n}\n\n", interp(name, g.refs[name]))
		if i == g.split-1 {
			fmt.Fprintf(&root, "module \"m\" {\n  source = \"./mod\"\n  in     = \"${%s}\"\n}\n\n", g.inputFrom)
		}
	}
	mod.WriteString("variable \"in\" {}\n\n")
	for j := 0; j < g.modRes; j++ {
		name := fmt.Sprintf("m%d", j)
		fmt.Fprintf(&mod, "resource \"terraform_data\" %q {\n  input = %s\n}\n\n", name, interp(name, g.modRefs[j]))
	}
	fmt.Fprintf(&mod, "output \"out\" {\n  value = terraform_data.%s.output\n}\n", g.outputOf)
	return map[string]string{"main.tf": root.String(), "mod/main.tf": mod.String()}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for n, s := range files {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func newTF(t *testing.T, bin, dir string) *tfexec.Terraform {
	t.Helper()
	tf, err := tfexec.NewTerraform(dir, bin)
	if err != nil {
		t.Fatal(err)
	}
	return tf
}

func planJSON(t *testing.T, ctx context.Context, tf *tfexec.Terraform) *tfjson.Plan {
	t.Helper()
	if _, err := tf.Plan(ctx, tfexec.Out("kl.plan")); err != nil {
		t.Fatalf("plan: %v", err)
	}
	p, err := tf.ShowPlanFile(ctx, "kl.plan")
	if err != nil {
		t.Fatalf("show: %v", err)
	}
	return p
}

// change is what a plan intends for one instance: actions and planned
// values (unknowns as such).
func change(t *testing.T, rc *tfjson.ResourceChange) string {
	t.Helper()
	b, err := json.Marshal([]any{rc.Change.Actions, rc.Change.After, rc.Change.AfterUnknown, rc.PreviousAddress})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSlicePlanEqualsFullPlan is the property of issue 17 ("Done when"):
// for generated configurations and random targets, a plan of the slice
// (sliced configuration, state restricted to the slice's resources) equals
// the full plan on the slice's addresses, and the closure proof checks pass.
// Runs with real Terraform: 2 configurations under -short, 4 otherwise,
// KL_CLOSURE_PROPERTY_N more.
func TestSlicePlanEqualsFullPlan(t *testing.T) {
	bin := terraformBinary(t)
	n := 4
	if testing.Short() {
		n = 2
	}
	if s := os.Getenv("KL_CLOSURE_PROPERTY_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("KL_CLOSURE_PROPERTY_N=%q: %v", s, err)
		}
		n = v
	}
	seed := uint64(rand.Int64())
	if s := os.Getenv("KL_CLOSURE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("KL_CLOSURE_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (KL_CLOSURE_SEED reruns it)", seed)
	for it := 0; it < n; it++ {
		t.Run(strconv.Itoa(it), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, uint64(it)))
			propertyOnce(t, bin, r)
		})
	}
}

func propertyOnce(t *testing.T, bin string, r *rand.Rand) {
	ctx := context.Background()
	g := generate(r)
	full := filepath.Join(t.TempDir(), "full")
	writeFiles(t, full, g.files(nil))
	tf := newTF(t, bin, full)
	if err := tf.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tf.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	ver := map[string]int{}
	for _, k := range []string{"v0", "v1", "v2", "l0", "l1", "r0", "r1", "r2", "r3", "r4", "r5", "m0", "m1", "m2"} {
		if r.IntN(4) == 0 {
			ver[k] = 1
		}
	}
	files := g.files(ver)
	writeFiles(t, full, files)
	t.Logf("configuration:\n%s\n--- mod/main.tf\n%s", files["main.tf"], files["mod/main.tf"])
	fullPlan := planJSON(t, ctx, tf)
	stateBytes, err := os.ReadFile(filepath.Join(full, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	head, err := tfstate.Parse(stateBytes)
	if err != nil {
		t.Fatal(err)
	}
	cfg := load(t, full)
	for k := 0; k < 2; k++ {
		var target string
		if r.IntN(3) == 0 {
			target = fmt.Sprintf("module.m.terraform_data.m%d", r.IntN(g.modRes))
		} else {
			target = fmt.Sprintf("terraform_data.r%d", r.IntN(g.rootRes))
		}
		s, err := closure.TargetScope(cfg, []string{target})
		if err != nil {
			t.Fatal(err)
		}
		c, err := closure.Compute(cfg, s)
		if err != nil {
			t.Fatal(err)
		}
		sliceDir := filepath.Join(t.TempDir(), "slice")
		if err := c.WriteSlice(sliceDir); err != nil {
			t.Fatal(err)
		}
		ss := c.SliceState(head)
		b, err := ss.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		writeFiles(t, sliceDir, map[string]string{"terraform.tfstate": string(b)})
		if ch := closure.Validates(ctx, bin, sliceDir); !ch.Passed {
			t.Fatalf("target %s: %s: %s", target, ch.Name, ch.Found)
		}
		slicePlan := planJSON(t, ctx, newTF(t, bin, sliceDir))
		for _, ch := range []closure.Check{closure.WithinSlice(slicePlan, c), closure.NoCreateOutside(slicePlan, head, ss), closure.TargetsPlanned(slicePlan, c)} {
			if !ch.Passed {
				t.Errorf("target %s: %s: %s", target, ch.Name, ch.Found)
			}
		}
		want, got := map[string]string{}, map[string]string{}
		for _, rc := range fullPlan.ResourceChanges {
			if c.Contains(rc.Address) {
				want[rc.Address] = change(t, rc)
			}
		}
		for _, rc := range slicePlan.ResourceChanges {
			got[rc.Address] = change(t, rc)
		}
		for a, w := range want {
			if got[a] != w {
				t.Errorf("target %s (closure %v): %s: slice plan %s, full plan %s", target, c.Addresses, a, got[a], w)
			}
		}
		changed := 0
		for _, w := range want {
			if !strings.HasPrefix(w, `[["no-op"]`) {
				changed++
			}
		}
		t.Logf("target %s: closure of %d resources, %d of its instances change", target, len(c.Addresses), changed)
		for a := range got {
			if _, ok := want[a]; !ok {
				t.Errorf("target %s: the slice plans %s, which the full plan does not have on the slice", target, a)
			}
		}
	}
}
