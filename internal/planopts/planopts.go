// Package planopts parses the Terraform plan options a user passes after
// `--` to `kl plan` and to klbot's `/kl plan` comment (ADR 0045):
// -destroy, -refresh-only, -refresh=false, -parallelism=N and, on kl plan
// only, -var NAME=VALUE. The words are the arguments as given — no shell,
// no quotes — and are read with Go's flag package, which is what Terraform
// reads its own options with, so they are spelt as for terraform plan
// (-var=x=1 or -var x=1, -refresh=false, --destroy). Parsing is strict:
// an unknown option, a bad value, or an option Kilolock cannot honour
// (-state, -lock=false, -chdir, …) is an error naming it, and no error
// ever quotes a -var value.
package planopts

import (
	"errors"
	"flag"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kilolock/kilolock/internal/engine"
)

// Source is where the options come from.
type Source int

const (
	// CLI is `kl plan … -- OPTIONS`: -var allowed.
	CLI Source = iota
	// Comment is `/kl plan … -- OPTIONS` in a pull request comment: -var
	// refused, since the value would be public in the pull request and in
	// its edit history.
	Comment
)

// Accepted names the options Parse accepts from src, for error messages.
func Accepted(src Source) string {
	s := "-destroy, -refresh-only, -refresh=false, -parallelism=N"
	if src == CLI {
		s += " and -var NAME=VALUE"
	}
	return s
}

// VarInComment is why a -var in a comment is refused. The refusal quotes
// nothing the comment holds: not the value, nor the variable's name.
const VarInComment = "in a comment its value would be public, in the pull request and in its edit history; " +
	"give klbot the value as a TF_VAR_* variable it passes (KLBOT_TF_VARS), or commit a var file"

// refusedReasons are the options of terraform plan (and the global
// -chdir) that Kilolock cannot honour, with why and what to do instead.
var refusedReasons = map[string]string{
	"state":     stateReason,
	"state-out": stateReason,
	"backup":    stateReason,
	"lock": "Kilolock replaces Terraform's state lock with reservations: a plan holds none, " +
		"and an apply reserves what its plan writes and reads",
	"lock-timeout": "Kilolock replaces Terraform's state lock with reservations: an apply waits for them with kl apply --wait",
	"chdir": "it is a global option of terraform, not a plan option, and Kilolock runs Terraform in a copy of the root module: " +
		"name the directory with kl plan -C DIR, or as the project's dir in kl.yaml",
	"out":                 "Kilolock saves the plan itself, server-side (it holds secrets), and applies it with kl apply RUN or /kl apply",
	"target":              "use kl plan --target ADDR (it is recorded in the plan's scope)",
	"replace":             "use kl plan --replace ADDR (it is recorded in the plan's scope)",
	"var-file":            "use kl plan --var-file FILE (the file is kept with the plan's configuration), or a var file named in kl.yaml",
	"input":               "Kilolock runs Terraform without a terminal: every variable needs a value (a default, a var file, -var or TF_VAR_*)",
	"no-color":            kilolockSets,
	"json":                kilolockSets + " (kl plan --json prints the plan as JSON)",
	"detailed-exitcode":   kilolockSets,
	"compact-warnings":    kilolockSets,
	"generate-config-out": "it writes configuration files into the root module, and Kilolock plans a copy: generate them with terraform, commit them, then plan",
}

const (
	stateReason = "Kilolock owns the state: every run plans against a snapshot of the head version in a work dir of its own, " +
		"and an apply commits the state's next version"
	kilolockSets = "Kilolock runs Terraform and sets this itself"
)

// Parse parses args, the words after `--`, as plan options from src.
// It returns the options (Vars: the -var names, in order first given,
// each once: engine.VarNames) and, from CLI, the -var values in the order
// given (a later one of a name wins in Terraform, as on its command
// line). Errors wrap engine.ErrInvalid; an option Kilolock cannot honour
// is an *engine.Refused. No error quotes a -var value, and from Comment
// an argument is quoted only when no -var was given (a -var is refused
// first, with VarInComment).
func Parse(args []string, src Source) (engine.PlanOptions, []engine.Var, error) {
	if src == Comment && HasVar(args) {
		return engine.PlanOptions{}, nil, &engine.Refused{Option: "-var", Reason: VarInComment}
	}
	p := &parser{src: src}
	fs := p.flagSet()
	if err := fs.Parse(args); err != nil {
		return engine.PlanOptions{}, nil, p.explain(err)
	}
	if p.problem != nil {
		return engine.PlanOptions{}, nil, p.problem
	}
	if rest := fs.Args(); len(rest) > 0 {
		return engine.PlanOptions{}, nil, p.unexpected(args, rest[0])
	}
	p.opts.NoRefresh = !p.refresh
	p.opts.Vars = engine.VarNames(p.vars)
	if err := errors.Join(p.opts.Check(), engine.CheckVars(p.vars)); err != nil {
		return engine.PlanOptions{}, nil, err
	}
	return p.opts, p.vars, nil
}

// HasVar reports whether any of args is a -var option (-var, --var,
// -var=…), by its name alone: what a comment is refused for before any
// of its words is quoted.
func HasVar(args []string) bool {
	for _, a := range args {
		if optionName(a) == "var" {
			return true
		}
	}
	return false
}

// optionName is the name of the option a is ("-var=x" → "var"), "" when
// a is not one.
func optionName(a string) string {
	if len(a) < 2 || a[0] != '-' || a == "--" {
		return ""
	}
	n := strings.TrimPrefix(a[1:], "-")
	n, _, _ = strings.Cut(n, "=")
	return n
}

// parser is one Parse.
type parser struct {
	src     Source
	opts    engine.PlanOptions
	refresh bool
	vars    []engine.Var
	// problem is the first bad value: recorded by the flags' Set, which
	// returns errStop so that flag stops without its own message (which
	// would quote the value).
	problem error
}

// errStop stops flag.Parse at a problem the parser recorded.
var errStop = errors.New("stop")

func (p *parser) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	p.refresh = true
	fs.Var(boolValue{p: p, name: "destroy", to: &p.opts.Destroy}, "destroy", "")
	fs.Var(boolValue{p: p, name: "refresh-only", to: &p.opts.RefreshOnly}, "refresh-only", "")
	fs.Var(boolValue{p: p, name: "refresh", to: &p.refresh}, "refresh", "")
	fs.Var(parallelismValue{p: p}, "parallelism", "")
	if p.src == CLI {
		fs.Var(varValue{p: p}, "var", "")
	}
	for name, reason := range refusedReasons {
		fs.Var(refusedValue{p: p, name: name, reason: reason}, name, "")
	}
	return fs
}

// fail records problem err (the first one) and stops the parse.
func (p *parser) fail(err error) error {
	if p.problem == nil {
		p.problem = err
	}
	return errStop
}

// explain turns flag's error into one that names the option and quotes
// no value.
func (p *parser) explain(err error) error {
	if p.problem != nil {
		return p.problem
	}
	msg := err.Error()
	if errors.Is(err, flag.ErrHelp) {
		msg = "flag provided but not defined: -help"
	}
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		if p.src == Comment && name == "var" {
			return &engine.Refused{Option: "-var", Reason: VarInComment}
		}
		return engine.Errorf(engine.ErrInvalid, "unknown option -%s: Kilolock passes %s to terraform plan", name, Accepted(p.src))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		want := "a value"
		switch name {
		case "var":
			want = "NAME=VALUE"
		case "parallelism":
			want = "a whole number, -parallelism=N"
		}
		return engine.Errorf(engine.ErrInvalid, "-%s needs %s", name, want)
	}
	if strings.HasPrefix(msg, "bad flag syntax") {
		return engine.Errorf(engine.ErrInvalid, "an option is not spelt as one: write -NAME or -NAME=VALUE (%s)", Accepted(p.src))
	}
	return engine.Errorf(engine.ErrInvalid, "reading the plan options: %s", msg)
}

// unexpected is the error of a word that is no option (rest: where flag
// stopped). It is quoted only when no -var was given: a -var value split
// over two words would be quoted otherwise.
func (p *parser) unexpected(args []string, word string) error {
	what := "argument"
	if !HasVar(args) {
		what += " " + quote(word)
	}
	return engine.Errorf(engine.ErrInvalid, "unexpected %s after the plan options: terraform plan takes options only (%s), each one word (-var NAME=VALUE: the pair is one)",
		what, Accepted(p.src))
}

// quote is s quoted (Go syntax), cut to 40 characters.
func quote(s string) string {
	const n = 40
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	return strconv.Quote(s)
}

// boolValue is a boolean option (-destroy, -destroy=false).
type boolValue struct {
	p    *parser
	name string
	to   *bool
}

func (v boolValue) IsBoolFlag() bool { return true }
func (v boolValue) String() string   { return "" }
func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return v.p.fail(engine.Errorf(engine.ErrInvalid, "-%s=%s: want true or false", v.name, quote(s)))
	}
	*v.to = b
	return nil
}

// parallelismValue is -parallelism=N.
type parallelismValue struct{ p *parser }

func (v parallelismValue) String() string { return "" }
func (v parallelismValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > engine.MaxParallelism {
		return v.p.fail(engine.Errorf(engine.ErrInvalid, "-parallelism=%s: want a whole number from 1 to %d (Terraform's default is 10)", quote(s), engine.MaxParallelism))
	}
	v.p.opts.Parallelism = int(n)
	return nil
}

// varValue is -var NAME=VALUE; its errors never quote the value.
type varValue struct{ p *parser }

func (v varValue) String() string { return "" }
func (v varValue) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok {
		return v.p.fail(engine.Errorf(engine.ErrInvalid, "-var: want NAME=VALUE, one argument (-var 'NAME=VALUE' in a shell)"))
	}
	if err := engine.ValidVariableName(name); err != nil {
		return v.p.fail(engine.Errorf(engine.ErrInvalid, "-var: %v", err))
	}
	v.p.vars = append(v.p.vars, engine.Var{Name: name, Value: value})
	return nil
}

// refusedValue is an option Kilolock cannot honour: any use of it is
// refused with its reason. Boolean-like, so that -lock=false, -lock and
// -state=PATH all reach it.
type refusedValue struct {
	p      *parser
	name   string
	reason string
}

func (v refusedValue) IsBoolFlag() bool { return true }
func (v refusedValue) String() string   { return "" }
func (v refusedValue) Set(string) error {
	return v.p.fail(&engine.Refused{Option: "-" + v.name, Reason: v.reason})
}
