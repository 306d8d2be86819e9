package githubfake

import (
	"encoding/json"
	"strings"
	"testing"

	gh "github.com/google/go-github/v62/github"
)

func TestSignPublishedVector(t *testing.T) {
	t.Parallel()
	got := Sign("It's a Secret to Everybody", []byte("Hello, World!"))
	want := "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	if got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	// go-github's verifier agrees.
	if err := gh.ValidateSignature(got, []byte("Hello, World!"), []byte("It's a Secret to Everybody")); err != nil {
		t.Fatalf("ValidateSignature: %v", err)
	}
}

func TestWebhooksParse(t *testing.T) {
	t.Parallel()
	names := Webhooks()
	if len(names) < 12 {
		t.Fatalf("only %d payloads: %v", len(names), names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, err := Webhook(name)
			if err != nil {
				t.Fatal(err)
			}
			_, err = gh.ParseWebHook(Event(name), b)
			quirk := strings.HasPrefix(name, "check_run.rerequested.")
			switch {
			case quirk && err == nil:
				t.Errorf("%s parsed; the README says go-github rejects its created_at", name)
			case quirk && !strings.Contains(err.Error(), "2018-04-25 20:42:10"):
				t.Errorf("%s: unexpected error %v", name, err)
			case !quirk && err != nil:
				t.Errorf("%s: %v", name, err)
			}
		})
	}
}

func TestPatchedPayloads(t *testing.T) {
	t.Parallel()
	ev, err := gh.ParseWebHook("pull_request", MergedPullRequest("acme/infra", 7, sha1))
	if err != nil {
		t.Fatal(err)
	}
	pr := ev.(*gh.PullRequestEvent)
	if pr.GetAction() != "closed" || !pr.GetPullRequest().GetMerged() || pr.GetNumber() != 7 ||
		pr.GetPullRequest().GetHead().GetSHA() != sha1 || pr.GetRepo().GetFullName() != "acme/infra" || pr.GetInstallation().GetID() != 1 {
		t.Errorf("merged PR payload: action %s merged %v number %d sha %s repo %s",
			pr.GetAction(), pr.GetPullRequest().GetMerged(), pr.GetNumber(), pr.GetPullRequest().GetHead().GetSHA(), pr.GetRepo().GetFullName())
	}
	ev, err = gh.ParseWebHook("issue_comment", IssueCommentOnPR("acme/infra", 7, "maria", "/kl apply"))
	if err != nil {
		t.Fatal(err)
	}
	ic := ev.(*gh.IssueCommentEvent)
	if !ic.GetIssue().IsPullRequest() || ic.GetComment().GetBody() != "/kl apply" || ic.GetIssue().GetNumber() != 7 ||
		ic.GetComment().GetUser().GetLogin() != "maria" {
		t.Errorf("issue comment payload: %+v", ic.GetIssue().PullRequestLinks)
	}
	for _, name := range []string{"check_run.rerequested.7", "check_run.rerequested.8", "check_run.requested_action.6"} {
		ev, err = gh.ParseWebHook("check_run", CheckRunEvent(name, "acme/infra", "kl:7:prod", sha1, "maria"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cr := ev.(*gh.CheckRunEvent)
		if cr.GetCheckRun().GetExternalID() != "kl:7:prod" || cr.GetCheckRun().GetHeadSHA() != sha1 || len(cr.GetCheckRun().PullRequests) != 0 ||
			cr.GetRepo().GetFullName() != "acme/infra" || cr.GetInstallation().GetID() != 1 || cr.GetSender().GetLogin() != "maria" {
			t.Errorf("%s payload: external id %q sha %s prs %d repo %s installation %d sender %s", name, cr.GetCheckRun().GetExternalID(),
				cr.GetCheckRun().GetHeadSHA(), len(cr.GetCheckRun().PullRequests), cr.GetRepo().GetFullName(), cr.GetInstallation().GetID(), cr.GetSender().GetLogin())
		}
	}
	ev, err = gh.ParseWebHook("check_run", RequestedAction("acme/infra", "kl:7:prod", sha1, "maria", "kl-apply"))
	if err != nil {
		t.Fatal(err)
	}
	if ra := ev.(*gh.CheckRunEvent); ra.GetAction() != "requested_action" || ra.GetRequestedAction().Identifier != "kl-apply" {
		t.Errorf("requested_action payload: action %s identifier %+v", ra.GetAction(), ra.GetRequestedAction())
	}
	// Large ids survive patching exactly (no float64 rounding).
	b := MustPatch("check_run.requested_action.6", map[string]any{"requested_action.identifier": "apply"})
	var v struct {
		CheckRun struct {
			ID int64 `json:"id"`
		} `json:"check_run"`
		RequestedAction struct {
			Identifier string `json:"identifier"`
		} `json:"requested_action"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if v.CheckRun.ID != 1494503112 || v.RequestedAction.Identifier != "apply" {
		t.Errorf("requested_action payload: %+v", v)
	}
}

func TestWebhookRequest(t *testing.T) {
	t.Parallel()
	body := []byte(`{"zen":"x"}`)
	req, err := WebhookRequest("http://127.0.0.1/hook", "ping", "d-1", "s3cret", body)
	if err != nil {
		t.Fatal(err)
	}
	if req.Header.Get("X-Hub-Signature-256") != Sign("s3cret", body) || req.Header.Get("X-GitHub-Event") != "ping" {
		t.Errorf("headers %v", req.Header)
	}
}
