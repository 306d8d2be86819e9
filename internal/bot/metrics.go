package bot

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are klbot's Prometheus metrics (served on /metrics):
//
//	klbot_deliveries_total{event, outcome}   deliveries Accept handled: enqueued, duplicate, ignored
//	klbot_jobs_total{kind, result}           job attempts ended: ok, refused, skipped, joined, error (retried), cancelled (a final GitHub error), snoozed (it waits; runs again)
//	klbot_job_duration_seconds{kind}         job run time, seconds
//	klbot_runs_total{kind, outcome}          Kilolock runs klbot made: plan planned/refused/failed, apply applied/refused/interrupted/failed
type Metrics struct {
	deliveries *prometheus.CounterVec
	jobs       *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	runs       *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "klbot_deliveries_total",
			Help: "Webhook deliveries accepted by klbot's sink, by event and outcome (enqueued, duplicate, ignored)."}, []string{"event", "outcome"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "klbot_jobs_total",
			Help: "klbot job attempts ended, by kind and result (ok, refused, skipped, joined: the command joined a running job, error: retried by River, cancelled: a final GitHub error, snoozed: it waits for another job or for reservations, and runs again)."}, []string{"kind", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "klbot_job_duration_seconds",
			Help: "Run time of klbot jobs, in seconds.", Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}}, []string{"kind"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "klbot_runs_total",
			Help: "Kilolock runs made by klbot, by kind (plan, apply) and outcome."}, []string{"kind", "outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.deliveries, m.jobs, m.duration, m.runs)
	}
	return m
}

func (m *Metrics) delivery(event, outcome string) { m.deliveries.WithLabelValues(event, outcome).Inc() }

func (m *Metrics) job(kind string, result JobResult, d time.Duration) {
	m.jobs.WithLabelValues(kind, string(result)).Inc()
	m.duration.WithLabelValues(kind).Observe(d.Seconds())
}

func (m *Metrics) run(kind string, outcome runOutcome) {
	m.runs.WithLabelValues(kind, string(outcome)).Inc()
}

// runOutcome is how a Kilolock run klbot made ended, as klbot_runs_total's
// outcome label says.
type runOutcome string

// Run outcomes: a plan is planned, refused (its state does not exist) or
// failed; an apply is applied, refused, interrupted or failed.
const (
	outcomePlanned     runOutcome = "planned"
	outcomeApplied     runOutcome = "applied"
	outcomeRefused     runOutcome = "refused"
	outcomeInterrupted runOutcome = "interrupted"
	outcomeFailed      runOutcome = "failed"
)
