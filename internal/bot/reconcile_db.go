package bot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kilolock/kilolock/internal/engine"
)

// watchedProjects returns the project rows the reconcile job looks at,
// ordered by repository, pull request and project: those of open pull
// requests, and those whose apply was last reported unsettled
// (klbot_apply_reports.unsettled: recoverable or fenced), whatever their
// pull request's state — `kl run recover` may come after the close.
func (d db) watchedProjects(ctx context.Context) ([]projectRow, error) {
	rows, err := d.pool.Query(ctx, `SELECT `+projectCols+` FROM klbot_projects p WHERE p.open = 1 OR EXISTS (
		SELECT 1 FROM klbot_apply_reports a WHERE a.repo = p.repo AND a.pr = p.pr AND a.project = p.project AND a.unsettled = 1)
		ORDER BY repo, pr, project`)
	if err != nil {
		return nil, fmt.Errorf("listing the projects to reconcile: %w", err)
	}
	defer rows.Close()
	var out []projectRow
	for rows.Next() {
		p, err := scanProject(rows)
		if err != nil {
			return nil, fmt.Errorf("listing the projects to reconcile: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the projects to reconcile: %w", err)
	}
	return out, nil
}

// projectOfPlan returns the project row whose latest plan is plan run id;
// false when klbot tracks no such plan (a `kl plan`, or a plan replaced).
func (d db) projectOfPlan(ctx context.Context, id string) (projectRow, bool, error) {
	p, err := scanProject(d.pool.QueryRow(ctx, `SELECT `+projectCols+` FROM klbot_projects WHERE plan_run = $1 ORDER BY updated_at DESC LIMIT 1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return projectRow{}, false, nil
	}
	if err != nil {
		return projectRow{}, false, fmt.Errorf("reading the project of plan %s: %w", id, err)
	}
	return p, true, nil
}

// applyReport is one klbot_apply_reports row: the apply run last reported
// for a project, and its facts as reported (reportedFacts).
type applyReport struct {
	run, facts string
}

// applyReports returns the reports of a pull request's projects, by
// project.
func (d db) applyReports(ctx context.Context, repo string, pr int) (map[string]applyReport, error) {
	rows, err := d.pool.Query(ctx, `SELECT project, apply_run, reported FROM klbot_apply_reports WHERE repo = $1 AND pr = $2`, repo, pr)
	if err != nil {
		return nil, fmt.Errorf("reading the apply reports of %s#%d: %w", repo, pr, err)
	}
	defer rows.Close()
	out := map[string]applyReport{}
	for rows.Next() {
		var project string
		var r applyReport
		if err := rows.Scan(&project, &r.run, &r.facts); err != nil {
			return nil, fmt.Errorf("reading the apply reports of %s#%d: %w", repo, pr, err)
		}
		out[project] = r
	}
	return out, rows.Err()
}

// noteApplyReported records that apply run a was reported for project row
// r as it is now (reportedFacts), and whether it is unsettled.
func (d db) noteApplyReported(ctx context.Context, r projectRow, a engine.Run) error {
	unsettled := 0
	if applyUnsettled(a) {
		unsettled = 1
	}
	_, err := d.pool.Exec(ctx, `INSERT INTO klbot_apply_reports (repo, pr, project, apply_run, reported, unsettled, reported_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (repo, pr, project) DO UPDATE SET apply_run = EXCLUDED.apply_run,
		reported = EXCLUDED.reported, unsettled = EXCLUDED.unsettled, reported_at = EXCLUDED.reported_at`,
		r.Repo, r.PR, r.Project, a.ID, reportedFacts(a), unsettled, nowNanos())
	if err != nil {
		return fmt.Errorf("recording the report of apply %s of %s#%d: %w", a.ID, r.Repo, r.PR, err)
	}
	return nil
}

// reportedFacts are the facts of an ended apply run its report shows and
// that can change after it ended: its status and end, the version it
// committed (a recovery adds one), whether `kl run recover` still applies,
// its fence and how it was lifted.
func reportedFacts(a engine.Run) string {
	var cause engine.Cause
	var lift engine.Lift
	recoverable, fenced := false, 0
	if a.End != nil {
		cause, lift, recoverable, fenced = a.End.Cause, a.End.Lifted, a.End.Recoverable, len(a.End.Fenced)
	}
	return fmt.Sprintf("%s %s committed=%d recoverable=%t fenced=%d lifted=%s", a.Status, cause, a.CommittedSerial, recoverable, fenced, lift)
}

// applyUnsettled reports whether something outside klbot may still change
// ended apply run a: it is recoverable, or it holds a fence.
func applyUnsettled(a engine.Run) bool {
	return a.End != nil && a.CommittedSerial == 0 && (a.End.Recoverable || (len(a.End.Fenced) > 0 && a.End.Lifted == ""))
}

// reconcileLock takes the pull request's lock (lockPR's advisory lock)
// if it is free: ok false when a job of the pull request holds it — the
// reconcile job never waits for one.
func (d db) reconcileLock(ctx context.Context, repo string, pr int) (unlock func(), ok bool, err error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("locking %s#%d: %w", repo, pr, err)
	}
	key := fmt.Sprintf("%s#%d", repo, pr)
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext($2))`, prLockClass, key).Scan(&ok); err != nil || !ok {
		conn.Release()
		if err != nil {
			return nil, false, fmt.Errorf("locking %s#%d: %w", repo, pr, err)
		}
		return nil, false, nil
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1, hashtext($2))`, prLockClass, key); err != nil {
			conn.Conn().Close(ctx) //nolint:errcheck // closing the session drops the lock
		}
		conn.Release()
	}, true, nil
}

// closeJobPending reports whether an apply job of trigger merge or close
// for pull request (repo, pr) is unfinished in River (available, running,
// retryable, scheduled — a snoozed job is scheduled — or pending): its
// closed delivery came, and that job closes the pull request's rows.
func (d db) closeJobPending(ctx context.Context, repo string, pr int) (bool, error) {
	var n int
	err := d.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1
		AND state IN ('available', 'running', 'retryable', 'scheduled', 'pending')
		AND args->>'repo' = $2 AND (args->>'pr')::bigint = $3 AND args->>'trigger' IN ($4, $5)`,
		KindApply, repo, pr, string(TriggerMerge), string(TriggerClose)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("reading the close jobs of %s#%d: %w", repo, pr, err)
	}
	return n > 0, nil
}
