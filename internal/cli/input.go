package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/kilolock/kilolock/internal/engine"
)

// Bounds of free text that kl stores and later prints to everyone who
// reads the run (kl runs, kl run show, GitHub reports).
const (
	// MaxActor is the longest KL_ACTOR, in characters.
	MaxActor = 200
	// MaxReason is the longest kl run discard --reason, in characters.
	MaxReason = 1000
	// maxPath is the longest -C or --var-file path, in characters.
	maxPath = 4096
)

// textProblem is engine.TextProblem with a length limit: "" when s is fit
// to be stored and printed later, else what is wrong with it.
func textProblem(s string, max int) string {
	if !utf8.ValidString(s) {
		return "not valid UTF-8"
	}
	if n := utf8.RuneCountInString(s); n > max {
		return fmt.Sprintf("too long: %d characters, at most %d", n, max)
	}
	return engine.TextProblem(s)
}

// wordsProblem is textProblem for text that names or explains (KL_ACTOR,
// --reason): it must also show something — not blank — and neither begin
// nor end with a space, which a reader cannot see. Inner spaces are fine.
func wordsProblem(s string, max int) string {
	if p := textProblem(s, max); p != "" {
		return p
	}
	switch {
	case strings.TrimSpace(s) == "":
		return "blank: use printable text"
	case strings.TrimSpace(s) != s:
		return "begins or ends with a space: remove it"
	}
	return ""
}

// preview is s as shown in an error: quoted (Go syntax, so control
// characters show as escapes), and cut to 60 characters.
func preview(s string) string {
	const n = 60
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	return strconv.Quote(s)
}

// checkText returns an error naming flag when value is unfit to be stored
// and printed later (textProblem).
func checkText(flag, value string, max int) error {
	if p := textProblem(value, max); p != "" {
		return fmt.Errorf("%s %s: %s", flag, preview(value), p)
	}
	return nil
}

// checkWords returns an error naming flag when value is unfit to name or
// explain something (wordsProblem).
func checkWords(flag, value string, max int) error {
	if p := wordsProblem(value, max); p != "" {
		return fmt.Errorf("%s %s: %s", flag, preview(value), p)
	}
	return nil
}

// checkTexts checks every value of a repeatable flag (checkText).
func checkTexts(flag string, values []string, max int) error {
	for _, v := range values {
		if err := checkText(flag, v, max); err != nil {
			return err
		}
	}
	return nil
}

// parseRunID checks that s is a run id — a ULID, 26 characters of
// Crockford base32 (engine.NewRunID) — and returns it in the canonical
// upper case kl stores.
func parseRunID(flag, s string) (string, error) {
	id, err := ulid.ParseStrict(s)
	if err != nil {
		return "", fmt.Errorf("%s %s: not a run id (26 characters of Crockford base32, e.g. 01J0000000000000000000000X, as kl runs shows)", flag, preview(s))
	}
	return id.String(), nil
}

// repoPattern is a GitHub OWNER/REPO: an owner of letters, digits and '-',
// a repository of letters, digits, '.', '_' and '-'.
var repoPattern = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$`)

// storeMissing reports whether there is no SQLite store at path: no file,
// or an empty regular file (without a -wal file that holds data) — a
// store that was never initialised, which only `kl state init` turns into
// one. empty says it was the empty file. Other stat errors — a parent that
// is a regular file, a permission — are left to the store to report.
func storeMissing(path string) (missing, empty bool) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true, false
	}
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > 0 {
		return false, false
	}
	if wal, err := os.Stat(path + "-wal"); err == nil && wal.Size() > 0 {
		return false, false
	}
	return true, true
}
