package github

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v62/github"
)

// DefaultMaxTarballBytes caps DownloadTarball unless Options says otherwise.
const DefaultMaxTarballBytes = 256 << 20

// Options configure a Client. The zero value talks to github.com with the
// default retry policy.
type Options struct {
	// BaseURL is the REST API base: "" for https://api.github.com/;
	// https://HOST/api/v3/ (or https://HOST/) for GitHub Enterprise Server;
	// githubfake's APIURL() in tests.
	BaseURL string
	// UploadURL is the upload API base; "" derives it from BaseURL.
	UploadURL string
	// Transport carries every request (API, token and archive downloads);
	// nil is http.DefaultTransport.
	Transport http.RoundTripper
	// Logger gets retries and token refreshes; nil discards. Tokens, keys,
	// headers and archive-link queries are never logged.
	Logger *slog.Logger
	// Truncate shortens Markdown to a byte limit for check run outputs and
	// comments; callers pass report.Truncate (keeps the summary). nil is
	// CutLines.
	Truncate TruncateFunc
	// Retry bounds retries and waits (see RetryPolicy).
	Retry RetryPolicy
	// Sleep waits between attempts; nil sleeps for real, honouring ctx.
	Sleep Sleeper
	// Now is the clock for x-ratelimit-reset; nil is time.Now.
	Now func() time.Time
	// MaxTarballBytes caps DownloadTarball (DefaultMaxTarballBytes).
	MaxTarballBytes int64
	// BotLogin is the login of this client's own comments
	// ("kilolock[bot]", "github-actions[bot]"); "" accepts any author of
	// type Bot as the owner of a sticky comment.
	BotLogin string
}

type resolved struct {
	Options
	base http.RoundTripper // retrying, no credentials
}

func (o Options) resolve() resolved {
	if o.Transport == nil {
		o.Transport = http.DefaultTransport
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Truncate == nil {
		o.Truncate = CutLines
	}
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxTarballBytes <= 0 {
		o.MaxTarballBytes = DefaultMaxTarballBytes
	}
	o.Retry = o.Retry.withDefaults()
	return resolved{Options: o, base: &retryTransport{next: o.Transport, policy: o.Retry, sleep: o.Sleep, now: o.Now, log: o.Logger}}
}

// newGitHub builds a go-github client over rt pointed at the options' URLs.
func (o resolved) newGitHub(rt http.RoundTripper) (*gh.Client, error) {
	c := gh.NewClient(&http.Client{Transport: rt})
	if o.BaseURL == "" {
		return c, nil
	}
	upload := o.UploadURL
	if upload == "" {
		upload = o.BaseURL
	}
	c, err := c.WithEnterpriseURLs(o.BaseURL, upload)
	if err != nil {
		return nil, fmt.Errorf("setting GitHub base URL %q: %w", o.BaseURL, err)
	}
	return c, nil
}

// secretKey holds a private key; it formats and logs as [redacted].
type secretKey []byte

func (secretKey) String() string               { return "[redacted]" }
func (secretKey) GoString() string             { return "[redacted]" }
func (secretKey) LogValue() slog.Value         { return slog.StringValue("[redacted]") }
func (secretKey) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// App is a GitHub App: it hands out one Client per installation, cached,
// each authenticating with an installation token that ghinstallation
// obtains with an RS256 JWT and renews before its hour is up.
type App struct {
	id   int64
	key  secretKey
	opts resolved

	mu      sync.Mutex
	clients map[int64]*Client
}

// NewApp returns the App appID with its private key (PEM, PKCS#1 or
// PKCS#8 as GitHub issues it). The key is parsed here so that a bad key
// fails at start-up; the error never quotes it.
func NewApp(appID int64, privateKeyPEM []byte, opts Options) (*App, error) {
	if appID <= 0 {
		return nil, fmt.Errorf("creating GitHub App client: app id %d is not positive", appID)
	}
	if _, err := ghinstallation.NewAppsTransport(http.DefaultTransport, appID, privateKeyPEM); err != nil {
		return nil, fmt.Errorf("creating GitHub App %d client: private key: %w", appID, err)
	}
	return &App{id: appID, key: secretKey(append([]byte(nil), privateKeyPEM...)), opts: opts.resolve(),
		clients: map[int64]*Client{}}, nil
}

// NewAppFromKeyFile is NewApp with the key read from a PEM file.
func NewAppFromKeyFile(appID int64, keyFile string, opts Options) (*App, error) {
	b, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("reading GitHub App private key: %w", err)
	}
	return NewApp(appID, b, opts)
}

// ID is the app id.
func (a *App) ID() int64 { return a.id }

// String never shows the key.
func (a *App) String() string { return fmt.Sprintf("GitHub App %d", a.id) }

// GoString never shows the key either (%#v would print its bytes).
func (a *App) GoString() string { return fmt.Sprintf("github.App{id: %d, key: [redacted]}", a.id) }

// Installation returns the Client for an installation, creating it on
// first use and reusing it (and its token) afterwards.
func (a *App) Installation(installationID int64) (*Client, error) {
	if installationID <= 0 {
		return nil, fmt.Errorf("creating client for installation %d: id is not positive", installationID)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.clients[installationID]; ok {
		return c, nil
	}
	it := &installationTransport{installationID: installationID, log: a.opts.Logger}
	g, err := a.opts.newGitHub(it)
	if err != nil {
		return nil, err
	}
	tokenBase := strings.TrimSuffix(g.BaseURL.String(), "/")
	it.newTransport = func() (*ghinstallation.Transport, error) {
		itr, err := ghinstallation.New(a.opts.base, a.id, installationID, a.key)
		if err != nil {
			return nil, fmt.Errorf("creating installation transport: %w", err)
		}
		itr.BaseURL = tokenBase
		return itr, nil
	}
	c := newClient(g, a.opts)
	a.clients[installationID] = c
	return c, nil
}

// NewTokenClient returns a Client that authenticates with a fixed token:
// GITHUB_TOKEN in GitHub Actions, or a personal token. A 401 is returned,
// not retried: there is nothing to refresh.
func NewTokenClient(token string, opts Options) (*Client, error) {
	if strings.TrimSpace(token) == "" {
		return nil, errors.New("creating GitHub client: empty token")
	}
	o := opts.resolve()
	g, err := o.newGitHub(o.base)
	if err != nil {
		return nil, err
	}
	return newClient(g.WithAuthToken(token), o), nil
}

// Client performs the GitHub operations klbot and `kl report github`
// need. Every method takes ctx first and returns errors that say what was
// being done; GitHub's refusals are *APIError, this package's own
// *ValidationError. Safe for concurrent use.
type Client struct {
	gh    *gh.Client
	plain *http.Client // archive links: retrying, no credentials
	o     resolved
}

func newClient(g *gh.Client, o resolved) *Client {
	return &Client{gh: g, plain: &http.Client{Transport: o.base}, o: o}
}

// retryWrite runs a non-idempotent write until it succeeds, fails for
// good, or runs out of attempts. Before each retry it calls settled, which
// looks for the effect of the failed attempt (the comment or check run may
// exist although GitHub answered 5xx) and reports true when found.
func (c *Client) retryWrite(ctx context.Context, write func() error, settled func() (bool, error)) error {
	for attempt := 1; ; attempt++ {
		err := write()
		if err == nil || !retryableWrite(err) || attempt >= c.o.Retry.Attempts {
			return err
		}
		wait := c.o.Retry.backoff(attempt)
		c.o.Logger.LogAttrs(ctx, slog.LevelWarn, "github: write failed; checking it and retrying",
			slog.Int("attempt", attempt), slog.Duration("wait", wait), slog.String("error", mapErr(err).Error()))
		if serr := c.o.Sleep(ctx, wait); serr != nil {
			return fmt.Errorf("%w (gave up waiting to retry: %w)", err, serr)
		}
		if settled == nil {
			continue
		}
		done, serr := settled()
		if serr != nil {
			return fmt.Errorf("%w (checking whether the failed attempt took effect: %w)", err, serr)
		}
		if done {
			return nil
		}
	}
}
