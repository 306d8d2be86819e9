package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/kilolock/kilolock/internal/report"
)

// Jobs of one pull request take turns by what they touch (ADR 0041), with
// PostgreSQL session advisory locks taken by try-lock — a job that cannot
// have its locks at once is snoozed, never left holding a worker:
//
//   - a PR lock ("kb", repository#PR): exclusive for the jobs that change
//     the whole pull request — plans (they supersede the plans of older
//     heads), the close or merge, /kl recover and /kl unfence — and shared
//     for applies by comment or button;
//   - a project lock ("kp", repository#PR/PROJECT), exclusive, for each
//     project an apply works on: two projects of one pull request apply
//     side by side, one project's Terraform work is one job's at a time;
//   - a writer lock ("kw", repository#PR), exclusive and short, waited for
//     (not tried): held around each write of the pull request's check
//     runs, sticky comment and project rows, so that concurrent jobs of
//     one pull request never interleave them (UpsertStickyComment asks
//     its callers to serialise per pull request).
//
// The keys are (class, hashtext(name)): two names with one hash only make
// a job wait when it need not. A lock dies with its connection, so a
// replica that dies frees its locks.
const (
	prLockClass      = 0x6b62 // "kb"
	projectLockClass = 0x6b70 // "kp"
	writerLockClass  = 0x6b77 // "kw"
)

// lockSet is what a job locks: the PR lock exclusive, or shared with the
// project locks of Projects (Every: every project of the pull request, as
// an apply without -p may touch them all). The zero lockSet locks nothing
// (replies, refreshes).
type lockSet struct {
	Exclusive bool
	Projects  []string
	Every     bool
}

// none reports whether s locks nothing.
func (s lockSet) none() bool { return !s.Exclusive && len(s.Projects) == 0 && !s.Every }

// conflicts reports whether two jobs with lock sets s and o cannot run at
// once.
func (s lockSet) conflicts(o lockSet) bool {
	switch {
	case s.none() || o.none():
		return false
	case s.Exclusive || o.Exclusive:
		return true
	case s.Every || o.Every:
		return true
	}
	for _, p := range s.Projects {
		if slices.Contains(o.Projects, p) {
			return true
		}
	}
	return false
}

// jobLocks are the advisory locks of one attempt of a job, all on one
// pooled connection taken when the first is (mu guards the connection:
// the job's progress ticker writes too).
type jobLocks struct {
	pool *pgxpool.Pool
	repo string
	pr   int
	job  int64 // the River job; 0 for a writer lock outside a job

	mu   sync.Mutex
	conn *pgxpool.Conn
	held []lockKey
}

type lockKey struct {
	class  int32
	name   string
	shared bool
}

func (l *jobLocks) prName() string { return fmt.Sprintf("%s#%d", l.repo, l.pr) }

// keys are the advisory locks of s.
func (l *jobLocks) keys(s lockSet) []lockKey {
	if s.none() {
		return nil
	}
	keys := []lockKey{{class: prLockClass, name: l.prName(), shared: !s.Exclusive}}
	if s.Exclusive {
		return keys
	}
	for _, p := range s.Projects {
		keys = append(keys, lockKey{class: projectLockClass, name: l.prName() + "/" + p})
	}
	return keys
}

// connLocked returns the attempt's connection, acquiring it first. Call
// with l.mu held.
func (l *jobLocks) connLocked(ctx context.Context) (*pgxpool.Conn, error) {
	if l.conn != nil {
		return l.conn, nil
	}
	c, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", l.prName(), err)
	}
	if l.job != 0 {
		if _, err := c.Exec(ctx, `SELECT set_config('application_name', $1, false)`, fmt.Sprintf("%s%d", jobConnName, l.job)); err != nil {
			c.Release()
			return nil, fmt.Errorf("naming the lock connection of job %d: %w", l.job, err)
		}
	}
	l.conn = c
	return c, nil
}

// try takes every lock of s, or none: false when another session holds
// one that conflicts (the caller snoozes the job).
func (l *jobLocks) try(ctx context.Context, s lockSet) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	conn, err := l.connLocked(ctx)
	if err != nil {
		return false, err
	}
	var got []lockKey
	for _, k := range l.keys(s) {
		fn := "pg_try_advisory_lock"
		if k.shared {
			fn = "pg_try_advisory_lock_shared"
		}
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT `+fn+`($1, hashtext($2))`, k.class, k.name).Scan(&ok); err != nil {
			l.unlockLocked(got)
			return false, fmt.Errorf("locking %s: %w", k.name, err)
		}
		if !ok {
			l.unlockLocked(got)
			return false, nil
		}
		got = append(got, k)
	}
	l.held = append(l.held, got...)
	return true, nil
}

// unlockLocked releases keys (a failure closes the connection, which
// releases every lock of its session). Call with l.mu held.
func (l *jobLocks) unlockLocked(keys []lockKey) {
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, k := range keys {
		fn := "pg_advisory_unlock"
		if k.shared {
			fn = "pg_advisory_unlock_shared"
		}
		if _, err := l.conn.Exec(ctx, `SELECT `+fn+`($1, hashtext($2))`, k.class, k.name); err != nil {
			l.dropLocked(ctx)
			return
		}
	}
}

// dropLocked closes the connection instead of handing it back to the
// pool: closing the session drops every lock it holds. Call with l.mu
// held.
func (l *jobLocks) dropLocked(ctx context.Context) {
	l.conn.Conn().Close(ctx) //nolint:errcheck // the session ends either way
	l.conn.Release()
	l.conn, l.held = nil, nil
}

// unlockAll releases the job locks the attempt holds (not the writer
// lock, which writing releases itself).
func (l *jobLocks) unlockAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unlockLocked(l.held)
	l.held = nil
}

// close releases every advisory lock of the session — also one a
// cancelled statement may have taken after all — and hands the
// connection back to the pool (or closes it if that fails).
func (l *jobLocks) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.conn.Exec(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
		l.dropLocked(ctx)
		return
	}
	if _, err := l.conn.Exec(ctx, `RESET application_name`); err != nil {
		l.dropLocked(ctx)
		return
	}
	l.conn.Release()
	l.conn, l.held = nil, nil
}

// writerKey marks a context whose goroutine holds the writer lock
// (writing is re-entrant through it).
type writerKey struct{}

// writing runs fn holding the pull request's writer lock, waiting for it
// (it is held only around writes). Nested calls on fn's context run at
// once.
func (l *jobLocks) writing(ctx context.Context, fn func(ctx context.Context) error) error {
	if ctx.Value(writerKey{}) == l {
		return fn(ctx)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	conn, err := l.connLocked(ctx)
	if err != nil {
		return err
	}
	name := l.prName()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext($2))`, writerLockClass, name); err != nil {
		l.dropLocked(context.WithoutCancel(ctx)) // the lock may have been taken as the statement was cancelled
		return fmt.Errorf("waiting to write %s's check runs and comment: %w", name, err)
	}
	defer l.unlockLocked([]lockKey{{class: writerLockClass, name: name}})
	return fn(context.WithValue(ctx, writerKey{}, l))
}

// lockSetOf is the lock set of a job of kind with encoded args, as
// another job reads it from River to say what it is queued behind; the
// job itself locks the same (an apply's Every narrowed to its targets).
func lockSetOf(kind string, args []byte) (lockSet, report.LiveJob, error) {
	var a struct {
		JobBase
		Trigger JobTrigger `json:"trigger"`
		Project string     `json:"project"`
		HeadSHA string     `json:"head_sha"`
		Command Command    `json:"command"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return lockSet{}, report.LiveJob{}, fmt.Errorf("decoding %s job args: %w", kind, err)
	}
	j := report.LiveJob{Ask: jobAsk(a.Trigger), Project: a.Project, Actor: a.Actor, HeadSHA: a.HeadSHA}
	switch kind {
	case KindPlan:
		j.Kind = report.JobPlan
		return lockSet{Exclusive: true}, j, nil
	case KindApply:
		j.Kind = report.JobApply
		if a.Trigger == TriggerMerge || a.Trigger == TriggerClose {
			return lockSet{Exclusive: true}, j, nil
		}
		if a.Project == "" {
			return lockSet{Every: true}, j, nil
		}
		return lockSet{Projects: []string{a.Project}}, j, nil
	case KindReply:
		j.Ask, j.Project = report.AskComment, a.Command.Project
		switch a.Command.Name {
		case CmdRecover:
			j.Kind = report.JobRecover
			return lockSet{Exclusive: true}, j, nil
		case CmdUnfence:
			j.Kind = report.JobUnfence
			return lockSet{Exclusive: true}, j, nil
		}
	}
	return lockSet{}, j, nil
}

// jobAsk is a trigger in report's words.
func jobAsk(t JobTrigger) report.JobAsk {
	switch t {
	case TriggerPush:
		return report.AskPush
	case TriggerRerequest:
		return report.AskRerequest
	case TriggerButton:
		return report.AskButton
	case TriggerMerge:
		return report.AskMerge
	case TriggerClose:
		return report.AskClose
	}
	return report.AskComment
}

// holders are the jobs holding key — a job's lock connection is named
// "klbot job ID" (application_name, also what an operator sees in
// pg_stat_activity), and PostgreSQL's pg_locks says which sessions hold
// the advisory lock — with their lock sets, oldest first (River's job
// list: the args say what each does).
func (b *Bot) holders(ctx context.Context, l *jobLocks, key lockKey) ([]heldJob, error) {
	rows, err := b.db.pool.Query(ctx, `SELECT DISTINCT substr(a.application_name, length($3) + 1)::bigint
		FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND l.classid = $1::bigint::oid AND l.objid = (hashtext($2)::bigint & 4294967295)::oid
		AND a.application_name ~ ('^' || $3 || '[0-9]+$')`, int64(key.class), key.name, jobConnName)
	if err != nil {
		return nil, fmt.Errorf("reading who holds %s: %w", key.name, err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reading who holds %s: %w", key.name, err)
		}
		if id != l.job {
			ids = append(ids, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading who holds %s: %w", key.name, err)
	}
	if len(ids) == 0 || b.river == nil {
		return nil, nil
	}
	res, err := b.river.JobList(ctx, river.NewJobListParams().IDs(ids...).OrderBy(river.JobListOrderByID, river.SortOrderAsc).First(len(ids)))
	if err != nil {
		return nil, fmt.Errorf("reading the jobs holding %s: %w", key.name, err)
	}
	var out []heldJob
	for _, row := range res.Jobs {
		set, live, err := lockSetOf(row.Kind, row.EncodedArgs)
		if err != nil {
			return nil, err
		}
		if row.AttemptedAt != nil {
			live.Started = *row.AttemptedAt
		}
		out = append(out, heldJob{id: row.ID, kind: row.Kind, trigger: live.Ask, set: set, live: live})
	}
	return out, nil
}

// jobConnName prefixes the application_name of a job's lock connection.
const jobConnName = "klbot job "

// heldJob is another job of the pull request holding a lock.
type heldJob struct {
	id      int64
	kind    string
	trigger report.JobAsk
	set     lockSet
	live    report.LiveJob
}

// blocked is why a job did not get its locks: the jobs holding them, and
// by project the apply jobs (asked by comment or button) applying it —
// what a command asking for the same joins.
type blocked struct {
	behind   []report.LiveJob
	applying map[string]heldJob
}

// tryLock takes s by try-lock: nil when the job holds it now, else who
// holds what it could not take.
func (jr *jobRun) tryLock(ctx context.Context, s lockSet) (*blocked, error) {
	ok, err := jr.locks.try(ctx, s)
	if err != nil || ok {
		return nil, err
	}
	bl := &blocked{applying: map[string]heldJob{}}
	seen := map[int64]bool{}
	for _, k := range jr.locks.keys(s) {
		hs, err := jr.b.holders(ctx, jr.locks, k)
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			if k.class == projectLockClass && h.kind == KindApply && (h.trigger == report.AskComment || h.trigger == report.AskButton) {
				bl.applying[strings.TrimPrefix(k.name, jr.locks.prName()+"/")] = h
			}
			if !seen[h.id] {
				seen[h.id] = true
				bl.behind = append(bl.behind, h.live)
			}
		}
	}
	return bl, nil
}
