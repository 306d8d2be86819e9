package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Signed links (ADR 0064): a link klbot (or `kl report github`) posts
// opens one run's or one state's page without a token, until it expires.
// Its query carries the expiry and an HMAC-SHA256 (crypto/hmac; RFC 2104)
// over the link's kind, id and expiry under the server's key:
//
//	/runs/RUN?exp=UNIX&sig=BASE64URL
//	/states/NAME?exp=UNIX&sig=BASE64URL
//
// The MAC's message is "kilolock-link/v1", kind, id and exp joined by NUL
// bytes — no id holds one — so that a run's signature is never a state's.

// Link kinds: what a signed link opens.
const (
	KindRun   = "run"
	KindState = "state"
)

// MinKeyLen is the shortest signing key accepted, in bytes: 32, the size
// of HMAC-SHA256's output (RFC 2104 §3 advises a key at least that long).
const MinKeyLen = 32

// DefaultLinkTTL is how long a signed link opens its page when the
// server's configuration sets no TTL: 7 days. klbot signs anew each time
// it updates the check run that holds one.
const DefaultLinkTTL = 7 * 24 * time.Hour

// MaxLinkTTL is the longest TTL accepted: 366 days.
const MaxLinkTTL = 366 * 24 * time.Hour

// Signer signs and checks links. Its zero value is not usable: make one
// with NewSigner.
type Signer struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

// NewSigner returns a Signer with key (at least MinKeyLen bytes) whose
// links expire ttl after they are signed (0: DefaultLinkTTL; at most
// MaxLinkTTL). now is the clock (time.Now if nil). Errors name the
// problem: a short key, a negative or too long TTL.
func NewSigner(key string, ttl time.Duration, now func() time.Time) (*Signer, error) {
	switch {
	case len(key) < MinKeyLen:
		return nil, fmt.Errorf("link signing key is %d bytes: want at least %d (e.g. openssl rand -hex 32)", len(key), MinKeyLen)
	case ttl < 0:
		return nil, fmt.Errorf("link TTL %s is negative: want a duration such as 168h", ttl)
	case ttl > MaxLinkTTL:
		return nil, fmt.Errorf("link TTL %s is longer than %s", ttl, MaxLinkTTL)
	}
	if ttl == 0 {
		ttl = DefaultLinkTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Signer{key: []byte(key), ttl: ttl, now: now}, nil
}

// TTL is how long the links it signs open their page.
func (s *Signer) TTL() time.Duration { return s.ttl }

func (s *Signer) mac(kind, id string, exp int64) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("kilolock-link/v1\x00" + kind + "\x00" + id + "\x00" + strconv.FormatInt(exp, 10)))
	return m.Sum(nil)
}

// PagePath is the path of the page of kind (KindRun, KindState) and id:
// /runs/RUN or /states/NAME, each segment of NAME path-escaped.
func PagePath(kind, id string) string {
	if kind == KindRun {
		return "/runs/" + url.PathEscape(id)
	}
	segs := strings.Split(id, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/states/" + strings.Join(segs, "/")
}

// URL returns base (the server's public URL, e.g. https://klbot.example.com)
// joined with the signed page link of kind and id, expiring TTL from now.
func (s *Signer) URL(base, kind, id string) string {
	exp := s.now().Add(s.ttl).Unix()
	q := url.Values{"exp": {strconv.FormatInt(exp, 10)}, "sig": {base64.RawURLEncoding.EncodeToString(s.mac(kind, id, exp))}}
	return strings.TrimRight(base, "/") + PagePath(kind, id) + "?" + q.Encode()
}

// TimelineURL is the signed link of state's timeline page
// (/states/NAME/timeline): the state's signature, which opens the
// timeline as it opens the state's page.
func (s *Signer) TimelineURL(base, state string) string {
	u := s.URL(base, KindState, state)
	path, q, _ := strings.Cut(u, "?")
	return path + "/timeline?" + q
}

// ErrTampered is a link whose signature does not match its kind, id and
// expiry: altered, cut, or signed with another key.
var ErrTampered = errors.New("this link was altered or was not signed by this server: its signature does not match what it opens")

// ExpiredError is a link whose signature matches but whose expiry passed.
type ExpiredError struct{ At time.Time }

func (e *ExpiredError) Error() string {
	return "this link expired at " + e.At.UTC().Format(time.RFC3339)
}

// Check verifies the exp and sig of a link to kind and id: nil when it
// matches and has not expired; ErrTampered when the signature does not
// match (or exp is not a number); *ExpiredError when it matched but
// expired; ErrTooLong when it matched but expires more than MaxLinkTTL
// from now. The MAC is compared in constant time (hmac.Equal).
func (s *Signer) Check(kind, id, exp, sig string) error {
	n, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return ErrTampered
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(kind, id, n)) {
		return ErrTampered
	}
	at := time.Unix(n, 0)
	if !s.now().Before(at) {
		return &ExpiredError{At: at}
	}
	if at.Sub(s.now()) > MaxLinkTTL {
		// Signed with this key, but for longer than any link this server
		// signs (the TTL is capped at signing): not a link to honour.
		return ErrTooLong
	}
	return nil
}

// ErrTooLong is a link whose signature matches but whose expiry is more
// than MaxLinkTTL ahead: no link this server signs lasts that long.
var ErrTooLong = errors.New("this link expires more than 366 days from now, longer than any link this server signs: sign in with a token of kl token create")
