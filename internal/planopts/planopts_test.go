package planopts

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		args []string
		src  Source
		opts engine.PlanOptions
		vars []engine.Var
	}{
		"none":               {},
		"destroy":            {args: []string{"-destroy"}, opts: engine.PlanOptions{Destroy: true}},
		"double dash":        {args: []string{"--destroy"}, opts: engine.PlanOptions{Destroy: true}},
		"destroy=false":      {args: []string{"-destroy=false"}},
		"refresh-only":       {args: []string{"-refresh-only"}, opts: engine.PlanOptions{RefreshOnly: true}},
		"refresh=false":      {args: []string{"-refresh=false"}, opts: engine.PlanOptions{NoRefresh: true}},
		"refresh=true":       {args: []string{"-refresh=true"}},
		"parallelism":        {args: []string{"-parallelism=3"}, opts: engine.PlanOptions{Parallelism: 3}},
		"parallelism, space": {args: []string{"-parallelism", "7"}, opts: engine.PlanOptions{Parallelism: 7}},
		"all from a comment": {
			args: []string{"-destroy", "-refresh=false", "-parallelism=2"}, src: Comment,
			opts: engine.PlanOptions{Destroy: true, NoRefresh: true, Parallelism: 2},
		},
		"vars, in order, names once": {
			args: []string{"-var", "b=1", "-var=a=x=y", "-var", "b=", "-var", "c= spaced value\n"},
			opts: engine.PlanOptions{Vars: []string{"b", "a", "c"}},
			vars: []engine.Var{{Name: "b", Value: "1"}, {Name: "a", Value: "x=y"}, {Name: "b", Value: ""}, {Name: "c", Value: " spaced value\n"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts, vars, err := Parse(tc.args, tc.src)
			if err != nil {
				t.Fatalf("Parse(%q) = %v", tc.args, err)
			}
			if !reflect.DeepEqual(opts, tc.opts) || !reflect.DeepEqual(vars, tc.vars) {
				t.Errorf("Parse(%q) = %+v, %#v; want %+v, %#v", tc.args, opts, vars, tc.opts, tc.vars)
			}
		})
	}
}

// TestParseRefuses: each refusal names the option (and only quotes what
// is no -var value), and says why.
func TestParseRefuses(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-VALUE-42"
	tests := map[string]struct {
		args    []string
		src     Source
		want    []string // in the error
		refused bool     // an *engine.Refused
	}{
		"state":             {args: []string{"-state=other.tfstate"}, want: []string{"-state is refused", "Kilolock owns the state"}, refused: true},
		"state, spaced":     {args: []string{"-state", "x"}, want: []string{"-state is refused"}, refused: true},
		"state-out":         {args: []string{"-state-out=x"}, want: []string{"-state-out is refused"}, refused: true},
		"lock=false":        {args: []string{"-destroy", "-lock=false"}, want: []string{"-lock is refused", "reservations"}, refused: true},
		"lock-timeout":      {args: []string{"-lock-timeout=5m"}, want: []string{"-lock-timeout is refused", "kl apply --wait"}, refused: true},
		"chdir":             {args: []string{"-chdir=infra"}, want: []string{"-chdir is refused", "kl plan -C DIR"}, refused: true},
		"out":               {args: []string{"-out=p.tfplan"}, want: []string{"-out is refused"}, refused: true},
		"target":            {args: []string{"-target=terraform_data.a"}, want: []string{"-target is refused", "kl plan --target"}, refused: true},
		"unknown":           {args: []string{"-frobnicate=" + secret}, want: []string{"unknown option -frobnicate", "-destroy, -refresh-only"}},
		"help":              {args: []string{"-help"}, want: []string{"unknown option -help"}},
		"bad bool":          {args: []string{"-destroy=maybe"}, want: []string{`-destroy="maybe": want true or false`}},
		"parallelism zero":  {args: []string{"-parallelism=0"}, want: []string{`-parallelism="0": want a whole number from 1`}},
		"parallelism text":  {args: []string{"-parallelism=ten"}, want: []string{`-parallelism="ten"`}},
		"parallelism bare":  {args: []string{"-parallelism"}, want: []string{"-parallelism needs a whole number"}},
		"two modes":         {args: []string{"-destroy", "-refresh-only"}, want: []string{"-destroy and -refresh-only"}},
		"refresh-only, no":  {args: []string{"-refresh-only", "-refresh=false"}, want: []string{"-refresh-only and -refresh=false"}},
		"positional":        {args: []string{"-destroy", "extra"}, want: []string{`unexpected argument "extra" after the plan options`}},
		"var without =":     {args: []string{"-var", secret}, want: []string{"-var: want NAME=VALUE"}},
		"var bare":          {args: []string{"-var"}, want: []string{"-var needs NAME=VALUE"}},
		"var bad name":      {args: []string{"-var", "count=" + secret}, want: []string{`"count" is reserved`}},
		"var split":         {args: []string{"-var", "x=", secret}, want: []string{"unexpected argument after"}},
		"var in a comment":  {args: []string{"-destroy", "-var", "x=" + secret}, src: Comment, want: []string{"-var is refused", "public"}, refused: true},
		"var= in a comment": {args: []string{"--var=x=" + secret}, src: Comment, want: []string{"-var is refused"}, refused: true},
		"var after a bad":   {args: []string{"-state", "-var", "x=" + secret}, src: Comment, want: []string{"-var is refused"}, refused: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, _, err := Parse(tc.args, tc.src)
			if err == nil {
				t.Fatalf("Parse(%q) = nil, want an error", tc.args)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse(%q) = %q, want it to say %q", tc.args, err, w)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Parse(%q) = %q: it quotes the value", tc.args, err)
			}
			if tc.src == Comment && strings.Contains(err.Error(), "x=") {
				t.Errorf("Parse(%q) = %q: a refused -var's name is quoted", tc.args, err)
			}
			if !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("Parse(%q) = %v, want an engine.ErrInvalid", tc.args, err)
			}
			var r *engine.Refused
			if errors.As(err, &r) != tc.refused {
				t.Errorf("Parse(%q) = %v: *engine.Refused %v, want %v", tc.args, err, !tc.refused, tc.refused)
			}
		})
	}
}
