package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kilolock/kilolock/internal/klyaml"
)

// projectRow is one klbot_projects row: a pull request's project with its
// latest plan and apply runs and the bot's latest note.
type projectRow struct {
	Repo         string
	PR           int
	Project      string
	State        string
	Installation int64
	HeadSHA      string
	Config       klyaml.Project
	PlanRun      string
	ApplyRun     string
	Note         note
	Open         bool
	UpdatedAt    time.Time
}

// note is the bot's latest word on a project, shown in its section of the
// sticky comment: a refusal by a bot rule, a failed plan, a superseded
// plan. Kind decides how the section is marked (a refusal: ⛔).
type note struct {
	Kind noteKind `json:"kind"`
	Text string   `json:"text"` // Markdown, one line (report's Note words)
}

// noteKind is what a note is about.
type noteKind string

// Note kinds.
const (
	noteRefused    noteKind = "refused"    // a bot rule refused an apply, or the state does not exist
	noteFailed     noteKind = "failed"     // the plan failed
	noteSuperseded noteKind = "superseded" // the plan was superseded without an apply
)

// encodeNote is the note column's text: "" for no note, else the note as
// JSON.
func encodeNote(n note) (string, error) {
	if n == (note{}) {
		return "", nil
	}
	b, err := json.Marshal(n)
	return string(b), err
}

// decodeNote reads the note column. A column that is not a JSON object is
// a row written before notes had a kind (its text alone): a refusal then
// began with "⛔", the only kind the sticky comment marks.
func decodeNote(s string) (note, error) {
	if s == "" {
		return note{}, nil
	}
	if !strings.HasPrefix(s, "{") {
		n := note{Kind: noteSuperseded, Text: s}
		if strings.HasPrefix(s, "⛔") {
			n.Kind = noteRefused
		}
		return n, nil
	}
	var n note
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		return note{}, err
	}
	return n, nil
}

// db is klbot's access to its own tables (migrations/postgres/00002_bot.sql).
type db struct {
	pool *pgxpool.Pool
}

func nowNanos() int64 { return time.Now().UTC().UnixNano() }

// recordInstallation stores (or refreshes) an installation.
func (d db) recordInstallation(ctx context.Context, q pgx.Tx, id int64, account string) error {
	_, err := q.Exec(ctx, `INSERT INTO klbot_installations (id, account, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET account = EXCLUDED.account`, id, account, nowNanos())
	if err != nil {
		return fmt.Errorf("recording installation %d: %w", id, err)
	}
	return nil
}

// forgetInstallation deletes an installation.
func (d db) forgetInstallation(ctx context.Context, q pgx.Tx, id int64) error {
	if _, err := q.Exec(ctx, `DELETE FROM klbot_installations WHERE id = $1`, id); err != nil {
		return fmt.Errorf("forgetting installation %d: %w", id, err)
	}
	return nil
}

// checkRunID returns the check run klbot made for (repo, sha, name), if any.
func (d db) checkRunID(ctx context.Context, repo, sha, name string) (int64, bool, error) {
	var id int64
	err := d.pool.QueryRow(ctx, `SELECT check_run_id FROM klbot_check_runs WHERE repo = $1 AND head_sha = $2 AND name = $3`,
		repo, sha, name).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading check run %q of %s@%s: %w", name, repo, sha, err)
	}
	return id, true, nil
}

// saveCheckRunID records the check run made for (repo, sha, name).
func (d db) saveCheckRunID(ctx context.Context, repo, sha, name string, id int64) error {
	_, err := d.pool.Exec(ctx, `INSERT INTO klbot_check_runs (repo, head_sha, name, check_run_id) VALUES ($1, $2, $3, $4)
		ON CONFLICT (repo, head_sha, name) DO UPDATE SET check_run_id = EXCLUDED.check_run_id`, repo, sha, name, id)
	if err != nil {
		return fmt.Errorf("recording check run %q of %s@%s: %w", name, repo, sha, err)
	}
	return nil
}

const projectCols = `repo, pr, project, state, installation, head_sha, config, plan_run, apply_run, note, open, updated_at`

func scanProject(row pgx.Row) (projectRow, error) {
	var p projectRow
	var cfg, nt string
	var open, updated int64
	if err := row.Scan(&p.Repo, &p.PR, &p.Project, &p.State, &p.Installation, &p.HeadSHA, &cfg, &p.PlanRun,
		&p.ApplyRun, &nt, &open, &updated); err != nil {
		return projectRow{}, err
	}
	if err := json.Unmarshal([]byte(cfg), &p.Config); err != nil {
		return projectRow{}, fmt.Errorf("decoding project %s of %s#%d: %w", p.Project, p.Repo, p.PR, err)
	}
	n, err := decodeNote(nt)
	if err != nil {
		return projectRow{}, fmt.Errorf("decoding the note of project %s of %s#%d: %w", p.Project, p.Repo, p.PR, err)
	}
	p.Note = n
	p.Open, p.UpdatedAt = open == 1, time.Unix(0, updated).UTC()
	return p, nil
}

// projects returns the project rows of a pull request, by project name.
func (d db) projects(ctx context.Context, repo string, pr int) ([]projectRow, error) {
	rows, err := d.pool.Query(ctx, `SELECT `+projectCols+` FROM klbot_projects WHERE repo = $1 AND pr = $2 ORDER BY project`, repo, pr)
	if err != nil {
		return nil, fmt.Errorf("reading projects of %s#%d: %w", repo, pr, err)
	}
	defer rows.Close()
	var out []projectRow
	for rows.Next() {
		p, err := scanProject(rows)
		if err != nil {
			return nil, fmt.Errorf("reading projects of %s#%d: %w", repo, pr, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading projects of %s#%d: %w", repo, pr, err)
	}
	return out, nil
}

// openPRsOnState lists (repo, pr, installation) of open pull requests with
// a project on state, other than (exceptRepo, exceptPR).
func (d db) openPRsOnState(ctx context.Context, state, exceptRepo string, exceptPR int) ([]projectRow, error) {
	rows, err := d.pool.Query(ctx, `SELECT DISTINCT repo, pr, installation FROM klbot_projects
		WHERE state = $1 AND open = 1 AND NOT (repo = $2 AND pr = $3) ORDER BY repo, pr`, state, exceptRepo, exceptPR)
	if err != nil {
		return nil, fmt.Errorf("listing open pull requests on state %s: %w", state, err)
	}
	defer rows.Close()
	var out []projectRow
	for rows.Next() {
		var p projectRow
		if err := rows.Scan(&p.Repo, &p.PR, &p.Installation); err != nil {
			return nil, fmt.Errorf("listing open pull requests on state %s: %w", state, err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// saveProject inserts or replaces a project row.
func (d db) saveProject(ctx context.Context, p projectRow) error {
	cfg, err := json.Marshal(p.Config)
	if err != nil {
		return fmt.Errorf("encoding project %s: %w", p.Project, err)
	}
	nt, err := encodeNote(p.Note)
	if err != nil {
		return fmt.Errorf("encoding the note of project %s: %w", p.Project, err)
	}
	open := 0
	if p.Open {
		open = 1
	}
	_, err = d.pool.Exec(ctx, `INSERT INTO klbot_projects (`+projectCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (repo, pr, project) DO UPDATE SET state = EXCLUDED.state, installation = EXCLUDED.installation,
		head_sha = EXCLUDED.head_sha, config = EXCLUDED.config, plan_run = EXCLUDED.plan_run, apply_run = EXCLUDED.apply_run,
		note = EXCLUDED.note, open = EXCLUDED.open, updated_at = EXCLUDED.updated_at`,
		p.Repo, p.PR, p.Project, p.State, p.Installation, p.HeadSHA, string(cfg), p.PlanRun, p.ApplyRun, nt, open, nowNanos())
	if err != nil {
		return fmt.Errorf("saving project %s of %s#%d: %w", p.Project, p.Repo, p.PR, err)
	}
	return nil
}

// closePR marks every project row of a pull request closed.
func (d db) closePR(ctx context.Context, repo string, pr int) error {
	if _, err := d.pool.Exec(ctx, `UPDATE klbot_projects SET open = 0, updated_at = $3 WHERE repo = $1 AND pr = $2`, repo, pr, nowNanos()); err != nil {
		return fmt.Errorf("closing %s#%d: %w", repo, pr, err)
	}
	return nil
}

// claimRefusalReply decides whether a refusal of login on pull request
// (repo, pr) gets a reply (klbot_refusal_replies): true, and the row set
// to key and now, when klbot has not replied to login on that pull
// request within window, or when its last such reply was key's (a retry
// of the same job edits its own reply); false otherwise (issue 11 §1: a
// reply counts against GitHub's content-creation limit, and anyone can
// comment).
func (d db) claimRefusalReply(ctx context.Context, repo string, pr int, login, key string, window time.Duration) (bool, error) {
	now := nowNanos()
	tag, err := d.pool.Exec(ctx, `INSERT INTO klbot_refusal_replies (repo, pr, login, reply_key, replied_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (repo, pr, login) DO UPDATE SET reply_key = EXCLUDED.reply_key, replied_at = EXCLUDED.replied_at
		WHERE klbot_refusal_replies.replied_at <= $6 OR klbot_refusal_replies.reply_key = EXCLUDED.reply_key`,
		repo, pr, login, key, now, now-window.Nanoseconds())
	if err != nil {
		return false, fmt.Errorf("recording the refusal reply to %s on %s#%d: %w", login, repo, pr, err)
	}
	return tag.RowsAffected() == 1, nil
}
