package closure_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilolock/kilolock/internal/closure"
)

// TestClosureProviders covers providers (default, alias, passed to a
// module, inherited), a module directory called twice and depends_on on a
// module, on testdata/providers (no Terraform run: its providers cannot be
// downloaded here).
func TestClosureProviders(t *testing.T) {
	t.Parallel()
	cfg := load(t, "testdata/providers")
	for name, tc := range map[string]struct {
		target  string
		addrs   []string
		blocks  []string
		without []string
	}{
		"the default configuration and what it reads": {
			target:  "aws_instance.default",
			addrs:   []string{"aws_instance.default"},
			blocks:  []string{"|provider.aws", "|var.region"},
			without: []string{"|provider.aws.east", "|var.east_region"},
		},
		"the provider argument names an alias": {
			target:  "aws_instance.east",
			addrs:   []string{"aws_instance.east"},
			blocks:  []string{"|provider.aws.east", "|var.east_region"},
			without: []string{"|provider.aws", "|var.region"},
		},
		"a directory called twice is sliced once, each call with its provider": {
			target: "module.net.aws_subnet.s",
			addrs: []string{"module.net.aws_subnet.s", "module.net.aws_vpc.v",
				"module.net_again.aws_subnet.s", "module.net_again.aws_vpc.v"},
			blocks: []string{"|module.net", "|module.net_again", "|provider.aws.east", "|provider.aws"},
		},
		"depends_on a module takes its tree": {
			target: "terraform_data.after_net",
			addrs: []string{"module.net.aws_subnet.s", "module.net.aws_vpc.v",
				"module.net_again.aws_subnet.s", "module.net_again.aws_vpc.v", "terraform_data.after_net"},
			blocks:  []string{"|module.net", "|provider.aws.east"},
			without: []string{"|aws_instance.default", "|aws_instance.east"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := closure.TargetScope(cfg, []string{tc.target})
			if err != nil {
				t.Fatal(err)
			}
			c, err := closure.Compute(cfg, s)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.addrs, c.Addresses); d != "" {
				t.Errorf("Addresses (-want +got):\n%s", d)
			}
			has := map[string]bool{}
			for _, b := range c.Blocks {
				has[b] = true
			}
			for _, b := range tc.blocks {
				if !has[b] {
					t.Errorf("closure lacks %s; has %v", b, c.Blocks)
				}
			}
			for _, b := range tc.without {
				if has[b] {
					t.Errorf("closure holds %s", b)
				}
			}
		})
	}
}
