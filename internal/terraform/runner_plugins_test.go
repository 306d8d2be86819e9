package terraform

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/testprovider"
	"github.com/kilolock/kilolock/internal/testprovider/tptest"
)

// recordingTerraform is a terraform executable for the tests below: a
// script that appends "SUBCOMMAND WORKING-DIR" to the file $KLTEST_TFLOG
// and execs the real binary. When $KLTEST_TAMPER is set, right before an
// `apply` it does what another run's code (the same user) could do in the
// window between Kilolock's check of the run's provider copy and
// Terraform's start: "provider" changes the run's copy of the provider
// binary (../plugins/…), "lock" adds a hash to the root module's lock
// file.
func recordingTerraform(t *testing.T) string {
	t.Helper()
	script := "#!/bin/sh\n" +
		"echo \"$1 $PWD\" >> \"$KLTEST_TFLOG\"\n" +
		"if [ \"$1\" = apply ]; then\n" +
		"  case \"$KLTEST_TAMPER\" in\n" +
		"  provider) for f in ../plugins/*/*/*/*/*/terraform-provider-*; do echo >> \"$f\" || exit 97; done ;;\n" +
		"  lock) sed -i 's|hashes = \\[|hashes = [\\n    \"h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\",|' .terraform.lock.hcl || exit 97 ;;\n" +
		"  esac\n" +
		"fi\n" +
		"exec " + testBinary(t) + " \"$@\"\n"
	bin := filepath.Join(t.TempDir(), "terraform")
	if err := os.WriteFile(bin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return bin
}

// commandsIn returns the Terraform subcommands the recording script logged
// with a working dir below dir.
func commandsIn(t *testing.T, logFile, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		cmd, wd, _ := strings.Cut(line, " ")
		if wd == dir || strings.HasPrefix(wd, dir+string(filepath.Separator)) {
			cmds = append(cmds, cmd)
		}
	}
	return cmds
}

// TestApplyWithoutInit: with the plugin cache, an apply runs no second
// `terraform init` — the run's verified provider copy is linked into its
// data dir (linkProviders) — and still applies with the real provider. The
// safety that init's checks gave stays, as Terraform's own checks at the
// apply's start: a run's provider copy changed after Kilolock checked it,
// or a lock file that is not the plan's, is refused before any resource is
// touched. Without a plugin cache the apply runs init, as before.
func TestApplyWithoutInit(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		tamper  string
		noCache bool
		wantErr string // "" : the apply succeeds
	}{
		"linked":                     {},
		"provider changed at apply":  {tamper: "provider", wantErr: "does not match any of the checksums recorded in the dependency lock file"},
		"lock file changed at apply": {tamper: "lock", wantErr: "Inconsistent dependency lock file"},
		"no plugin cache: init runs": {noCache: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := tptest.New(t)
			tmp := t.TempDir()
			logFile := filepath.Join(tmp, "terraform.log")
			cache := filepath.Join(tmp, "plugins")
			if tc.noCache {
				cache = ""
			}
			env := append(os.Environ(), p.Env()...)
			env = append(env, "KLTEST_TFLOG="+logFile, "KLTEST_TAMPER="+tc.tamper)
			log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
			r, err := NewRunner(RunnerOptions{WorkRoot: filepath.Join(tmp, "runs"), Binary: recordingTerraform(t), Env: env,
				Logger: log, PluginCacheDir: cache, KeepWorkDirs: true})
			if err != nil {
				t.Fatal(err)
			}
			dir := setupConfig(t, map[string]string{"main.tf": cacheConfig, lockFileName: cacheLockFile(t, p)})
			ctx := context.Background()
			plan, err := r.Plan(ctx, engine.PlanRequest{Run: "01PLAN", Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if got := commandsIn(t, logFile, filepath.Join(r.workRoot, "01PLAN")); !strings.Contains(" "+strings.Join(got, " ")+" ", " init ") {
				t.Fatalf("the plan ran %v, want an init (the recording sees Terraform's commands)", got)
			}
			_, err = r.Apply(ctx, engine.ApplyRequest{Run: "01APPLY", PlanFile: plan.PlanFile, Config: plan.Config})
			applyDir := filepath.Join(r.workRoot, "01APPLY")
			cmds := strings.Join(commandsIn(t, logFile, applyDir), " ")
			wantInit := tc.noCache
			if strings.Contains(" "+cmds+" ", " init ") != wantInit {
				t.Errorf("the apply ran %q; want init: %v", cmds, wantInit)
			}
			if !strings.Contains(" "+cmds+" ", " apply ") {
				t.Errorf("the apply ran %q: no apply", cmds)
			}
			checkApplyOutcome(t, p, applyDir, err, tc.wantErr, tc.noCache)
		})
	}
}

// checkApplyOutcome checks an apply of TestApplyWithoutInit: with wantErr,
// it failed with that text and created nothing; else it created the
// object, and (linked) its data dir links the run's own copy.
func checkApplyOutcome(t *testing.T, p *tptest.Provider, applyDir string, err error, wantErr string, noCache bool) {
	t.Helper()
	objs := p.Objects(t)
	if wantErr != "" {
		var ce *CommandError
		if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("apply: %v; want Terraform's refusal %q", err, wantErr)
		}
		if len(objs) != 0 {
			t.Errorf("the fake API holds %v after a refused apply, want nothing", objs)
		}
		return
	}
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if len(objs) != 1 {
		t.Errorf("the fake API holds %v, want the object the apply created", objs)
	}
	if noCache {
		return
	}
	link := filepath.Join(applyDir, "data", "providers", testprovider.Hostname, testprovider.Namespace, testprovider.Type,
		testprovider.Version, testprovider.Platform)
	if target, err := os.Readlink(link); err != nil || target != cachedPackage(filepath.Join(applyDir, "plugins")) {
		t.Errorf("%s links to %q (%v), want the run's own copy", link, target, err)
	}
}
