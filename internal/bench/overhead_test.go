package bench

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kilolock/kilolock/internal/tfstate"
)

func TestStepTimings(t *testing.T) {
	t.Parallel()
	log := `time=2026-01-01T00:00:00.000Z level=DEBUG msg="terraform init done" run=01J op=plan elapsed=424.034611ms
time=2026-01-01T00:00:01.000Z level=DEBUG msg="terraform exec: /usr/local/bin/terraform plan" run=01J
time=2026-01-01T00:00:08.000Z level=DEBUG msg="terraform plan done" run=01J op=plan elapsed=7.397140757s
time=2026-01-01T00:00:09.000Z level=INFO msg="plan done" run=01J op=plan elapsed=10.138356388s serial=1 write=1
time=2026-01-01T00:00:09.000Z level=INFO msg=tick elapsed=1s
time=2026-01-01T00:00:09.000Z level=INFO msg=tick elapsed=2s
time=2026-01-01T00:00:09.000Z level=INFO msg="say \"hi\"" elapsed=5ms
time=2026-01-01T00:00:09.000Z level=INFO msg=bad elapsed=soon
not a log line
`
	want := map[string]time.Duration{
		StepInit:      424034611,
		StepPlan:      7397140757,
		StepRunnerAll: 10138356388,
		"tick":        3 * time.Second,
		`say "hi"`:    5 * time.Millisecond,
	}
	if diff := cmp.Diff(want, StepTimings([]byte(log))); diff != "" {
		t.Errorf("StepTimings (-want +got):\n%s", diff)
	}
}

func TestCleanEnv(t *testing.T) {
	t.Parallel()
	got := cleanEnv([]string{"PATH=/bin", "KL_STORE=x.db", "TF_VAR_a=1", "TF_LOG=trace", "TF_DATA_DIR=/d",
		"TF_CLI_ARGS_plan=-refresh=false", "HOME=/root", "PATH=/usr/bin", "TF_PLUGIN_CACHE_DIR=/c", "junk"})
	want := []string{"PATH=/usr/bin", "HOME=/root", "TF_PLUGIN_CACHE_DIR=/c"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cleanEnv (-want +got):\n%s", diff)
	}
}

func TestOverheadFixture(t *testing.T) {
	t.Parallel()
	state, config, err := overheadFixtureData(1500)
	if err != nil {
		t.Fatal(err)
	}
	st, err := tfstate.Parse(state)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.ResourceCount(); got != 1500 {
		t.Errorf("the state has %d resources, want 1500", got)
	}
	var changed []string
	for _, line := range strings.Split(string(config), "\n") {
		if strings.Contains(line, "-changed") {
			changed = append(changed, strings.TrimSpace(line))
		}
	}
	if want := []string{`input = "r01000-changed"`}; !slices.Equal(changed, want) {
		t.Errorf("changed lines %q, want %q", changed, want)
	}
	if _, _, err := overheadFixtureData(10); err == nil {
		t.Error("a state too small to hold the changed resource was accepted")
	}
}

func TestProviderFixtureData(t *testing.T) {
	t.Parallel()
	api := t.TempDir()
	state, config, err := providerFixtureData(api, 1500, "20ms")
	if err != nil {
		t.Fatal(err)
	}
	st, err := tfstate.Parse(state)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.ResourceCount(); got != 1500 {
		t.Errorf("the state has %d resources, want 1500", got)
	}
	objects, err := os.ReadDir(api)
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) != 1500 {
		t.Errorf("the fake cloud API holds %d objects, want 1500", len(objects))
	}
	var changed []string
	for _, line := range strings.Split(string(config), "\n") {
		if strings.Contains(line, "-changed") {
			changed = append(changed, strings.TrimSpace(line))
		}
	}
	if want := []string{`name  = "r01000-changed"`}; !slices.Equal(changed, want) {
		t.Errorf("changed lines %q, want %q", changed, want)
	}
	if got := strings.Count(string(config), `delay = "20ms"`); got != 1500 {
		t.Errorf("%d resources have the delay, want 1500", got)
	}
	if _, _, err := providerFixtureData(t.TempDir(), 10, "20ms"); err == nil {
		t.Error("a state too small to hold the changed resource was accepted")
	}
	if _, _, err := providerFixtureData(t.TempDir(), 1500, "soon"); err == nil || !strings.Contains(err.Error(), `delay "soon"`) {
		t.Errorf("a bad delay: error %v", err)
	}
}

func TestOverheadOptionsDefaults(t *testing.T) {
	t.Parallel()
	o := OverheadOptions{Mirror: "/m"}
	o.defaults()
	if o.ReadDelay != DefaultReadDelay || o.Resources != 2000 || o.Runs != 3 {
		t.Errorf("defaults with a mirror: %+v", o)
	}
	o = OverheadOptions{}
	o.defaults()
	if o.ReadDelay != "" {
		t.Errorf("a read delay without a provider: %q", o.ReadDelay)
	}
}
