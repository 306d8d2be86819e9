package cli

import (
	"errors"
)

// Message is err as kl prints it on stderr after "kl: " (cmd/kl): its
// text, or "" when the interrupt note already said all there is (an
// interrupted command that stopped before Terraform ran, with nothing but
// the cancellation to report). Errors of a kind carry it typed
// (engine.Errorf, errors.Is), not as a label in their words, so nothing is
// cut out of the text.
func Message(err error) string {
	var ee *ExitError
	if err == nil || errors.As(err, &ee) && ee.noted {
		return ""
	}
	return err.Error()
}
