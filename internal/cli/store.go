package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/store/sqlite"
	"github.com/kilolock/kilolock/internal/terraform"
)

// engine opens the store and the Terraform runner on first use, under ctx
// (the command's): the store's connection and migrations, and the
// KL_TERRAFORM version check.
func (a *app) engine(ctx context.Context, needTerraform bool) (*engine.Engine, error) {
	if a.eng != nil && (a.eng.Terraform != nil || !needTerraform) {
		return a.eng, nil
	}
	log := a.logger()
	if a.eng == nil {
		st, storeDir, err := a.openStore(ctx)
		if err != nil {
			return nil, err
		}
		workRoot, plugins := filepath.Join(storeDir, "runs"), filepath.Join(storeDir, "plugins")
		if storeDir == "" { // PostgreSQL
			workRoot, plugins = filepath.Join(os.TempDir(), "kilolock-runs"), filepath.Join(os.TempDir(), "kilolock-plugins")
		}
		switch a.cfg.PluginCacheDir {
		case "":
			a.cfg.PluginCacheDir = plugins
		case PluginCacheOff:
			a.cfg.PluginCacheDir = ""
		}
		a.eng = engine.New(st, nil, log)
		a.eng.Lease = a.cfg.Lease
		a.eng.BackendLockTTL = a.cfg.BackendLockTTL
		if a.cfg.WorkDir == "" {
			a.cfg.WorkDir = workRoot
		}
		// Work dirs are removed without a Terraform binary (kl run recover).
		a.eng.WorkDirs = terraform.WorkDirs{Root: a.cfg.WorkDir, Keep: a.cfg.KeepWorkDirs, Logger: log}
	}
	if needTerraform {
		bin, err := terraform.FindBinary(a.getenv)
		if err != nil {
			return nil, err
		}
		if v := strings.TrimSpace(a.getenv("KL_TERRAFORM")); v != "" {
			if err := terraform.CheckVersion(ctx, bin, a.env); err != nil {
				if errors.Is(err, context.Canceled) {
					return nil, err
				}
				return nil, fmt.Errorf("KL_TERRAFORM=%s is not Terraform or OpenTofu: %w; "+
					"set KL_TERRAFORM to a terraform or tofu binary, or unset it to use terraform or tofu on PATH", v, err)
			}
		}
		r, err := terraform.NewRunner(terraform.RunnerOptions{
			WorkRoot: a.cfg.WorkDir, Binary: bin, Env: a.env, KeepWorkDirs: a.cfg.KeepWorkDirs, Logger: log,
			PluginCacheDir: a.cfg.PluginCacheDir,
			// Never the work dir of a run whose lease may still run.
			StaleAfter: max(terraform.DefaultStaleAfter, 2*a.cfg.Lease),
		})
		if err != nil {
			return nil, err
		}
		a.eng.Terraform = r
	}
	return a.eng, nil
}

// engineToWrite is engine for a command that writes to the store (plan,
// apply, state init, run discard, run recover): a store that can check its
// integrity (SQLite: CheckIntegrity) is checked first, once, so that a
// damaged file is refused before anything is written to it.
func (a *app) engineToWrite(ctx context.Context, needTerraform bool) (*engine.Engine, error) {
	e, err := a.engine(ctx, needTerraform)
	if err != nil {
		return nil, err
	}
	if c, ok := e.Store.(interface{ CheckIntegrity(context.Context) error }); ok && !a.checked {
		if err := c.CheckIntegrity(ctx); err != nil {
			return nil, err
		}
		a.checked = true
	}
	return e, nil
}

// openStore opens the store named by --store or KL_STORE, else the
// default store (the nearest .kl/kl.db, discovery), and says on stderr
// which default store it used when it is not the working directory's, or
// that kl state init created it. It returns the store and its directory:
// the SQLite file's (runs/ and plugins/ go there by default), "" for
// PostgreSQL.
func (a *app) openStore(ctx context.Context) (engine.Store, string, error) {
	loc := a.store
	if loc == "" {
		loc = a.cfg.Store
	}
	var def *defaultStore
	if loc == "" {
		d, err := newDiscovery(a.ceilings(), a.getenv("HOME"))
		if err != nil {
			return nil, "", err
		}
		found, err := d.find()
		if err != nil {
			return nil, "", err
		}
		def, loc = &found, found.path
	}
	// A URL's scheme is case-insensitive (RFC 3986 §3.1); pgx reads only
	// the lower-case ones.
	if scheme, rest, ok := strings.Cut(loc, "://"); ok && def == nil {
		if l := strings.ToLower(scheme); l == "postgres" || l == "postgresql" || l == "sqlite" || l == "file" {
			loc = l + "://" + rest
		}
	}
	switch {
	case def != nil:
	case strings.TrimSpace(loc) == "":
		return nil, "", errors.New("opening store: the store (--store or KL_STORE) is blank: name a SQLite file or a postgres:// URL, or leave it unset for the default store")
	case strings.HasPrefix(loc, "postgres://"), strings.HasPrefix(loc, "postgresql://"), keyValueDSN.MatchString(loc):
		st, err := postgres.Open(ctx, loc, postgres.WithKeyring(a.cfg.keys))
		if err != nil {
			return nil, "", err // it names the server (host, port, database, user), never the password
		}
		a.closers = append(a.closers, st.Close)
		return st, "", nil
	case strings.Contains(loc, "://") && !strings.HasPrefix(loc, "sqlite://") && !strings.HasPrefix(loc, "file://"):
		blank := ""
		if strings.TrimSpace(loc) != loc {
			blank = " (it starts or ends with a blank)"
		}
		return nil, "", fmt.Errorf("opening store %s: unknown store kind%s: use a file path or a postgres:// URL", redact(loc), blank)
	}
	path := strings.TrimPrefix(strings.TrimPrefix(loc, "sqlite://"), "file://")
	if def == nil && strings.TrimSpace(path) != path {
		return nil, "", fmt.Errorf("opening store %q: the SQLite path starts or ends with a blank (a trailing newline pasted into a CI variable?): remove it", path)
	}
	missing, empty := storeMissing(path)
	if missing && !a.createStore {
		return nil, "", a.missingStore(path, empty, def)
	}
	st, err := sqlite.Open(ctx, path, sqlite.WithLogger(a.logger()), sqlite.WithKeyring(a.cfg.keys))
	if err != nil {
		return nil, "", err // it says "opening store PATH: …" itself
	}
	a.closers = append(a.closers, st.Close)
	switch {
	case def != nil && missing:
		fmt.Fprintf(a.io.Err, "kl: created a new store in %s (%s)\n", filepath.Dir(path), def.where())
	case def != nil && def.above:
		fmt.Fprintf(a.io.Err, "kl: using the store in %s (%s)\n", filepath.Dir(path), def.where())
	}
	return st, filepath.Dir(path), nil
}

// missingStore is the error for a SQLite store that does not exist (or
// is an empty file) at path, named by --store, KL_STORE or the default
// (def): a mistyped KL_STORE must not start an empty store.
func (a *app) missingStore(path string, empty bool, def *defaultStore) error {
	src := "KL_STORE"
	switch {
	case def != nil:
		src = "the default: " + def.where() + "; set KL_STORE or --store to use another"
	case a.store != "":
		src = "--store"
	}
	what := ""
	if empty {
		what = ": the file is empty"
	}
	return fmt.Errorf("no Kilolock store at %s (%s)%s: \"kl state init NAME\" creates one", path, src, what)
}

// close closes what the command opened (the store), last opened first.
func (a *app) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		_ = a.closers[i]()
	}
}

// keyValueDSN matches a libpq keyword/value connection string ("host=db
// dbname=kl password=…", PostgreSQL's "Connection Strings", which pgx's
// pgconn.ParseConfig parses as it does a postgres:// URL): a word a
// connection string starts a setting with, then "=". A SQLite path that
// would match (a file named "host=x") is given as ./host=x or
// sqlite://host=x.
var keyValueDSN = regexp.MustCompile(`(^|\s)(host|hostaddr|port|dbname|user|password|passfile|sslmode|service|connect_timeout|options|application_name)\s*=`)

// redact hides a password in a URL-shaped store location: the userinfo's
// password is xxxxx and a query (which may hold password=) is "?…"; a
// location Go does not parse as a URL (a blank before the scheme or in the
// password) is shown as its scheme and "://…" alone (issue 15 §4).
func redact(loc string) string {
	u, err := url.Parse(loc)
	if err != nil {
		scheme, _, _ := strings.Cut(loc, "://")
		return strings.TrimSpace(scheme) + "://…"
	}
	if u.RawQuery != "" {
		u.RawQuery = ""
		u.ForceQuery = false
		return u.Redacted() + "?…"
	}
	return u.Redacted()
}
