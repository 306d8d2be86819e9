package bot

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/tarball"
)

// mergeTree is the checkout of a merged pull request's merge commit, made
// once per apply job for the re-plans of its merge-time applies (ADR
// 0062): root is "" when there is none to use.
type mergeTree struct {
	tried bool
	root  string
}

// remove deletes the checkout (none: nothing).
func (m *mergeTree) remove() {
	if m.root != "" {
		os.RemoveAll(filepath.Dir(m.root))
		m.root = ""
	}
}

// mergeCommit is the configuration of the merged pull request's merge
// commit (GitHub's merge_commit_sha: the merge, squash or last rebased
// commit, or its merge group's commit in a merge queue) for project r, for
// engine.ApplyInput.MergeCommit: a re-plan of the merge-time apply plans
// it instead of the reviewed configuration, which lacks what the base
// gained before the merge (ADR 0062). Nil — the re-plan plans the reviewed
// configuration, as before — when GitHub names no merge commit, has no
// archive of it (404) or its archive is refused as unsafe, or when the
// project's directory is not in it; each logged. Other errors (GitHub
// failing) are returned: the job is retried.
func (b *Bot) mergeCommit(ctx context.Context, x *applyCtx, r projectRow) (*engine.MergeCommit, error) {
	sha := x.pr.MergeCommitSHA
	if !x.pr.Merged || sha == "" {
		return nil, nil
	}
	log := logOf(ctx).With("project", r.Project, "merge_commit", sha)
	if !x.merge.tried {
		root, err := b.fetchTree(ctx, x.c, x.repo, sha)
		switch {
		case errors.Is(err, github.ErrNotFound), errors.Is(err, tarball.ErrUnsafe):
			log.Warn("the merge commit cannot be checked out: a re-plan plans the reviewed configuration", "err", err)
		case err != nil:
			return nil, err
		}
		x.merge.tried, x.merge.root = true, root
	}
	if x.merge.root == "" {
		return nil, nil
	}
	dir := filepath.Join(x.merge.root, filepath.FromSlash(r.Config.Dir))
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		log.Warn("the project's directory is not in the merge commit: a re-plan plans the reviewed configuration", "dir", r.Config.Dir)
		return nil, nil
	}
	return &engine.MergeCommit{SHA: sha, Dir: dir}, nil
}
