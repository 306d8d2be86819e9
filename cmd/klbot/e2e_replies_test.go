package main

import (
	"strings"
	"testing"
)

// TestLongCommentReply posts a 70,000-character comment command (issue 11
// defect 6): the reply keeps its message — what was wrong and the help —
// and cuts the echo of the comment's word, never the message.
func TestLongCommentReply(t *testing.T) {
	h := setup(t)
	p := pr{1, sha(1), change(t, [3]string{"infra/app.tf", `"app_web-v1"`, `"app_web-v2"`}), []string{"infra/app.tf"}}
	h.seed(t, p, false)
	_, id := h.comment(t, 1, "alice", "/kl plan "+strings.Repeat("x", 70000))
	h.settle()
	reply := h.replyTo(t, 1, id)
	mustContain(t, "the reply to a 70,000-character comment", reply,
		"@alice", "klbot did not run this comment", "unexpected", "70000 characters", "**klbot commands**", "`/kl help`")
	mustLack(t, "the reply to a 70,000-character comment", reply, "more lines omitted", "RUN`", strings.Repeat("x", 100))
	if len(reply) > 4000 {
		t.Errorf("the reply is %d bytes, want the message and the help only:\n%s", len(reply), reply)
	}
}
