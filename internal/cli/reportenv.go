package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
)

// ghTarget is where a report goes on GitHub.
type ghTarget struct {
	repo github.Repo
	pr   int    // 0: no pull request, no comment
	sha  string // commit of the check run
	// askHead: the pull request came from an issue_comment event, which
	// does not carry the head commit; GitHub is asked for it.
	askHead bool
	// fork is the head repository of a pull request from a fork ("" when
	// not a fork, or unknown).
	fork string
	// runPage is the signed link of the run's page on a kl serve that
	// shares the store (KL_PUBLIC_URL, KL_LINK_KEY; ADR 0064); "": none.
	runPage string
}

// actionsEvent is the part of a GitHub Actions event payload
// ($GITHUB_EVENT_PATH) that names a pull request: pull_request and
// pull_request_target carry pull_request; issue_comment on a pull request
// carries issue.pull_request.
type actionsEvent struct {
	PullRequest *struct {
		Number int `json:"number"`
		Head   struct {
			SHA  string    `json:"sha"`
			Repo *repoName `json:"repo"`
		} `json:"head"`
		Base struct {
			Repo *repoName `json:"repo"`
		} `json:"base"`
	} `json:"pull_request"`
	Issue *struct {
		Number      int             `json:"number"`
		PullRequest json.RawMessage `json:"pull_request"`
	} `json:"issue"`
}

type repoName struct {
	FullName string `json:"full_name"`
}

// ghTargetOf resolves the repository, pull request and commit from the
// flags, then the Actions environment.
func (a *app) ghTargetOf(f ghReportFlags) (ghTarget, error) {
	var t ghTarget
	full := f.repo
	if full == "" {
		full = a.getenv("GITHUB_REPOSITORY")
	}
	if full == "" {
		return t, errors.New("reporting to GitHub: no repository: pass --repo OWNER/NAME or set GITHUB_REPOSITORY")
	}
	repo, err := github.ParseRepo(full)
	if err != nil {
		return t, fmt.Errorf("reporting to GitHub: %w", err)
	}
	t.repo = repo
	var ev actionsEvent
	if p := a.getenv("GITHUB_EVENT_PATH"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return t, fmt.Errorf("reading the Actions event %s: %w", p, err)
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			return t, fmt.Errorf("reading the Actions event %s: %w", p, err)
		}
	}
	var eventSHA string
	switch {
	case ev.PullRequest != nil:
		t.pr, eventSHA = ev.PullRequest.Number, ev.PullRequest.Head.SHA
		if h, b := ev.PullRequest.Head.Repo, ev.PullRequest.Base.Repo; h != nil && b != nil && !strings.EqualFold(h.FullName, b.FullName) {
			t.fork = h.FullName
		}
	case ev.Issue != nil && len(ev.Issue.PullRequest) > 0 && string(ev.Issue.PullRequest) != "null":
		t.pr, t.askHead = ev.Issue.Number, true
	}
	if f.pr != 0 {
		if f.pr < 0 {
			return t, fmt.Errorf("reporting to GitHub: --pr %d is not a pull request number", f.pr)
		}
		if f.pr != t.pr {
			eventSHA, t.askHead, t.fork = "", true, ""
		}
		t.pr = f.pr
	}
	switch {
	case f.sha != "":
		t.sha, t.askHead = f.sha, false
	case eventSHA != "":
		t.sha = eventSHA
	case t.askHead:
		// asked from GitHub once there is a client
	default:
		t.sha = a.getenv("GITHUB_SHA")
	}
	if t.sha == "" && !t.askHead {
		return t, fmt.Errorf("reporting to GitHub: %w for the check run: pass --sha SHA or set GITHUB_SHA", errNoCommit)
	}
	return t, nil
}

// adoptRunPR makes the sticky comment go to the pull request run names,
// when the event names none and --pr is not given: an apply on push (the
// GitHub Action at merge) updates the comment of the pull request its
// plan was made for (issue 15 §4). Only a pull request of the reported
// repository is taken; the check run stays on the event's commit.
func (t *ghTarget) adoptRunPR(run engine.Run, f ghReportFlags) {
	if t.pr != 0 || f.pr != 0 || run.PR == nil || run.PR.Number <= 0 || !strings.EqualFold(run.PR.Repo, t.repo.String()) {
		return
	}
	t.pr = run.PR.Number
}

// errNoCommit: ghTargetOf found no commit (kl plan --pr actions needs none).
var errNoCommit = errors.New("no commit")

// runIDFrom reads the run id from a `kl plan --json` or `kl apply --json`
// document (its "run"."id").
func runIDFrom(ctx context.Context, path string, stdin io.Reader) (string, error) {
	b, err := readInput(ctx, path, stdin)
	if err != nil {
		return "", err
	}
	var doc struct {
		Schema string `json:"schema"`
		Run    *struct {
			ID string `json:"id"`
		} `json:"run"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return "", fmt.Errorf("reading the run id from %s: not a kl --json document: %w", path, err)
	}
	if doc.Run == nil || doc.Run.ID == "" {
		return "", fmt.Errorf("reading the run id from %s: no run.id in it (want the output of kl plan --json or kl apply --json)", path)
	}
	return doc.Run.ID, nil
}

// minSummaryRoom is the least room worth a report: its title and verdict.
const minSummaryRoom = 256

// appendSummary appends md to the job summary file, fitted so that the
// file stays within StepSummaryLimit (ghMarkdown.document: a plan's diff
// is cut last, ADR 0044), and
// returns the bytes written; errSummaryFull when the step filled it
// already.
func appendSummary(path string, md ghMarkdown) (int, error) {
	var have int64
	if fi, err := os.Stat(path); err == nil {
		have = fi.Size()
	}
	room := StepSummaryLimit - int(have) - 1
	if room < minSummaryRoom {
		return 0, fmt.Errorf("appending to the job summary %s: it holds %d bytes and GitHub shows at most %d per step: %w",
			path, have, StepSummaryLimit, errSummaryFull)
	}
	body := "\n" + md.document(room)
	if err := appendFile(path, body); err != nil {
		return 0, fmt.Errorf("appending to the job summary %s: %w", path, err)
	}
	return len(body), nil
}

// appendOutputs appends step outputs as name=value lines ($GITHUB_OUTPUT).
// Values are single-line words; an empty path writes nothing.
func appendOutputs(path string, kv [][2]string) error {
	if path == "" || len(kv) == 0 {
		return nil
	}
	var b strings.Builder
	for _, p := range kv {
		if strings.ContainsAny(p[1], "\r\n") {
			return fmt.Errorf("writing step output %s: value holds a line break", p[0])
		}
		b.WriteString(p[0] + "=" + p[1] + "\n")
	}
	if err := appendFile(path, b.String()); err != nil {
		return fmt.Errorf("writing step outputs to %s: %w", path, err)
	}
	return nil
}

func appendFile(path, s string) error {
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(fh, s); err != nil {
		_ = fh.Close()
		return err
	}
	return fh.Close()
}
