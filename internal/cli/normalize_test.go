package cli_test

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// normalizer rewrites what differs between two runs of the same session so
// that golden files compare: run ids, lineages, times, durations, digests,
// temp paths, the holder (host:pid) and the Terraform version.
type normalizer struct {
	// paths are absolute temp directories, each replaced by "$TMP".
	paths []string
	// host is os.Hostname(); "host:<pid>" (a run's holder) becomes "HOST:PID".
	host string
}

var (
	reDigest = regexp.MustCompile(`sha256:[0-9a-f]{64}`)
	reTime   = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
	reAge    = regexp.MustCompile(`\((\d+[smhd] ago|in the future)\)`)
	// A ULID: 26 characters of Crockford's base32 (no I, L, O, U).
	reULID = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
	reUUID = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	// A Go duration as time.Duration.String prints it: 1h2m3.5s, 250ms, 0s;
	// and "<1ms" (internal/report's words for less than a millisecond).
	reDuration = regexp.MustCompile(`<?\b(\d+h)?(\d+m)?\d+(\.\d+)?(ns|µs|us|ms|s)\b`)
	// JSON durations in milliseconds ("waited_ms": 1234).
	reMillis = regexp.MustCompile(`("[a-z_]+_ms": )\d+`)
	// The Terraform version: goldens must not depend on the binary found
	// (make tools installs 1.5.7; CI machines may have another).
	reTFVersion     = regexp.MustCompile(`Terraform \d+\.\d+\.\d+`)
	reTFVersionJSON = regexp.MustCompile(`("terraform_version": )"\d+\.\d+\.\d+"`)
	// A snapshot's size holds the Terraform version that wrote it.
	reSize = regexp.MustCompile(`("size_bytes": )\d+`)
	// Padding inside a line (table columns): two or more spaces after a
	// non-space. Indentation (leading spaces) is kept.
	rePadding = regexp.MustCompile(`(\S) {2,}`)
)

// normalize returns s with, in this order: temp paths → $TMP; host:pid →
// HOST:PID; sha256 digests → sha256:DIGEST; RFC 3339 times → TIME;
// relative ages "(3s ago)" → (AGE); ULID run ids → RUN1, RUN2… and UUIDs
// (lineages) → LINEAGE1, LINEAGE2…, numbered in order of first appearance
// in s; Go durations → DURATION and "…_ms": N → "…_ms": DURATION; the
// Terraform version → TFVERSION and "size_bytes": N → SIZE; and column
// padding (2+ spaces inside a line) → two spaces, since the tokens above
// change column widths (and a relative age does by itself): alignment is
// checked by internal/report's goldens, which use fixed ids and times.
func (n normalizer) normalize(s string) string {
	paths := append([]string(nil), n.paths...)
	// Longest first, so a path is not cut by a shorter prefix of it.
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	for _, p := range paths {
		if p != "" {
			s = strings.ReplaceAll(s, p, "$TMP")
		}
	}
	if n.host != "" {
		s = regexp.MustCompile(regexp.QuoteMeta(n.host)+`:\d+`).ReplaceAllString(s, "HOST:PID")
	}
	s = reDigest.ReplaceAllString(s, "sha256:DIGEST")
	s = reTime.ReplaceAllString(s, "TIME")
	s = reAge.ReplaceAllString(s, "(AGE)")
	s = numbered(s, reULID, "RUN")
	s = numbered(s, reUUID, "LINEAGE")
	s = reDuration.ReplaceAllString(s, "DURATION")
	s = reMillis.ReplaceAllString(s, "${1}DURATION")
	s = reTFVersion.ReplaceAllString(s, "Terraform TFVERSION")
	s = reTFVersionJSON.ReplaceAllString(s, `${1}"TFVERSION"`)
	s = reSize.ReplaceAllString(s, "${1}SIZE")
	s = rePadding.ReplaceAllString(s, "$1  ")
	return s
}

// numbered replaces every match of re by prefix+N, N counting distinct
// matches from 1 in order of first appearance.
func numbered(s string, re *regexp.Regexp, prefix string) string {
	seen := map[string]string{}
	return re.ReplaceAllStringFunc(s, func(m string) string {
		if r, ok := seen[m]; ok {
			return r
		}
		r := fmt.Sprintf("%s%d", prefix, len(seen)+1)
		seen[m] = r
		return r
	})
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	n := normalizer{paths: []string{"/tmp/TestX1", "/tmp/TestX1/001"}, host: "build-7"}
	for name, tc := range map[string]struct{ in, want string }{
		"run ids in order of first appearance": {
			"apply 01M8M39MRHN7K3TQMQX1HTWSCM of plan 01M8M39HR5KN918JBSK6Y99A1J; again 01M8M39MRHN7K3TQMQX1HTWSCM",
			"apply RUN1 of plan RUN2; again RUN1",
		},
		"lineages": {
			`"lineage": "8efc1038-856c-4d02-9131-2e98c96075d7", other 1b4e28ba-2fa1-11d2-883f-0016d3cca427, 8efc1038-856c-4d02-9131-2e98c96075d7`,
			`"lineage": "LINEAGE1", other LINEAGE2, LINEAGE1`,
		},
		"times with and without fractions": {
			"2026-11-29T16:47:57Z → 2026-11-29T16:47:57.189749923Z, 2026-11-29T16:47:57+02:00",
			"TIME → TIME, TIME",
		},
		"relative ages": {"created TIME (3s ago), (58m ago), (2h ago), (3d ago), (in the future)", "created TIME (AGE), (AGE), (AGE), (AGE), (AGE)"},
		"durations": {
			"waited 4.8s, 250ms, 1m30.5s, 2h0m0s, 0s, 3µs, <1ms; \"waited_ms\": 4812",
			"waited DURATION, DURATION, DURATION, DURATION, DURATION, DURATION, DURATION; \"waited_ms\": DURATION",
		},
		"digests": {
			"sha256:89166dfe48e1d048d9c6a0db97f2d4ffa22631f4e4ca2a00f695cefa5ecef00e",
			"sha256:DIGEST",
		},
		"temp paths, longest first": {"dir /tmp/TestX1/001/cfg and /tmp/TestX1/x", "dir $TMP/cfg and $TMP/x"},
		"holder":                    {"holder build-7:25858, \"holder\": \"build-7:1\"", "holder HOST:PID, \"holder\": \"HOST:PID\""},
		"terraform version": {
			"(Terraform 1.11.4) \"terraform_version\": \"1.5.7\", \"size_bytes\": 2287",
			"(Terraform TFVERSION) \"terraform_version\": \"TFVERSION\", \"size_bytes\": SIZE",
		},
		"column padding, not indentation": {
			"  id                          kind   state\n  RUN1  apply  prod",
			"  id  kind  state\n  RUN1  apply  prod",
		},
		"words and addresses stay": {
			"module.app.terraform_data.web[0] +3 ~0 -0 ±0, serial 12 → 13, kilolock/plan/v1",
			"module.app.terraform_data.web[0] +3 ~0 -0 ±0, serial 12 → 13, kilolock/plan/v1",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := n.normalize(tc.in); got != tc.want {
				t.Errorf("normalize(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}
