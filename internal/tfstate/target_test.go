package tfstate_test

import (
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/tfstate"
)

func TestParseTarget(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"terraform_data.a":    "terraform_data.a",
		" terraform_data.a ":  "terraform_data.a",
		"terraform_data.a[0]": "terraform_data.a[0]",
		`x.y["a\"b"]`:         `x.y["a\"b"]`,
		`x.y["$${x}"]`:        `x.y["$${x}"]`,
		`x.y["é\n"]`:          `x.y["é\n"]`,
		"data.t.n":            "data.t.n",
		`module.a["eu"].module.b[2].data.t.n["k"]`: `module.a["eu"].module.b[2].data.t.n["k"]`,
		"module.app":    "module.app",
		"module.app[1]": "module.app[1]",
	} {
		got, err := tfstate.ParseTarget(in)
		if err != nil {
			t.Errorf("ParseTarget(%q): %v", in, err)
			continue
		}
		if got.String() != want {
			t.Errorf("ParseTarget(%q).String() = %q, want %q", in, got.String(), want)
		}
	}
}

func TestParseTargetRefuses(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                 "empty address",
		"bad address!":     `parsing address "bad address!": Invalid character`,
		"module":           `"module" must be followed by a module name`,
		"module.a.b":       "want [module.NAME[KEY].]…[data.]TYPE.NAME[KEY], or a module address",
		"x.y.z":            `unexpected "z" after the resource`,
		"x.y[0][1]":        "unexpected [1] after the resource",
		"x.y[1.5]":         "instance key 1.5: a count index is a whole number from 0",
		"x.y[-1]":          "parsing address",
		"x.y[true]":        "Index brackets must contain either a literal number or a literal string",
		"module.a[0][1].x": "want [module.NAME[KEY].]",
	} {
		_, err := tfstate.ParseTarget(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTarget(%q) = %v, want an error saying %q", in, err, want)
		}
	}
}
