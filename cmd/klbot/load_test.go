package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/kilolock/kilolock/internal/bench"
	"github.com/kilolock/kilolock/internal/bot"
	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/webhook"
)

// The load of BenchmarkWebhookLoad (make bench passes them after -args).
var (
	loadRate      = flag.Float64("load.rate", 200, "BenchmarkWebhookLoad: signed deliveries per second, at most 2000")
	loadDuration  = flag.Duration("load.duration", 30*time.Second, "BenchmarkWebhookLoad: how long deliveries are sent, at most 10m")
	loadRedeliver = flag.Float64("load.redeliver", 0.10, "BenchmarkWebhookLoad: share of deliveries that redeliver an earlier one (same id and body), 0 to 0.5")
	loadSeed      = flag.Uint64("load.seed", 1, "BenchmarkWebhookLoad: seed of the redeliveries")
)

// loadPlan is a bounded load: deliveries at rate per second for duration,
// a share redeliver of them redeliveries.
type loadPlan struct {
	rate      float64
	duration  time.Duration
	redeliver float64
	seed      uint64
}

// Bounds of a loadPlan: the load goes to loopback only and must stop by
// itself.
const (
	maxLoadRate     = 2000
	maxLoadDuration = 10 * time.Minute
)

// check refuses a load that is not bounded or not a load, naming the flag.
func (p loadPlan) check() error {
	switch {
	case math.IsNaN(p.rate) || p.rate <= 0 || p.rate > maxLoadRate:
		return fmt.Errorf("-load.rate=%g: want more than 0 and at most %d deliveries per second", p.rate, maxLoadRate)
	case p.duration <= 0 || p.duration > maxLoadDuration:
		return fmt.Errorf("-load.duration=%s: want more than 0 and at most %s", p.duration, maxLoadDuration)
	case math.IsNaN(p.redeliver) || p.redeliver < 0 || p.redeliver > 0.5:
		return fmt.Errorf("-load.redeliver=%g: want a share from 0 to 0.5", p.redeliver)
	case p.count() < 1:
		return fmt.Errorf("-load.rate=%g for -load.duration=%s sends no delivery", p.rate, p.duration)
	}
	return nil
}

// count is how many deliveries the plan sends.
func (p loadPlan) count() int { return int(math.Round(p.rate * p.duration.Seconds())) }

// loadMix is the mix of unique deliveries, by position modulo 10: what
// klbot gets from a busy organisation, every one of them work (events
// klbot ignores never reach the database and would flatter the figure).
// Each enqueues exactly one job of its kind.
var loadMix = [10]struct {
	name, event, kind string
}{
	{"pull_request.synchronize.22", "pull_request", bot.KindPlan}, // 60%: pushes, a head SHA each
	{"pull_request.synchronize.22", "pull_request", bot.KindPlan},
	{"pull_request.synchronize.22", "pull_request", bot.KindPlan},
	{"pull_request.synchronize.22", "pull_request", bot.KindPlan},
	{"pull_request.synchronize.22", "pull_request", bot.KindPlan},
	{"pull_request.synchronize.22", "pull_request", bot.KindPlan},
	{"/kl plan", "issue_comment", bot.KindPlan},                  // 10%
	{"/kl apply", "issue_comment", bot.KindApply},                // 10%
	{"check_run.requested_action.6", "check_run", bot.KindApply}, // 10%: the Apply button
	{"/kl why", "issue_comment", bot.KindReply},                  // 10%
}

// loadPRs is how many pull requests the deliveries are spread over.
const loadPRs = 50

// headMarker stands for the head SHA in a pull_request template.
const headMarker = "feedfacefeedfacefeedfacefeedfacefeedface"

// loadPayloads builds each delivery's body from the real payloads
// (githubfake's copy of shared/fixtures/github/webhooks), patched once per
// mix entry and pull request; the head SHA of a push is put in by byte
// substitution, so a body costs microseconds when it is sent.
type loadPayloads struct {
	templates [len(loadMix)][loadPRs][]byte
}

func newLoadPayloads() (*loadPayloads, error) {
	p := &loadPayloads{}
	for i, m := range loadMix {
		for j := range loadPRs {
			n := j + 1
			var body []byte
			switch m.event {
			case "pull_request":
				body = githubfake.PullRequestEvent(m.name, repo, n, headMarker)
				if c := bytes.Count(body, []byte(headMarker)); c != 1 {
					return nil, fmt.Errorf("%s holds the head SHA %d times, want once", m.name, c)
				}
			case "issue_comment":
				body = githubfake.IssueCommentOnPR(repo, n, "alice", m.name)
			case "check_run":
				body = githubfake.RequestedAction(repo, fmt.Sprintf("kl:%d:infra", n), sha(n), "alice", bot.ApplyActionID)
			}
			p.templates[i][j] = body
		}
	}
	return p, nil
}

// body is the payload of unique delivery k (the same on every call: a
// redelivery sends the very bytes of its original).
func (p *loadPayloads) body(k int) []byte {
	t := p.templates[k%len(loadMix)][(k/len(loadMix))%loadPRs]
	if loadMix[k%len(loadMix)].event != "pull_request" {
		return t
	}
	return bytes.Replace(t, []byte(headMarker), fmt.Appendf(nil, "%040x", k+1), 1)
}

// loadDelivery is one request of the schedule: unique delivery k, or a
// redelivery of it.
type loadDelivery struct {
	k          int
	redelivery bool
}

// id is delivery k's X-GitHub-Delivery, a GUID as GitHub sends.
func loadID(k int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", 0x6b6c, k) }

// loadSchedule draws the deliveries of plan: each is, with probability
// plan.redeliver (the first never), a redelivery of an earlier unique
// delivery drawn uniformly, else the next unique one.
func loadSchedule(plan loadPlan) (sched []loadDelivery, unique int) {
	rng := rand.New(rand.NewPCG(plan.seed, 0x6b6c))
	sched = make([]loadDelivery, plan.count())
	for i := range sched {
		if unique > 0 && rng.Float64() < plan.redeliver {
			sched[i] = loadDelivery{k: rng.IntN(unique), redelivery: true}
			continue
		}
		sched[i] = loadDelivery{k: unique}
		unique++
	}
	return sched, unique
}

// loadTarget is one webhook endpoint under load and what it answered.
type loadTarget struct {
	name   string
	url    string
	client *http.Client

	mu        sync.Mutex
	codes     map[int]int
	latencies []time.Duration
	failures  []error // requests that got no answer
}

func newLoadTarget(name, url string) *loadTarget {
	// Keep-alive connections, as many as requests in flight: a new TCP
	// connection per request would measure the kernel's TIME_WAIT.
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true}
	return &loadTarget{name: name, url: url, codes: map[int]int{},
		client: &http.Client{Transport: tr, Timeout: 15 * time.Second}}
}

// send POSTs one signed delivery and records the status and how long the
// answer took, from sending the request to the body's last byte.
func (t *loadTarget) send(ctx context.Context, event, id string, body []byte) {
	req, err := githubfake.WebhookRequest(t.url+"/webhook", event, id, secret, body)
	if err == nil {
		req = req.WithContext(ctx)
		var res *http.Response
		t0 := time.Now()
		if res, err = t.client.Do(req); err == nil {
			_, err = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			took := time.Since(t0)
			t.mu.Lock()
			t.codes[res.StatusCode]++
			t.latencies = append(t.latencies, took)
			t.mu.Unlock()
		}
	}
	if err != nil {
		t.mu.Lock()
		t.failures = append(t.failures, fmt.Errorf("delivery %s: %w", id, err))
		t.mu.Unlock()
	}
}

// loadRun is how the sender kept to its schedule.
type loadRun struct {
	elapsed time.Duration // first send to last answer
	lagP99  time.Duration // p99 of how late a send started against its ideal time
	lagMax  time.Duration
}

// fire sends the schedule at perSecond to every target, interleaved: a
// golang.org/x/time/rate limiter ticks len(targets) times per delivery
// slot, and tick t sends delivery t/len(targets) to target
// t%len(targets) — klbot and the baseline get the same deliveries at the
// same rate, half a slot apart, so neither's answer competes for the CPU
// with the other's at the same instant. Every send runs in a goroutine of
// its own, so a slow answer never delays the next send (an open loop:
// the rate is the rate GitHub sends at, whatever klbot does). The
// limiter's bucket holds 100 ms of ticks and starts empty: a sender the
// scheduler held back catches up instead of losing its slots, and
// nothing is sent in a burst at the start.
func fire(ctx context.Context, sched []loadDelivery, perSecond float64, payloads *loadPayloads, targets ...*loadTarget) (loadRun, error) {
	ticks := perSecond * float64(len(targets))
	burst := max(1, int(ticks/10))
	lim := rate.NewLimiter(rate.Limit(ticks), burst)
	lim.AllowN(time.Now(), burst)
	lags := make([]time.Duration, 0, len(sched)*len(targets))
	var wg sync.WaitGroup
	start := time.Now()
	for t := range len(sched) * len(targets) {
		if err := lim.Wait(ctx); err != nil {
			wg.Wait()
			return loadRun{}, fmt.Errorf("sending delivery %d of %d: %w", t/len(targets)+1, len(sched), err)
		}
		ideal := start.Add(time.Duration(float64(t) / ticks * float64(time.Second)))
		lags = append(lags, max(0, time.Since(ideal)))
		d, target := sched[t/len(targets)], targets[t%len(targets)]
		event, id, body := loadMix[d.k%len(loadMix)].event, loadID(d.k), payloads.body(d.k)
		wg.Go(func() { target.send(ctx, event, id, body) })
	}
	wg.Wait()
	slices.Sort(lags)
	return loadRun{elapsed: time.Since(start), lagP99: quantile(lags, 0.99), lagMax: lags[len(lags)-1]}, nil
}

// quantile is the q-quantile of sorted durations, nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// serveLoad serves h on a free loopback port until the benchmark ends and
// returns its base URL.
func serveLoad(b *testing.B, h http.Handler) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ErrServerClosed at cleanup
	b.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// startLoadKlbot wires klbot's webhook endpoint as run() does — the
// configuration's defaults (KLBOT_WORKERS=4: a pool of 14 connections),
// migrations, the Bot as the webhook's Sink with its River client, the
// routes, JSON logs at info (formatted, then discarded) — on dsn, and
// serves it, with the baseline beside it. The River client is never
// started: no worker takes a job, so the figure is the endpoint's alone.
// GitHub is never called; the fake only gives the App a key and a base
// URL.
func startLoadKlbot(b *testing.B, dsn string) (klbotURL, baselineURL string) {
	b.Helper()
	ctx := b.Context()
	fake := githubfake.New(b)
	env := []string{fmt.Sprintf("KLBOT_APP_ID=%d", appID), "KLBOT_PRIVATE_KEY=" + string(fake.NewAppKey(appID)),
		"KLBOT_WEBHOOK_SECRET=" + secret, "KLBOT_DATABASE_URL=" + dsn, "KLBOT_GITHUB_URL=" + fake.APIURL()}
	cfg, key, err := loadConfig(ctx, env)
	if err != nil {
		b.Fatal(err)
	}
	prev := logOutput
	logOutput = io.Discard
	b.Cleanup(func() { logOutput = prev })
	log := newLogger(cfg.LogLevel)
	app, err := github.NewApp(cfg.AppID, key, github.Options{BaseURL: cfg.GitHubURL, Logger: log, Truncate: report.Truncate})
	if err != nil {
		b.Fatal(err)
	}
	store, err := postgres.Open(ctx, cfg.DatabaseURL, postgres.WithApplicationName("klbot"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	p, err := openPool(ctx, cfg.DatabaseURL, cfg.Workers)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	if err := bot.MigrateRiver(ctx, p); err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	sink, _, err := newBot(cfg, engine.New(store, nil, log), app, p, b.TempDir(), log, reg, bot.NewStopper())
	if err != nil {
		b.Fatal(err)
	}
	hook, err := webhook.NewHandler(webhook.HandlerConfig{Secret: []byte(cfg.WebhookSecret), Sink: sink, Logger: log, Metrics: reg})
	if err != nil {
		b.Fatal(err)
	}
	klbotURL = serveLoad(b, routes(hook, http.NotFoundHandler(), p, reg))
	// The baseline: the same handler, routes and logs in front of a sink
	// that records nothing.
	baseReg := prometheus.NewRegistry()
	baseHook, err := webhook.NewHandler(webhook.HandlerConfig{Secret: []byte(cfg.WebhookSecret), Sink: discardSink{}, Logger: log, Metrics: baseReg})
	if err != nil {
		b.Fatal(err)
	}
	return klbotURL, serveLoad(b, routes(baseHook, http.NotFoundHandler(), p, baseReg))
}

// discardSink is the baseline's sink: it accepts every delivery and
// records nothing (no de-duplication: every answer is a 202).
type discardSink struct{}

func (discardSink) Accept(context.Context, webhook.Delivery) (webhook.Outcome, error) {
	return webhook.Enqueued, nil
}

// BenchmarkWebhookLoad is the load test of klbot's webhook endpoint
// (issue 11): signed deliveries of the real payloads at -load.rate per
// second for -load.duration over loopback, -load.redeliver of them
// redeliveries of an earlier delivery (same X-GitHub-Delivery and body),
// sent at once to klbot's endpoint (the webhook handler and the Bot's
// durable Sink on a real PostgreSQL, no River workers) and to a baseline
// (the same handler in front of a sink that records nothing). It prints
// p50/p99 of the answer beside the baseline's, with ratios (docs/style.md 16:
// never asserted), and the count of each status; it FAILS on any 5xx or
// unanswered request, on any count of 202 (enqueued) other than the unique
// deliveries or of 200 (duplicate) other than the redeliveries, and unless
// the database holds every unique delivery exactly once with exactly one
// job of its kind. It runs once whatever b.N is:
//
//	go test -run '^$' -bench WebhookLoad -benchtime 1x ./cmd/klbot/ -args -load.rate 200 -load.duration 30s
func BenchmarkWebhookLoad(b *testing.B) {
	plan := loadPlan{rate: *loadRate, duration: *loadDuration, redeliver: *loadRedeliver, seed: *loadSeed}
	if err := plan.check(); err != nil {
		b.Fatal(err)
	}
	payloads, err := newLoadPayloads()
	if err != nil {
		b.Fatal(err)
	}
	dsn := pgtest.DSN(b)
	klURL, baseURL := startLoadKlbot(b, dsn)
	kl, base := newLoadTarget("klbot", klURL), newLoadTarget("baseline", baseURL)
	sched, unique := loadSchedule(plan)
	machine := bench.ReadMachine()
	b.ResetTimer()
	run, err := fire(b.Context(), sched, plan.rate, payloads, kl, base)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	printLoad(os.Stdout, plan, machine, run, len(sched), unique, kl, base)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(quantile(sortedCopy(kl.latencies), 0.50)), "p50-ms")
	b.ReportMetric(ms(quantile(sortedCopy(kl.latencies), 0.99)), "p99-ms")
	for _, err := range checkAnswers(kl, base, len(sched), unique) {
		b.Error(err)
	}
	for _, err := range checkRecorded(b.Context(), dsn, sched, unique) {
		b.Error(err)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func sortedCopy(ds []time.Duration) []time.Duration {
	out := slices.Clone(ds)
	slices.Sort(out)
	return out
}

// printLoad prints the figures: the load, the machine, klbot's p50/p99
// beside the baseline's with ratios, and the answers by status.
func printLoad(w io.Writer, plan loadPlan, m bench.Machine, run loadRun, sent, unique int, kl, base *loadTarget) {
	fmt.Fprintf(w, "\nwebhook load: %d signed deliveries at %g/s for %s over loopback (%d unique, %d redeliveries of an earlier one)\n",
		sent, plan.rate, plan.duration, unique, sent-unique)
	fmt.Fprintf(w, "  machine: %d CPUs, %s, load %s; sent in %s (%.1f/s); send lag p99 %s, max %s\n",
		m.CPUs, m.Model, m.Load, run.elapsed.Round(time.Millisecond), float64(sent)/run.elapsed.Seconds(),
		run.lagP99.Round(time.Microsecond), run.lagMax.Round(time.Microsecond))
	kls, bases := sortedCopy(kl.latencies), sortedCopy(base.latencies)
	ratio := func(q float64) string {
		if d := quantile(bases, q); d > 0 {
			return fmt.Sprintf("%.2fx", float64(quantile(kls, q))/float64(d))
		}
		return "-"
	}
	fmt.Fprintf(w, "%-58s %10s %10s %10s\n", "answer latency", "p50", "p99", "max")
	for _, t := range []struct {
		label string
		lat   []time.Duration
	}{{"klbot (webhook + Bot sink, PostgreSQL, no workers)", kls}, {"baseline (same handler, a sink that records nothing)", bases}} {
		fmt.Fprintf(w, "%-58s %9.2fms %9.2fms %9.2fms\n", t.label, ms(quantile(t.lat, 0.5)), ms(quantile(t.lat, 0.99)), ms(quantile(t.lat, 1)))
	}
	fmt.Fprintf(w, "%-58s %10s %10s\n", "klbot/baseline", ratio(0.5), ratio(0.99))
	for _, t := range []*loadTarget{kl, base} {
		fmt.Fprintf(w, "  %-8s answers: %s; no answer: %d\n", t.name, codeCounts(t.codes), len(t.failures))
	}
}

// codeCounts is "202 ×5421, 200 ×579", by status.
func codeCounts(codes map[int]int) string {
	keys := make([]int, 0, len(codes))
	for c := range codes {
		keys = append(keys, c)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, c := range keys {
		parts = append(parts, fmt.Sprintf("%d ×%d", c, codes[c]))
	}
	return strings.Join(parts, ", ")
}

// checkAnswers returns what klbot (and the baseline) answered wrong:
// every request answered, no 5xx, a 202 per unique delivery and a 200
// per redelivery and nothing else (the baseline: a 202 for each).
func checkAnswers(kl, base *loadTarget, sent, unique int) []error {
	var errs []error
	for _, t := range []*loadTarget{kl, base} {
		for i, err := range t.failures {
			if i == 5 {
				errs = append(errs, fmt.Errorf("%s: %d more requests without an answer", t.name, len(t.failures)-5))
				break
			}
			errs = append(errs, fmt.Errorf("%s: no answer: %w", t.name, err))
		}
		for c, n := range t.codes {
			if c >= 500 {
				errs = append(errs, fmt.Errorf("%s answered %d to %d deliveries", t.name, c, n))
			}
		}
	}
	want := map[int]int{http.StatusAccepted: unique}
	if sent > unique {
		want[http.StatusOK] = sent - unique
	}
	if !mapsEqual(kl.codes, want) {
		errs = append(errs, fmt.Errorf("klbot answered %s; want 202 ×%d (unique deliveries, enqueued) and 200 ×%d (redeliveries, duplicate)",
			codeCounts(kl.codes), unique, sent-unique))
	}
	if !mapsEqual(base.codes, map[int]int{http.StatusAccepted: sent}) {
		errs = append(errs, fmt.Errorf("the baseline answered %s; want 202 ×%d", codeCounts(base.codes), sent))
	}
	return errs
}

func mapsEqual(a, b map[int]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// checkRecorded returns what the database holds wrong after the load:
// klbot_deliveries must hold exactly the unique delivery ids, and
// river_job exactly one job per unique delivery, of the kind its event
// asks for (loadMix) — none for a redelivery, none twice.
func checkRecorded(ctx context.Context, dsn string, sched []loadDelivery, unique int) []error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return []error{err}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	want := make(map[string]string, unique) // delivery id → job kind
	for _, d := range sched {
		want[loadID(d.k)] = loadMix[d.k%len(loadMix)].kind
	}
	var errs []error
	rows, err := conn.Query(ctx, `SELECT id FROM klbot_deliveries`)
	if err != nil {
		return append(errs, fmt.Errorf("reading klbot_deliveries: %w", err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return append(errs, fmt.Errorf("reading klbot_deliveries: %w", err))
	}
	seen := map[string]int{}
	for _, id := range ids {
		seen[id]++
	}
	if len(ids) != unique || len(seen) != unique {
		errs = append(errs, fmt.Errorf("klbot_deliveries holds %d rows (%d ids), want %d: each unique delivery once", len(ids), len(seen), unique))
	}
	for id := range want {
		if seen[id] != 1 {
			errs = append(errs, fmt.Errorf("delivery %s recorded %d times, want once", id, seen[id]))
		}
	}
	type job struct{ Delivery, Kind string }
	rows, err = conn.Query(ctx, `SELECT args->>'delivery', kind FROM river_job`)
	if err != nil {
		return append(errs, fmt.Errorf("reading river_job: %w", err))
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[job])
	if err != nil {
		return append(errs, fmt.Errorf("reading river_job: %w", err))
	}
	got := map[string][]string{}
	for _, j := range jobs {
		got[j.Delivery] = append(got[j.Delivery], j.Kind)
	}
	if len(jobs) != unique {
		errs = append(errs, fmt.Errorf("river_job holds %d jobs, want %d: one per unique delivery", len(jobs), unique))
	}
	for id, kind := range want {
		if ks := got[id]; len(ks) != 1 || ks[0] != kind {
			errs = append(errs, fmt.Errorf("delivery %s enqueued jobs %v, want one %s", id, ks, kind))
		}
	}
	return capErrors(errs, 20)
}

// capErrors keeps the first n errors and says how many more there were.
func capErrors(errs []error, n int) []error {
	if len(errs) <= n {
		return errs
	}
	return append(errs[:n], errors.New(fmt.Sprint(len(errs)-n, " more")))
}

// TestLoadPlan: a load that is not bounded, or sends nothing, is refused
// with the flag named; the schedule is the seed's, starts with a unique
// delivery and redelivers only earlier ones; every delivery's body is one
// GitHub's parser (go-github's, as klbot's) reads, the same on every call.
func TestLoadPlan(t *testing.T) {
	t.Parallel()
	ok := loadPlan{rate: 200, duration: 30 * time.Second, redeliver: 0.1, seed: 1}
	for name, tc := range map[string]struct {
		plan loadPlan
		want string
	}{
		"zero rate":          {loadPlan{rate: 0, duration: time.Second}, "-load.rate=0: want more than 0 and at most 2000"},
		"rate over the cap":  {loadPlan{rate: 5000, duration: time.Second}, "-load.rate=5000"},
		"NaN rate":           {loadPlan{rate: math.NaN(), duration: time.Second}, "-load.rate=NaN"},
		"no duration":        {loadPlan{rate: 200}, "-load.duration=0s: want more than 0 and at most 10m0s"},
		"hour-long":          {loadPlan{rate: 200, duration: time.Hour}, "-load.duration=1h0m0s"},
		"negative share":     {loadPlan{rate: 200, duration: time.Second, redeliver: -0.1}, "-load.redeliver=-0.1: want a share from 0 to 0.5"},
		"mostly redelivered": {loadPlan{rate: 200, duration: time.Second, redeliver: 0.9}, "-load.redeliver=0.9"},
		"nothing sent":       {loadPlan{rate: 1, duration: 100 * time.Millisecond}, "sends no delivery"},
	} {
		err := tc.plan.check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: check() = %v, want an error with %q", name, err, tc.want)
		}
	}
	if err := ok.check(); err != nil {
		t.Fatalf("the make bench load: %v", err)
	}

	sched, unique := loadSchedule(ok)
	again, _ := loadSchedule(ok)
	if len(sched) != 6000 || !slices.Equal(sched, again) {
		t.Fatalf("schedule of %d deliveries, the same twice: %v; want 6000, deterministic", len(sched), slices.Equal(sched, again))
	}
	if sched[0].redelivery {
		t.Error("the first delivery is a redelivery")
	}
	next := 0
	for i, d := range sched {
		switch {
		case d.redelivery && d.k >= next:
			t.Fatalf("delivery %d redelivers unique delivery %d, not sent yet", i, d.k)
		case !d.redelivery && d.k != next:
			t.Fatalf("delivery %d is unique delivery %d, want %d", i, d.k, next)
		case !d.redelivery:
			next++
		}
	}
	if share := float64(len(sched)-unique) / float64(len(sched)); next != unique || share < 0.08 || share > 0.12 {
		t.Errorf("%d unique deliveries (counted %d), %.3f redelivered; want about 0.1", unique, next, share)
	}

	payloads, err := newLoadPayloads()
	if err != nil {
		t.Fatal(err)
	}
	for k := range 2 * len(loadMix) {
		m := loadMix[k%len(loadMix)]
		body := payloads.body(k)
		if !bytes.Equal(body, payloads.body(k)) {
			t.Errorf("delivery %d: two bodies differ (a redelivery must send the same bytes)", k)
		}
		parsed, err := gh.ParseWebHook(m.event, body)
		if err != nil {
			t.Fatalf("delivery %d (%s): %v", k, m.name, err)
		}
		if pe, ok := parsed.(*gh.PullRequestEvent); ok && pe.GetPullRequest().GetHead().GetSHA() != fmt.Sprintf("%040x", k+1) {
			t.Errorf("delivery %d: head SHA %s, want a SHA of its own", k, pe.GetPullRequest().GetHead().GetSHA())
		}
	}
}
