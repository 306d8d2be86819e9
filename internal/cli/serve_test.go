package cli_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// served is a kl serve process the test started: its address, its stderr
// as it comes, and its end.
type served struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string
	mu     sync.Mutex
	lines  []string
	exited chan struct{}
	err    error
}

// startServe starts the kl binary bin as `kl serve --listen 127.0.0.1:0
// args…` in k's environment and waits until it says where it listens.
// The test's cleanup kills it if it is still running.
func startServe(t *testing.T, k *kit, bin string, args ...string) *served {
	t.Helper()
	s := &served{t: t, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	s.cmd.Env, s.cmd.Dir = procEnv(k.env), k.dir
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting kl serve: %v", err)
	}
	addr := make(chan string, 1)
	go s.read(stderr, addr)
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	})
	select {
	case s.addr = <-addr:
	case <-s.exited:
		t.Fatalf("kl serve exited before it listened (%v):\n%s", s.err, s.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("kl serve did not listen within 30s:\n%s", s.log())
	}
	return s
}

// read collects stderr's lines, sends the address of the "kl serve
// listening" record on addr, and waits for the process at EOF.
func (s *served) read(r io.Reader, addr chan<- string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		s.mu.Lock()
		s.lines = append(s.lines, line)
		s.mu.Unlock()
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "kl serve listening" {
			addr <- rec.Addr
		}
	}
	s.err = s.cmd.Wait()
	close(s.exited)
}

func (s *served) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// stop sends SIGTERM and waits for the exit, which must be 0.
func (s *served) stop() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	s.wait(20 * time.Second)
}

// wait waits up to d for the process to exit with status 0.
func (s *served) wait(d time.Duration) {
	s.t.Helper()
	select {
	case <-s.exited:
	case <-time.After(d):
		s.t.Fatalf("kl serve did not exit within %s:\n%s", d, s.log())
	}
	if s.err != nil {
		s.t.Fatalf("kl serve exited with %v:\n%s", s.err, s.log())
	}
}

// do sends method path with auth ("" for none) and body, returning the
// status and body.
func (s *served) do(method, path, auth string, body io.Reader) (int, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, "http://"+s.addr+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// basicAuth is the Authorization header of HTTP Basic auth, as Terraform's
// http backend sends it.
func basicAuth(user, pass string) string {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(user, pass)
	return r.Header.Get("Authorization")
}

func TestServe(t *testing.T) {
	t.Parallel()
	bin := buildKL(t, t.TempDir())
	for kind, newKit := range kits {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			k := newKit(t)
			k.ok("state", "init", "acme/prod")
			var made tokenCreated
			k.jsonOf(&made, "token", "create", "--actor", "ci-deployer", "--state", "acme/**")
			s := startServe(t, k, bin, "--max-body-mib", "1")
			if code, body := s.do("GET", "/healthz", "", nil); code != 200 || body != "ok\n" {
				t.Errorf("GET /healthz = %d %q", code, body)
			}
			if code, body := s.do("GET", "/api/v1/whoami", basicAuth("ci-deployer", made.Secret), nil); code != 200 ||
				!strings.Contains(body, `"actor": "ci-deployer"`) || !strings.Contains(body, `"token": "`+made.Token.ID+`"`) {
				t.Errorf("GET /api/v1/whoami with the token = %d %s", code, body)
			}
			if code, body := s.do("GET", "/api/v1/whoami", "", nil); code != 401 || !strings.Contains(body, "no token") {
				t.Errorf("GET /api/v1/whoami without a token = %d %s", code, body)
			}
			big := strings.NewReader(strings.Repeat("x", 1<<20+1))
			if code, body := s.do("POST", "/api/v1/whoami", "", big); code != 413 || !strings.Contains(body, "the limit is 1 MiB (1048576 bytes)") {
				t.Errorf("POST of 1 MiB + 1 byte with --max-body-mib 1 = %d %s", code, body)
			}
			s.stop()
			log := s.log()
			for _, want := range []string{`"msg":"kl serve stopped"`, `"actor":"ci-deployer","token":"` + made.Token.ID + `"`, `"status":413`} {
				if !strings.Contains(log, want) {
					t.Errorf("the log does not say %s:\n%s", want, log)
				}
			}
			if strings.Contains(log, made.Secret[30:]) {
				t.Errorf("the token's secret is in the log:\n%s", log)
			}
		})
	}
}

// TestServeFinishesRequestsInFlight stops kl serve while a request waits
// for the store (the token table is locked): the request is answered, and
// only then does kl serve exit, with status 0.
func TestServeFinishesRequestsInFlight(t *testing.T) {
	t.Parallel()
	k := setupPostgres(t)
	bin := buildKL(t, t.TempDir())
	var made tokenCreated
	k.jsonOf(&made, "token", "create", "--actor", "ci-deployer")
	s := startServe(t, k, bin)

	ctx := t.Context()
	conn, err := pgx.Connect(ctx, k.store)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	if _, err := tx.Exec(ctx, `LOCK TABLE kl_tokens IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	answered := make(chan int, 1)
	go func() { // not s.do: Fatal only from the test's goroutine
		req, _ := http.NewRequest("GET", "http://"+s.addr+"/api/v1/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+made.Secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("the request in flight: %v", err)
			answered <- -1
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	// The request waits for the lock.
	if !poll(10*time.Second, 20*time.Millisecond, func() bool {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			WHERE c.relname = 'kl_tokens' AND NOT l.granted`).Scan(&n)
		return err == nil && n > 0
	}) {
		t.Fatalf("the request never waited for the table lock:\n%s", s.log())
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
		t.Fatalf("kl serve exited with a request in flight (%v):\n%s", s.err, s.log())
	case code := <-answered:
		t.Fatalf("the request was answered (%d) while the store was locked", code)
	case <-time.After(time.Second):
	}
	if !strings.Contains(s.log(), "kl serve stopping") {
		t.Errorf("kl serve did not say it is stopping:\n%s", s.log())
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-answered:
		if code != 200 {
			t.Errorf("the request in flight got %d, want 200", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the request in flight was not answered:\n%s", s.log())
	}
	s.wait(15 * time.Second)
	if !strings.Contains(s.log(), `"msg":"kl serve stopped"`) {
		t.Errorf("kl serve did not say it stopped:\n%s", s.log())
	}
}
