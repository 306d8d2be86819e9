// Package pgtest gives tests a real PostgreSQL server (docs/style.md 14): the one
// named by TEST_DATABASE_URL, or else ONE throwaway cluster per test binary
// that the harness makes itself with initdb and runs from a temp dir (as the
// postgres user when the tests run as root), trust auth, a free loopback
// port, fsync off. No Docker, no mocks.
//
// Each DSN call makes a fresh schema (kl_<random>) and returns a DSN whose
// search_path is that schema, so tests run in parallel on one server without
// seeing each other's tables.
//
// Use it from TestMain so the server stops when the tests end:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// The server is also tied to the test binary's life: it gets SIGINT (a fast
// shutdown) when the binary dies, even by SIGKILL or a test timeout.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the environment variable holding an existing server's DSN
// (a postgres:// URL or key=value string). When set, no server is started;
// the DSN's user needs CREATE on its database (DSN makes schemas).
const EnvURL = "TEST_DATABASE_URL"

// InstallHint says what to do when there is no server to test against.
const InstallHint = "install PostgreSQL server binaries (Debian: apt-get install postgresql, or postgresql-15; they land in /usr/lib/postgresql/<version>/bin) or set " + EnvURL

// ErrNoServerBinaries means neither TEST_DATABASE_URL nor initdb/postgres
// binaries were found.
var ErrNoServerBinaries = errors.New("no PostgreSQL server binaries (initdb, postgres) on PATH or in /usr/lib/postgresql/*/bin")

var (
	mu       sync.Mutex
	started  bool
	srv      *server
	base     string // DSN of the server's postgres database
	startErr error
)

// Main runs the tests, stops the throwaway server (if one was started) and
// exits with the tests' code. An interrupt (SIGINT, SIGTERM) also stops it
// before the binary dies of the signal.
func Main(m *testing.M) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig, ok := <-sigs
		if !ok {
			return
		}
		Stop()
		signal.Reset(sig)
		if s, ok := sig.(syscall.Signal); ok {
			_ = syscall.Kill(os.Getpid(), s)
		}
		os.Exit(1)
	}()
	code := m.Run()
	signal.Stop(sigs)
	Stop()
	os.Exit(code)
}

// BaseDSN returns the DSN of the server's own database (TEST_DATABASE_URL,
// or the throwaway cluster's "postgres" database), starting the cluster on
// first use. Without a server it skips the test with InstallHint — or fails
// it when the CI environment variable is set, because CI must run these
// tests.
func BaseDSN(t testing.TB) string {
	t.Helper()
	dsn, err := serverDSN()
	switch {
	case errors.Is(err, ErrNoServerBinaries) && os.Getenv("CI") == "":
		t.Skipf("PostgreSQL tests skipped: %v: %s", err, InstallHint)
	case errors.Is(err, ErrNoServerBinaries):
		t.Fatalf("PostgreSQL tests cannot run in CI: %v: %s", err, InstallHint)
	case err != nil:
		t.Fatalf("starting the test PostgreSQL server: %v", err)
	}
	return dsn
}

// DSN returns a DSN for a fresh, empty schema on the test server (see
// BaseDSN for how the server is found): the schema kl_<16 hex digits> is
// created now and named as the connection's search_path, so every table a
// store creates through the DSN lands in it. With TEST_DATABASE_URL the
// schema is dropped at cleanup; a throwaway cluster is removed whole by Stop.
func DSN(t testing.TB) string {
	t.Helper()
	b := BaseDSN(t)
	dsn, schema, err := NewSchema(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv(EnvURL) != "" {
		t.Cleanup(func() {
			if err := exec1(context.Background(), b, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
				t.Errorf("dropping test schema %s: %v", schema, err)
			}
		})
	}
	return dsn
}

// Server is BaseDSN for a program that is not a test (klbench): the DSN of
// TEST_DATABASE_URL, or of the throwaway cluster's "postgres" database,
// started on first use. It returns ErrNoServerBinaries when there is
// neither. Call Stop when done.
func Server() (string, error) {
	return serverDSN()
}

// NewSchema creates a fresh schema kl_<16 hex digits> on the server at
// base (a DSN) and returns a DSN whose search_path is that schema, and the
// schema's name. Nothing drops it: a throwaway cluster goes whole at Stop.
func NewSchema(ctx context.Context, base string) (dsn, schema string, err error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", "", fmt.Errorf("naming a test schema: %w", err)
	}
	schema = "kl_" + hex.EncodeToString(rnd[:])
	if err := exec1(ctx, base, "CREATE SCHEMA "+schema); err != nil {
		return "", "", fmt.Errorf("creating test schema %s: %w", schema, err)
	}
	if dsn, err = WithParam(base, "search_path", schema); err != nil {
		return "", "", fmt.Errorf("test DSN: %w", err)
	}
	return dsn, schema, nil
}

// WithParam returns dsn (a postgres:// URL or a key=value string) with the
// connection parameter key set to value.
func WithParam(dsn, key, value string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parsing DSN: %w", err)
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	quoted := "'" + strings.ReplaceAll(strings.ReplaceAll(value, `\`, `\\`), `'`, `\'`) + "'"
	return strings.TrimSpace(dsn + " " + key + "=" + quoted), nil
}

// Stop stops the throwaway server and removes its directory. It does
// nothing when none was started (or TEST_DATABASE_URL is used), and is safe
// to call more than once.
func Stop() {
	mu.Lock()
	s := srv
	srv = nil
	mu.Unlock()
	if s != nil {
		s.stop()
	}
}

// exec1 runs one statement on its own connection.
func exec1(ctx context.Context, dsn, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// serverDSN returns the base DSN, starting the cluster once.
func serverDSN() (string, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if !started {
		started = true
		srv, startErr = start()
		if startErr == nil {
			base = srv.dsn
		}
	}
	if startErr == nil && srv == nil {
		return "", errors.New("the test PostgreSQL server was already stopped")
	}
	return base, startErr
}

// server is one running throwaway cluster.
type server struct {
	dir    string
	dsn    string
	cmd    *exec.Cmd
	exited chan struct{} // closed when the postmaster has exited
}

// findBinaries returns the directory holding initdb and postgres: PATH
// first, then the newest /usr/lib/postgresql/<version>/bin (Debian, Ubuntu),
// /usr/pgsql-<version>/bin (RHEL) or /usr/local/pgsql/bin (source builds).
func findBinaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	var dirs []string
	for _, pattern := range []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin"} {
		m, _ := filepath.Glob(pattern)
		sort.Slice(m, func(i, j int) bool { return versionOf(m[i]) > versionOf(m[j]) })
		dirs = append(dirs, m...)
	}
	dirs = append(dirs, "/usr/local/pgsql/bin")
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", ErrNoServerBinaries
}

// versionOf extracts the major version from a .../postgresql/15/bin or
// .../pgsql-15/bin path (0 if none).
func versionOf(dir string) int {
	v := filepath.Base(filepath.Dir(dir))
	v = strings.TrimPrefix(v, "pgsql-")
	n, _ := strconv.Atoi(v)
	return n
}

// start makes and starts a cluster: initdb (trust auth, superuser
// postgres), then the postmaster on a free loopback port with its socket in
// the cluster's directory. As root both run as the postgres user.
func start() (*server, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	removeAbandoned()
	dir, err := os.MkdirTemp("", "kl-pgtest-")
	if err != nil {
		return nil, fmt.Errorf("making the cluster directory: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("giving %s to the postgres user: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "--auth=trust", "-U", "postgres",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb in %s: %w\n%s", data, err, out)
	}
	var lastErr error
	for range 3 { // a free port can be taken between picking and binding it
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := run(bin, dir, data, port, cred)
		if err == nil {
			ok = true
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// removeAbandoned removes cluster directories left by test binaries that
// were killed (SIGKILL, a test timeout): their server stopped with them
// (Pdeathsig), but nobody removed the directory. A directory is abandoned
// when it is over 10 minutes old and no live process owns its
// postmaster.pid.
func removeAbandoned() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "kl-pgtest-*"))
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if err != nil || time.Since(fi.ModTime()) < 10*time.Minute {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(d, "data", "postmaster.pid")); err == nil {
			pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
			if pid > 0 && syscall.Kill(pid, 0) != syscall.ESRCH {
				continue // a server still runs there
			}
		}
		os.RemoveAll(d)
	}
}

// credential returns the postgres user's credential when running as root
// (PostgreSQL refuses to run as root), nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a postgres user to run the server as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres user id %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres group id %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// run starts the postmaster directly (not through pg_ctl, which would
// detach it) so that it can be tied to this process: Pdeathsig sends it
// SIGINT, a fast shutdown, if the test binary dies without calling Stop.
// The kernel sends that signal when the THREAD that started the child ends,
// so the child is started from a goroutine locked to its thread that lives
// as long as the server. Setpgid keeps a terminal's Ctrl-C from reaching it
// directly: Main's handler stops it and removes the directory.
func run(bin, dir, data string, port int, cred *syscall.Credential) (*server, error) {
	logPath := filepath.Join(dir, "postgres.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the server log: %w", err)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGINT}
	s := &server{dir: dir, cmd: cmd, exited: make(chan struct{}),
		dsn: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}
	startErr := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the server
		defer close(s.exited)
		defer logf.Close()
		if err := cmd.Start(); err != nil {
			startErr <- err
			return
		}
		startErr <- nil
		_ = cmd.Wait()
	}()
	if err := <-startErr; err != nil {
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.dsn)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("postgres on port %d exited during start-up:\n%s", port, tail(logPath))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("postgres on port %d not ready after 60s: %v\n%s", port, err, tail(logPath))
		}
	}
}

// stop asks for a fast shutdown, kills the server if it has not exited
// after 15 s, and removes the cluster directory.
func (s *server) stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	}
	os.RemoveAll(s.dir)
}

// tail returns the end of the server log, for start-up errors.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
