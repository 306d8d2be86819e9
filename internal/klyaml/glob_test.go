package klyaml

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSelect(t *testing.T) {
	t.Parallel()
	cfg := &Config{Projects: []Project{
		{Name: "root", Dir: ".", WhenModified: []string{"*.tf"}},
		{Name: "prod", Dir: "envs/prod", WhenModified: DefaultWhenModified},
		{Name: "dns", Dir: "dns", WhenModified: []string{"*.tf", "../modules/dns/**"}},
		{Name: "docs", Dir: "docs", WhenModified: []string{"**/*.md"}},
	}}
	for name, tc := range map[string]struct {
		changed   []string
		touched   map[string][]string
		untouched []string
	}{
		"root file only": {[]string{"main.tf"}, map[string][]string{"root": {"main.tf"}}, []string{"prod", "dns", "docs"}},
		"nested default": {[]string{"envs/prod/modules/app/main.tf", "envs/prod/prod.tfvars"},
			map[string][]string{"prod": {"envs/prod/modules/app/main.tf", "envs/prod/prod.tfvars"}}, []string{"root", "dns", "docs"}},
		"sibling module":                {[]string{"modules/dns/zone/records.tf"}, map[string][]string{"dns": {"modules/dns/zone/records.tf"}}, []string{"root", "prod", "docs"}},
		"star does not cross dirs":      {[]string{"sub/main.tf"}, map[string][]string{}, []string{"root", "prod", "dns", "docs"}},
		"double star matches zero dirs": {[]string{"docs/a.md"}, map[string][]string{"docs": {"docs/a.md"}}, []string{"root", "prod", "dns"}},
		"nothing":                       {[]string{"README.md", "envs/prod/README.md"}, map[string][]string{}, []string{"root", "prod", "dns", "docs"}},
		"prefix not a dir":              {[]string{"envs/production/main.tf"}, map[string][]string{}, []string{"root", "prod", "dns", "docs"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := Select(cfg, tc.changed)
			if d := cmp.Diff(tc.touched, s.Touched); d != "" {
				t.Errorf("touched (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.untouched, s.Untouched); d != "" {
				t.Errorf("untouched (-want +got):\n%s", d)
			}
		})
	}
}
