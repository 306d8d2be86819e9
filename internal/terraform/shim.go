package terraform

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// The TF_VAR shim. terraform-exec refuses TF_VAR_* in SetEnv, and a nil
// environment would hand Terraform the whole of this process's, Kilolock's
// own variables included (KL_STORE, klbot's key). Passing the values as
// -var would put them on a command line (ps, /proc/PID/cmdline), and a
// generated *.auto.tfvars would raise their precedence above terraform.tfvars
// (docs/terraform.md). So when the caller's environment holds TF_VAR_*, the
// Runner gives terraform-exec this program itself as the executable, with
// the real binary in ShimExecVar and each TF_VAR_NAME=VALUE renamed to
// ShimVarPrefix+NAME=VALUE (names terraform-exec accepts); the shim, started
// by terraform-exec with the same arguments, renames them back, drops its
// own variables and execs the real binary (execve: same pid, so
// terraform-exec's SIGINT, process group and parent-death signal reach
// Terraform). Terraform then reads TF_VAR_* as from any shell: the lowest
// precedence of all variable sources (-var, -var-file, *.auto.tfvars,
// terraform.tfvars all win; Terraform's documented "Variable Definition
// Precedence"). The values travel only through process environments, never
// a file or a command line (ADR 0037). The -var options of a plan travel
// the same way, as TF_CLI_ARGS_plan (ShimArgsPrefix; cliargs.go, ADR
// 0045).
//
// Every program that links this package can be its shim: the check runs in
// init, before main or TestMain (shim_unix.go), so kl, klbot and the test
// binaries that run the engine in-process need no wiring.
const (
	// ShimExecVar holds the Terraform (or OpenTofu) binary the shim execs;
	// set, it puts the program into shim mode.
	ShimExecVar = "KL_TERRAFORM_SHIM_EXEC"
	// ShimVarPrefix + NAME carries TF_VAR_NAME to the shim.
	ShimVarPrefix = "KL_TERRAFORM_SHIM_VAR_"
	// ShimArgsPrefix + COMMAND carries TF_CLI_ARGS_COMMAND to the shim
	// ("plan", "apply"): the -var and -var-file options of a plan with
	// -var values, which must not be on a command line (cliargs.go, ADR
	// 0045).
	ShimArgsPrefix = "KL_TERRAFORM_SHIM_CLI_ARGS_"
)

// argsPrefix is the prefix of the environment variables whose value
// Terraform adds to the arguments of one command (TF_CLI_ARGS_plan).
const argsPrefix = "TF_CLI_ARGS_"

// varPrefix is the prefix of the environment variables Terraform reads as
// input variables.
const varPrefix = "TF_VAR_"

// shimEnv returns the environment the shim execs Terraform with: environ
// without ShimExecVar, each ShimVarPrefix+NAME=VALUE as TF_VAR_NAME=VALUE,
// each ShimArgsPrefix+COMMAND=ARGS as TF_CLI_ARGS_COMMAND=ARGS, everything
// else as it is.
func shimEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == ShimExecVar:
		case strings.HasPrefix(k, ShimVarPrefix):
			out = append(out, varPrefix+strings.TrimPrefix(k, ShimVarPrefix)+"="+v)
		case strings.HasPrefix(k, ShimArgsPrefix):
			out = append(out, argsPrefix+strings.TrimPrefix(k, ShimArgsPrefix)+"="+v)
		default:
			out = append(out, kv)
		}
	}
	return out
}

// runShim execs bin with args[1:] and shimEnv(environ) (execTerraform);
// it returns only when that fails, with the exit status 127 (a shell's for
// a command it cannot start) after saying why on stderr — terraform-exec
// then reports the failed command with that text. Neither the values nor
// the environment are printed.
func runShim(bin string, args, environ []string, stderr io.Writer) int {
	argv := append([]string{bin}, args[1:]...)
	err := execTerraform(bin, argv, shimEnv(environ))
	fmt.Fprintf(stderr, "kilolock: starting terraform %s for the TF_VAR_* shim: %v\n", bin, err)
	return 127
}

// shimEnvFor adds what the shim needs to env (the map handed to
// terraform-exec's SetEnv): ShimExecVar=bin, ShimVarPrefix+NAME for each
// TF_VAR_NAME of vars, ShimArgsPrefix+COMMAND for each TF_CLI_ARGS_COMMAND
// of args.
func shimEnvFor(env, vars, args map[string]string, bin string) {
	env[ShimExecVar] = bin
	for k, v := range vars {
		env[ShimVarPrefix+strings.TrimPrefix(k, varPrefix)] = v
	}
	for k, v := range args {
		env[ShimArgsPrefix+strings.TrimPrefix(k, argsPrefix)] = v
	}
}

// shimExecutable returns the path of this program, the shim the Runner
// hands terraform-exec when there are TF_VAR_* to pass, or an error saying
// why there is none (a platform without execve, an executable that cannot
// be found).
func shimExecutable() (string, error) {
	if !shimSupported {
		return "", errors.New("this platform has no exec to hand the variables over")
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding this program's executable: %w", err)
	}
	if err := isExecutable(exe); err != nil {
		return "", err
	}
	return exe, nil
}

// ValidVariableName returns nil when name can be a Terraform input
// variable's name, else an error saying what is wrong: it is
// engine.ValidVariableName (an HCL identifier that Terraform does not
// reserve). TF_VAR_NAME reaches a variable only when NAME is such a name.
func ValidVariableName(name string) error { return engine.ValidVariableName(name) }
