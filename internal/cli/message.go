package cli

import (
	"errors"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// kindLabels are the sentinels whose text is a kind, not words: wrapping
// one with %w appends ": conflict" to a message that already says what
// conflicts, or starts one with "invalid input: ".
var kindLabels = []error{engine.ErrConflict, engine.ErrNotFound, engine.ErrInvalid}

// Message is err as kl prints it on stderr after "kl: " (cmd/kl): its text
// without kind labels (errText), or "" when the interrupt note already
// said all there is (an interrupted command that stopped before Terraform
// ran, with nothing but the cancellation to report).
func Message(err error) string {
	var ee *ExitError
	if err == nil || errors.As(err, &ee) && ee.noted {
		return ""
	}
	return errText(err)
}

// errText is err's text without the kind labels of kindLabels it wraps: a
// trailing ": <label>", and a "<label>: " that starts the message or a
// clause of its first line. The kind stays in the error (errors.Is, the
// exit code) and in the JSON error document, which keeps the full text;
// only the words on stderr change. Text that would be left empty is kept
// whole.
func errText(err error) string {
	msg := err.Error()
	for _, kind := range kindLabels {
		if !errors.Is(err, kind) {
			continue
		}
		label := kind.Error()
		if m, ok := strings.CutSuffix(msg, ": "+label); ok && m != "" {
			msg = m
		}
		first, rest, lines := strings.Cut(msg, "\n")
		if m, ok := strings.CutPrefix(first, label+": "); ok && m != "" {
			first = m
		} else if i := strings.Index(first, ": "+label+": "); i >= 0 {
			first = first[:i+2] + first[i+2+len(label)+2:]
		}
		msg = first
		if lines {
			msg += "\n" + rest
		}
	}
	return msg
}
