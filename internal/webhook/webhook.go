// Package webhook is the HTTP front of klbot: it verifies, parses and
// routes a GitHub webhook delivery to a Sink, and answers GitHub fast.
//
// A request goes through, in order (docs/github.md "Webhooks"):
//
//	POST only                                   → 405
//	body read through http.MaxBytesReader       → 413 over the cap (25 MB)
//	X-Hub-Signature-256, HMAC-SHA256, constant time, SHA-1 never accepted;
//	the secret, or during a rotation the previous one
//	                                            → 401 missing / malformed / mismatch
//	X-GitHub-Event and X-GitHub-Delivery        → 400 naming the missing header
//	event and action klbot handles?             → 202 {"outcome":"ignored"} if not
//	github.ParseWebHook                         → 400 with the parser's reason
//	fields routing needs (repo, installation, PR number, head SHA)
//	                                            → 400 naming the field
//	Sink.Accept, bounded by 8 s                 → 202 enqueued, 200 duplicate, 202 ignored,
//	                                              503 error (not durable: redeliver), 500 panic
//
// A payload GitHub's parser rejects is a 400, never a 500: GitHub does not
// redeliver by itself, and a manual redelivery of a 500 would fail again.
//
// The package knows nothing of queues or databases: de-duplication on the
// delivery id and, for push plans, on (repo, PR, head SHA, draft or not)
// is the Sink's, done durably.
// Every request logs once, with RequestKeys attached; the body and the
// headers are never logged.
package webhook

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/go-github/v62/github"
	"github.com/prometheus/client_golang/prometheus"
)

// Header names GitHub sets on a delivery.
const (
	EventHeader     = "X-GitHub-Event"
	DeliveryHeader  = "X-GitHub-Delivery"
	SignatureHeader = "X-Hub-Signature-256"
	// sha1Header is GitHub's legacy SHA-1 signature, never accepted.
	sha1Header = "X-Hub-Signature"
)

// Defaults for HandlerConfig.
const (
	// DefaultMaxBody is GitHub's cap on a webhook payload, 25 MB.
	DefaultMaxBody = 25 << 20
	// DefaultAcceptTimeout bounds Sink.Accept so that GitHub, which waits
	// 10 s for an answer, gets one in time.
	DefaultAcceptTimeout = 8 * time.Second
)

// Delivery is one verified, parsed webhook delivery.
type Delivery struct {
	ID           string // X-GitHub-Delivery (the same on a redelivery)
	Event        string // X-GitHub-Event
	Action       string // payload "action"; "" for ping
	Installation int64  // installation.id; 0 only for a ping without one
	Repo         string // "owner/name", when the event has one ("" for installation)
	// PR is the pull request number: pull_request.number, issue.number
	// (a comment on a PR), or the single entry of
	// check_run.pull_requests; 0 when there is none (a check run from a
	// fork comes with none: map it through check_run.external_id).
	PR int
	// HeadSHA is pull_request.head.sha, check_run.head_sha or
	// merge_group.head_sha; "" for comments (the bot reads the PR) and the
	// other events.
	HeadSHA string
	// Reason is a merge_group destroyed delivery's "reason" (merged,
	// dequeued or invalidated), which go-github v62's MergeGroupEvent
	// does not carry; "" otherwise.
	Reason string
	// Payload is *github.PullRequestEvent, *github.IssueCommentEvent,
	// *github.CheckRunEvent, *github.MergeGroupEvent,
	// *github.InstallationEvent or *github.PingEvent.
	Payload  any
	Received time.Time // when the request arrived (HandlerConfig.Now)
}

// Outcome is what a Sink did with a delivery. The zero value is not an
// outcome: a Sink returning it is answered with a 500.
type Outcome int

// Outcomes of Sink.Accept.
const (
	// Enqueued: recorded and its work enqueued durably → 202.
	Enqueued Outcome = iota + 1
	// Duplicate: already recorded (same delivery id, or a push plan for
	// the same repo, PR and head SHA, draft or not) → 200.
	Duplicate
	// Ignored: recorded or not, there is no work to do → 202.
	Ignored
)

// String is the outcome's name as it appears in responses, logs and the
// outcome label of klbot_webhook_deliveries_total.
func (o Outcome) String() string {
	switch o {
	case Enqueued:
		return "enqueued"
	case Duplicate:
		return "duplicate"
	case Ignored:
		return "ignored"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Sink takes verified deliveries; internal/bot implements it with a
// durable enqueue.
type Sink interface {
	// Accept durably records d (de-duplicated on d.ID and, for push plans,
	// on (repo, PR, head SHA, draft or not)) and enqueues its work; it returns only once
	// that is durable. ctx carries the request's logger (LoggerFrom) and is
	// cancelled after HandlerConfig.AcceptTimeout. An error means nothing
	// was made durable: the handler answers 503 so an operator redelivers.
	Accept(ctx context.Context, d Delivery) (Outcome, error)
}

// HandlerConfig configures NewHandler.
type HandlerConfig struct {
	// Secret is the webhook secret (required: NewHandler refuses to start
	// without one, docs/github.md).
	Secret []byte
	// PreviousSecret (optional; empty means none) is the secret being
	// replaced while the App's webhook secret is changed on GitHub: a
	// delivery signed with either verifies, Secret tried first. GitHub has one secret per App
	// and signs with the new one from the moment it is saved, so replicas
	// started with both miss no delivery. Which one matched is counted
	// (klbot_webhook_signature_verified_total{secret}) and, while
	// PreviousSecret is set, logged ("secret": "current" or "previous").
	// It must differ from Secret.
	PreviousSecret []byte
	// Sink receives every routed delivery (required).
	Sink Sink
	// Logger logs one line per request; nil discards.
	Logger *slog.Logger
	// MaxBody caps the request body in bytes; 0 means DefaultMaxBody.
	MaxBody int64
	// AcceptTimeout bounds Sink.Accept; 0 means DefaultAcceptTimeout.
	AcceptTimeout time.Duration
	// Metrics, when set, gets the handler's collectors registered
	// (klbot_webhook_deliveries_total, klbot_webhook_delivery_rejected_total,
	// klbot_webhook_signature_verified_total,
	// klbot_webhook_handler_duration_seconds). Collectors already registered
	// there by another Handler are shared.
	Metrics prometheus.Registerer
	// Now stamps Delivery.Received; nil means time.Now.
	Now func() time.Time
}

// Handler is the webhook endpoint, an http.Handler. Build it with
// NewHandler.
type Handler struct {
	secret        []byte
	previous      []byte // nil when no rotation is under way
	sink          Sink
	logger        *slog.Logger
	maxBody       int64
	acceptTimeout time.Duration
	now           func() time.Time
	metrics       *metrics
}

var _ http.Handler = (*Handler)(nil)

// NewHandler returns the webhook handler. It fails without a secret or a
// sink, with a PreviousSecret equal to Secret, with a negative MaxBody or
// AcceptTimeout, or when the metrics cannot be registered.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if len(cfg.Secret) == 0 {
		return nil, errors.New("creating webhook handler: a webhook secret is required")
	}
	if len(cfg.PreviousSecret) > 0 && hmac.Equal(cfg.PreviousSecret, cfg.Secret) {
		return nil, errors.New("creating webhook handler: the previous webhook secret is the current one: set it to the secret being replaced")
	}
	if cfg.Sink == nil {
		return nil, errors.New("creating webhook handler: a sink is required")
	}
	if cfg.MaxBody < 0 {
		return nil, fmt.Errorf("creating webhook handler: negative MaxBody %d", cfg.MaxBody)
	}
	if cfg.AcceptTimeout < 0 {
		return nil, fmt.Errorf("creating webhook handler: negative AcceptTimeout %s", cfg.AcceptTimeout)
	}
	h := &Handler{
		secret:        append([]byte(nil), cfg.Secret...),
		sink:          cfg.Sink,
		logger:        cfg.Logger,
		maxBody:       cfg.MaxBody,
		acceptTimeout: cfg.AcceptTimeout,
		now:           cfg.Now,
	}
	if len(cfg.PreviousSecret) > 0 { // an empty key would verify anyone's HMAC
		h.previous = append([]byte(nil), cfg.PreviousSecret...)
	}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBody
	}
	if h.acceptTimeout == 0 {
		h.acceptTimeout = DefaultAcceptTimeout
	}
	if h.now == nil {
		h.now = time.Now
	}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("creating webhook handler: %w", err)
	}
	h.metrics = m
	return h, nil
}

// ServeHTTP answers one delivery; see the package doc for the status codes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	code := h.serve(w, r)
	h.metrics.latency.WithLabelValues(strconv.Itoa(code)).Observe(time.Since(start).Seconds())
}

// Rejection reasons, the reason label of klbot_webhook_delivery_rejected_total.
const (
	reasonMethod       = "method_not_allowed"
	reasonTooLarge     = "body_too_large"
	reasonUnreadable   = "body_unreadable"
	reasonSigMissing   = "signature_missing"
	reasonSigMalformed = "signature_malformed"
	reasonSigMismatch  = "signature_mismatch"
	reasonHeader       = "header_missing"
	reasonUnparsable   = "payload_unparsable"
	reasonField        = "field_missing"
)

// Delivery outcomes beyond Outcome's, for logs and metrics.
const (
	outcomeError = "error"
	outcomePanic = "panic"
)

// response is the JSON body of every answer.
type response struct {
	Delivery string `json:"delivery,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
	Note     string `json:"note,omitempty"`
	Error    string `json:"error,omitempty"`
}

// serve answers one delivery (see the package doc) and returns the status
// code, for the latency metric: it reads and verifies the request
// (readVerified), parses and routes the payload (parseDelivery), and hands
// the delivery to the sink (deliver).
func (h *Handler) serve(w http.ResponseWriter, r *http.Request) int {
	received := h.now()
	id := r.Header.Get(DeliveryHeader)
	event := r.Header.Get(EventHeader)
	// Before the signature is checked these two are only claims: logged
	// (bounded) to trace a probe, never used as metric labels.
	log := h.logger.With(slog.String("delivery", clip(id, 80)), slog.String("event", clip(event, 80)))

	body, matched, rej := h.readVerified(w, r)
	if rej != nil {
		return h.reject(r.Context(), w, log, id, *rej)
	}
	h.metrics.verified.WithLabelValues(matched).Inc()
	if h.previous != nil {
		log = log.With(slog.String("secret", matched))
	}

	// From here the delivery is GitHub's own.
	eventLabel := event
	if github.EventForType(event) == nil {
		eventLabel = "unknown"
	}
	d, skip, rej := parseDelivery(r.Header, event, body)
	switch {
	case skip != nil:
		return h.ignore(r.Context(), w, log, id, eventLabel, *skip)
	case rej != nil:
		return h.reject(r.Context(), w, log, id, *rej)
	}
	d.ID, d.Event, d.Received = id, event, received
	return h.deliver(w, r, d, eventLabel, matched)
}

// rejection is an answer that refuses a delivery before the sink sees it:
// the status code, the reason label of
// klbot_webhook_delivery_rejected_total, and the message of the body.
type rejection struct {
	code        int
	reason, msg string
}

// skipped is a delivery klbot does not handle (202 ignored): its action,
// as the metric label, and a note saying why.
type skipped struct {
	action, note string
}

// reject answers rej, counts and logs it.
func (h *Handler) reject(ctx context.Context, w http.ResponseWriter, log *slog.Logger, id string, rej rejection) int {
	h.metrics.rejected.WithLabelValues(rej.reason).Inc()
	log.LogAttrs(ctx, slog.LevelWarn, "webhook rejected",
		slog.Int("status", rej.code), slog.String("reason", rej.reason), slog.String("error", rej.msg))
	writeJSON(w, rej.code, response{Delivery: id, Error: rej.msg})
	return rej.code
}

// ignore answers 202 ignored for s, counts and logs it.
func (h *Handler) ignore(ctx context.Context, w http.ResponseWriter, log *slog.Logger, id, eventLabel string, s skipped) int {
	h.metrics.deliveries.WithLabelValues(eventLabel, s.action, Ignored.String()).Inc()
	log.LogAttrs(ctx, slog.LevelInfo, "webhook ignored",
		slog.String("action", s.action), slog.Int("status", http.StatusAccepted), slog.String("note", s.note))
	writeJSON(w, http.StatusAccepted, response{Delivery: id, Outcome: Ignored.String(), Note: s.note})
	return http.StatusAccepted
}

// readVerified reads the body of a POST, at most h.maxBody bytes, and
// checks its signature (verify) and the event and delivery headers; it
// returns the body and which secret signed it (secretCurrent or
// secretPrevious), or the rejection (405, 413, 400, 401).
func (h *Handler) readVerified(w http.ResponseWriter, r *http.Request) ([]byte, string, *rejection) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return nil, "", &rejection{http.StatusMethodNotAllowed, reasonMethod, "method " + r.Method + " not allowed: webhooks are POSTed"}
	}
	tooLarge := fmt.Sprintf("body over %d bytes (GitHub caps payloads at 25 MB)", h.maxBody)
	if r.ContentLength > h.maxBody {
		return nil, "", &rejection{http.StatusRequestEntityTooLarge, reasonTooLarge, tooLarge}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, "", &rejection{http.StatusRequestEntityTooLarge, reasonTooLarge, tooLarge}
		}
		return nil, "", &rejection{http.StatusBadRequest, reasonUnreadable, "reading body: " + err.Error()}
	}
	matched, reason, msg := h.verify(r.Header, body)
	if reason != "" {
		return nil, "", &rejection{http.StatusUnauthorized, reason, msg}
	}
	if r.Header.Get(EventHeader) == "" {
		return nil, "", &rejection{http.StatusBadRequest, reasonHeader, "missing " + EventHeader + " header"}
	}
	if r.Header.Get(DeliveryHeader) == "" {
		return nil, "", &rejection{http.StatusBadRequest, reasonHeader, "missing " + DeliveryHeader + " header"}
	}
	return body, matched, nil
}

// parseDelivery parses the verified body of event and routes it: it
// returns the Delivery (without ID, Event, Received), or why klbot skips
// it (an event or action it does not handle, route's note), or the
// rejection (400: not JSON, not a payload GitHub's parser reads, a field
// routing needs missing).
func parseDelivery(hdr http.Header, event string, body []byte) (Delivery, *skipped, *rejection) {
	actions, supported := supportedActions[event]
	if !supported {
		return Delivery{}, &skipped{"", "event " + strconv.Quote(clip(event, 80)) + " is not handled by klbot"}, nil
	}
	var head struct {
		Action string `json:"action"`
		Reason string `json:"reason"` // merge_group destroyed
	}
	if err := json.Unmarshal(body, &head); err != nil {
		msg := "payload is not JSON: " + clip(err.Error(), 300)
		if ct, _, _ := mime.ParseMediaType(hdr.Get("Content-Type")); ct == "application/x-www-form-urlencoded" {
			msg += " (set the webhook content type to application/json)"
		}
		return Delivery{}, nil, &rejection{http.StatusBadRequest, reasonUnparsable, msg}
	}
	if actions != nil && !actions[head.Action] {
		return Delivery{}, &skipped{clip(head.Action, 40), fmt.Sprintf("%s action %q is not handled by klbot", event, clip(head.Action, 80))}, nil
	}
	parsed, err := github.ParseWebHook(event, body)
	if err != nil {
		return Delivery{}, nil, &rejection{http.StatusBadRequest, reasonUnparsable,
			fmt.Sprintf("parsing %s payload: %s", event, clip(err.Error(), 300))}
	}
	d, note, missing := route(parsed)
	if event == "merge_group" {
		d.Reason = head.Reason
	}
	if note != "" {
		return Delivery{}, &skipped{d.Action, note}, nil
	}
	if missing != "" {
		return Delivery{}, nil, &rejection{http.StatusBadRequest, reasonField,
			fmt.Sprintf("%s %s payload has no %s", event, d.Action, missing)}
	}
	return d, nil, nil
}

// deliver hands d, verified with the secret matched names, to the sink
// (accept, bounded by h.acceptTimeout) and answers its outcome: 202
// enqueued or ignored, 200 duplicate, 503 on an error (not recorded:
// redeliver), 500 on a panic or no outcome.
func (h *Handler) deliver(w http.ResponseWriter, r *http.Request, d Delivery, eventLabel, matched string) int {
	ctx := NewContext(r.Context(), h.logger, d)
	log := LoggerFrom(ctx) // the sink's; the secret is the handler's line only
	if h.previous != nil {
		log = log.With(slog.String("secret", matched))
	}
	ctx, cancel := context.WithTimeout(ctx, h.acceptTimeout)
	defer cancel()
	start := time.Now()
	outcome, panicked, err := h.accept(ctx, d)
	took := slog.Duration("accept_took", time.Since(start))
	count := func(outcome string) {
		h.metrics.deliveries.WithLabelValues(eventLabel, d.Action, outcome).Inc()
	}
	switch {
	case panicked != nil:
		count(outcomePanic)
		log.LogAttrs(ctx, slog.LevelError, "webhook sink panicked",
			slog.Int("status", http.StatusInternalServerError), slog.Any("panic", panicked.value),
			slog.String("stack", string(panicked.stack)), took)
		writeJSON(w, http.StatusInternalServerError, response{Delivery: d.ID, Outcome: outcomeError,
			Error: "internal error: the delivery was not recorded; redeliver it"})
		return http.StatusInternalServerError
	case err != nil:
		count(outcomeError)
		log.LogAttrs(ctx, slog.LevelError, "webhook not recorded",
			slog.Int("status", http.StatusServiceUnavailable), slog.String("error", err.Error()), took)
		writeJSON(w, http.StatusServiceUnavailable, response{Delivery: d.ID, Outcome: outcomeError,
			Error: "the delivery was not recorded; redeliver it once klbot is healthy"})
		return http.StatusServiceUnavailable
	}
	code := http.StatusAccepted
	switch outcome {
	case Enqueued, Ignored:
	case Duplicate:
		code = http.StatusOK
	default:
		count(outcomeError)
		log.LogAttrs(ctx, slog.LevelError, "webhook sink returned no outcome",
			slog.Int("status", http.StatusInternalServerError), slog.String("outcome", outcome.String()), took)
		writeJSON(w, http.StatusInternalServerError, response{Delivery: d.ID, Outcome: outcomeError,
			Error: "internal error: the delivery may not be recorded; redeliver it"})
		return http.StatusInternalServerError
	}
	count(outcome.String())
	log.LogAttrs(ctx, slog.LevelInfo, "webhook accepted",
		slog.Int("status", code), slog.String("outcome", outcome.String()), took)
	writeJSON(w, code, response{Delivery: d.ID, Outcome: outcome.String()})
	return code
}

// Which secret a delivery's signature matched: the secret label of
// klbot_webhook_signature_verified_total, and the "secret" of the log
// line while a previous secret is set.
const (
	secretCurrent  = "current"
	secretPrevious = "previous"
)

// verify checks X-Hub-Signature-256 over the raw body against the secret,
// then the previous secret when one is set, each with
// github.ValidateSignature (hmac.Equal: constant time). It returns which
// secret matched (secretCurrent, secretPrevious), or a rejection reason
// and message. Only "sha256=" and 64 hex digits is accepted:
// github.ValidateSignature alone would take a "sha1=" value, and SHA-1 is
// refused (docs/github.md). Messages never echo the signature or a
// secret.
func (h *Handler) verify(hdr http.Header, body []byte) (matched, reason, msg string) {
	sigs := hdr.Values(SignatureHeader)
	switch {
	case len(sigs) == 0 || sigs[0] == "":
		if hdr.Get(sha1Header) != "" {
			return "", reasonSigMissing, "missing " + SignatureHeader + " header (" + sha1Header + ", SHA-1, is not accepted)"
		}
		return "", reasonSigMissing, "missing " + SignatureHeader + " header"
	case len(sigs) > 1:
		return "", reasonSigMalformed, "malformed " + SignatureHeader + ": more than one value"
	}
	const prefix = "sha256="
	sig := sigs[0]
	if len(sig) != len(prefix)+64 || sig[:len(prefix)] != prefix || !isHex(sig[len(prefix):]) {
		return "", reasonSigMalformed, "malformed " + SignatureHeader + ": want sha256= and 64 hex digits"
	}
	if github.ValidateSignature(sig, body, h.secret) == nil {
		return secretCurrent, "", ""
	}
	if h.previous != nil && github.ValidateSignature(sig, body, h.previous) == nil {
		return secretPrevious, "", ""
	}
	if h.previous != nil {
		return "", reasonSigMismatch, SignatureHeader + " does not match the body with the webhook secret nor with the previous one (is the secret the same on both sides?)"
	}
	return "", reasonSigMismatch, SignatureHeader + " does not match the body (is the webhook secret the same on both sides?)"
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

type sinkPanic struct {
	value any
	stack []byte
}

// accept calls the sink, turning a panic into a value.
func (h *Handler) accept(ctx context.Context, d Delivery) (outcome Outcome, panicked *sinkPanic, err error) {
	defer func() {
		if p := recover(); p != nil {
			panicked = &sinkPanic{value: p, stack: debug.Stack()}
		}
	}()
	outcome, err = h.sink.Accept(ctx, d)
	return outcome, nil, err
}

func writeJSON(w http.ResponseWriter, code int, body response) {
	b, err := json.Marshal(body)
	if err != nil { // cannot happen: strings only
		b = []byte(`{}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
