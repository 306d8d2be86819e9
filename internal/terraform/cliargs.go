package terraform

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// How -var values reach Terraform (ADR 0045). A -var on Terraform's command
// line is visible to every user of the machine (ps, /proc/PID/cmdline), and
// as TF_VAR_NAME it would lose its precedence: terraform.tfvars,
// *.auto.tfvars and -var-file all win over the environment, while a -var
// wins over all of them but the -var and -var-file options after it. A var
// file Kilolock wrote would leave the value on disk. So the options go
// where Terraform reads more arguments of one command from:
// TF_CLI_ARGS_plan (and TF_CLI_ARGS_apply), an environment variable that
// Terraform parses with github.com/mattn/go-shellwords and inserts right
// after the command name, before the arguments terraform-exec puts on the
// command line. With -var values, the plan's -var-file options move there
// too, first, so that the order is the one `terraform plan -var-file=F
// -var NAME=VALUE` has: the -var wins, as Terraform documents. The
// variable reaches Terraform through the shim (shim.go), since
// terraform-exec refuses TF_CLI_ARGS* in SetEnv; Terraform itself only
// logs it with TF_LOG, which kl never passes (terraformEnv drops it).
// Measured with Terraform 1.11.4: a value holding quotes, backslashes, $,
// backticks, ;, &, |, <, >, tabs and newlines reaches the variable
// unchanged, and a -var-file given on the command line would win over a
// -var of TF_CLI_ARGS_plan (hence the move). Terraform 1.5.7 (what make
// tools installs) reads TF_CLI_ARGS* with the same code (main.go
// mergeEnvArgs) and go-shellwords v1.0.4, 1.11.4 with v1.0.12: both parse
// cliArgs' words back unchanged — checked with each version's Parse on
// values holding quotes, backslashes, $, $( ), backticks, ;, &, |, <, >,
// %, tabs, newlines, non-ASCII letters and the empty string (neither
// expands $ unless ParseEnv is set, which Terraform does not set).

// shellQuote quotes s as one word for go-shellwords: in single quotes
// every character is literal but the quote itself, which is written as
// four characters — a quote that ends the quoting, a backslash-escaped
// quote, and a quote that starts it again.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// cliArgs is the value of TF_CLI_ARGS_COMMAND for the options: a
// -var-file=PATH for each of varFiles (as given: relative to the root
// module copy Terraform runs in), then a -var=NAME=VALUE for each of vars,
// in order (a later one of the same name wins, as on a command line), each
// quoted (shellQuote) and separated by a space. "" when both are empty.
func cliArgs(varFiles []string, vars []engine.Var) string {
	words := make([]string, 0, len(varFiles)+len(vars))
	for _, vf := range varFiles {
		words = append(words, shellQuote("-var-file="+vf))
	}
	for _, v := range vars {
		words = append(words, shellQuote("-var="+v.Name+"="+v.Value))
	}
	return strings.Join(words, " ")
}

// varFilePaths are the paths Terraform reads the archived var files from:
// their names in the archive (relative to cfg/), relative to the root
// module copy Terraform runs in.
func (w workDir) varFilePaths(varFiles []string) []string {
	out := make([]string, len(varFiles))
	for i, vf := range varFiles {
		out[i] = w.rel(filepath.Join(w.Cfg, filepath.FromSlash(vf)))
	}
	return out
}

// varMasks are vars as the masker's input (newMasker): each value keyed
// by "-var NAME", so that a masked value reads "(value of -var NAME)".
func varMasks(vars []engine.Var) map[string]string {
	out := make(map[string]string, len(vars))
	for _, v := range vars {
		// A later -var of the same name wins in Terraform; every value
		// given is masked.
		k := "-var " + v.Name
		for i := 2; out[k] != "" && out[k] != v.Value; i++ {
			k = "-var " + v.Name + " (#" + strconv.Itoa(i) + ")"
		}
		out[k] = v.Value
	}
	return out
}
