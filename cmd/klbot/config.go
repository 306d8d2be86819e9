package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/kilolock/kilolock/internal/klyaml"
)

// config is klbot's environment (docs/klbot.md), read with go-envconfig.
type config struct {
	// AppID is the GitHub App's id.
	AppID int64 `env:"KLBOT_APP_ID"`
	// PrivateKey is the App's private key (PEM); or PrivateKeyFile, its path.
	PrivateKey     string `env:"KLBOT_PRIVATE_KEY"`
	PrivateKeyFile string `env:"KLBOT_PRIVATE_KEY_FILE"`
	// WebhookSecret verifies X-Hub-Signature-256 (required: shared/GITHUB.md).
	WebhookSecret string `env:"KLBOT_WEBHOOK_SECRET"`
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
	// Terraform is the terraform or tofu binary (default: on PATH).
	Terraform string `env:"KLBOT_TERRAFORM"`
	// PublicURL is klbot's public base URL, for links (optional).
	PublicURL string `env:"KLBOT_PUBLIC_URL"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `env:"KLBOT_LOG_LEVEL, default=info"`
	// ShutdownTimeout bounds the graceful stop on SIGTERM: running jobs get
	// this long to finish, then they are cancelled and handed back to the queue.
	ShutdownTimeout time.Duration `env:"KLBOT_SHUTDOWN_TIMEOUT, default=5m"`
	// AllowForkPRs plans pull requests from forks on push (default false:
	// a plan runs the pull request's code with klbot's credentials).
	AllowForkPRs bool `env:"KLBOT_ALLOW_FORK_PRS, default=false"`
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
	case cfg.ShutdownTimeout < 0:
		return cfg, nil, fmt.Errorf("KLBOT_SHUTDOWN_TIMEOUT=%s: want 0 or more (0: cancel running jobs at once on SIGTERM)", cfg.ShutdownTimeout)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return cfg, nil, fmt.Errorf("KLBOT_LOG_LEVEL=%q: want debug, info, warn or error", cfg.LogLevel)
	}
	switch klyaml.Trigger(cfg.ApplyTrigger) {
	case klyaml.TriggerComment, klyaml.TriggerMerge:
	default:
		return cfg, nil, fmt.Errorf("KLBOT_APPLY_TRIGGER=%q: want comment or merge", cfg.ApplyTrigger)
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
