package webhook

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the handler's collectors.
type metrics struct {
	// deliveries counts verified, parsed deliveries by event, action and
	// outcome (enqueued, duplicate, ignored, error, panic).
	deliveries *prometheus.CounterVec
	// rejected counts deliveries refused before the sink, by reason.
	rejected *prometheus.CounterVec
	// verified counts deliveries whose signature holds, by the secret
	// that matched (current, previous): during a rotation, previous
	// stops growing once GitHub signs with the new secret.
	verified *prometheus.CounterVec
	// latency is the handler's time to answer, by status code.
	latency *prometheus.HistogramVec
}

// newMetrics builds the collectors and registers them on reg when it is
// set, sharing collectors another Handler already registered there.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "klbot", Subsystem: "webhook", Name: "deliveries_total",
			Help: "Verified webhook deliveries by event, action and outcome (enqueued, duplicate, ignored, error, panic).",
		}, []string{"event", "action", "outcome"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "klbot", Subsystem: "webhook", Name: "delivery_rejected_total",
			Help: "Webhook requests refused before the sink, by reason (signature_mismatch, body_too_large, …).",
		}, []string{"reason"}),
		verified: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "klbot", Subsystem: "webhook", Name: "signature_verified_total",
			Help: "Webhook deliveries whose X-Hub-Signature-256 holds, by the secret that matched (current, or previous during a rotation).",
		}, []string{"secret"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "klbot", Subsystem: "webhook", Name: "handler_duration_seconds",
			Help: "Time to answer a webhook request, by status code; GitHub waits 10 s.",
			// 1 ms … 10 s, GitHub's timeout.
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 8, 10},
		}, []string{"code"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.deliveries, err = register(reg, m.deliveries); err != nil {
		return nil, err
	}
	if m.rejected, err = register(reg, m.rejected); err != nil {
		return nil, err
	}
	if m.verified, err = register(reg, m.verified); err != nil {
		return nil, err
	}
	if m.latency, err = register(reg, m.latency); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c on reg, returning the collector already registered
// under the same description if there is one.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("registering webhook metrics: %w", err)
	}
	return c, nil
}
