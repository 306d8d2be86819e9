package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilolock/kilolock/internal/api"
	"github.com/kilolock/kilolock/internal/web"
)

// ShutdownTimeout is how long kl serve, asked to stop (SIGINT, SIGTERM),
// lets the requests in flight finish before it cuts their connections.
const ShutdownTimeout = 10 * time.Second

func (a *app) serveCommand() *cobra.Command {
	var (
		listen string
		mib    int
	)
	cmd := &cobra.Command{
		Use:   "serve [--listen HOST:PORT] [--max-body-mib N]",
		Short: "Serve Kilolock's HTTP API on the store: Terraform's http backend at /tf/states/NAME, the run and state pages, the JSON views of /api/v1/",
		Long: `kl serve serves Kilolock's HTTP API on the store, SQLite or PostgreSQL: the handler klbot mounts too.
It serves Terraform's http backend at /tf/states/NAME (README "Terraform's http backend"): a LOCK is a
whole-state reservation, the writes under it one version at UNLOCK. It serves the run pages (/runs/RUN:
kl run show), the state pages (/states, /states/NAME: head, live reservations and fences, waiting runs,
open plans, history) and their JSON under /api/v1/ (what kl ... --json prints; docs/json.md). Requests
authenticate with a token of kl token create (read-only suffices for the pages); with KL_LINK_KEY set, a
page link signed with that key (klbot's KLBOT_LINK_KEY) opens its one page until it expires. It logs one JSON line per request on stderr
(at info unless KL_LOG_LEVEL says otherwise), never a credential. SIGINT or SIGTERM stops it: it takes no new
connections and lets the requests in flight finish, for at most 10s.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("listen") {
				listen = a.cfg.Listen
			}
			if !cmd.Flags().Changed("max-body-mib") {
				mib = a.cfg.MaxBodyMiB
			}
			return a.serve(cmd.Context(), listen, mib, cmd.Flags().Changed("listen"), cmd.Flags().Changed("max-body-mib"))
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on, HOST:PORT (env KL_LISTEN; default 127.0.0.1:8700, loopback only)")
	cmd.Flags().IntVar(&mib, "max-body-mib", 0, fmt.Sprintf("largest request body in MiB, 1 to %d; larger ones get 413 (env KL_MAX_BODY_MIB; default 64)", api.MaxBodyMiB))
	return cmd
}

// serve listens on listen and serves the API over the store until ctx
// ends, then shuts down gracefully (ShutdownTimeout). listenFlag and
// mibFlag say whether the value came from the flag (to name it in an
// error) or the environment.
func (a *app) serve(ctx context.Context, listen string, mib int, listenFlag, mibFlag bool) error {
	if err := checkListen(listen, listenFlag); err != nil {
		return err
	}
	if mib < 1 || mib > api.MaxBodyMiB {
		what := "KL_MAX_BODY_MIB=" + strconv.Itoa(mib)
		if mibFlag {
			what = "--max-body-mib " + strconv.Itoa(mib)
		}
		return fmt.Errorf("%s: use 1 to %d (MiB)", what, api.MaxBodyMiB)
	}
	e, err := a.engineToWrite(ctx, false)
	if err != nil {
		return err
	}
	tokens, err := a.tokenStore(ctx, true)
	if err != nil {
		return err
	}
	links, err := a.linkSigner()
	if err != nil {
		return err
	}
	pages, err := web.New(web.Options{Views: e, Auth: &api.TokenAuth{Tokens: tokens}, Links: links})
	if err != nil {
		return err
	}
	log := a.serveLogger()
	h, err := api.New(api.Options{Tokens: tokens, Backend: e, Web: pages, Logger: log, MaxBody: int64(mib) << 20})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("kl serve: listening on %s: %w", listen, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	a.phase.set(phaseServe)
	log.Info("kl serve listening", "addr", ln.Addr().String(), "max_body_mib", mib)
	select {
	case err := <-served:
		return fmt.Errorf("kl serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("kl serve stopping: no new connections; waiting for the requests in flight", "timeout", ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("kl serve: requests still in flight after %s were cut off: %w", ShutdownTimeout, err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("kl serve: %w", err)
	}
	log.Info("kl serve stopped")
	return nil
}

// linkSigner is the signer of KL_LINK_KEY and KL_LINK_TTL (nil when
// KL_LINK_KEY is unset). Errors name the variable, never the key.
func (a *app) linkSigner() (*web.Signer, error) {
	if a.cfg.LinkKey == "" {
		return nil, nil
	}
	s, err := web.NewSigner(a.cfg.LinkKey, a.cfg.LinkTTL, nil)
	if err != nil {
		return nil, fmt.Errorf("KL_LINK_KEY or KL_LINK_TTL: %w", err)
	}
	return s, nil
}

// runPageLink returns the signed link of a run's page under KL_PUBLIC_URL
// (a kl serve that shares the store and KL_LINK_KEY), or nil when either
// is unset: then kl posts no page link. Errors name the variable.
func (a *app) runPageLink() (func(id string) string, error) {
	if a.cfg.PublicURL == "" || a.cfg.LinkKey == "" {
		return nil, nil
	}
	u, err := url.Parse(a.cfg.PublicURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("KL_PUBLIC_URL=%s: want the public base URL of a kl serve that shares the store, http(s)://HOST[/PATH]", preview(a.cfg.PublicURL))
	}
	s, err := a.linkSigner()
	if err != nil {
		return nil, err
	}
	return func(id string) string { return s.URL(a.cfg.PublicURL, web.KindRun, id) }, nil
}

// checkListen refuses an address that is not HOST:PORT with a port of 0 to
// 65535, naming where it came from.
func checkListen(listen string, flag bool) error {
	what := "KL_LISTEN=" + preview(listen)
	if flag {
		what = "--listen " + preview(listen)
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("%s: not HOST:PORT (e.g. 127.0.0.1:8700, or :8700 for every interface)", what)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%s: port %q is not a number from 0 to 65535", what, port)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("%s: host %q is not a host name or IP address", what, host)
	}
	return nil
}

// serveLogger is kl serve's logger: JSON lines on stderr, at KL_LOG_LEVEL
// when it is set and info otherwise (the request log is at info).
func (a *app) serveLogger() *slog.Logger {
	lvl := slog.LevelInfo
	if a.getenv("KL_LOG_LEVEL") != "" {
		_ = lvl.UnmarshalText([]byte(a.cfg.LogLevel)) // checked by loadEnv
	}
	return slog.New(slog.NewJSONHandler(a.io.Err, &slog.HandlerOptions{Level: lvl}))
}
