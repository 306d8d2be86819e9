package bot

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/planopts"
)

func TestParseCommand(t *testing.T) {
	t.Parallel()
	const run = "01J2ZP0A11CE0000000000PLAN"
	for name, tc := range map[string]struct {
		body   string
		want   Command
		wantOK bool
	}{
		"plan":                {"/kl plan", Command{Name: CmdPlan}, true},
		"apply":               {"/kl apply", Command{Name: CmdApply}, true},
		"apply -p":            {"/kl apply -p infra", Command{Name: CmdApply, Project: "infra"}, true},
		"apply -p missing":    {"/kl apply -p", Command{Name: CmdHelp, Err: "`-p` needs a project name: `/kl apply -p PROJECT`"}, true},
		"apply -p twice":      {"/kl apply -p a -p b", Command{Name: CmdHelp, Err: "`-p` given twice"}, true},
		"junk after":          {"/kl apply now", Command{Name: CmdHelp, Err: `unexpected "now" after ` + "`/kl apply`"}, true},
		"junk after project":  {"/kl apply -p infra please", Command{Name: CmdHelp, Err: `unexpected "please" after ` + "`/kl apply`"}, true},
		"why":                 {"/kl why", Command{Name: CmdWhy}, true},
		"why run":             {"/kl why " + run, Command{Name: CmdWhy, Run: run}, true},
		"why bad run":         {"/kl why 123", Command{Name: CmdHelp, Err: `"123" is not a run id (26 characters, as in ` + "`kl run show RUN`)"}, true},
		"history -p":          {"/kl history -p dns", Command{Name: CmdHistory, Project: "dns"}, true},
		"help":                {"/kl help", Command{Name: CmdHelp}, true},
		"recover":             {"/kl recover", Command{Name: CmdRecover}, true},
		"recover -p":          {"/kl recover -p dns", Command{Name: CmdRecover, Project: "dns"}, true},
		"recover junk":        {"/kl recover " + run, Command{Name: CmdHelp, Err: `unexpected "` + run + `" after ` + "`/kl recover`"}, true},
		"unfence":             {"/kl unfence -- checked the  VM by hand; it is gone", Command{Name: CmdUnfence, Reason: "checked the VM by hand; it is gone"}, true},
		"unfence -p":          {"/kl unfence -p dns -- checked", Command{Name: CmdUnfence, Project: "dns", Reason: "checked"}, true},
		"unfence no reason":   {"/kl unfence", Command{Name: CmdHelp, Err: "`/kl unfence` needs a reason: `/kl unfence -- WHAT YOU CHECKED`"}, true},
		"unfence empty --":    {"/kl unfence -p dns --", Command{Name: CmdHelp, Err: "`/kl unfence` needs a reason: `/kl unfence -- WHAT YOU CHECKED`"}, true},
		"unfence bare words":  {"/kl unfence checked", Command{Name: CmdHelp, Err: `unexpected "checked" after ` + "`/kl unfence`"}, true},
		"unfence long":        {"/kl unfence -- " + strings.Repeat("x", MaxReason+1), Command{Name: CmdHelp, Err: "the reason after `--` is 1001 characters; at most 1000"}, true},
		"recover --":          {"/kl recover -- x", Command{Name: CmdHelp, Err: `unexpected "--" after ` + "`/kl recover`"}, true},
		"bare":                {"/kl", Command{Name: CmdHelp}, true},
		"long word":           {"/kl plan " + strings.Repeat("é", 70000), Command{Name: CmdHelp, Err: `unexpected "` + strings.Repeat("é", MaxEcho) + `"… (70000 characters) after ` + "`/kl plan`"}, true},
		"unknown":             {"/kl destroy", Command{Name: CmdHelp, Err: `unknown command "destroy"`}, true},
		"uppercase word":      {"/kl APPLY", Command{Name: CmdHelp, Err: `unknown command "APPLY"`}, true},
		"uppercase prefix":    {"/KL apply", Command{}, false},
		"no space":            {"/klapply", Command{}, false},
		"not first word":      {"please /kl apply", Command{}, false},
		"leading spaces":      {"   /kl plan", Command{Name: CmdPlan}, true},
		"tabs":                {"/kl\tapply\t-p\tinfra", Command{Name: CmdApply, Project: "infra"}, true},
		"multiple lines":      {"LGTM!\n\n/kl apply -p infra\n/kl plan\n", Command{Name: CmdApply, Project: "infra"}, true},
		"windows line ending": {"/kl apply\r\n", Command{Name: CmdApply}, true},
		"no command":          {"looks good to me", Command{}, false},
		"shell semicolon":     {"/kl apply; rm -rf /", Command{Name: CmdHelp, Err: `unknown command "apply;"`}, true},
		"shell and":           {"/kl apply && curl x", Command{Name: CmdHelp, Err: `unexpected "&&" after ` + "`/kl apply`"}, true},
		"shell substitution":  {"/kl apply -p $(whoami)", Command{Name: CmdHelp, Err: `"$(whoami)" is not a project name`}, true},
		"quoted project":      {`/kl apply -p "infra"`, Command{Name: CmdHelp, Err: `"\"infra\"" is not a project name`}, true},
		"backtick":            {"/kl plan -p `id`", Command{Name: CmdHelp, Err: "\"`id`\" is not a project name"}, true},
		"plan -- options": {"/kl plan -p app -- -destroy -refresh=false -parallelism=3",
			Command{Name: CmdPlan, Project: "app", Options: engine.PlanOptions{Destroy: true, NoRefresh: true, Parallelism: 3}}, true},
		"plan -- refresh-only": {"/kl plan -- -refresh-only", Command{Name: CmdPlan, Options: engine.PlanOptions{RefreshOnly: true}}, true},
		"plan -- nothing":      {"/kl plan --", Command{Name: CmdPlan}, true},
		"plan -- -state": {"/kl plan -- -state=x",
			Command{Name: CmdHelp, Err: "`/kl plan -- …`: -state is refused: Kilolock owns the state: every run plans against a snapshot of the head version in a work dir of its own, and an apply commits the state's next version"}, true},
		"plan -- unknown": {"/kl plan -- -frob",
			Command{Name: CmdHelp, Err: "`/kl plan -- …`: unknown option -frob: Kilolock passes -destroy, -refresh-only, -refresh=false, -parallelism=N to terraform plan"}, true},
		"plan -- -p after": {"/kl plan -- -destroy -p app", Command{Name: CmdHelp, Err: "`/kl plan -- …`: unknown option -p: Kilolock passes -destroy, -refresh-only, -refresh=false, -parallelism=N to terraform plan"}, true},
		"apply --":         {"/kl apply -- -destroy", Command{Name: CmdHelp, Err: `unexpected "--" after ` + "`/kl apply`"}, true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, ok := ParseCommand(tc.body)
			if ok != tc.wantOK {
				t.Fatalf("ok = %t, want %t", ok, tc.wantOK)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("ParseCommand(%q) (-want +got):\n%s", tc.body, d)
			}
		})
	}
}

// TestParseCommandVar: a -var in a "/kl plan" comment is refused with a
// reason, and the refusal quotes none of the comment's words — not the
// value, nor the variable's name — wherever the -var is.
func TestParseCommandVar(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-super-SECRET"
	for _, body := range []string{
		"/kl plan -- -var x=" + secret,
		"/kl plan -- -destroy -var=x=" + secret,
		"/kl plan -- --var x=" + secret + " -state=y",
		"/kl plan -p app -var=x=" + secret,
		"/kl plan -var x=" + secret + " --",
		"/kl plan -- -var " + secret,
	} {
		got, ok := ParseCommand(body)
		if !ok || got.Name != CmdHelp {
			t.Fatalf("ParseCommand(%q) = %+v, %t; want a refusal", body, got, ok)
		}
		want := "`/kl plan`: -var is refused: " + planopts.VarInComment
		if got.Err != want {
			t.Errorf("ParseCommand(%q).Err = %q, want %q", body, got.Err, want)
		}
		if strings.Contains(got.Err, secret) || strings.Contains(got.Err, "x=") {
			t.Errorf("ParseCommand(%q).Err = %q quotes the comment", body, got.Err)
		}
	}
}

// TestParseCommandVarOtherCommands: a word that starts with -var or --var
// in a comment that is not `/kl plan` is refused as -var is in one, and
// the refusal quotes none of the comment's words: the parse error of any
// other stray word quotes it (echo), which would publish the value in the
// bot's reply.
func TestParseCommandVarOtherCommands(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-echo-123"
	for _, tc := range []struct{ body, cmd string }{
		{"/kl apply -var=pw=" + secret, "apply"},
		{"/kl apply -p app --var pw=" + secret, "apply"},
		{"/kl history -var=pw=" + secret, "history"},
		{"/kl recover -VAR=pw=" + secret, "recover"},
		{"/kl why -var=pw=" + secret, "why"},
		{"/kl why 01ARZ3NDEKTSV4RRFFQ69G5FAV -var=pw=" + secret, "why"},
		{"/kl help -var-file=" + secret, "help"},
		{"/kl unfence -var=pw=" + secret + " -- checked the objects", "unfence"},
		{"/kl -var=pw=" + secret, "-var"},
	} {
		got, ok := ParseCommand(tc.body)
		if !ok || got.Name != CmdHelp {
			t.Fatalf("ParseCommand(%q) = %+v, %t; want a refusal", tc.body, got, ok)
		}
		want := "-var is refused in a comment: " + planopts.VarInComment
		if tc.cmd != "-var" {
			want = "`/kl " + tc.cmd + "`: " + want
		}
		if got.Err != want {
			t.Errorf("ParseCommand(%q).Err = %q, want %q", tc.body, got.Err, want)
		}
		if strings.Contains(got.Err, secret) || strings.Contains(got.Err, "pw") {
			t.Errorf("ParseCommand(%q).Err = %q quotes the comment", tc.body, got.Err)
		}
	}
	// The reason of an unfence is the commenter's own text, kept as said.
	got, _ := ParseCommand("/kl unfence -- removed the -var test object by hand")
	if got.Err != "" || got.Reason != "removed the -var test object by hand" {
		t.Errorf("unfence with -var in its reason = %+v, want the reason kept", got)
	}
}
