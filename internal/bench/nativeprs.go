package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/kilolock/kilolock/internal/testprovider"
)

// nativeState is a state a side's store adopts: its name, the state
// document's file, its size and lineage (testprovider.Synthesize's objects
// are derived from both, so each side's fake cloud API is written anew
// with the same objects).
type nativeState struct {
	name, file string
	n          int
	lineage    string
}

// nativePR is one pull request of figure 5b: the state it plans against,
// its configuration dir (the state's configuration with one name changed)
// and the resource it changes, its --target.
type nativePR struct {
	state, cfg, addr string
}

// nativeFixture is what every round of figure 5 starts from.
type nativeFixture struct {
	opts NativeOptions
	big  nativeState
	tiny []nativeState
	// cfg is figure 5a's configuration dir (changedConfig, the big state's
	// configuration with changed's name changed) with its lock file.
	cfg, changed  string
	changedConfig []byte
	lock          []byte
	// shared are 5b's PRs on the big state, tinyPRs those on the tiny
	// states (PR i on tiny state i).
	shared, tinyPRs []nativePR
	// klEnv is every kl's environment but its store, work dir and API;
	// tfEnv what bare Terraform adds (the provider's CLI configuration).
	klEnv, tfEnv []string
}

// newNativeFixture writes the fixture below root and fills kl's plugin
// cache (warmPluginCaches).
func newNativeFixture(ctx context.Context, opts NativeOptions, root string) (*nativeFixture, error) {
	if opts.Resources < 10 || opts.PRs < 1 || opts.PRs > opts.Resources/2 {
		return nil, fmt.Errorf("native benchmark: %d resources and %d PRs: want at least 10 resources and at most half as many PRs", opts.Resources, opts.PRs)
	}
	lock, err := testprovider.LockFile(opts.Mirror)
	if err != nil {
		return nil, fmt.Errorf("native benchmark: %w", err)
	}
	fx := &nativeFixture{opts: opts, lock: lock, changed: objectAddr(opts.Resources / 10)}
	if err := fx.writeEnv(root); err != nil {
		return nil, err
	}
	if fx.big, err = writeNativeState(opts, root, nativeStateName, opts.Resources, nativeLineage); err != nil {
		return nil, err
	}
	config := testprovider.SynthesizeConfig(opts.Resources, opts.ReadDelay)
	fx.cfg = filepath.Join(root, "config")
	if fx.changedConfig, err = fx.writeConfig(fx.cfg, config, opts.Resources/10); err != nil {
		return nil, err
	}
	for i := range opts.PRs {
		k := i*opts.Resources/opts.PRs + opts.Resources/(2*opts.PRs)
		dir := filepath.Join(root, fmt.Sprintf("pr%d", i+1))
		if _, err := fx.writeConfig(dir, config, k); err != nil {
			return nil, err
		}
		fx.shared = append(fx.shared, nativePR{state: fx.big.name, cfg: dir, addr: objectAddr(k)})

		st, err := writeNativeState(opts, root, fmt.Sprintf("%s-tiny-%d", nativeStateName, i+1), opts.TinyResources, tinyLineage(i))
		if err != nil {
			return nil, err
		}
		fx.tiny = append(fx.tiny, st)
		dir = filepath.Join(root, fmt.Sprintf("tiny-pr%d", i+1))
		if _, err := fx.writeConfig(dir, testprovider.SynthesizeConfig(opts.TinyResources, opts.ReadDelay), opts.TinyResources/2); err != nil {
			return nil, err
		}
		fx.tinyPRs = append(fx.tinyPRs, nativePR{state: st.name, cfg: dir, addr: objectAddr(opts.TinyResources / 2)})
	}
	warm := OverheadOptions{KL: opts.KL, Terraform: opts.Terraform}
	if err := warmPluginCaches(ctx, warm, filepath.Join(root, "warm"), &overheadFixture{env: fx.tfEnv}, lock); err != nil {
		return nil, fmt.Errorf("native benchmark: %w", err)
	}
	return fx, nil
}

// objectAddr is the address of synthetic object i's resource.
func objectAddr(i int) string { return testprovider.Type + "_object." + testprovider.SynthName(i) }

// writeEnv writes the provider's CLI configuration below root (with a
// plugin cache dir for bare Terraform) and sets fx.klEnv and fx.tfEnv.
func (fx *nativeFixture) writeEnv(root string) error {
	cliConfig := filepath.Join(root, testprovider.CLIConfigName)
	tfCache := filepath.Join(root, "terraform-plugins")
	if err := os.MkdirAll(tfCache, 0o700); err != nil {
		return fmt.Errorf("native benchmark: %w", err)
	}
	if err := os.WriteFile(cliConfig, []byte(testprovider.CLIConfig(fx.opts.Mirror, tfCache)), 0o600); err != nil {
		return fmt.Errorf("native benchmark: %w", err)
	}
	fx.tfEnv = []string{"TF_CLI_CONFIG_FILE=" + cliConfig, "KL_PLUGIN_CACHE_DIR=" + filepath.Join(root, "kl-plugins")}
	fx.klEnv = append(append(cleanEnv(os.Environ()), fx.tfEnv...), "KL_TERRAFORM="+fx.opts.Terraform,
		"KL_LOG_LEVEL=debug", "KL_ACTOR=klbench", "KL_KEEP_WORKDIRS=false", "NO_COLOR=1", "CHECKPOINT_DISABLE=1")
	return nil
}

// writeNativeState synthesizes a state of n objects (into a throwaway API
// dir) and writes it to root/NAME.tfstate.
func writeNativeState(opts NativeOptions, root, name string, n int, lineage string) (nativeState, error) {
	st := nativeState{name: name, file: filepath.Join(root, filepath.Base(name)+".tfstate"), n: n, lineage: lineage}
	api := filepath.Join(root, "setup-api")
	defer os.RemoveAll(api)
	doc, err := testprovider.Synthesize(api, n, opts.ReadDelay, lineage, 1)
	if err != nil {
		return st, fmt.Errorf("native benchmark: %w", err)
	}
	if err := os.WriteFile(st.file, doc, 0o600); err != nil {
		return st, fmt.Errorf("native benchmark: %w", err)
	}
	return st, nil
}

// writeConfig writes config with object k's name changed, and the lock
// file, into dir; it returns the changed configuration.
func (fx *nativeFixture) writeConfig(dir string, config []byte, k int) ([]byte, error) {
	name := testprovider.SynthName(k)
	old := fmt.Appendf(nil, "name  = %q\n", name)
	if bytes.Count(config, old) != 1 {
		return nil, fmt.Errorf("native benchmark: %s is not in the synthetic configuration", name)
	}
	changed := bytes.Replace(config, old, fmt.Appendf(nil, "name  = %q\n", name+"-changed"), 1)
	return changed, writeFiles(dir, map[string][]byte{"main.tf": changed, ".terraform.lock.hcl": fx.lock})
}

// side is a fresh store in dir adopting states (`kl state init --from`,
// not timed) and a fresh fake cloud API holding their objects.
func (fx *nativeFixture) side(ctx context.Context, dir string, states ...nativeState) (klSide, error) {
	s := klSide{kl: fx.opts.KL, dir: dir, api: filepath.Join(dir, "api")}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return s, fmt.Errorf("native benchmark: %w", err)
	}
	s.env = append(slices.Clone(fx.klEnv), "KL_STORE="+filepath.Join(dir, "kl.db"), "KL_WORKDIR="+filepath.Join(dir, "runs"), s.apiEnv())
	for _, st := range states {
		if _, err := testprovider.Synthesize(s.api, st.n, fx.opts.ReadDelay, st.lineage, 1); err != nil {
			return s, fmt.Errorf("native benchmark: %w", err)
		}
		if _, err := s.run(ctx, "state", "init", st.name, "--from", st.file); err != nil {
			return s, err
		}
	}
	return s, nil
}

// prsRound is figure 5b's round in dir: the PRs on the big state and on
// the tiny states, each side's plans made at once, then its applies
// started at once; tinyFirst runs the tiny states first.
func (fx *nativeFixture) prsRound(ctx context.Context, dir string, tinyFirst bool, round *NativeRound) error {
	shared, err := fx.side(ctx, filepath.Join(dir, "shared"), fx.big)
	if err != nil {
		return err
	}
	tiny, err := fx.side(ctx, filepath.Join(dir, "tiny"), fx.tiny...)
	if err != nil {
		return err
	}
	steps := []func() error{
		func() (err error) {
			round.SharedPlans, round.SharedApplies, round.Shared, err = shared.prsAtOnce(ctx, fx.shared)
			if err == nil {
				err = shared.checkApplied(ctx, fx.big, fx.shared)
			}
			return err
		},
		func() (err error) {
			round.TinyPlans, round.TinyApplies, round.Tiny, err = tiny.prsAtOnce(ctx, fx.tinyPRs)
			return err
		},
	}
	if tinyFirst {
		slices.Reverse(steps)
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// prsAtOnce makes the native-lane plans of prs at once, one kl process
// each, then starts their applies at once, and returns the wall time of
// each phase (from the start to the last process's end) and the medians
// of each process.
func (s klSide) prsAtOnce(ctx context.Context, prs []nativePR) (plans, applies time.Duration, each PRTimes, err error) {
	ids := make([]string, len(prs))
	planRes, applyRes := make([]commandResult, len(prs)), make([]commandResult, len(prs))
	plans, err = atOnce(len(prs), func(i int) error {
		p, err := s.plan(ctx, prs[i].state, prs[i].cfg, "native", prs[i].addr)
		ids[i], planRes[i] = p.id, p.res
		return err
	})
	if err != nil {
		return 0, 0, each, fmt.Errorf("plans at once: %w", err)
	}
	applies, err = atOnce(len(prs), func(i int) error {
		var err error
		applyRes[i], err = s.apply(ctx, ids[i])
		return err
	})
	if err != nil {
		return 0, 0, each, fmt.Errorf("applies at once: %w", err)
	}
	each.Plan, each.PlanRunner, each.PlanRest = medianSplit(planRes, StepRunnerAll)
	each.Apply, each.ApplyRunner, each.ApplyRest = medianSplit(applyRes, StepApplyAll)
	return plans, applies, each, nil
}

// medianSplit is the median over rs of the wall time, of the runner's
// step (from the debug log) and of the rest.
func medianSplit(rs []commandResult, step string) (wall, runner, rest time.Duration) {
	var walls, runners, rests []time.Duration
	for _, r := range rs {
		d := StepTimings(r.Stderr)[step]
		walls, runners, rests = append(walls, r.Wall), append(runners, d), append(rests, r.Wall-d)
	}
	return Median(walls), Median(runners), Median(rests)
}

// atOnce runs f(0) … f(n-1) in n goroutines started together and returns
// the wall time until the last returned, and their errors joined.
func atOnce(n int, f func(i int) error) (time.Duration, error) {
	errs := make([]error, n)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-gate
			if err := f(i); err != nil {
				errs[i] = fmt.Errorf("%d: %w", i+1, err)
			}
		})
	}
	t0 := time.Now()
	close(gate)
	wg.Wait()
	return time.Since(t0), errors.Join(errs...)
}

// checkApplied reads the head of state with `kl state pull` and checks
// that every PR's change is in it (each object's name "-changed") and that
// it still holds every resource: the concurrent delta commits lost none.
func (s klSide) checkApplied(ctx context.Context, st nativeState, prs []nativePR) error {
	state := st.name
	res, err := s.run(ctx, "state", "pull", state)
	if err != nil {
		return err
	}
	var doc struct {
		Resources []struct {
			Type, Name string
			Instances  []struct {
				Attributes struct {
					Name string `json:"name"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(res.Stdout, &doc); err != nil {
		return fmt.Errorf("reading the head of %s: %w", state, err)
	}
	names := map[string]string{}
	for _, r := range doc.Resources {
		for _, in := range r.Instances {
			names[r.Type+"."+r.Name] = in.Attributes.Name
		}
	}
	if len(names) != st.n {
		return fmt.Errorf("after the applies at once, the head of %s holds %d resources, want %d", state, len(names), st.n)
	}
	for _, pr := range prs {
		if got, want := names[pr.addr], pr.addr[len(testprovider.Type+"_object."):]+"-changed"; got != want {
			return fmt.Errorf("after the applies at once, %s's name is %q in the head of %s, want %q", pr.addr, got, state, want)
		}
	}
	return nil
}
