// Package report renders Kilolock's operator views (ADR 0033 D6) — plan,
// apply, run story, history, since-plan, runs, why, status, footprint,
// states and state init — four ways from one report model per view:
//
//   - Text for a terminal (`kl`): plain and aligned, with ANSI colour only
//     when Options.Color says the output is a TTY;
//   - Markdown for GitHub (check-run summary, sticky PR comment, Actions job
//     summary), cut to GitHub's limits by Truncate (docs/github.md);
//   - JSON: one versioned document per view ("schema": "kilolock/<view>/v1",
//     documented in docs/json.md; fields are only ever added within v1).
//   - HTML: a fragment for the run and state pages of internal/web
//     (html.go, ADR 0064): the text's words, escaped, tones as classes.
//
// The words of every fact, marker and since-plan class are written once
// (words.go) as sentences of styled spans; the text, Markdown and HTML
// renderers only lay them out, and the JSON documents carry the same words in their
// "text" fields. The three since-plan classes always look different (ADR
// D3, D8): "=" independent, "~" plan input changed, "!" planned target
// changed, and "*" for the version a plan's own apply produced.
//
// Output is deterministic: views keep the engine's order (which is itself
// sorted: address sets, serials, marker time) and never range over a map
// unsorted, so golden files are stable.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// Format selects how a view is rendered.
type Format int

// Formats.
const (
	// Text is for a terminal; ANSI colour only with Options.Color.
	Text Format = iota
	// Markdown is GitHub-flavoured Markdown for check runs, PR comments and
	// Actions job summaries.
	Markdown
	// JSON is the versioned document of docs/json.md.
	JSON
	// HTML is a fragment (an <article>) for the web pages of internal/web
	// (ADR 0064): the same words as Text, escaped, tones as CSS classes.
	HTML
)

// String returns "text", "markdown" or "json".
func (f Format) String() string {
	switch f {
	case Text:
		return "text"
	case Markdown:
		return "markdown"
	case JSON:
		return "json"
	case HTML:
		return "html"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// ParseFormat parses a --format flag value: "text", "markdown" (or "md")
// or "json".
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "text", "":
		return Text, nil
	case "markdown", "md":
		return Markdown, nil
	case "json":
		return JSON, nil
	}
	return Text, fmt.Errorf("parsing output format %q: want text, markdown or json", s)
}

// Options says how to render a view.
type Options struct {
	Format Format
	// Color enables ANSI colour in Text output. Set it only when the output
	// is a terminal; it is ignored by Markdown and JSON.
	Color bool
	// Now, when set, makes Runs and Status print relative ages ("5m ago")
	// next to times. Zero prints times only.
	Now time.Time
	// RunURL, when set, links run ids in Markdown and HTML to the page it
	// returns. It may be nil (run ids are code spans). internal/web sets
	// it to the run pages' paths; klbot's Markdown sets none yet (its
	// check runs link their own run's signed page as details_url, ADR
	// 0064): a link must not point at a page that does not open (issue 11
	// §16).
	RunURL func(runID string) string
	// MaxMarkdown, when > 0, cuts Markdown output with Truncate to at most
	// this many bytes (GitHub: check-run summary 65535, comment 65536).
	MaxMarkdown int
	// HeadingLevel is the level of a Markdown view's first heading (1–6;
	// 0 is 3, "###"); its sections are one level below. klbot nests views
	// in its sticky comment at level 5.
	HeadingLevel int
	// Commands, when set, says the views are read on a pull request
	// where klbot answers comment commands for project Commands.Project:
	// the next steps they name are those comments (`/kl apply -p app`),
	// not kl's CLI commands (`kl apply RUN`), which kl's own output keeps.
	Commands *Commands
}

// Commands are klbot's pull-request comment commands for one project
// (klbot's grammar: internal/bot ParseCommand). A view read on pull
// request PR about project Project names, for each next step, the comment
// that does it there: `/kl apply -p app`, `/kl plan -p app`, `/kl recover
// -p app`, `/kl unfence -p app -- REASON` — or, for a run of another pull
// request, the comment on that one ("`/kl recover` on acme/infra#4"). A
// run made with kl outside any pull request keeps kl's command: no comment
// reaches it (issue 11 §9).
type Commands struct {
	PR      *engine.PullRequest // the pull request the view is read on; nil: any
	Project string              // the kl.yaml project the view is about
	// Of is the pull request of the view's run when it is not PR (a
	// "/kl why RUN" of another pull request): its comments are made there,
	// "`/kl plan -p app` on acme/infra#3". nil: the run is PR's.
	Of *engine.PullRequest
	// RevertFail is the project's `on_revert: fail` (kl.yaml, ADR 0046):
	// the next step of a plan that would undo an earlier change is to
	// bring the branch up to date, not `/kl apply`, which is refused.
	RevertFail bool
}

// applyCmd is the command that applies plan run plan: `/kl apply -p P`
// on a pull request, else `kl apply PLAN`.
func (o Options) applyCmd(plan string) string {
	if o.Commands != nil {
		return "/kl apply -p " + o.Commands.Project
	}
	return "kl apply " + plan
}

// JSON schema identifiers, one per view (docs/json.md). Within a version
// fields are only added, never renamed, retyped, removed or given a new
// meaning. Apply, run, history and why were v2 when a commit that differs
// from its plan became a "deviation" (marker kind and provenance field),
// which v1 called drift; they are v3 since an unchanged re-plan is what
// Terraform applies (issue 10 §2): a version's plan_run is the reviewed
// plan, no longer always the one applied (applied_plan_run says), and
// "replanned" with intent_changed false means the re-plan was applied.
const (
	SchemaPlan      = "kilolock/plan/v1"
	SchemaApply     = "kilolock/apply/v3"
	SchemaRun       = "kilolock/run/v3"
	SchemaHistory   = "kilolock/history/v3"
	SchemaSincePlan = "kilolock/since-plan/v1"
	SchemaRuns      = "kilolock/runs/v1"
	SchemaWhy       = "kilolock/why/v3"
	SchemaStatus    = "kilolock/status/v1"
	SchemaFootprint = "kilolock/footprint/v1"
	SchemaStates    = "kilolock/states/v1"
	SchemaStateInit = "kilolock/state-init/v1"
	SchemaError     = "kilolock/error/v1"
)

// GitHub's Markdown limits (docs/github.md).
const (
	// CheckRunSummaryLimit is the most characters of a check run's
	// output.summary (and output.text).
	CheckRunSummaryLimit = 65535
	// CommentLimit is the most characters of an issue or PR comment body.
	CommentLimit = 65536
)

// errorDocument is the kilolock/error/v1 document.
type errorDocument struct {
	Schema string `json:"schema"`
	Error  string `json:"error"`
	// Kind is the error's kind (engine.KindOf): invalid, not-found,
	// conflict or lease-lost; absent for others.
	Kind string `json:"kind,omitempty"`
	Code int    `json:"code"`
}

// ErrorDocument writes the kilolock/error/v1 document of err: what kl
// prints on stdout with --json when a command fails before it has a view
// to print (bad flags or environment, an unknown run, a plan that cannot be
// applied), so that a script always reads one JSON document. code is the
// exit status: 3 for a refusal, 1 for any other error.
func ErrorDocument(w io.Writer, err error, code int) error {
	return emit(w, Options{Format: JSON}, nil, func() any {
		return errorDocument{Schema: SchemaError, Error: err.Error(), Kind: string(engine.KindOf(err)), Code: code}
	})
}

// emit renders one view: the document model for Text and Markdown, the
// JSON document otherwise. Both are built lazily: a JSON caller pays for
// no layout, a text caller for no JSON.
func emit(w io.Writer, o Options, model func() *doc, document func() any) error {
	var out string
	switch o.Format {
	case Text:
		out = renderText(model(), o)
	case Markdown:
		out = renderMarkdown(model(), o)
		if o.MaxMarkdown > 0 {
			out = Truncate(out, o.MaxMarkdown)
		}
	case JSON:
		b, err := json.MarshalIndent(document(), "", "  ")
		if err != nil {
			return fmt.Errorf("encoding report as JSON: %w", err)
		}
		out = string(b) + "\n"
	case HTML:
		out = renderHTML(model(), o)
	default:
		return fmt.Errorf("rendering report: unknown format %d", int(o.Format))
	}
	if _, err := io.WriteString(w, out); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}
