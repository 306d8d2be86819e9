package plandiff

import (
	"sort"

	tfjson "github.com/hashicorp/terraform-json"
)

// Secrets returns the values Build masks wherever they appear, for masking
// text that is not a plan — Terraform's diagnostics of an apply, which
// quote configuration and command output in clear (ADR 0047): every value
// of at least 8 bytes that plan marks sensitive (before_sensitive,
// after_sensitive of every resource change and drift, sensitive outputs,
// sensitive root variables' values and defaults), that the
// sensitive_attributes of opts.PriorState mark or that are its sensitive
// outputs' values, and opts.Secrets. Shorter values are left out: masked
// in free text they would garble it (Build masks them only where they are
// marked). Longest first, then in byte order; no duplicates.
//
// plan may be nil: then only opts.PriorState and opts.Secrets count (a
// state Terraform wrote after the plan). Errors: a PriorState that is not a
// Terraform state v4 document (tfstate.Parse's error).
func Secrets(plan *tfjson.Plan, opts Options) ([]string, error) {
	b := &builder{sec: &secrets{min: minContained}}
	for _, v := range opts.Secrets {
		b.sec.addLeaf(v)
	}
	if err := b.readState(opts.PriorState); err != nil {
		return nil, err
	}
	if plan != nil {
		b.collect(plan)
	}
	out := append([]string(nil), b.sec.contains...)
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out, nil
}
