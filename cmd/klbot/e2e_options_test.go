package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// TestCommentPlanDestroy: "/kl plan -- -destroy" plans the project with
// Terraform's -destroy: its check run says so in the scope and lists the
// destroys, flagged; "/kl apply" then applies that plan, and the head
// holds no resource.
func TestCommentPlanDestroy(t *testing.T) {
	h := setup(t)
	app := "infra/app.tf"
	p := pr{1, sha(1), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	h.open(t, p)
	h.settle()
	if c := h.one(t, p.head, "kl plan · infra"); !strings.Contains(c.Summary, "~1") || strings.Contains(c.Summary, "-destroy") {
		t.Fatalf("the push's plan:\n%s\nwant one change, no -destroy", c.Summary)
	}
	h.comment(t, 1, "alice", "/kl plan -- -destroy")
	h.settle()
	c := h.shown(t, p.head, "kl plan · infra")
	t.Logf("the -destroy plan's check run:\n%s", c.Summary)
	mustContain(t, "the -destroy plan's check run", c.Summary, "terraform options `-destroy`", "⚠ 20 to destroy")
	if st := h.runStatus(h.planRun(1)); st != "planned" {
		t.Fatalf("the -destroy plan is %s, want planned", st)
	}
	h.comment(t, 1, "alice", "/kl apply")
	h.settle()
	if a := h.one(t, p.head, "kl apply · infra"); a.Conclusion != "success" {
		t.Fatalf("the apply of the -destroy plan: %s %q\n%s", a.Conclusion, a.Title, a.Summary)
	}
	st := h.openStore(t)
	head := h.headSerial()
	snap, err := st.Snapshot(context.Background(), "acme/infra", int64(head))
	if err != nil {
		t.Fatal(err)
	}
	s, err := tfstate.Parse(snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Resources) != 0 {
		t.Errorf("the head (serial %d) after the -destroy apply holds %d resources, want none", head, len(s.Resources))
	}
}

// TestCommentPlanVarRefused: "/kl plan -- -var x=SECRET" is refused — a
// value in a comment is public, in the pull request and its edit history —
// and the value appears nowhere klbot writes: not in its reply, a check
// run, the sticky comment, its logs, or any row of its database (River's
// jobs included). Nothing is planned.
func TestCommentPlanVarRefused(t *testing.T) {
	const secret = "SECRET-in-a-comment-9921"
	logs := captureLogs(t)
	h := setup(t)
	app := "infra/app.tf"
	p := pr{1, sha(1), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	h.open(t, p)
	h.settle()
	plans := h.planRuns()
	_, cid := h.comment(t, 1, "alice", "/kl plan -p infra -- -destroy -var x="+secret)
	h.settle()
	reply := h.replyTo(t, 1, cid)
	t.Logf("the reply:\n%s", reply)
	mustContain(t, "the reply to /kl plan -- -var", reply, "-var is refused", "would be public")
	if n := h.planRuns(); n != plans {
		t.Errorf("%d plan runs after the refused comment, want %d: nothing is planned", n, plans)
	}
	for _, b := range h.bodies(1) {
		if strings.Contains(b, secret) {
			t.Errorf("a comment of klbot holds the value:\n%s", b)
		}
	}
	for _, c := range h.fake.CheckRuns(repo) {
		if strings.Contains(c.Title+c.Summary, secret) {
			t.Errorf("check run %q holds the value:\n%s", c.Name, c.Summary)
		}
	}
	if lines := logs.lines(func(map[string]any) bool { return true }); strings.Contains(strings.Join(lines, "\n"), secret) {
		t.Errorf("klbot logged the value")
	}
	if rows := h.everyRow(t); strings.Contains(rows, secret) {
		t.Errorf("a row of klbot's database holds the value")
	}
}

// everyRow is every row of every table of the test's schema, as JSON text.
func (h *harness) everyRow(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	conn := h.conn()
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	if len(tables) < 5 {
		t.Fatalf("the schema has %d tables: %v", len(tables), tables)
	}
	var b strings.Builder
	for _, table := range tables {
		rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT to_jsonb(t)::text FROM %q t`, table))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			b.WriteString(s + "\n")
		}
		rows.Close()
	}
	return b.String()
}
