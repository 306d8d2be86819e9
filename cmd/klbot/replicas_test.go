package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/kilolock/kilolock/internal/store/pgtest"
)

// startReplicas starts n klbot run()s at once on one database and one
// GitHub fake — as replicas starting together behind one load balancer
// (both migrate River's tables at the same moment) — and waits until
// every one answers /readyz. Replica i numbers its deliveries from
// i*1000+1, so ids never collide across replicas unless a test means them to.
func startReplicas(t *testing.T, fake *githubfake.Fake, key []byte, dsn, tfBin string, n int, extra ...string) []*harness {
	t.Helper()
	hs := make([]*harness, n)
	for i := range hs {
		addr := freeAddr(t)
		h := &harness{t: t, fake: fake, dsn: dsn, url: "http://" + addr, tfBin: tfBin, done: make(chan error, 1)}
		h.delivery.Store(int64(i) * 1000)
		ctx, cancel := context.WithCancel(context.Background())
		h.stop = cancel
		env := append(baseEnv(t, fake, key, dsn, addr, tfBin), extra...)
		go func() { h.done <- run(ctx, []string{"klbot"}, env) }()
		t.Cleanup(func() {
			cancel()
			select {
			case err := <-h.done:
				if err != nil {
					t.Errorf("replica %d: run() returned %v", i, err)
				}
			case <-time.After(60 * time.Second):
				t.Errorf("replica %d: run() did not stop within a minute of its context ending", i)
			}
		})
		hs[i] = h
	}
	deadline := time.Now().Add(60 * time.Second)
	for i, h := range hs {
		for {
			select {
			case err := <-h.done:
				t.Fatalf("replica %d stopped before it was ready: %v", i, err)
			default:
			}
			if res, err := http.Get(h.url + "/readyz"); err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d did not become ready within a minute", i)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return hs
}

// deliverToAll POSTs delivery d to every replica at the same moment and
// returns the status each answered, in replica order.
func deliverToAll(t *testing.T, d sent, hs ...*harness) []int {
	t.Helper()
	ds := make([]sent, len(hs))
	for i := range ds {
		ds[i] = d
	}
	return deliverAtOnce(t, hs, ds)
}

// deliverAtOnce POSTs ds[i] to replica hs[i], all at the same moment (the
// requests are built first and released together), and returns the
// status each answered.
func deliverAtOnce(t *testing.T, hs []*harness, ds []sent) []int {
	t.Helper()
	reqs := make([]*http.Request, len(hs))
	for i, h := range hs {
		req, err := githubfake.WebhookRequest(h.url+"/webhook", ds[i].event, ds[i].id, secret, ds[i].body)
		if err != nil {
			t.Fatal(err)
		}
		reqs[i] = req
	}
	codes := make([]int, len(hs))
	errs := make([]error, len(hs))
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() {
			<-gate
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			codes[i] = res.StatusCode
			if res.StatusCode/100 != 2 {
				errs[i] = fmt.Errorf("answered %d: %s", res.StatusCode, body)
			}
		})
	}
	close(gate)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("delivery %s (%s) to replica %d: %v", ds[i].id, ds[i].event, i, err)
		}
	}
	return codes
}

// workedBy counts the finished jobs of kinds per River client (the last
// entry of river_job.attempted_by: the replica whose worker ran the
// attempt that finished the job).
func (h *harness) workedBy(t *testing.T, kinds ...string) map[string]int {
	t.Helper()
	ctx := context.Background()
	conn := h.conn()
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT attempted_by[array_length(attempted_by, 1)], count(*) FROM river_job
		WHERE state = 'completed' AND kind = ANY($1) GROUP BY 1`, kinds)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var client string
		var n int
		if err := rows.Scan(&client, &n); err != nil {
			t.Fatal(err)
		}
		out[client] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// jobErrors lists the jobs that failed an attempt (River keeps each
// attempt's error in river_job.errors, also for a job a retry finished).
func (h *harness) jobErrors(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	conn := h.conn()
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT kind, args::text, errors::text FROM river_job WHERE errors IS NOT NULL ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var kind, args, errs string
		if err := rows.Scan(&kind, &args, &errs); err != nil {
			t.Fatal(err)
		}
		out = append(out, kind+" "+args+": "+errs)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// noDuplicateCheckRuns fails the test for any (head SHA, name) with more
// than one check run on the fake, and returns how many there are.
func noDuplicateCheckRuns(t *testing.T, fake *githubfake.Fake) int {
	t.Helper()
	seen := map[string]int{}
	for _, c := range fake.CheckRuns(repo) {
		seen[c.HeadSHA+" "+c.Name]++
	}
	for k, n := range seen {
		if n != 1 {
			head, name, _ := strings.Cut(k, " ")
			t.Errorf("%d check runs %q on %s, want exactly one", n, name, head[:7])
		}
	}
	return len(seen)
}

// TestTwoReplicas runs two klbot replicas (two run()s: two webhook
// servers, two River clients with their workers) on one PostgreSQL
// schema against one GitHub fake, with real Terraform, as docs/klbot.md
// "Several replicas" promises they work:
//
//  1. both start at once on a fresh schema (River's migrations race);
//  2. PR 1's opening is delivered to both replicas at the same moment:
//     one answers 202 (enqueued), the other 200 (duplicate);
//  3. five more PRs' openings are spread over both; PR 2's push comes as
//     opened and ready_for_review for one head (GitHub sends both for one
//     push), one to each replica at the same moment: one 202, one 200;
//  4. every PR gets exactly one plan, one `kl plan · infra` check run and
//     one sticky comment;
//  5. `/kl apply` on every PR (disjoint write sets), spread over both,
//     PR 3's comment delivered to both at once: every apply succeeds
//     once — one apply run, one `kl apply · infra` check run, one 👀 —
//     and the state has one version per apply.
//
// No (head SHA, check-run name) ever has two check runs, and no job fails
// an attempt (a failed attempt that a retry cured would hide a race).
func TestTwoReplicas(t *testing.T) {
	tfBin := terraformBinary(t)
	fake := githubfake.New(t)
	key := fake.NewAppKey(appID)
	fake.AddInstallation(1, appID, repo)
	fake.SetPermission(repo, "alice", "write")
	dsn := pgtest.DSN(t)
	bootstrap(t, dsn, tfBin, repo, baseRepo())
	hs := startReplicas(t, fake, key, dsn, tfBin, 2)
	a, b := hs[0], hs[1]

	// Six PRs, each changing a resource of its own: disjoint write sets.
	edit := func(file, res string) [3]string { return [3]string{file, `"` + res + `-v1"`, `"` + res + `-v2"`} }
	edits := [][3]string{edit("infra/app.tf", "app_api"), edit("infra/app.tf", "app_worker"), edit("infra/db.tf", "db_backup"),
		edit("infra/db.tf", "db_users"), edit("infra/dns.tf", "dns_b"), edit("infra/net.tf", "net_subnet_a")}
	var prs []pr
	for i, e := range edits {
		n := i + 1
		prs = append(prs, pr{n, sha(n), change(t, e), []string{e[0]}})
	}
	replica := func(n int) *harness { return hs[n%2] } // PR n's deliveries go to replica n mod 2

	// --- 2. One delivery reaching both replicas at once. ---
	a.seed(t, prs[0], false)
	both := sent{event: "pull_request", id: "delivery-both-open-1",
		body: githubfake.PullRequestEvent("pull_request.opened.0", repo, 1, prs[0].head)}
	if codes := deliverToAll(t, both, a, b); !slices.Equal(sorted(codes), []int{http.StatusOK, http.StatusAccepted}) {
		t.Errorf("PR 1's opening sent to both replicas at once answered %v, want one 202 and one 200", codes)
	}

	// --- 3. The other openings, spread over both; PR 2's push comes as
	// two deliveries (opened, ready_for_review) reaching both at once. ---
	a.seed(t, prs[1], false)
	push2 := []sent{
		{event: "pull_request", id: "delivery-both-push-2a", body: githubfake.PullRequestEvent("pull_request.opened.0", repo, 2, prs[1].head)},
		{event: "pull_request", id: "delivery-both-push-2b", body: githubfake.PullRequestEvent("pull_request.ready_for_review.15", repo, 2, prs[1].head)},
	}
	if codes := deliverAtOnce(t, hs, push2); !slices.Equal(sorted(codes), []int{http.StatusOK, http.StatusAccepted}) {
		t.Errorf("PR 2's opened and ready_for_review for one head, one to each replica at once, answered %v, want one 202 and one 200", codes)
	}
	for _, p := range prs[2:] {
		replica(p.n).open(t, p)
	}
	a.settle()

	// --- 4. One plan, one plan check run, one sticky comment per PR. ---
	if n := a.count(`SELECT count(*) FROM runs WHERE kind = 'plan'`); n != len(prs)+1 {
		t.Errorf("%d plan runs, want %d (one per PR and the bootstrap's)", n, len(prs)+1)
	}
	for _, p := range prs {
		if c := a.one(t, p.head, "kl plan · infra"); c.Conclusion != "success" {
			t.Errorf("PR %d's plan: conclusion %q, want success (disjoint write sets):\n%s", p.n, c.Conclusion, c.Summary)
		}
		a.sticky(t, p.n)
	}
	// Which replica's River client fetches a job is River's choice: six
	// plan jobs can all go to one (it fetches in batches). Both replicas
	// working is asserted over all jobs, after the applies.
	t.Logf("plan jobs finished per replica: %v", a.workedBy(t, "klbot_plan"))
	noDuplicateCheckRuns(t, fake)

	// --- 5. /kl apply on every PR, spread over both; PR 3's to both at once. ---
	comments := map[int]int64{}
	for _, p := range prs {
		if p.n == 3 {
			id := fake.AddComment(repo, 3, "alice", "/kl apply")
			body, err := githubfake.Patch(githubfake.IssueCommentOnPR(repo, 3, "alice", "/kl apply"), map[string]any{"comment.id": id})
			if err != nil {
				t.Fatal(err)
			}
			comments[3] = id
			d := sent{event: "issue_comment", id: "delivery-both-apply-3", body: body}
			if codes := deliverToAll(t, d, a, b); !slices.Equal(sorted(codes), []int{http.StatusOK, http.StatusAccepted}) {
				t.Errorf("PR 3's /kl apply sent to both replicas at once answered %v, want one 202 and one 200", codes)
			}
			continue
		}
		_, comments[p.n] = replica(p.n).comment(t, p.n, "alice", "/kl apply")
	}
	a.settle()
	for _, p := range prs {
		if c := a.one(t, p.head, "kl apply · infra"); c.Conclusion != "success" {
			t.Errorf("PR %d's apply: conclusion %q, want success:\n%s", p.n, c.Conclusion, c.Summary)
		}
		if rs := fake.Reactions(comments[p.n]); len(rs) != 1 || rs[0].Content != "eyes" {
			t.Errorf("PR %d's /kl apply got reactions %+v, want one 👀", p.n, rs)
		}
		a.sticky(t, p.n)
	}
	if n := a.count(`SELECT count(*) FROM runs WHERE kind = 'apply'`); n != len(prs)+1 {
		t.Errorf("%d apply runs, want %d (one per PR and the bootstrap's)", n, len(prs)+1)
	}
	var head int64
	a.scan(&head, `SELECT max(serial) FROM versions`)
	if want := int64(1 + len(prs)); head != want {
		t.Errorf("the state's head is serial %d, want %d (the bootstrap's and one per apply)", head, want)
	}
	all := a.workedBy(t, "klbot_plan", "klbot_apply", "klbot_refresh")
	t.Logf("jobs finished per replica: %v", all)
	if len(all) != 2 {
		t.Errorf("jobs were finished by %d River clients (%v), want both replicas'", len(all), all)
	}
	for _, e := range a.jobErrors(t) {
		t.Errorf("a job failed an attempt (two replicas got in each other's way?): %s", e)
	}
	if n := noDuplicateCheckRuns(t, fake); n != 3*len(prs) {
		t.Errorf("%d distinct check runs, want %d (a plan, an apply and the aggregate kl check run per PR)", n, 3*len(prs))
	}
}

func sorted(xs []int) []int {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}
