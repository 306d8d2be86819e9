package bot

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/klyaml"
)

// TestLaneInput: the scope a native-lane plan of a pull request gets
// (ADR 0070): its changed files inside the project's dir, relative to it;
// a fall-back reason instead when the list is partial, when a changed file
// outside the dir touches the project, or when the base cannot be had.
// Files outside the dir that do not touch the project are left out.
func TestLaneInput(t *testing.T) {
	t.Parallel()
	p := klyaml.Project{Name: "prod", Dir: "infra/prod", State: "acme/prod", Lane: engine.LaneChoiceNative,
		WhenModified: []string{"*.tf", "../modules/**/*.tf"}}
	for name, tc := range map[string]struct {
		p       klyaml.Project
		files   []string
		partial string
		lane    engine.LaneChoice
		why     string // ScopeIncomplete holds it
	}{
		"terraform lane":    {p: klyaml.Project{Dir: "infra/prod"}, files: []string{"infra/prod/a.tf"}, lane: engine.LaneChoiceTerraform},
		"partial listing":   {p: p, files: []string{"infra/prod/a.tf"}, partial: partialListing(3000, 3001), lane: engine.LaneChoiceNative, why: "GitHub lists 3000 of the pull request's 3001 changed files"},
		"a shared module":   {p: p, files: []string{"infra/prod/a.tf", "infra/modules/net/main.tf"}, lane: engine.LaneChoiceNative, why: "infra/modules/net/main.tf changed outside the project's dir infra/prod"},
		"no base commit":    {p: p, files: []string{"README.md", "infra/prod/a.tf"}, lane: engine.LaneChoiceNative, why: "GitHub names no base commit"},
		"a sibling project": {p: p, files: []string{"infra/prodx/README.md", "infra/prod/a.tf"}, lane: engine.LaneChoiceNative, why: "GitHub names no base commit"},
		"a Terraform file":  {p: p, files: []string{"infra/prodx/a.tf", "infra/prod/a.tf"}, lane: engine.LaneChoiceNative, why: "a Terraform file there may be a module"},
	} {
		co := &checkout{pr: github.PullRequest{Number: 1}, files: tc.files, partial: tc.partial}
		in := engine.PlanInput{ChangedFiles: tc.files}
		if err := (&Bot{}).laneInput(context.Background(), nil, github.Repo{Owner: "acme", Name: "infra"}, co, tc.p, &in); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if in.Lane != tc.lane || !strings.Contains(in.ScopeIncomplete, tc.why) || (tc.why == "") != (in.ScopeIncomplete == "") {
			t.Errorf("%s: lane %q, scope incomplete %q; want %q, %q", name, in.Lane, in.ScopeIncomplete, tc.lane, tc.why)
		}
	}
	root := t.TempDir()
	src := filepath.Join(root, "infra", "modules", "net")
	if why := outsideChange(root, p, "infra/modules/net/user-data.sh", []string{src}, nil); !strings.Contains(why, "in the source of a module the configuration calls") {
		t.Errorf("a template of a called module outside the dir: %q, want a fall-back reason", why)
	}
	if why := outsideChange(root, p, "infra/modules/network/user-data.sh", []string{src}, nil); why != "" {
		t.Errorf("a file beside a called module's source: %q, want none", why)
	}
	if why := outsideChange(root, p, "infra/staging/main.tf", []string{src}, []string{"infra/staging"}); why != "" {
		t.Errorf("a Terraform file of another project: %q, want none (it is that project's)", why)
	}
	if why := outsideChange(root, p, "infra/modules/net/main.tf", []string{src}, []string{"infra/modules/net"}); why == "" {
		t.Error("a file of another project's dir that this one calls as a module: want a fall-back reason")
	}
	if got := partialListing(3000, 3000); got != "" {
		t.Errorf("3000 files of 3000 listed: %q, want whole", got)
	}
	if got := partialListing(3000, 0); got == "" {
		t.Error("3000 files listed, changed_files unknown: want partial")
	}
	for _, tc := range []struct {
		dir, file, rel string
		ok             bool
	}{{".", "a.tf", "a.tf", true}, {"infra", "infra/a.tf", "a.tf", true}, {"infra", "infrax/a.tf", "", false}, {"infra", "a.tf", "", false}} {
		if rel, ok := within(tc.dir, tc.file); rel != tc.rel && tc.ok || ok != tc.ok {
			t.Errorf("within(%q, %q) = %q, %v; want %q, %v", tc.dir, tc.file, rel, ok, tc.rel, tc.ok)
		}
	}
}
