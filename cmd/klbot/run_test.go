package main

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kilolock/kilolock/internal/bot"
	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/kilolock/kilolock/internal/seal"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/store/storetest"
)

// TestRunConfigErrors: run() refuses to start on a bad environment and the
// error names the variable.
func TestRunConfigErrors(t *testing.T) {
	t.Parallel()
	fake := githubfake.New(t)
	key := fake.NewAppKey(appID)
	keyFile := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	badPEM := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(badPEM, []byte("-----BEGIN RSA PRIVATE KEY-----\nnot a key\n-----END RSA PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A stand-in that answers `terraform version -json` like Terraform.
	tf := filepath.Join(t.TempDir(), "terraform")
	if err := os.WriteFile(tf, []byte("#!/bin/sh\necho '{\"terraform_version\":\"1.5.7\"}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	badRepoConfig := filepath.Join(t.TempDir(), "repos.yaml")
	if err := os.WriteFile(badRepoConfig, []byte("repos:\n  - id: acme/infra\n    allowed_overrides: [workflow]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := baseEnv(t, fake, key, "postgres://127.0.0.1:1/none", "127.0.0.1:0", tf)
	// Keys for KLBOT_ENCRYPTION_KEY, and a store sealed with key k1 (ADR
	// 0066) that klbot without the key must refuse at start.
	shortKey := base64.StdEncoding.EncodeToString([]byte("sixteen byte key"))
	fullKey := base64.StdEncoding.EncodeToString([]byte("thirty-two bytes of key material"))
	encrypted := pgtest.DSN(t)
	kr, err := seal.Parse("KLBOT_ENCRYPTION_KEY", "k1:"+fullKey)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := postgres.Open(t.Context(), encrypted, postgres.WithKeyring(kr))
	if err != nil {
		t.Fatal(err)
	}
	// The key is recorded with the store's first write (a binary that only
	// reads records nothing): a state, its first version sealed.
	if _, err := sealed.CreateState(t.Context(), storetest.NewState("acme/sealed")); err != nil {
		t.Fatal(err)
	}
	sealed.Close()
	without := func(env []string, names ...string) []string {
		var out []string
	next:
		for _, kv := range env {
			for _, n := range names {
				if strings.HasPrefix(kv, n+"=") {
					continue next
				}
			}
			out = append(out, kv)
		}
		return out
	}
	for name, tc := range map[string]struct {
		env  []string
		want string
	}{
		"missing webhook secret":  {without(base, "KLBOT_WEBHOOK_SECRET"), "KLBOT_WEBHOOK_SECRET"},
		"empty webhook secret":    {append(without(base, "KLBOT_WEBHOOK_SECRET"), "KLBOT_WEBHOOK_SECRET="), "KLBOT_WEBHOOK_SECRET"},
		"unreadable key file":     {append(without(base, "KLBOT_PRIVATE_KEY"), "KLBOT_PRIVATE_KEY_FILE=/nonexistent/key.pem"), "KLBOT_PRIVATE_KEY_FILE"},
		"invalid PEM in file":     {append(without(base, "KLBOT_PRIVATE_KEY"), "KLBOT_PRIVATE_KEY_FILE="+badPEM), "KLBOT_PRIVATE_KEY_FILE"},
		"invalid PEM in variable": {append(without(base, "KLBOT_PRIVATE_KEY"), "KLBOT_PRIVATE_KEY=garbage"), "KLBOT_PRIVATE_KEY"},
		"no key":                  {without(base, "KLBOT_PRIVATE_KEY"), "KLBOT_PRIVATE_KEY"},
		"both keys":               {append(base, "KLBOT_PRIVATE_KEY_FILE="+keyFile), "KLBOT_PRIVATE_KEY_FILE are both set"},
		"no app id":               {without(base, "KLBOT_APP_ID"), "KLBOT_APP_ID"},
		"no database":             {without(base, "KLBOT_DATABASE_URL"), "KLBOT_DATABASE_URL"},
		"bad trigger":             {append(base, "KLBOT_APPLY_TRIGGER=push"), "KLBOT_APPLY_TRIGGER"},
		"bad duration":            {append(base, "KLBOT_APPLY_WAIT=soon"), "KLBOT_APPLY_WAIT"},
		"zero workers":            {append(base, "KLBOT_WORKERS=0"), "KLBOT_WORKERS"},
		"blank webhook secret":    {append(without(base, "KLBOT_WEBHOOK_SECRET"), "KLBOT_WEBHOOK_SECRET=  "), "KLBOT_WEBHOOK_SECRET is only white space"},
		"blank previous secret":   {append(base, "KLBOT_WEBHOOK_SECRET_PREVIOUS= "), "KLBOT_WEBHOOK_SECRET_PREVIOUS is only white space"},
		"previous secret unchanged": {append(base, "KLBOT_WEBHOOK_SECRET_PREVIOUS="+secret),
			"KLBOT_WEBHOOK_SECRET_PREVIOUS is the same as KLBOT_WEBHOOK_SECRET: set it to the secret being replaced"},
		"negative shutdown":       {append(base, "KLBOT_SHUTDOWN_TIMEOUT=-1s"), "KLBOT_SHUTDOWN_TIMEOUT=-1s: want at least 1s"},
		"no shutdown time":        {append(base, "KLBOT_SHUTDOWN_TIMEOUT=0"), "KLBOT_SHUTDOWN_TIMEOUT=0s: want at least 1s"},
		"bad fork switch":         {append(base, "KLBOT_ALLOW_FORK_PRS=maybe"), "KLBOT_ALLOW_FORK_PRS"},
		"reconcile too often":     {append(base, "KLBOT_RECONCILE_INTERVAL=500ms"), "KLBOT_RECONCILE_INTERVAL=500ms: want at least 1s"},
		"retention zero":          {append(base, "KLBOT_RETENTION=0"), "KLBOT_RETENTION=0 is ambiguous: say off to keep closed plans' artifacts forever"},
		"retention not a time":    {append(base, "KLBOT_RETENTION=monthly"), "KLBOT_RETENTION=monthly: want a positive Go duration (720h, 90m), a whole number of days (30d) or off"},
		"gc too often":            {append(base, "KLBOT_GC_INTERVAL=100ms"), "KLBOT_GC_INTERVAL=100ms: want at least 1s"},
		"body cap too large":      {append(base, "KLBOT_MAX_BODY_MIB=5000"), "KLBOT_MAX_BODY_MIB=5000: use 1 to 4096 (MiB)"},
		"backend lock too short":  {append(base, "KLBOT_BACKEND_LOCK_TTL=10s"), "KLBOT_BACKEND_LOCK_TTL=10s: use 1m to 24h"},
		"bad reconcile interval":  {append(base, "KLBOT_RECONCILE_INTERVAL=often"), "KLBOT_RECONCILE_INTERVAL"},
		"terraform not terraform": {append(without(base, "KLBOT_TERRAFORM"), "KLBOT_TERRAFORM=/bin/true"), "KLBOT_TERRAFORM=/bin/true is not Terraform or OpenTofu"},
		"terraform missing":       {append(without(base, "KLBOT_TERRAFORM"), "KLBOT_TERRAFORM=/nonexistent/terraform"), `resolving KLBOT_TERRAFORM="/nonexistent/terraform"`},
		"bad log level":           {append(base, "KLBOT_LOG_LEVEL=loud"), "KLBOT_LOG_LEVEL"},
		"TF_VARS not a name":      {append(base, "KLBOT_TF_VARS=TF_VAR_region,TF_VAR_1x"), `KLBOT_TF_VARS: TF_VAR_1x: "1x" is not a Terraform variable name`},
		"TF_VARS without prefix":  {append(base, "KLBOT_TF_VARS=region"), `KLBOT_TF_VARS: "region" is not a TF_VAR_ variable`},
		"TF_VARS glob":            {append(base, "KLBOT_TF_VARS=TF_VAR_*"), `KLBOT_TF_VARS: "TF_VAR_*": patterns are not accepted`},
		"TF_VARS reserved":        {append(base, "KLBOT_TF_VARS=TF_VAR_count"), `KLBOT_TF_VARS: TF_VAR_count: "count" is reserved by Terraform`},
		"TF_VARS empty entry":     {append(base, "KLBOT_TF_VARS=TF_VAR_a,,TF_VAR_b"), `KLBOT_TF_VARS="TF_VAR_a,,TF_VAR_b": an empty entry`},
		"repo config missing":     {append(base, "KLBOT_REPO_CONFIG=/nonexistent/repos.yaml"), "KLBOT_REPO_CONFIG=/nonexistent/repos.yaml: reading the server-side repository config: stat /nonexistent/repos.yaml: no such file"},
		"repo config a directory": {append(base, "KLBOT_REPO_CONFIG=/"), "KLBOT_REPO_CONFIG=/: not a regular file"},
		"repo config invalid": {append(base, "KLBOT_REPO_CONFIG="+badRepoConfig), "KLBOT_REPO_CONFIG=" + badRepoConfig +
			`: invalid repos.yaml: repos.yaml:3: repos entry "acme/infra": allowed_overrides: "workflow" is not a safety key: want apply_requirements or apply_trigger`},
		"unreachable database": {base, "KLBOT_DATABASE_URL"},
		"encryption key short": {append(base, "KLBOT_ENCRYPTION_KEY=k1:"+shortKey), `KLBOT_ENCRYPTION_KEY: entry 1 (key id "k1"): the key is 16 bytes, want 32`},
		"encryption key no id": {append(base, "KLBOT_ENCRYPTION_KEY="+fullKey), "KLBOT_ENCRYPTION_KEY: entry 1 has no key id"},
		"encrypted store, no key": {baseEnv(t, fake, key, encrypted, "127.0.0.1:0", tf),
			"the store is encrypted (sealed with key k1) but KLBOT_ENCRYPTION_KEY is not set"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := run(ctx, []string{"klbot"}, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run() = %v, want an error naming %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "BEGIN RSA") || strings.Contains(err.Error(), shortKey) || strings.Contains(err.Error(), fullKey) {
				t.Fatalf("the error quotes the key: %v", err)
			}
		})
	}
}

// TestReadyz: /readyz answers 503 with the reason when the database is
// unreachable or its migrations are behind, 200 when all is current; /healthz
// is 200 regardless. (/metrics is checked by TestEndToEnd.)
func TestReadyz(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	get := func(pool *pgxpool.Pool, path string) (int, string) {
		srv := httptest.NewServer(routes(http.NotFoundHandler(), http.NotFoundHandler(), pool, reg))
		defer srv.Close()
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	dead, err := pgxpool.New(ctx, "postgres://klbot@127.0.0.1:1/klbot?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	if code, body := get(dead, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "database unreachable") {
		t.Errorf("/readyz with the database down: %d %q, want 503 saying the database is unreachable", code, body)
	}
	if code, _ := get(dead, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d, want 200", code)
	}

	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if code, body := get(pool, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "migrations pending") {
		t.Errorf("/readyz on an empty schema: %d %q, want 503 saying migrations are pending", code, body)
	}
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if code, body := get(pool, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "river migrations pending") {
		t.Errorf("/readyz before River's migrations: %d %q, want 503 naming River", code, body)
	}
	if err := bot.MigrateRiver(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if code, body := get(pool, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with everything migrated: %d %q, want 200", code, body)
	}
}
