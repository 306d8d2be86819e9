package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/store/pgtest"
)

// setupPostgres returns a kit whose store (k.store, KL_STORE) is the
// postgres:// DSN of a fresh schema on the test PostgreSQL server
// (pgtest.DSN) and whose runs work under <temp>/runs.
// It skips the test without terraform or PostgreSQL server binaries.
func setupPostgres(t *testing.T) *kit {
	t.Helper()
	k := setup(t)
	dsn := pgtest.DSN(t)
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		t.Skipf("kl takes a postgres:// URL; %s is a key=value DSN", pgtest.EnvURL)
	}
	k.store = dsn
	env := []string{"KL_STORE=" + dsn, "KL_WORKDIR=" + filepath.Join(k.dir, "runs")}
	for _, kv := range k.env {
		if !strings.HasPrefix(kv, "KL_STORE=") {
			env = append(env, kv)
		}
	}
	k.env = env
	return k
}

// envWith returns env with each "KEY=value" of kvs replacing the entry of
// the same key.
func envWith(env []string, kvs ...string) []string {
	out := make([]string, 0, len(env)+len(kvs))
	keys := map[string]bool{}
	for _, kv := range kvs {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !keys[k] {
			out = append(out, kv)
		}
	}
	return append(out, kvs...)
}

// bgProc is a kl process running in the background.
type bgProc struct {
	args        []string
	cmd         *exec.Cmd
	out, errOut bytes.Buffer
	exited      chan struct{}
	err         error
}

// startKL starts the kl binary with args and env (procEnv is applied) in
// dir. The test's cleanup kills it if it is still running.
func startKL(t *testing.T, bin, dir string, env []string, args ...string) *bgProc {
	t.Helper()
	p := &bgProc{args: args, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env, p.cmd.Dir = procEnv(env), dir
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errOut
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting kl %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// wait waits up to timeout for p to exit and returns its result.
func (p *bgProc) wait(t *testing.T, timeout time.Duration) proc {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Fatalf("kl %s did not exit within %s\nstdout:\n%s\nstderr:\n%s", strings.Join(p.args, " "), timeout, p.out.String(), p.errOut.String())
	}
	var ee *exec.ExitError
	if p.err != nil && !errors.As(p.err, &ee) {
		t.Fatalf("kl %s: %v", strings.Join(p.args, " "), p.err)
	}
	return proc{out: p.out.String(), errOut: p.errOut.String(), code: p.cmd.ProcessState.ExitCode()}
}

// tfData is one terraform_data resource of a tfConfig: its input is Value,
// or "Value:${terraform_data.Ref}" when Ref is set ("r00.id": stable across
// in-place updates; "r01.input": known at plan time).
type tfData struct{ Value, Ref string }

// tfConfig is a root module of terraform_data resources by name.
type tfConfig map[string]tfData

// with returns a copy of c with the values of the named resources replaced.
func (c tfConfig) with(values map[string]string) tfConfig {
	out := make(tfConfig, len(c))
	for n, r := range c {
		if v, ok := values[n]; ok {
			r.Value = v
		}
		out[n] = r
	}
	return out
}

// names returns c's resource names, sorted.
func (c tfConfig) names() []string {
	out := make([]string, 0, len(c))
	for n := range c {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// hcl renders c as main.tf.
func (c tfConfig) hcl() string {
	var b strings.Builder
	for _, n := range c.names() {
		r := c[n]
		if r.Ref != "" {
			fmt.Fprintf(&b, "resource \"terraform_data\" %q {\n  input = \"%s:${terraform_data.%s}\"\n}\n\n", n, r.Value, r.Ref)
		} else {
			fmt.Fprintf(&b, "resource \"terraform_data\" %q {\n  input = %q\n}\n\n", n, r.Value)
		}
	}
	return b.String()
}

// tfInstances returns the terraform_data instances of a state v4 document
// by resource name (root module, one instance each): id and input.
func tfInstances(t *testing.T, doc []byte) (serial int64, ids, inputs map[string]string) {
	t.Helper()
	var raw struct {
		Serial    int64 `json:"serial"`
		Resources []struct {
			Module    string `json:"module"`
			Type      string `json:"type"`
			Name      string `json:"name"`
			Instances []struct {
				Attributes struct {
					ID    string `json:"id"`
					Input *struct {
						Value any `json:"value"`
					} `json:"input"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(doc, &raw); err != nil {
		t.Fatalf("parsing state: %v\n%s", err, doc)
	}
	ids, inputs = map[string]string{}, map[string]string{}
	for _, r := range raw.Resources {
		if r.Module != "" || r.Type != "terraform_data" || len(r.Instances) != 1 {
			t.Fatalf("unexpected resource %s %s.%s with %d instances", r.Module, r.Type, r.Name, len(r.Instances))
		}
		a := r.Instances[0].Attributes
		ids[r.Name] = a.ID
		if a.Input != nil && a.Input.Value != nil {
			inputs[r.Name] = fmt.Sprint(a.Input.Value)
		}
	}
	return raw.Serial, ids, inputs
}

// The parts of kl's JSON documents (docs/json.md) these tests read.
type (
	runDoc struct {
		ID              string `json:"id"`
		Kind            string `json:"kind"`
		Status          string `json:"status"`
		Reason          string `json:"reason"`
		PlanRun         string `json:"plan_run"`
		CommittedSerial int64  `json:"committed_serial"`
	}
	markerDoc struct {
		Role      string   `json:"role"`
		Kind      string   `json:"kind"`
		OtherRun  string   `json:"other_run"`
		Addresses []string `json:"addresses"`
		WaitedMS  int64    `json:"waited_ms"`
		Commit    string   `json:"commit"`
		Reason    string   `json:"reason"`
		Text      string   `json:"text"`
	}
	footprintDoc struct {
		Write []string `json:"write"`
		Read  []string `json:"read"`
	}
	// planDoc is `kl plan --json`.
	planDoc struct {
		Run      runDoc `json:"run"`
		Envelope struct {
			SourceSerial int64 `json:"source_serial"`
		} `json:"envelope"`
		Footprint footprintDoc `json:"footprint"`
	}
	// storyDoc is `kl apply --json` and `kl run show --json`.
	storyDoc struct {
		Verdict string      `json:"verdict"`
		Run     runDoc      `json:"run"`
		Plan    *runDoc     `json:"plan"`
		Markers []markerDoc `json:"markers"`
	}
	// whyDoc is `kl why --json`.
	whyDoc struct {
		Verdict  string      `json:"verdict"`
		Reason   string      `json:"reason"`
		Run      runDoc      `json:"run"`
		Waited   []markerDoc `json:"waited"`
		Reserved *markerDoc  `json:"reserved"`
		Decisive []markerDoc `json:"decisive"`
	}
	// historyDoc is `kl history --state --json`.
	historyDoc struct {
		Entries []struct {
			Version struct {
				Serial     int64    `json:"serial"`
				Changed    []string `json:"changed"`
				Provenance struct {
					Run     string `json:"run"`
					PlanRun string `json:"plan_run"`
					Exact   bool   `json:"exact"`
					Partial bool   `json:"partial"`
				} `json:"provenance"`
			} `json:"version"`
		} `json:"entries"`
	}
	// runsDoc is `kl runs --json`.
	runsDoc struct {
		Runs []runDoc `json:"runs"`
	}
)

// poll calls cond every interval until it returns true or timeout passes;
// it reports whether cond held.
func poll(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}

// set returns ss as a set.
func set(ss ...[]string) map[string]bool {
	out := map[string]bool{}
	for _, s := range ss {
		for _, v := range s {
			out[v] = true
		}
	}
	return out
}
