package bot

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/klyaml"
	"github.com/kilolock/kilolock/internal/planopts"
)

// CommandPrefix starts a klbot command in a pull request comment.
const CommandPrefix = "/kl"

// MaxReason is the longest reason of `/kl unfence -- REASON`, in
// characters (as kl run unfence --reason).
const MaxReason = 1000

// Command names.
const (
	CmdPlan    = "plan"
	CmdApply   = "apply"
	CmdWhy     = "why"
	CmdHistory = "history"
	CmdRecover = "recover"
	CmdUnfence = "unfence"
	CmdHelp    = "help"
)

// Command is one parsed "/kl …" line. Err is set (and Name is CmdHelp) when
// the line starts with /kl but is not a valid command: the reply is the help
// text with Err.
type Command struct {
	Name    string `json:"name"`
	Project string `json:"project,omitempty"` // -p PROJECT (plan, apply, history)
	Run     string `json:"run,omitempty"`     // why RUN
	Reason  string `json:"reason,omitempty"`  // unfence -- REASON
	// Options are plan's Terraform options after "--" (planopts, Comment:
	// no -var; ADR 0045).
	Options engine.PlanOptions `json:"options,omitzero"`
	Err     string             `json:"err,omitempty"`
}

var runIDRE = regexp.MustCompile(`^[0-9A-Z]{26}$`) // a ULID (engine.NewRunID), upper case

// ParseCommand finds the first line of body whose first word is exactly
// "/kl" (leading spaces allowed; "/klapply" and "/KL" are not commands) and
// parses it. Words are split on white space and taken literally: no shell,
// no quotes, no escapes, so `;`, `&&`, `$(…)` or a quoted name are just words
// that fail to parse. Grammar (every other word is an error):
//
//	/kl plan [-p PROJECT] [-- OPTIONS…]
//	/kl apply [-p PROJECT]
//	/kl why [RUN]
//	/kl history [-p PROJECT]
//	/kl recover [-p PROJECT]
//	/kl unfence [-p PROJECT] -- REASON…
//	/kl help
//
// After unfence's "--", every word is the reason (joined by single spaces):
// what the commenter checked on the real objects (ADR 0035). After plan's
// "--", the words are Terraform's plan options (planopts.Parse from
// planopts.Comment: -destroy, -refresh-only, -refresh=false,
// -parallelism=N), parsed strictly; a -var anywhere in the line is refused
// without quoting any of its words (planopts.VarInComment), since its
// value would be public in the pull request and its edit history. In every
// other command, a word that starts with -var or --var (any case) is
// refused the same way, "-var is refused in a comment", unquoted (varWord):
// a parse error would quote it in the public reply.
//
// ok is false when no line is a command; the bot then ignores the comment.
func ParseCommand(body string) (cmd Command, ok bool) {
	for _, line := range strings.Split(body, "\n") {
		words := strings.Fields(line)
		if len(words) == 0 || words[0] != CommandPrefix {
			continue
		}
		return parseWords(words[1:]), true
	}
	return Command{}, false
}

func parseWords(w []string) Command {
	fail := func(format string, args ...any) Command {
		return Command{Name: CmdHelp, Err: fmt.Sprintf(format, args...)}
	}
	if len(w) == 0 {
		return Command{Name: CmdHelp}
	}
	name, rest := w[0], w[1:]
	if name == CmdPlan && planopts.HasVar(rest) {
		return fail("`/kl plan`: -var is refused: %s", planopts.VarInComment)
	}
	if name != CmdPlan && varWord(w) { // plan's options: planopts, which quotes no -var value
		if strings.HasPrefix(name, "-") {
			return fail("-var is refused in a comment: %s", planopts.VarInComment)
		}
		return fail("`/kl %s`: -var is refused in a comment: %s", name, planopts.VarInComment)
	}
	switch name {
	case CmdPlan, CmdApply, CmdHistory, CmdRecover, CmdUnfence:
		c := Command{Name: name}
		for len(rest) > 0 {
			switch {
			case rest[0] == "--" && name == CmdUnfence:
				c.Reason, rest = strings.Join(rest[1:], " "), nil
			case rest[0] == "--" && name == CmdPlan:
				opts, _, err := planopts.Parse(rest[1:], planopts.Comment)
				if err != nil {
					return fail("`/kl plan -- …`: %v", err)
				}
				c.Options, rest = opts, nil
			case rest[0] == "-p" && len(rest) >= 2:
				if c.Project != "" {
					return fail("`-p` given twice")
				}
				if !klyaml.ValidProjectName(rest[1]) {
					return fail("%s is not a project name", echo(rest[1]))
				}
				c.Project, rest = rest[1], rest[2:]
			case rest[0] == "-p":
				return fail("`-p` needs a project name: `/kl %s -p PROJECT`", name)
			default:
				return fail("unexpected %s after `/kl %s`", echo(rest[0]), name)
			}
		}
		switch {
		case name == CmdUnfence && c.Reason == "":
			return fail("`/kl unfence` needs a reason: `/kl unfence -- WHAT YOU CHECKED`")
		case utf8.RuneCountInString(c.Reason) > MaxReason:
			return fail("the reason after `--` is %d characters; at most %d", utf8.RuneCountInString(c.Reason), MaxReason)
		}
		return c
	case CmdWhy:
		c := Command{Name: name}
		switch {
		case len(rest) > 1:
			return fail("unexpected %s after `/kl why %s`", echo(rest[1]), echo(rest[0]))
		case len(rest) == 1 && !runIDRE.MatchString(rest[0]):
			return fail("%s is not a run id (26 characters, as in `kl run show RUN`)", echo(rest[0]))
		case len(rest) == 1:
			c.Run = rest[0]
		}
		return c
	case CmdHelp:
		if len(rest) > 0 {
			return fail("unexpected %s after `/kl help`", echo(rest[0]))
		}
		return Command{Name: CmdHelp}
	}
	return fail("unknown command %s", echo(name))
}

// varWord reports whether a word of w that a parse error could quote
// starts with -var or --var, in any case (-var=NAME=VALUE, -VAR, --var,
// -var-file=…): such a word may hold a value meant to be secret, and the
// reply to the comment is public, where a parse error quotes the word it
// stops at (echo). The words after an unfence's "--" are
// its reason, kept as written and never refused.
func varWord(w []string) bool {
	for i, s := range w {
		if i > 0 && s == "--" && w[0] == CmdUnfence {
			return false
		}
		l := strings.ToLower(s)
		if strings.HasPrefix(l, "-var") || strings.HasPrefix(l, "--var") {
			return true
		}
	}
	return false
}

// MaxEcho is the most characters of a comment's word that a parse error
// quotes back: a comment holds up to 65,536 characters (docs/github.md),
// and an echo of all of them would push the reply's message out of it.
const MaxEcho = 40

// echo quotes word w for a parse error (%q), cut to MaxEcho characters
// with "…" and its length in characters when it is longer.
func echo(w string) string {
	n := utf8.RuneCountInString(w)
	if n <= MaxEcho {
		return fmt.Sprintf("%q", w)
	}
	return fmt.Sprintf("%q… (%d characters)", string([]rune(w)[:MaxEcho]), n)
}
