package terraform

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/oklog/ulid/v2"

	"github.com/kilolock/kilolock/internal/engine"
)

var (
	_ engine.LeftWorkDirs = (*Runner)(nil)
	_ engine.LeftWorkDirs = WorkDirs{}
)

// WorkDirRuns is WorkDirs.WorkDirRuns of the Runner's work root.
func (r *Runner) WorkDirRuns() ([]string, error) { return r.dirs().WorkDirRuns() }

// LastState is WorkDirs.LastState of the Runner's work root.
func (r *Runner) LastState(run string) ([]byte, error) { return r.dirs().LastState(run) }

func (r *Runner) dirs() WorkDirs { return WorkDirs{Root: r.workRoot, Keep: r.keep, Logger: r.log} }

// WorkDirRuns lists the run ids of the work dirs below the work root,
// sorted (engine.LeftWorkDirs): directories named like a run id (a ULID),
// as newWorkDir makes them; nothing else kept under the root is listed. A
// missing root lists nothing.
func (w WorkDirs) WorkDirRuns() ([]string, error) {
	ents, err := os.ReadDir(w.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing work dirs below %s: %w", w.Root, err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if _, err := ulid.ParseStrict(e.Name()); err == nil {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// LastState returns the state Terraform last wrote in run's work dir
// (engine.LeftWorkDirs), as workDir.readState reads it after an apply:
// errored.tfstate, which Terraform writes into its working directory (the
// root module copy below cfg/) when it cannot persist its state, else the
// run's snapshot file — the local backend's path, which Terraform rewrites
// as it applies. A configuration archive never holds a *.tfstate file
// (excluded), so an errored.tfstate below cfg/ is Terraform's. nil, nil
// when the dir holds neither; engine.ErrInvalid for a run id that is not a
// plain name.
func (w WorkDirs) LastState(run string) ([]byte, error) {
	if run == "" || run == "." || run == ".." || strings.ContainsAny(run, `/\`) || !filepath.IsLocal(run) {
		return nil, engine.Errorf(engine.ErrInvalid, "reading the work dir: run id %q is not a plain name", run)
	}
	dir := filepath.Join(w.Root, run)
	errored := ""
	err := filepath.WalkDir(filepath.Join(dir, "cfg"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "errored.tfstate" && d.Type().IsRegular() {
			errored = p
			return fs.SkipAll
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the work dir of run %s: %w", run, err)
	}
	for _, p := range []string{errored, filepath.Join(dir, "snapshot.tfstate")} {
		if p == "" {
			continue
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the work dir of run %s: %w", run, err)
		}
		return b, nil
	}
	return nil, nil
}
