package cli

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sethvargo/go-envconfig"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/seal"
)

// Config is kl's environment configuration (read with go-envconfig). An
// empty variable counts as unset. A value that does not parse, or is out of
// range, is an error that names the variable ("KL_LEASE=banana: not a
// duration (e.g. 2m)").
type Config struct {
	// Store is the store location: a SQLite file path, or a postgres://
	// URL. The --store flag overrides it. Unset: the default store, the
	// nearest .kl/kl.db from the working directory upward (ADR 0049).
	Store string `env:"KL_STORE"`
	// CeilingDirectories are absolute directories the search for the
	// default store does not enter, as git's GIT_CEILING_DIRECTORIES:
	// list-separated (":" on unix); empty entries are ignored, a relative
	// one is an error (ADR 0049).
	CeilingDirectories string `env:"KL_CEILING_DIRECTORIES"`
	// Actor names who runs kl in run records (default: the OS user).
	Actor string `env:"KL_ACTOR"`
	// Terraform is the terraform/tofu binary (default: terraform, then tofu on PATH).
	Terraform string `env:"KL_TERRAFORM"`
	// Lease is the lease of reservations and of runs in progress, MinLease
	// to MaxLease; the holder renews every third of it, so a killed kl's
	// runs end lease-expired once it runs out.
	Lease time.Duration `env:"KL_LEASE, default=2m"`
	// WorkDir is where per-run work dirs are made (default: runs/ next to
	// the SQLite file, or the OS temp dir for PostgreSQL). Work dirs a
	// killed kl left there untouched for 24 h (or two leases, if longer)
	// are removed (terraform.DefaultStaleAfter).
	WorkDir string `env:"KL_WORKDIR"`
	// KeepWorkDirs keeps per-run work dirs for debugging (they hold secrets).
	KeepWorkDirs bool `env:"KL_KEEP_WORKDIRS"`
	// PluginCacheDir is Kilolock's provider plugin cache (ADR 0061;
	// terraform.RunnerOptions.PluginCacheDir): default plugins/ next to the
	// SQLite file (.kl/plugins), or kilolock-plugins in the OS temp dir for
	// PostgreSQL; PluginCacheOff ("off") disables it, and Terraform then
	// installs providers as its own CLI configuration says.
	PluginCacheDir string `env:"KL_PLUGIN_CACHE_DIR"`
	// NoColor, set to anything, disables colour even on a terminal
	// (https://no-color.org: "regardless of its value").
	NoColor string `env:"NO_COLOR"`
	// Term is the terminal type; "dumb" gets no colour.
	Term string `env:"TERM"`
	// LogLevel is debug, info, warn or error (default warn; kl serve:
	// info, for its request log), logged to stderr.
	LogLevel string `env:"KL_LOG_LEVEL, default=warn"`
	// Listen is kl serve's address, host:port (--listen overrides it).
	// The default is loopback only: serving other hosts is a choice.
	Listen string `env:"KL_LISTEN, default=127.0.0.1:8700"`
	// MaxBodyMiB caps kl serve's request bodies, in MiB, 1 to MaxBodyMiB
	// (--max-body-mib overrides it); a larger body is refused with 413.
	MaxBodyMiB int `env:"KL_MAX_BODY_MIB, default=64"`
	// BackendLockTTL is the lease of a lock taken through the http
	// backend (engine.Engine.BackendLockTTL, ADR 0056), MinBackendLockTTL
	// to MaxLease: never renewed, since Terraform never renews an http
	// lock; once it runs out a lock that wrote is fenced.
	BackendLockTTL time.Duration `env:"KL_BACKEND_LOCK_TTL, default=1h"`
	// LinkKey is the key of signed page links (internal/web, ADR 0064):
	// kl serve opens /runs/RUN and /states/NAME without a token for a link
	// signed with it (klbot's KLBOT_LINK_KEY when they share a store). At
	// least web.MinKeyLen bytes; empty: kl serve accepts tokens only.
	LinkKey string `env:"KL_LINK_KEY"`
	// LinkTTL is how long a link kl report github signs opens its page
	// (default 168h, at most 366 days).
	LinkTTL time.Duration `env:"KL_LINK_TTL, default=168h"`
	// PublicURL is the public base URL of a kl serve that shares the store
	// (http or https, no query): with LinkKey, kl report github links the
	// check run and the sticky comment to the run's signed page there.
	PublicURL string `env:"KL_PUBLIC_URL"`
	// Retention is how long `kl gc` keeps a closed plan's saved plan,
	// configuration archive and -var values, from the plan's finish
	// (engine.ParseRetention: a Go duration, whole days "30d", or "off";
	// default 30d; ADR 0063). Read at startup, so a bad value fails every
	// command, naming it.
	Retention string `env:"KL_RETENTION"`
	// retention is Retention parsed.
	retention time.Duration
	// EncryptionKey is the keyring of encryption at rest (seal.Parse:
	// "ID:BASE64[,ID:BASE64…]", 32-byte keys; the first seals, every key
	// opens; ADR 0066). Read at startup, so a bad value fails every
	// command, naming the variable and never the key. Empty: nothing is
	// sealed, and an encrypted store is refused.
	EncryptionKey string `env:"KL_ENCRYPTION_KEY"`
	// keys is EncryptionKey parsed (a keyring without a key when empty).
	keys *seal.Keyring
}

// PluginCacheOff is the KL_PLUGIN_CACHE_DIR that disables the plugin cache.
const PluginCacheOff = "off"

// MinBackendLockTTL is the shortest KL_BACKEND_LOCK_TTL: a lock shorter
// than a Terraform command's run fences the state under a live Terraform.
const MinBackendLockTTL = time.Minute

// Bounds of KL_LEASE.
const (
	// MinLease is the shortest lease: the holder renews every third of it,
	// and a lease shorter than a store round trip under load lets the
	// reservations lapse while their run still works.
	MinLease = 3 * time.Second
	// MaxLease is the longest lease: the reservations of a killed kl block
	// other applies until their lease ends.
	MaxLease = 24 * time.Hour
)

// logLevels are the values of KL_LOG_LEVEL.
var logLevels = []string{"debug", "info", "warn", "error"}

// envError is a bad value of an environment variable, named as the user
// set it: "KL_LEASE=banana: not a duration (e.g. 2m)".
type envError struct {
	key, value, problem string
}

func (e *envError) Error() string {
	v := e.value
	if q := strconv.Quote(v); v == "" || q[1:len(q)-1] != v || strings.ContainsAny(v, " \t") || utf8.RuneCountInString(v) > 60 {
		v = preview(v)
	}
	return e.key + "=" + v + ": " + e.problem
}

// envTypes maps each variable of Config to its field's type, for
// checkEnvSyntax.
var envTypes = func() map[string]reflect.Type {
	m := map[string]reflect.Type{}
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		if key = strings.TrimSpace(key); key != "" {
			m[key] = f.Type
		}
	}
	return m
}()

// checkEnvSyntax is a go-envconfig mutator that parses a typed variable
// before go-envconfig does, so that a bad value is reported under its
// variable's name (go-envconfig's own errors name the Go field).
func checkEnvSyntax(_ context.Context, _, key, _, value string) (string, bool, error) {
	var problem string
	switch t := envTypes[key]; {
	case t == reflect.TypeFor[time.Duration]():
		if _, err := time.ParseDuration(value); err != nil {
			problem = "not a duration (e.g. 2m)"
		}
	case t != nil && t.Kind() == reflect.Bool:
		if _, err := strconv.ParseBool(value); err != nil {
			problem = "not a boolean (true or false)"
		}
	case t != nil && t.Kind() == reflect.Int:
		if _, err := strconv.Atoi(value); err != nil {
			problem = "not a whole number"
		}
	}
	if problem != "" {
		return "", true, &envError{key: key, value: value, problem: problem}
	}
	return value, false, nil
}

// shortDuration prints d without zero minutes and seconds: "2m", "24h".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// loadEnv reads the environment into a.cfg and checks its values.
func (a *app) loadEnv(ctx context.Context) error {
	vars := envMap(a.env)
	for k, v := range vars {
		if v == "" {
			delete(vars, k) // an empty variable counts as unset
		}
	}
	err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: &a.cfg, Lookuper: envconfig.MapLookuper(vars),
		Mutators: []envconfig.Mutator{envconfig.MutatorFunc(checkEnvSyntax)}})
	var ee *envError
	if errors.As(err, &ee) {
		return ee
	}
	if err != nil {
		return fmt.Errorf("reading environment: %w", err)
	}
	switch lease := vars["KL_LEASE"]; {
	case a.cfg.Lease < MinLease:
		return &envError{key: "KL_LEASE", value: lease, problem: fmt.Sprintf("too short: use at least %s (default %s): the holder renews its "+
			"reservations every third of the lease, and a lease shorter than a store round trip under load loses them to other runs",
			shortDuration(MinLease), shortDuration(engine.DefaultLease))}
	case a.cfg.Lease > MaxLease:
		return &envError{key: "KL_LEASE", value: lease, problem: fmt.Sprintf("too long: use at most %s (default %s): "+
			"the reservations of a kl that was killed block other applies until their lease ends",
			shortDuration(MaxLease), shortDuration(engine.DefaultLease))}
	}
	if ttl := a.cfg.BackendLockTTL; ttl < MinBackendLockTTL || ttl > MaxLease {
		return &envError{key: "KL_BACKEND_LOCK_TTL", value: vars["KL_BACKEND_LOCK_TTL"], problem: fmt.Sprintf("use %s to %s (default %s): "+
			"a backend lock is never renewed, and once its lease runs out a lock that wrote fences the state",
			shortDuration(MinBackendLockTTL), shortDuration(MaxLease), shortDuration(engine.DefaultBackendLockTTL))}
	}
	if a.cfg.retention, err = engine.ParseRetention("KL_RETENTION", a.cfg.Retention); err != nil {
		return err
	}
	if a.cfg.keys, err = seal.Parse("KL_ENCRYPTION_KEY", a.cfg.EncryptionKey); err != nil {
		return err // it names the variable and the entry, never the key
	}
	if err := checkCeilings(a.cfg.CeilingDirectories); err != nil {
		return err
	}
	if !slices.Contains(logLevels, strings.ToLower(a.cfg.LogLevel)) {
		return &envError{key: "KL_LOG_LEVEL", value: a.cfg.LogLevel, problem: "use debug, info, warn or error"}
	}
	// Recorded on every run and printed to everyone who reads it.
	if p := wordsProblem(a.cfg.Actor, MaxActor); a.cfg.Actor != "" && p != "" {
		return &envError{key: "KL_ACTOR", value: a.cfg.Actor, problem: p + " (it names you on every run)"}
	}
	return nil
}

// checkCeilings refuses a KL_CEILING_DIRECTORIES entry that is not an
// absolute path (git ignores one silently; kl names it).
func checkCeilings(list string) error {
	for _, dir := range filepath.SplitList(list) {
		if dir != "" && !filepath.IsAbs(dir) {
			return &envError{key: "KL_CEILING_DIRECTORIES", value: list,
				problem: fmt.Sprintf("%q is not an absolute path: each entry must be one", dir)}
		}
	}
	return nil
}

// ceilings are the entries of KL_CEILING_DIRECTORIES (checked by loadEnv).
func (a *app) ceilings() []string {
	var out []string
	for _, dir := range filepath.SplitList(a.cfg.CeilingDirectories) {
		if dir != "" {
			out = append(out, dir)
		}
	}
	return out
}

// getenv returns the variable k of the invocation's environment, "" when
// unset.
func (a *app) getenv(k string) string { return envMap(a.env)[k] }

// actor names who runs kl in run records: KL_ACTOR, else the OS user
// (or $USER when it is text kl accepts), else "unknown".
func (a *app) actor() string {
	if a.cfg.Actor != "" {
		return a.cfg.Actor
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := a.getenv("USER"); wordsProblem(u, MaxActor) == "" {
		return u
	}
	return "unknown"
}

// envMap maps the KEY=value pairs of env by key (a later pair wins).
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
