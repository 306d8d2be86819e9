package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
	"github.com/kilolock/kilolock/internal/store/sqlite"
	"github.com/kilolock/kilolock/internal/store/storetest"
	"github.com/kilolock/kilolock/internal/token"
)

// setup opens a fresh store at a temp path, closed at cleanup, and returns
// it with its path.
func setup(t *testing.T, opts ...sqlite.Option) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kl.db")
	s, err := sqlite.Open(t.Context(), path, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, path
}

func TestEntriesContract(t *testing.T) {
	t.Parallel()
	storetest.RunEntries(t, func(t *testing.T) storetest.EntriesStore {
		t.Helper()
		s, _ := setup(t)
		return s
	})
}

func TestContract(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) engine.Store {
		t.Helper()
		s, _ := setup(t)
		return s
	})
}

func TestOpenCreatesPrivateFiles(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "nested", "dir", "kl.db")
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if _, err := s.CreateState(t.Context(), storetest.NewState("s")); err != nil {
		t.Fatalf("CreateState: %v", err)
	}
	tests := map[string]struct {
		path string
		mode os.FileMode
	}{
		"directory": {filepath.Dir(path), 0o700 | os.ModeDir},
		"database":  {path, 0o600},
		"wal":       {path + "-wal", 0o600},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fi, err := os.Stat(tc.path)
			if err != nil {
				t.Fatalf("stat: %v", err)
			}
			if fi.Mode() != tc.mode {
				t.Fatalf("mode of %s = %v; want %v", tc.path, fi.Mode(), tc.mode)
			}
		})
	}
}

// TestOpenMakesExistingFilesPrivate: a store file that exists before Open
// (an empty file made beforehand, a leftover -wal or -shm) keeps its mode
// through OpenFile; Open sets the current user's files to 0600 and logs it,
// and warns about another user's file without touching it.
func TestOpenMakesExistingFilesPrivate(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		files map[string]os.FileMode // suffix of the database path → mode before Open
	}{
		"empty database file":       {files: map[string]os.FileMode{"": 0o644}},
		"database, -wal and -shm":   {files: map[string]os.FileMode{"": 0o640, "-wal": 0o644, "-shm": 0o604}},
		"private already, -wal not": {files: map[string]os.FileMode{"": 0o600, "-wal": 0o660}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "kl.db")
			for suffix, mode := range tc.files {
				if err := os.WriteFile(path+suffix, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path+suffix, mode); err != nil { // past the umask
					t.Fatal(err)
				}
			}
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			s, err := sqlite.Open(t.Context(), path, sqlite.WithLogger(log))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer s.Close()
			if _, err := s.CreateState(t.Context(), storetest.NewState("s")); err != nil {
				t.Fatalf("CreateState: %v", err)
			}
			for suffix, was := range tc.files {
				p := path + suffix
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatalf("stat: %v", err)
				}
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("mode of %s = %v, want 0600", p, fi.Mode().Perm())
				}
				said := strings.Contains(logs.String(), "set its mode to 0600") && strings.Contains(logs.String(), "path="+p+" ")
				if wantLog := was&0o077 != 0; said != wantLog {
					t.Errorf("log says %s was made private: %v, want %v (mode was %v); log:\n%s", p, said, wantLog, was, logs.String())
				}
			}
			if strings.Contains(logs.String(), "level=WARN") {
				t.Errorf("warnings about the current user's files:\n%s", logs.String())
			}
		})
	}
}

// TestOpenLeavesAnotherUsersFile: a store file open to others that belongs
// to another user is left as it is, with a warning (root only: it chowns).
func TestOpenLeavesAnotherUsersFile(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	path := filepath.Join(t.TempDir(), "kl.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := sqlite.Open(t.Context(), path, sqlite.WithLogger(log))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, want 0644 left as it was", fi.Mode().Perm())
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "belongs to another user") {
		t.Errorf("no warning about another user's file open to others; log:\n%s", logs.String())
	}
}

func TestOpenReopens(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "kl.db")
	for i := range 2 {
		s, err := sqlite.Open(t.Context(), path)
		if err != nil {
			t.Fatalf("Open #%d: %v", i+1, err)
		}
		_, err = s.CreateState(t.Context(), storetest.NewState(fmt.Sprintf("s%d", i)))
		if err != nil {
			t.Fatalf("CreateState after Open #%d: %v", i+1, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
}

// TestOpenNewerSchemaOfTheSameLevel: a store a newer binary migrated
// further (a schema version this binary lacks, at its level) opens and
// takes writes; before ADR 0048 it was refused ("upgrade kl").
func TestOpenNewerSchemaOfTheSameLevel(t *testing.T) {
	t.Parallel()
	s, path := setup(t)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatalf("opening raw database: %v", err)
	}
	if _, err := db.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, 1)`); err != nil {
		t.Fatalf("faking a newer schema: %v", err)
	}
	db.Close()
	s, err = sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open of a newer schema at the same level: %v", err)
	}
	defer s.Close()
	if _, err := s.CreateState(t.Context(), storetest.NewState("s")); err != nil {
		t.Fatalf("CreateState on a newer schema at the same level: %v", err)
	}
}

// TestCompat runs the compatibility suite (ADR 0048) on fresh files.
func TestCompat(t *testing.T) {
	t.Parallel()
	storetest.RunCompat(t, func(t *testing.T) storetest.CompatDB {
		path := filepath.Join(t.TempDir(), "kl.db")
		return storetest.CompatDB{Dialect: store.SQLite, Open: func(t *testing.T, b store.Binary, extra ...*goose.Migration) (storetest.CompatStore, error) {
			s, err := sqlite.Open(t.Context(), path, sqlite.WithBinary(b, extra...))
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { s.Close() })
			return s, nil
		}}
	})
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	blocker := filepath.Join(dir, "a-file")
	if err := os.WriteFile(blocker, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	notDB := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("not a database ", 300)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		path string
		want string
	}{
		"directory cannot be created": {filepath.Join(blocker, "sub", "kl.db"), "creating directory " + filepath.Join(blocker, "sub")},
		"path is a directory":         {dir, "opening store " + dir},
		"empty path":                  {"", "empty database path"},
		"not a database":              {notDB, "opening store " + notDB},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := sqlite.Open(t.Context(), tc.path)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded; want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %q; want it to say %q", err, tc.want)
			}
		})
	}
}

func TestBusyTimeout(t *testing.T) {
	t.Parallel()
	s, path := setup(t, sqlite.WithBusyTimeout(200*time.Millisecond))
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatalf("opening raw database: %v", err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("taking the write lock: %v", err)
	}
	start := time.Now()
	_, err = s.CreateState(t.Context(), storetest.NewState("s"))
	if !errors.Is(err, sqlite.ErrBusy) {
		t.Fatalf("CreateState while another connection writes: %v; want ErrBusy", err)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Fatalf("gave up after %v; want it to wait for the busy timeout", waited)
	}
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	// Readers are never blocked by a writer (WAL), and the lock is free now.
	if _, err := s.CreateState(t.Context(), storetest.NewState("s")); err != nil {
		t.Fatalf("CreateState after the lock was released: %v", err)
	}
}

func TestContextCanceledWhileWaiting(t *testing.T) {
	t.Parallel()
	s, path := setup(t)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK") //nolint:errcheck
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.CreateState(ctx, storetest.NewState("s"))
	if err == nil {
		t.Fatal("CreateState succeeded while another connection held the write lock")
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("a canceled context waited %v for the lock; want about 200ms", waited)
	}
}

// The multi-process test re-executes this test binary: the children run
// TestMultiProcessChild with these variables set.
const (
	envChildDB     = "KL_SQLITE_TEST_CHILD_DB"
	envChildWorker = "KL_SQLITE_TEST_CHILD_WORKER"
	childCommits   = 10
	childProcesses = 4
)

// TestMultiProcessCommits runs 4 processes that open one new database file at
// once (racing on its migrations and on creating the state) and each commit
// 10 versions: the serials must come out contiguous, 1..40, with every
// commit's change in the head snapshot.
func TestMultiProcessCommits(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shared", "kl.db")
	var wg sync.WaitGroup
	outs := make([][]byte, childProcesses)
	errs := make([]error, childProcesses)
	for i := range childProcesses {
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestMultiProcessChild$", "-test.count=1", "-test.timeout=120s")
			cmd.Env = append(os.Environ(), envChildDB+"="+path, envChildWorker+"="+strconv.Itoa(i))
			outs[i], errs[i] = cmd.CombinedOutput()
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
	}
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	storetest.CheckContiguous(t, t.Context(), s, "shared", childProcesses*childCommits, nil)
	runs, err := s.ListRuns(t.Context(), engine.RunQuery{State: "shared", Statuses: []engine.RunStatus{engine.StatusApplied}, Limit: 100})
	if err != nil || len(runs) != childProcesses*childCommits {
		t.Fatalf("applied runs = %d, %v; want %d", len(runs), err, childProcesses*childCommits)
	}
}

// TestMultiProcessChild is one child process of TestMultiProcessCommits; it
// skips unless run by it.
func TestMultiProcessChild(t *testing.T) {
	path, worker := os.Getenv(envChildDB), os.Getenv(envChildWorker)
	if path == "" {
		t.Skip("a child of TestMultiProcessCommits")
	}
	ctx := t.Context()
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("worker %s: Open: %v", worker, err)
	}
	defer s.Close()
	if _, err := s.CreateState(ctx, storetest.NewState("shared")); err != nil && !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("worker %s: CreateState: %v", worker, err)
	}
	for i := range childCommits {
		id := fmt.Sprintf("01CHILD%sCOMMIT%02d", worker, i)
		if err := s.CreateRun(ctx, engine.Run{ID: id, Kind: engine.KindApply, State: "shared", Actor: "worker-" + worker, Status: engine.StatusApplying}); err != nil {
			t.Fatalf("worker %s: CreateRun: %v", worker, err)
		}
		addr := engine.Address(fmt.Sprintf("terraform_data.w%s_%02d", worker, i))
		merge := storetest.Merge(id, addr)
		if _, err := s.Commit(ctx, engine.CommitRequest{State: "shared", Run: id,
			Merge: func(head engine.Version, snap []byte) (engine.CommitResult, error) {
				res, err := merge(head, snap)
				res.UpdateRun = func(r *engine.Run) error { r.Status = engine.StatusApplied; return nil }
				return res, err
			}}); err != nil {
			t.Fatalf("worker %s: Commit %d: %v", worker, i, err)
		}
	}
}

// TestOpenLeavesOtherFilesAlone: a file that is not a SQLite database is
// refused before Open writes anything — its mode and content stay as they
// were, and no -wal or -shm file appears — while an empty file becomes a
// store (kl state init may make one in a file made beforehand).
func TestOpenLeavesOtherFilesAlone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"text":        "hi\n",
		"short":       "SQLite",
		"near header": "SQLite format 3 but not quite a database",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".txt")
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, 0o644); err != nil { // past the umask
				t.Fatal(err)
			}
			s, err := sqlite.Open(t.Context(), path)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded; want an error")
			}
			if want := "not a SQLite database"; !strings.Contains(err.Error(), want) {
				t.Errorf("Open: %q; want it to say %q", err, want)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o644 {
				t.Errorf("mode %#o after Open, want 0644 (unchanged)", fi.Mode().Perm())
			}
			if b, _ := os.ReadFile(path); string(b) != content {
				t.Errorf("content %q after Open, want %q", b, content)
			}
			for _, suffix := range []string{"-wal", "-shm", "-journal"} {
				if _, err := os.Stat(path + suffix); err == nil {
					t.Errorf("Open made %s%s", path, suffix)
				}
			}
		})
	}
	t.Run("empty file", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(dir, "empty.db")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := sqlite.Open(t.Context(), path)
		if err != nil {
			t.Fatalf("Open of an empty file: %v", err)
		}
		s.Close()
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasPrefix(string(b), "SQLite format 3\x00") {
			t.Errorf("the empty file is not a database after Open (err %v)", err)
		}
	})
}

// TestOpenLeavesForeignDatabasesAlone: another program's SQLite database
// (tables, but not Kilolock's), in rollback or WAL journal mode, and a file
// with the SQLite header and garbage after it are refused before Open
// writes anything: mode and bytes stay as they were, and no -wal, -shm or
// -journal file is left. A database with no schema at all (one another kl
// is just initialising) and a store whose first migration stopped after
// goose's table was made are opened.
func TestOpenLeavesForeignDatabasesAlone(t *testing.T) {
	t.Parallel()
	foreign := func(t *testing.T, path, journal string) {
		t.Helper()
		db, err := sql.Open("sqlite", "file:"+path+"?_journal_mode="+journal)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`CREATE TABLE users (id INTEGER); INSERT INTO users VALUES (1)`); err != nil {
			t.Fatal(err)
		}
		if journal == "WAL" { // back to one file, as another program leaves it when it ends
			if _, err := db.Exec(`PRAGMA journal_mode = DELETE`); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, tc := range map[string]struct {
		make func(t *testing.T, path string)
		want string
	}{
		"foreign database": {func(t *testing.T, path string) { foreign(t, path, "DELETE") }, "not a Kilolock store"},
		"foreign database once in WAL mode": {func(t *testing.T, path string) {
			foreign(t, path, "WAL")
		}, "not a Kilolock store"},
		"another program's goose database": {func(t *testing.T, path string) {
			foreign(t, path, "DELETE")
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(`CREATE TABLE goose_db_version (id INTEGER PRIMARY KEY AUTOINCREMENT, version_id INTEGER NOT NULL,
				is_applied INTEGER NOT NULL, tstamp TIMESTAMP DEFAULT (datetime('now')));
				INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, 1), (2, 1)`); err != nil {
				t.Fatal(err)
			}
		}, "another program's"},
		"header and garbage": {func(t *testing.T, path string) {
			garbage := bytes.Repeat([]byte("garbage!"), 1024)
			if err := os.WriteFile(path, append([]byte("SQLite format 3\x00"), garbage...), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a SQLite database"},
		"text": {func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("hello\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a SQLite database"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "foreign.db")
			tc.make(t, path)
			if err := os.Chmod(path, 0o644); err != nil {
				t.Fatal(err)
			}
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			s, err := sqlite.Open(t.Context(), path)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded; want an error")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "left unchanged") {
				t.Errorf("Open: %q; want it to say %q and left unchanged", err, tc.want)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o644 {
				t.Errorf("mode %#o after Open, want 0644 (unchanged)", fi.Mode().Perm())
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
				t.Errorf("content changed by Open: %d bytes before, %d after", len(before), len(after))
			}
			for _, suffix := range []string{"-wal", "-shm", "-journal"} {
				if _, err := os.Stat(path + suffix); err == nil {
					t.Errorf("Open left %s%s", path, suffix)
				}
			}
		})
	}

	t.Run("no schema yet", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "kl.db")
		db, err := sql.Open("sqlite", "file:"+path+"?_journal_mode=WAL")
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Ping(); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
			t.Fatalf("the WAL switch wrote no header: %v", err)
		}
		s, err := sqlite.Open(t.Context(), path)
		if err != nil {
			t.Fatalf("Open of a database without schema: %v", err)
		}
		s.Close()
	})
	t.Run("first migration interrupted", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "kl.db")
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`CREATE TABLE goose_db_version (id INTEGER PRIMARY KEY AUTOINCREMENT,
			version_id INTEGER NOT NULL, is_applied INTEGER NOT NULL, tstamp TIMESTAMP DEFAULT (datetime('now')));
			INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, 1)`); err != nil {
			t.Fatal(err)
		}
		db.Close()
		s, err := sqlite.Open(t.Context(), path)
		if err != nil {
			t.Fatalf("Open of a store whose first migration was interrupted: %v", err)
		}
		defer s.Close()
		if _, err := s.CreateState(t.Context(), storetest.NewState("s")); err != nil {
			t.Fatalf("CreateState after finishing the migrations: %v", err)
		}
	})
}

func TestTokenContract(t *testing.T) {
	t.Parallel()
	storetest.RunTokens(t, func(t *testing.T) token.Store {
		t.Helper()
		s, _ := setup(t)
		return s
	})
}
