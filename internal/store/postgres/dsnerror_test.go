package postgres_test

import (
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/store/postgres"
)

// TestParseErrorShowsNoDSN (issue 15 §4, "never print a store value"): a
// DSN that does not parse fails Open with the cause alone. pgx's parse
// error quotes the DSN with its password redacted on a best-effort basis,
// and libpq's own syntax defeats it: spaces around "=" ("password = pw")
// or an escaped blank ("password=pw\ rest") showed the password, whole or
// in part. No server is needed: parsing fails before any connection.
func TestParseErrorShowsNoDSN(t *testing.T) {
	t.Parallel()
	const pw = "s3cretPW9"
	for name, tc := range map[string]struct{ dsn, cause string }{
		"blanks around =":  {"host=127.0.0.1 password = " + pw + " sslmode=bogus", "sslmode is invalid"},
		"escaped blank":    {`host=127.0.0.1 password=abc\ ` + pw + " sslmode=bogus", "sslmode is invalid"},
		"quoted":           {"host=127.0.0.1 password='" + pw + "' sslmode=bogus", "sslmode is invalid"},
		"unterminated":     {"host=127.0.0.1 password='" + pw, "unterminated quoted string"},
		"URL, bad port":    {"postgres://kl:" + pw + "@127.0.0.1:notaport/kl", "invalid port"},
		"URL, query value": {"postgres://kl@127.0.0.1:1/kl?password=" + pw + "&sslmode=bogus", "sslmode is invalid"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := postgres.Open(t.Context(), tc.dsn)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded; want a parse error")
			}
			msg := err.Error()
			if !strings.Contains(msg, "parsing the DSN") || !strings.Contains(msg, tc.cause) {
				t.Errorf("Open: %q; want it to say parsing the DSN and %q", msg, tc.cause)
			}
			if strings.Contains(msg, pw) || strings.Contains(msg, "127.0.0.1") {
				t.Errorf("Open: %q shows the DSN", msg)
			}
		})
	}
}
