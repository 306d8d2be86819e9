package action_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// runner runs a composite action's steps with bash the way the Actions
// runner does, for the parts of it this action uses:
//
//   - expressions ${{ … }} in env, run, names, defaults and output values
//     are replaced from the contexts inputs.NAME (the value given, else the
//     input's default, itself expanded), github.NAME, steps.ID.outputs.NAME
//     ("" when unset) and env.NAME (the step's env); anything else fails
//     the test, so an action that outgrows this substituter says so;
//   - a step's if: is "", always(), success(), failure(), or `X == 'v'` /
//     `X != 'v'` (case-insensitive, as Actions compares strings) joined
//     with &&, implicitly and-ed with success();
//   - a run step runs as `bash --noprofile --norc -eo pipefail FILE` in the
//     workspace, with the job's environment plus the step's env, and fresh
//     $GITHUB_OUTPUT and $GITHUB_STEP_SUMMARY files, read back afterwards
//     (name=value and name<<DELIMITER lines; summaries concatenated);
//   - a uses: step fails the test when its if: holds: it is setup-go,
//     which the action must not need where Go is on PATH.
type runner struct {
	t      *testing.T
	action actionFile
	work   string            // $GITHUB_WORKSPACE
	temp   string            // $RUNNER_TEMP
	github map[string]string // the github context
	env    []string          // the job's environment
}

// run is one use of the action.
type run struct {
	outputs map[string]string // the action's outputs
	summary string            // the job summary of all its steps
	log     string            // every step's output
	failed  string            // the step that failed, "" if none
	code    int               // its exit status
}

func (r *runner) value(expr string, inputs map[string]string, steps map[string]map[string]string, env map[string]string) string {
	r.t.Helper()
	parts := strings.Split(expr, ".")
	switch {
	case len(parts) == 2 && parts[0] == "inputs":
		in, ok := r.action.Inputs[parts[1]]
		if !ok {
			r.t.Fatalf("${{ %s }}: no such input", expr)
		}
		if v, ok := inputs[parts[1]]; ok {
			return v
		}
		if in.Required {
			r.t.Fatalf("input %s is required and the test gave none", parts[1])
		}
		return r.expand(in.Default, inputs, steps, env)
	case len(parts) == 2 && parts[0] == "github":
		v, ok := r.github[parts[1]]
		if !ok {
			r.t.Fatalf("${{ %s }}: the test's github context has no %s", expr, parts[1])
		}
		return v
	case len(parts) == 4 && parts[0] == "steps" && parts[2] == "outputs":
		return steps[parts[1]][parts[3]]
	case len(parts) == 2 && parts[0] == "env":
		return env[parts[1]]
	case len(expr) >= 2 && expr[0] == '\'' && expr[len(expr)-1] == '\'':
		return strings.ReplaceAll(expr[1:len(expr)-1], "''", "'")
	}
	r.t.Fatalf("${{ %s }}: outside what the test's substituter knows (inputs, github, steps, env)", expr)
	return ""
}

func (r *runner) expand(s string, inputs map[string]string, steps map[string]map[string]string, env map[string]string) string {
	r.t.Helper()
	return exprRE.ReplaceAllStringFunc(s, func(m string) string {
		return r.value(exprRE.FindStringSubmatch(m)[1], inputs, steps, env)
	})
}

// cond evaluates a step's if: (see runner).
func (r *runner) cond(expr string, failed bool, inputs map[string]string, steps map[string]map[string]string) bool {
	r.t.Helper()
	expr = strings.TrimSpace(expr)
	if m := exprRE.FindStringSubmatch(expr); m != nil && m[0] == expr {
		expr = m[1]
	}
	if expr == "" {
		return !failed
	}
	ok, status := true, false
	for _, part := range strings.Split(expr, "&&") {
		part = strings.TrimSpace(part)
		switch {
		case part == "always()":
			status = true
		case part == "success()":
			status, ok = true, ok && !failed
		case part == "failure()":
			status, ok = true, ok && failed
		default:
			op := "=="
			l, rv, found := strings.Cut(part, "==")
			if !found {
				op = "!="
				if l, rv, found = strings.Cut(part, "!="); !found {
					r.t.Fatalf("if: %s: outside what the test evaluates", expr)
				}
			}
			eq := strings.EqualFold(r.value(strings.TrimSpace(l), inputs, steps, nil), r.value(strings.TrimSpace(rv), inputs, steps, nil))
			ok = ok && eq == (op == "==")
		}
	}
	if !status {
		ok = ok && !failed
	}
	return ok
}

// use runs the action's steps with inputs.
func (r *runner) use(inputs map[string]string) run {
	r.t.Helper()
	steps := map[string]map[string]string{}
	var res run
	var log, summary strings.Builder
	for i, s := range r.action.Runs.Steps {
		name := r.expand(s.Name, inputs, steps, nil)
		if name == "" {
			name = s.Uses
		}
		if !r.cond(s.If, res.failed != "", inputs, steps) {
			fmt.Fprintf(&log, "── %s: skipped (if: %s)\n", name, s.If)
			continue
		}
		if s.Uses != "" {
			r.t.Fatalf("step %q (uses %s) would run: the action wants it although Go %s is on PATH", name, s.Uses, goVersion(r.t))
		}
		env := map[string]string{}
		for k, v := range s.Env {
			env[k] = r.expand(v, inputs, steps, env)
		}
		out, err := r.step(i, name, r.expand(s.Run, inputs, steps, env), env)
		fmt.Fprintf(&log, "── %s\n%s", name, out.log)
		summary.WriteString(out.summary)
		if s.ID != "" {
			steps[s.ID] = out.outputs
		}
		if err != nil {
			code := -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if res.failed == "" {
				res.failed, res.code = name, code
			}
			fmt.Fprintf(&log, "── %s: failed: %v\n", name, err)
		}
	}
	res.outputs = map[string]string{}
	for k, o := range r.action.Outputs {
		res.outputs[k] = r.expand(o.Value, inputs, steps, nil)
	}
	res.log, res.summary = log.String(), summary.String()
	return res
}

// stepRun is what one step left behind.
type stepRun struct {
	outputs map[string]string
	summary string
	log     string
}

func (r *runner) step(i int, name, script string, stepEnv map[string]string) (stepRun, error) {
	r.t.Helper()
	dir := filepath.Join(r.temp, "_steps", fmt.Sprintf("%d-%d", time.Now().UnixNano(), i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	file, output, summary := filepath.Join(dir, "script.sh"), filepath.Join(dir, "output"), filepath.Join(dir, "summary")
	for _, p := range []string{output, summary} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		r.t.Fatal(err)
	}
	env := append(append([]string(nil), r.env...), "GITHUB_OUTPUT="+output, "GITHUB_STEP_SUMMARY="+summary,
		"GITHUB_ACTION_PATH="+r.github["action_path"])
	keys := make([]string, 0, len(stepEnv))
	for k := range stepEnv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+stepEnv[k])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-eo", "pipefail", file)
	cmd.Dir, cmd.Env = r.work, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	outs, perr := parseOutputs(output)
	if perr != nil {
		r.t.Fatalf("step %q: %v", name, perr)
	}
	sum, rerr := os.ReadFile(summary)
	if rerr != nil {
		r.t.Fatal(rerr)
	}
	return stepRun{outputs: outs, summary: string(sum), log: out.String()}, err
}

// parseOutputs reads a $GITHUB_OUTPUT file: name=value lines and
// name<<DELIMITER … DELIMITER blocks.
func parseOutputs(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if name, delim, ok := strings.Cut(line, "<<"); ok && !strings.Contains(name, "=") {
			var val []string
			for {
				if !sc.Scan() {
					return nil, fmt.Errorf("reading $GITHUB_OUTPUT: %s<<%s is not closed", name, delim)
				}
				if sc.Text() == delim {
					break
				}
				val = append(val, sc.Text())
			}
			out[name] = strings.Join(val, "\n")
			continue
		}
		name, val, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("reading $GITHUB_OUTPUT: line %q is neither name=value nor name<<DELIMITER", line)
		}
		out[name] = val
	}
	return out, sc.Err()
}

func goVersion(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "(none)"
	}
	return strings.TrimSpace(string(out))
}
