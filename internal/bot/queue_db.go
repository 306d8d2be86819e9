package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// groupPR is a pull request of a judged merge group, as
// klbot_merge_groups.prs keeps it (migration 00015).
type groupPR struct {
	PR   int    `json:"pr"`
	Head string `json:"head"`
}

// saveGroup records the merge group of head, judged now, with its pull
// requests in queue order (a re-run replaces them; a destroyed reason
// recorded already stays).
func (d db) saveGroup(ctx context.Context, repo, head, baseRef string, prs []groupPR) error {
	js, err := json.Marshal(prs)
	if err != nil {
		return fmt.Errorf("encoding the merge group %s of %s: %w", shortSHA(head), repo, err)
	}
	_, err = d.pool.Exec(ctx, `INSERT INTO klbot_merge_groups (repo, head_sha, base_ref, prs, judged_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (repo, head_sha) DO UPDATE SET base_ref = EXCLUDED.base_ref, prs = EXCLUDED.prs, judged_at = EXCLUDED.judged_at`,
		repo, head, baseRef, string(js), nowNanos())
	if err != nil {
		return fmt.Errorf("recording the merge group %s of %s: %w", shortSHA(head), repo, err)
	}
	return nil
}

// destroyGroup records GitHub's reason for destroying the merge group of
// head (a group klbot has not judged yet is recorded too, so that its
// judging job, if it runs later, judges nothing).
func (d db) destroyGroup(ctx context.Context, repo, head, baseRef, reason string) error {
	_, err := d.pool.Exec(ctx, `INSERT INTO klbot_merge_groups (repo, head_sha, base_ref, prs, judged_at, destroyed) VALUES ($1, $2, $3, '[]', $4, $5)
		ON CONFLICT (repo, head_sha) DO UPDATE SET destroyed = EXCLUDED.destroyed`, repo, head, baseRef, nowNanos(), reason)
	if err != nil {
		return fmt.Errorf("recording the end of the merge group %s of %s: %w", shortSHA(head), repo, err)
	}
	return nil
}

// groupDestroyed is GitHub's reason for destroying the merge group of
// head, "" while it lives (or klbot never heard of it).
func (d db) groupDestroyed(ctx context.Context, repo, head string) (string, error) {
	var reason string
	err := d.pool.QueryRow(ctx, `SELECT destroyed FROM klbot_merge_groups WHERE repo = $1 AND head_sha = $2`, repo, head).Scan(&reason)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the merge group %s of %s: %w", shortSHA(head), repo, err)
	}
	return reason, nil
}

// aheadInGroup returns the pull requests ahead of pull request pr (at
// commit head) in the latest judged merge group holding it at that
// commit, in queue order; none when no group holds it.
func (d db) aheadInGroup(ctx context.Context, repo string, pr int, head string) ([]groupPR, error) {
	rows, err := d.pool.Query(ctx, `SELECT prs FROM klbot_merge_groups WHERE repo = $1 AND prs LIKE $2 ORDER BY judged_at DESC`,
		repo, fmt.Sprintf(`%%{"pr":%d,"head":"%s"}%%`, pr, head))
	if err != nil {
		return nil, fmt.Errorf("reading the merge groups of %s#%d: %w", repo, pr, err)
	}
	defer rows.Close()
	for rows.Next() {
		var js string
		if err := rows.Scan(&js); err != nil {
			return nil, fmt.Errorf("reading the merge groups of %s#%d: %w", repo, pr, err)
		}
		var prs []groupPR
		if err := json.Unmarshal([]byte(js), &prs); err != nil {
			return nil, fmt.Errorf("decoding a merge group of %s#%d: %w", repo, pr, err)
		}
		for i, p := range prs {
			if p.PR == pr && p.Head == head {
				return prs[:i], nil
			}
		}
	}
	return nil, rows.Err()
}

// shortSHA abbreviates a commit SHA for messages.
func shortSHA(s string) string {
	if len(s) > 7 {
		return s[:7]
	}
	return s
}
