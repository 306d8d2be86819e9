package bot

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/kilolock/kilolock/internal/closure"
	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/klyaml"
	"github.com/kilolock/kilolock/internal/tarball"
)

// The lane of a pull request's plan (kl.yaml lane:, ADR 0069, ADR 0070).
// A native or auto plan is scoped to the pull request's changed files
// against the base commit's tree; where klbot cannot give the whole list
// of changed files, the engine falls back to the terraform lane with the
// reason (engine.PlanInput.ScopeIncomplete), never plans a narrower scope.

// partialListing is why a pull request's listed files (listed of them)
// are not all it changes (changed: GitHub's changed_files), or "" when
// they are: GitHub lists at most github.MaxListedFiles.
func partialListing(listed, changed int) string {
	if listed < changed || (changed == 0 && listed >= github.MaxListedFiles) {
		return fmt.Sprintf("GitHub lists %d of the pull request's %d changed files (at most %d): the changed files are not all known",
			listed, max(changed, listed), github.MaxListedFiles)
	}
	return ""
}

// laneInput sets in's lane from project p (terraform when it says none)
// and, for the native and auto lanes, its scope: every changed file of co
// inside p.Dir, relative to it (as kl plan --changed-file), and BaseDir,
// p.Dir in the base commit's tree (co.baseTree), which holds each file's
// old content — or ScopeIncomplete, why that scope would not be the whole
// change: the listing is partial (co.partial), a changed file outside
// p.Dir may change the project (outsideChange), or the base's tree cannot
// be had. Other files outside p.Dir are not the project's and are left out.
func (b *Bot) laneInput(ctx context.Context, c Client, repo github.Repo, co *checkout, p klyaml.Project, in *engine.PlanInput) error {
	in.Lane = p.Lane
	if in.Lane == "" || in.Lane == engine.LaneChoiceTerraform {
		in.Lane = engine.LaneChoiceTerraform
		return nil
	}
	if co.partial != "" {
		in.ScopeIncomplete = co.partial
		return nil
	}
	var files []string
	var sources []string // the head's module sources outside p.Dir, once needed
	loaded := false
	for _, f := range co.files {
		f = path.Clean(f)
		if rel, ok := within(p.Dir, f); ok {
			files = append(files, rel)
			continue
		}
		if !loaded && co.root != "" {
			sources, loaded = outsideSources(filepath.Join(co.root, filepath.FromSlash(p.Dir))), true
		}
		if why := outsideChange(co.root, p, f, sources, otherDirs(co.config, p)); why != "" {
			in.ScopeIncomplete = why
			return nil
		}
	}
	base, why, err := b.baseTree(ctx, c, repo, co)
	if err != nil || why != "" {
		in.ScopeIncomplete = why
		return err
	}
	in.ChangedFiles, in.BaseDir = files, filepath.Join(base, filepath.FromSlash(p.Dir))
	in.ListedByPR = true // GitHub's list, against the merge base; the base tree is the base branch's
	return nil
}

// outsideChange is why changed file f (repository-relative), outside
// project p's dir, may change what p plans although the closure cannot see
// it (the closure sees only the root module directory), or "" when it is
// not the project's: f matches p's when_modified; f is a Terraform file
// (.tf, .tf.json, .tfvars, .tfvars.json: a module the configuration calls,
// or one such a module calls) outside the dirs of the other projects
// (others: another root module's files are its own); or f lies in a module
// source outside the dir that the configuration calls (sources, absolute;
// root is the checkout's root), another project's dir included.
func outsideChange(root string, p klyaml.Project, f string, sources, others []string) string {
	out := fmt.Sprintf("%s changed outside the project's dir %s", f, p.Dir)
	if len(p.Touches([]string{f})) > 0 {
		return out + " (it matches when_modified): the closure sees only the root module directory"
	}
	inOther := false
	for _, d := range others {
		if _, ok := within(d, f); ok {
			inOther = true
		}
	}
	for _, ext := range []string{".tf", ".tf.json", ".tfvars", ".tfvars.json"} {
		if strings.HasSuffix(f, ext) && !inOther {
			return out + ": a Terraform file there may be a module the configuration calls, which the closure does not see"
		}
	}
	abs := filepath.Join(root, filepath.FromSlash(f))
	for _, src := range sources {
		if rel, err := filepath.Rel(src, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return out + ", in the source of a module the configuration calls: the closure sees only the root module directory"
		}
	}
	return ""
}

// otherDirs are the dirs of cfg's projects other than p (none for a nil
// cfg), the repository root's (".") left out: every file is inside it.
func otherDirs(cfg *klyaml.Config, p klyaml.Project) []string {
	var out []string
	if cfg == nil {
		return nil
	}
	for _, o := range cfg.Projects {
		if o.Name != p.Name && o.Dir != p.Dir && o.Dir != "." {
			out = append(out, o.Dir)
		}
	}
	return out
}

// outsideSources are the module sources outside dir that the
// configuration in dir calls (closure.Config.OutsideSources), or none when
// it cannot be loaded: the engine's closure then falls back on its own.
func outsideSources(dir string) []string {
	cfg, err := closure.Load(dir)
	if err != nil {
		return nil
	}
	return cfg.OutsideSources()
}

// within is file (a cleaned repository-relative slash path) relative to
// dir, and whether it is inside dir.
func within(dir, file string) (string, bool) {
	if dir == "." {
		return file, true
	}
	rel, ok := strings.CutPrefix(file, dir+"/")
	return rel, ok && rel != ""
}

// baseTree is the root of the pull request's base commit's tree (GitHub's
// base.sha), downloaded and extracted once per checkout (fetchTree; removed
// with it), or why it cannot be had: GitHub names no base commit, or its
// archive was refused (tarball.ErrUnsafe). Other errors are GitHub's.
func (b *Bot) baseTree(ctx context.Context, c Client, repo github.Repo, co *checkout) (string, string, error) {
	if co.baseRoot != "" {
		return co.baseRoot, "", nil
	}
	if co.pr.BaseSHA == "" {
		return "", "GitHub names no base commit of the pull request to compare the changed files with", nil
	}
	root, err := b.fetchTree(ctx, c, repo, co.pr.BaseSHA)
	if errors.Is(err, tarball.ErrUnsafe) {
		return "", "the archive of the base commit " + co.pr.BaseSHA + " was refused: " + err.Error(), nil
	}
	if err != nil {
		return "", "", err
	}
	co.baseRoot = root
	return root, "", nil
}
