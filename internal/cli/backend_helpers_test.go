package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/cli"
)

// backendServer is `kl serve` run in-process (cli.Run) on a loopback
// port over k's store: the real API over the real engine. Its log is
// every JSON line kl serve wrote.
type backendServer struct {
	t    *testing.T
	url  string // http://127.0.0.1:PORT
	mu   sync.Mutex
	logs []string
}

// serveBackend starts kl serve --listen 127.0.0.1:0 args… in k's
// environment; the test's cleanup stops it (its context ends: the
// graceful shutdown) and waits for it.
func serveBackend(t *testing.T, k *kit, args ...string) *backendServer {
	t.Helper()
	s := &backendServer{t: t}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := cli.Run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...), k.env,
			cli.IO{In: strings.NewReader(""), Out: io.Discard, Err: pw})
		_ = pw.CloseWithError(io.EOF)
		done <- err
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.logs = append(s.logs, line)
			s.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "kl serve listening" {
				addr <- rec.Addr
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kl serve: %v\n%s", err, s.log())
		}
	})
	select {
	case a := <-addr:
		s.url = "http://" + a
	case err := <-done:
		done <- err
		t.Fatalf("kl serve ended before it listened: %v\n%s", err, s.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("kl serve did not listen within 30s:\n%s", s.log())
	}
	return s
}

func (s *backendServer) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.logs, "\n")
}

// mark is the number of log lines so far, for requests.
func (s *backendServer) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.logs)
}

// requests returns "METHOD status" of each request to /tf/states/ logged
// since mark.
func (s *backendServer) requests(mark int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, line := range s.logs[mark:] {
		var rec struct {
			Msg, Method, Path string
			Status            int
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "http request" && strings.HasPrefix(rec.Path, "/tf/states/") {
			out = append(out, rec.Method+" "+http.StatusText(rec.Status))
		}
	}
	return out
}

// address is the backend address of state.
func (s *backendServer) address(state string) string { return s.url + "/tf/states/" + state }

// backendBlock is the terraform block of a configuration on state through
// s, as README "Terraform's http backend" gives it; the token comes from
// TF_HTTP_PASSWORD.
func (s *backendServer) backendBlock(state string) string {
	a := s.address(state)
	return `terraform {
  backend "http" {
    address        = "` + a + `"
    lock_address   = "` + a + `"
    unlock_address = "` + a + `"
    username       = "kl"
  }
}
`
}

// do sends method to state's address with the bearer token tok ("" for
// none) and body, and returns the status and body.
func (s *backendServer) do(method, state, tok, body string) (int, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.address(state), strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Errorf("%s %s: %v", method, state, err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// tf is one terraform process against the backend: dir, the token
// (TF_HTTP_PASSWORD; "" sends none) and args.
type tf struct {
	k   *kit
	dir string
	tok string
}

// cmd is the terraform command of args, in k's environment (no CLI
// configuration) with the token.
func (c tf) cmd(args ...string) *exec.Cmd {
	cmd := exec.Command("terraform", args...)
	cmd.Dir = c.dir
	cmd.Env = append(append([]string(nil), c.k.env...), "TF_IN_AUTOMATION=1", "TF_INPUT=0", "TF_HTTP_PASSWORD="+c.tok)
	return cmd
}

// run runs terraform args and returns its output (stdout and stderr) and
// error.
func (c tf) run(args ...string) (string, error) {
	var out bytes.Buffer
	cmd := c.cmd(args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// ok runs terraform args, fails the test if it fails, and returns its
// output.
func (c tf) ok(args ...string) string {
	c.k.t.Helper()
	out, err := c.run(args...)
	if err != nil {
		c.k.t.Fatalf("terraform %s in %s: %v\n%s", strings.Join(args, " "), filepath.Base(c.dir), err, out)
	}
	return out
}

// fails runs terraform args, fails the test if it succeeds, and returns
// its output.
func (c tf) fails(args ...string) string {
	c.k.t.Helper()
	out, err := c.run(args...)
	if err == nil {
		c.k.t.Fatalf("terraform %s in %s succeeded, want a failure:\n%s", strings.Join(args, " "), filepath.Base(c.dir), out)
	}
	return out
}

// bgTF is a terraform process running in the background.
type bgTF struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
	err  error
}

// start starts terraform args; the test's cleanup kills it if it still
// runs.
func (c tf) start(args ...string) *bgTF {
	c.k.t.Helper()
	p := &bgTF{cmd: c.cmd(args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		c.k.t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	c.k.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits up to d for p and returns its output and error.
func (p *bgTF) wait(t *testing.T, d time.Duration) (string, error) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("terraform %s did not end within %s:\n%s", strings.Join(p.cmd.Args[1:], " "), d, p.out.String())
	}
	return p.out.String(), p.err
}

// tokens creates a write token for bob and a read-only one for consumer
// and returns them.
func (k *kit) tokens() (writer, reader string) {
	k.t.Helper()
	var w, r tokenCreated
	k.jsonOf(&w, "token", "create", "--actor", "bob")
	k.jsonOf(&r, "token", "create", "--actor", "consumer", "--read-only")
	return w.Secret, r.Secret
}

// versionDoc is one entry of `kl history --state NAME --json`, generic:
// the fields the backend tests read.
type versionDoc struct {
	Serial     int64          `json:"serial"`
	Lineage    string         `json:"lineage"`
	Changed    []string       `json:"changed"`
	Provenance map[string]any `json:"provenance"`
}

// history returns state's versions, newest first.
func (k *kit) history(state string) []versionDoc {
	k.t.Helper()
	var doc struct {
		Entries []struct {
			Version versionDoc `json:"version"`
		} `json:"entries"`
	}
	k.jsonOf(&doc, "history", "--state", state)
	out := make([]versionDoc, len(doc.Entries))
	for i, e := range doc.Entries {
		out[i] = e.Version
	}
	return out
}

// stateDoc is the parts of a state document the tests read.
type stateDoc struct {
	Serial    int64  `json:"serial"`
	Lineage   string `json:"lineage"`
	Resources []struct {
		Type, Name string
		Instances  []struct {
			Attributes map[string]any `json:"attributes"`
		} `json:"instances"`
	} `json:"resources"`
}

// pull returns kl state pull NAME, decoded, and its resource addresses.
func (k *kit) pull(state string) (stateDoc, []string) {
	k.t.Helper()
	var doc stateDoc
	if err := json.Unmarshal([]byte(k.ok("state", "pull", state)), &doc); err != nil {
		k.t.Fatal(err)
	}
	var addrs []string
	for _, r := range doc.Resources {
		addrs = append(addrs, r.Type+"."+r.Name)
	}
	return doc, addrs
}
