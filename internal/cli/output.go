package cli

import (
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/kilolock/kilolock/internal/report"
)

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// logger logs to stderr at KL_LOG_LEVEL (warn when unset or unknown).
func (a *app) logger() *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(a.cfg.LogLevel)); err != nil {
		lvl = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(a.io.Err, &slog.HandlerOptions{Level: lvl}))
}

// isTTY reports whether w is a terminal.
func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// termWidth returns the width in columns of the terminal w, or 0.
func termWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return cols
}

// reportOptions returns the rendering options for stdout.
func (a *app) reportOptions() report.Options {
	o := report.Options{Format: report.Text, Now: time.Now().UTC()}
	if a.jsonOut {
		o.Format = report.JSON
	}
	o.Color = o.Format == report.Text && useColor(a.cfg, isTTY(a.stdout))
	return o
}

// useColor says whether text on a terminal (tty) gets ANSI colour: not
// with NO_COLOR set to anything (https://no-color.org), nor on a terminal
// that has none (TERM=dumb, as Emacs shell buffers and some CI logs say).
func useColor(cfg Config, tty bool) bool {
	return tty && cfg.NoColor == "" && cfg.Term != "dumb"
}
