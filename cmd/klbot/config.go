package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/kilolock/kilolock/internal/api"
	"github.com/kilolock/kilolock/internal/bot"
	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/klyaml"
	"github.com/kilolock/kilolock/internal/seal"
	"github.com/kilolock/kilolock/internal/terraform"
	"github.com/kilolock/kilolock/internal/web"
)

// config is klbot's environment (docs/klbot.md), read with go-envconfig.
type config struct {
	// AppID is the GitHub App's id.
	AppID int64 `env:"KLBOT_APP_ID"`
	// PrivateKey is the App's private key (PEM); or PrivateKeyFile, its path.
	PrivateKey     string `env:"KLBOT_PRIVATE_KEY"`
	PrivateKeyFile string `env:"KLBOT_PRIVATE_KEY_FILE"`
	// WebhookSecret verifies X-Hub-Signature-256 (required: docs/github.md).
	WebhookSecret string `env:"KLBOT_WEBHOOK_SECRET"`
	// WebhookSecretPrevious (optional) is the secret being replaced while
	// the App's webhook secret is changed: deliveries signed with it verify
	// too (webhook.HandlerConfig.PreviousSecret; docs/klbot.md "Rotating
	// the webhook secret and the App's private key").
	WebhookSecretPrevious string `env:"KLBOT_WEBHOOK_SECRET_PREVIOUS"`
	// DatabaseURL is the PostgreSQL DSN shared by every replica.
	DatabaseURL string `env:"KLBOT_DATABASE_URL"`
	// GitHubURL is the REST API base: GitHub Enterprise (https://HOST/api/v3/) or a fake.
	GitHubURL string `env:"KLBOT_GITHUB_URL, default=https://api.github.com/"`
	// Listen is the HTTP address (webhook, health, readiness, metrics).
	Listen string `env:"KLBOT_LISTEN, default=:8080"`
	// Workers is how many jobs this replica runs at once.
	Workers int `env:"KLBOT_WORKERS, default=4"`
	// Lease is the reservation lease; the holder renews every third of it.
	Lease time.Duration `env:"KLBOT_LEASE, default=2m"`
	// ApplyWait bounds how long an apply waits for other runs' reservations.
	ApplyWait time.Duration `env:"KLBOT_APPLY_WAIT, default=10m"`
	// ApplyTrigger is the default apply trigger: comment or merge.
	ApplyTrigger string `env:"KLBOT_APPLY_TRIGGER, default=comment"`
	// WorkDir holds per-job checkouts and per-run Terraform work dirs (secrets).
	WorkDir string `env:"KLBOT_WORKDIR"`
	// PluginCacheDir is klbot's provider plugin cache (ADR 0061;
	// terraform.RunnerOptions.PluginCacheDir): default plugins/ in
	// WorkDir; "off" disables it (Terraform then installs providers as its
	// CLI configuration says). Replicas sharing one disk may share it: the
	// installs take a file lock.
	PluginCacheDir string `env:"KLBOT_PLUGIN_CACHE_DIR"`
	// Terraform is the terraform or tofu binary (default: on PATH).
	Terraform string `env:"KLBOT_TERRAFORM"`
	// PublicURL is klbot's public base URL (optional; an http or https
	// URL), under which it serves the run and state pages (internal/web,
	// ADR 0064). With LinkKey, check runs link to their run's page there.
	PublicURL string `env:"KLBOT_PUBLIC_URL"`
	// LinkKey signs the page links klbot posts (web.Signer; at least
	// web.MinKeyLen bytes; optional): a reviewer opens such a link without
	// a token until it expires. kl serve checks them with the same key as
	// KL_LINK_KEY. Without it klbot posts no page links; its pages still
	// open with a token of kl token create.
	LinkKey string `env:"KLBOT_LINK_KEY"`
	// LinkTTL is how long a signed link opens its page (default 168h, at
	// most 366 days); klbot signs a new one each time it writes the check
	// run that holds it.
	LinkTTL time.Duration `env:"KLBOT_LINK_TTL, default=168h"`
	// links is LinkKey's signer (nil without one), made by loadConfig.
	links *web.Signer
	// MaxBodyMiB caps the body of a request to the API klbot mounts
	// (/api/, /tf/; ADR 0054), in MiB: 1 to api.MaxBodyMiB. The webhook has
	// its own cap (GitHub's 25 MB).
	MaxBodyMiB int `env:"KLBOT_MAX_BODY_MIB, default=64"`
	// BackendLockTTL is the lease of a lock Terraform takes through the
	// http backend (engine.Engine.BackendLockTTL; ADR 0056): Terraform never
	// renews one, so a lock older than this is released or, if its
	// Terraform may have written, fenced. 1m to 24h.
	BackendLockTTL time.Duration `env:"KLBOT_BACKEND_LOCK_TTL, default=1h"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `env:"KLBOT_LOG_LEVEL, default=info"`
	// ReconcileInterval is how often klbot compares its tables with GitHub
	// and the engine (ADR 0042): closed pull requests whose delivery was
	// missed, applies whose replica died, runs recovered on the CLI.
	ReconcileInterval time.Duration `env:"KLBOT_RECONCILE_INTERVAL, default=5m"`
	// Retention is how long the gc job keeps a closed plan's saved plan,
	// configuration archive and -var values, from the plan's finish
	// (engine.ParseRetention: a Go duration, whole days "30d", or "off";
	// default 30d; ADR 0063). Parsed into retention by loadConfig.
	Retention string `env:"KLBOT_RETENTION"`
	// GCInterval is how often the gc job runs (at least 1s).
	GCInterval time.Duration `env:"KLBOT_GC_INTERVAL, default=1h"`
	// ShutdownTimeout bounds the stop on SIGTERM (at least 1s): the process
	// exits within it, spent as bot.PlanShutdown says (ADR 0043).
	ShutdownTimeout time.Duration `env:"KLBOT_SHUTDOWN_TIMEOUT, default=5m"`
	// AllowForkPRs plans pull requests from forks on push (default false:
	// a plan runs the pull request's code with klbot's credentials).
	AllowForkPRs bool `env:"KLBOT_ALLOW_FORK_PRS, default=false"`
	// TFVars lists, comma-separated, the TF_VAR_* variables of klbot's
	// environment that reach Terraform (default none): every pull
	// request's code can read them. Parsed into tfVars by loadConfig.
	TFVars string `env:"KLBOT_TF_VARS"`
	// RepoConfig is the path of the server-side repository configuration
	// (optional; docs/kl-yaml.md "Safety keys"): per repository, the safety
	// keys of its pull requests and the ones their kl.yaml may change.
	// Parsed into repoConfig by loadConfig.
	RepoConfig string `env:"KLBOT_REPO_CONFIG"`
	// EncryptionKey is the keyring of encryption at rest (seal.Parse:
	// "ID:BASE64[,ID:BASE64…]", 32-byte keys; the first seals, every key
	// opens; ADR 0066): the same keys as KL_ENCRYPTION_KEY of every kl
	// sharing the store. Parsed into keys by parse. Empty: nothing is
	// sealed, and an encrypted store is refused at start.
	EncryptionKey string `env:"KLBOT_ENCRYPTION_KEY"`

	// retention is Retention parsed.
	retention time.Duration
	// keys is EncryptionKey parsed (a keyring without a key when empty).
	keys *seal.Keyring
	// tfVars is TFVars parsed: full names (TF_VAR_region), each once.
	tfVars []string
	// repoConfig is RepoConfig parsed (nil when unset).
	repoConfig *klyaml.ServerConfig
}

// loadConfig reads and checks the environment; every error names the
// variable. It returns the private key's PEM bytes.
func loadConfig(ctx context.Context, env []string) (config, []byte, error) {
	var cfg config
	m := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	if err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: &cfg, Lookuper: envconfig.MapLookuper(m)}); err != nil {
		return cfg, nil, fmt.Errorf("reading the environment: %s", nameVariable(err.Error()))
	}
	switch {
	case cfg.WebhookSecret == "":
		return cfg, nil, errors.New("KLBOT_WEBHOOK_SECRET is required: klbot refuses unsigned webhooks (set the secret configured on the GitHub App)")
	case strings.TrimSpace(cfg.WebhookSecret) == "":
		return cfg, nil, errors.New("KLBOT_WEBHOOK_SECRET is only white space: set the secret configured on the GitHub App")
	case cfg.WebhookSecretPrevious != "" && strings.TrimSpace(cfg.WebhookSecretPrevious) == "":
		return cfg, nil, errors.New("KLBOT_WEBHOOK_SECRET_PREVIOUS is only white space: set the secret being replaced, or unset it")
	case cfg.WebhookSecretPrevious == cfg.WebhookSecret:
		return cfg, nil, errors.New("KLBOT_WEBHOOK_SECRET_PREVIOUS is the same as KLBOT_WEBHOOK_SECRET: set it to the secret being replaced, or unset it")
	case cfg.AppID <= 0:
		return cfg, nil, errors.New("KLBOT_APP_ID is required: the GitHub App's id (a positive number)")
	case cfg.DatabaseURL == "":
		return cfg, nil, errors.New("KLBOT_DATABASE_URL is required: the PostgreSQL DSN every replica shares")
	case cfg.PrivateKey != "" && cfg.PrivateKeyFile != "":
		return cfg, nil, errors.New("KLBOT_PRIVATE_KEY and KLBOT_PRIVATE_KEY_FILE are both set: set one")
	case cfg.PrivateKey == "" && cfg.PrivateKeyFile == "":
		return cfg, nil, errors.New("KLBOT_PRIVATE_KEY (PEM) or KLBOT_PRIVATE_KEY_FILE (its path) is required: the GitHub App's private key")
	case cfg.Workers < 1:
		return cfg, nil, fmt.Errorf("KLBOT_WORKERS=%d: want at least 1", cfg.Workers)
	case cfg.Lease < 3*time.Second:
		return cfg, nil, fmt.Errorf("KLBOT_LEASE=%s: want at least 3s", cfg.Lease)
	case cfg.ApplyWait < 0:
		return cfg, nil, fmt.Errorf("KLBOT_APPLY_WAIT=%s: want 0 or more", cfg.ApplyWait)
	case cfg.ReconcileInterval < time.Second:
		return cfg, nil, fmt.Errorf("KLBOT_RECONCILE_INTERVAL=%s: want at least 1s (River runs periodic jobs at most once a second)", cfg.ReconcileInterval)
	case cfg.GCInterval < time.Second:
		return cfg, nil, fmt.Errorf("KLBOT_GC_INTERVAL=%s: want at least 1s (River runs periodic jobs at most once a second)", cfg.GCInterval)
	case cfg.MaxBodyMiB < 1 || cfg.MaxBodyMiB > api.MaxBodyMiB:
		return cfg, nil, fmt.Errorf("KLBOT_MAX_BODY_MIB=%d: use 1 to %d (MiB)", cfg.MaxBodyMiB, api.MaxBodyMiB)
	case cfg.BackendLockTTL < time.Minute || cfg.BackendLockTTL > 24*time.Hour:
		return cfg, nil, fmt.Errorf("KLBOT_BACKEND_LOCK_TTL=%s: use 1m to 24h (Terraform never renews an http backend lock; ADR 0056)", cfg.BackendLockTTL)
	case cfg.ShutdownTimeout < bot.MinShutdownTimeout:
		return cfg, nil, fmt.Errorf("KLBOT_SHUTDOWN_TIMEOUT=%s: want at least %s (the time to stop Terraform and record what it did; ADR 0043)", cfg.ShutdownTimeout, bot.MinShutdownTimeout)
	}
	if err := cfg.parse(); err != nil {
		return cfg, nil, err
	}
	key := []byte(cfg.PrivateKey)
	if cfg.PrivateKeyFile != "" {
		b, err := os.ReadFile(cfg.PrivateKeyFile)
		if err != nil {
			return cfg, nil, fmt.Errorf("KLBOT_PRIVATE_KEY_FILE: reading the GitHub App private key: %w", err)
		}
		key = b
	}
	return cfg, key, nil
}

// parse checks and parses what loadConfig's checks leave: the log level,
// the apply trigger, the retention, the TF_VAR names, the repository
// configuration, the public URL and the link key; errors name the
// variable.
func (c *config) parse() error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("KLBOT_LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel)
	}
	switch klyaml.Trigger(c.ApplyTrigger) {
	case klyaml.TriggerComment, klyaml.TriggerMerge:
	default:
		return fmt.Errorf("KLBOT_APPLY_TRIGGER=%q: want comment or merge", c.ApplyTrigger)
	}
	retention, err := engine.ParseRetention("KLBOT_RETENTION", c.Retention)
	if err != nil {
		return err
	}
	c.retention = retention
	if c.keys, err = seal.Parse("KLBOT_ENCRYPTION_KEY", c.EncryptionKey); err != nil {
		return err // it names the variable and the entry, never the key
	}
	vars, err := parseTFVars(c.TFVars)
	if err != nil {
		return err
	}
	c.tfVars = vars
	if c.repoConfig, err = readRepoConfig(c.RepoConfig); err != nil {
		return err
	}
	if err := checkPublicURL(c.PublicURL); err != nil {
		return err
	}
	if c.LinkKey != "" {
		if c.links, err = web.NewSigner(c.LinkKey, c.LinkTTL, nil); err != nil {
			return fmt.Errorf("KLBOT_LINK_KEY or KLBOT_LINK_TTL: %w", err)
		}
	}
	return nil
}

// checkPublicURL refuses a KLBOT_PUBLIC_URL that is not an absolute http
// or https URL without a query or fragment ("" is none).
func checkPublicURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("KLBOT_PUBLIC_URL=%q: want klbot's public base URL, http(s)://HOST[/PATH] (e.g. https://klbot.example.com)", s)
	}
	return nil
}

// readRepoConfig reads KLBOT_REPO_CONFIG's file (klyaml.ParseServer): nil
// for an empty path. Errors name the variable and the path: a missing or
// unreadable file, one that is not a regular file or is over
// klyaml.MaxBytes, and every problem of an invalid one with its line.
func readRepoConfig(path string) (*klyaml.ServerConfig, error) {
	if path == "" {
		return nil, nil
	}
	what := "KLBOT_REPO_CONFIG=" + path
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: reading the server-side repository config: %w", what, err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s: not a regular file: want the YAML file of the server-side repository config", what)
	case fi.Size() > klyaml.MaxBytes:
		return nil, fmt.Errorf("%s: %d bytes, larger than %d", what, fi.Size(), klyaml.MaxBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the server-side repository config: %w", what, err)
	}
	rc, err := klyaml.ParseServer(data, filepath.Base(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return rc, nil
}

// keyVar names the variable the key came from, for errors.
func (c config) keyVar() string {
	if c.PrivateKeyFile != "" {
		return "KLBOT_PRIVATE_KEY_FILE"
	}
	return "KLBOT_PRIVATE_KEY"
}

// nameVariable replaces the Go field name go-envconfig's errors start with
// ("ApplyWait: time: invalid duration") by the variable's name.
func nameVariable(msg string) string {
	t := reflect.TypeOf(config{})
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		if rest, ok := strings.CutPrefix(msg, f.Name+":"); ok {
			return name + ":" + rest
		}
	}
	return msg
}

// parseTFVars parses KLBOT_TF_VARS: comma-separated names of environment
// variables, each TF_VAR_ and a Terraform variable name
// (terraform.ValidVariableName), blanks around a name ignored. It returns
// them in order, each once; an empty list for an empty value. Errors name
// the variable and the entry: an empty entry, one without the TF_VAR_
// prefix, a glob, a name Terraform cannot declare.
func parseTFVars(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		name := strings.TrimSpace(item)
		rest, ok := strings.CutPrefix(name, "TF_VAR_")
		switch {
		case name == "":
			return nil, fmt.Errorf("KLBOT_TF_VARS=%q: an empty entry (a comma too many?): list TF_VAR_ names, comma-separated", s)
		case strings.ContainsAny(name, "*?["):
			return nil, fmt.Errorf("KLBOT_TF_VARS: %q: patterns are not accepted, list each TF_VAR_ name", name)
		case !ok:
			return nil, fmt.Errorf("KLBOT_TF_VARS: %q is not a TF_VAR_ variable: list environment variable names such as TF_VAR_%s", name, name)
		}
		if err := terraform.ValidVariableName(rest); err != nil {
			return nil, fmt.Errorf("KLBOT_TF_VARS: %s: %w", name, err)
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out, nil
}

// terraformEnv is klbot's environment as Terraform gets it: without the
// TF_VAR_* variables KLBOT_TF_VARS does not list (every pull request's code
// can read what Terraform gets). It also returns the TF_VAR_* names it left
// out, and the listed ones that are not set, sorted.
func terraformEnv(env, allowed []string) (out, withheld, unset []string) {
	ok := map[string]bool{}
	for _, n := range allowed {
		ok[n] = true
	}
	set := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TF_VAR_") && !ok[k] {
			if !slices.Contains(withheld, k) {
				withheld = append(withheld, k)
			}
			continue
		}
		set[k] = true
		out = append(out, kv)
	}
	for _, n := range allowed {
		if !set[n] {
			unset = append(unset, n)
		}
	}
	slices.Sort(withheld)
	slices.Sort(unset)
	return out, withheld, unset
}
