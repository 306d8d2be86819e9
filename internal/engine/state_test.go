package engine_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store/sqlite"
	"github.com/kilolock/kilolock/internal/tfstate"
)

func TestValidateStateName(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		in string
		ok bool
	}{
		"one segment":               {in: "prod", ok: true},
		"three segments":            {in: "acme/infra/prod", ok: true},
		"dots, dashes, underscores": {in: "acme.io/infra_core/eu-west-1.prod", ok: true},
		"digit first":               {in: "0/1", ok: true},
		"dots inside":               {in: "a..b", ok: true},
		"200 characters":            {in: strings.Repeat("a", 200), ok: true},
		"200 with segments":         {in: strings.Repeat("ab/", 66) + "ab", ok: true},
		"empty":                     {in: ""},
		"201 characters":            {in: strings.Repeat("a", 201)},
		"double slash":              {in: "a//b"},
		"leading slash":             {in: "/a"},
		"trailing slash":            {in: "a/"},
		"only a slash":              {in: "/"},
		"dot-dot segment":           {in: "a/../b"},
		"dot segment":               {in: "a/./b"},
		"dot-dot alone":             {in: ".."},
		"trailing dots":             {in: "a.."},
		"trailing dot":              {in: "a/b."},
		"dot first":                 {in: ".a"},
		"dash first in a segment":   {in: "a/-b"},
		"underscore first":          {in: "_a"},
		"space":                     {in: "bad name"},
		"backslash":                 {in: `a\b`},
		"colon":                     {in: "a:b"},
		"non-ASCII letter":          {in: "prød"},
		// The web pages' routes (ADR 0064): /states/acme/prod/timeline is
		// acme/prod's timeline, so no state may be named that.
		"timeline last":     {in: "acme/prod/timeline"},
		"timeline.svg last": {in: "acme/prod/timeline.svg"},
		"timeline alone":    {in: "timeline", ok: true},
		"timeline inside":   {in: "acme/timeline/prod", ok: true},
		"timelines last":    {in: "acme/timelines", ok: true},
		"newline":           {in: "a\nb"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := engine.ValidateStateName(tc.in)
			if tc.ok {
				if err != nil {
					t.Errorf("ValidateStateName(%q) = %v, want nil", tc.in, err)
				}
				return
			}
			if !errors.Is(err, engine.ErrInvalid) {
				t.Fatalf("ValidateStateName(%q) = %v, want ErrInvalid", tc.in, err)
			}
			want := []string{"ASCII letters", "single '/'", "starting with a letter or digit", "1-200"}
			if strings.HasPrefix(name, "timeline") {
				want = []string{"is reserved", "timeline"}
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestInitStateLineage: one Terraform lineage is one Kilolock state;
// adopting a document whose lineage another state has is refused, naming
// that state, and creates nothing.
func TestInitStateLineage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "kl.db"))
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	e := engine.New(st, nil, nil)
	const lineage = "0b8d9c64-3f0e-4d7a-9d53-6a1f2c9e8b70"
	doc := stateDoc(t, lineage, 7)

	x, err := e.InitState(ctx, "acme/x", doc, "tester")
	if err != nil {
		t.Fatalf("adopting the document as acme/x: %v", err)
	}
	if x.Lineage != lineage || x.HeadSerial != 7 {
		t.Errorf("acme/x = lineage %s serial %d, want %s 7", x.Lineage, x.HeadSerial, lineage)
	}

	_, err = e.InitState(ctx, "acme/y", doc, "tester")
	want := "state acme/x already has lineage " + lineage + ": adopting the same Terraform state twice would fork it; use acme/x"
	if !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), want) {
		t.Errorf("adopting it again as acme/y = %v, want ErrConflict saying %q", err, want)
	}
	// The same name again is refused for its name, not its lineage.
	_, err = e.InitState(ctx, "acme/x", doc, "tester")
	if !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), "a state of that name exists") {
		t.Errorf("adopting it again as acme/x = %v, want the name conflict", err)
	}
	// Another lineage and empty states (each a new lineage) are fine.
	if _, err := e.InitState(ctx, "acme/z", stateDoc(t, "7e4f1a2b-9c3d-4e5f-8a6b-1c2d3e4f5a6b", 1), "tester"); err != nil {
		t.Errorf("adopting another lineage: %v", err)
	}
	for _, n := range []string{"acme/e1", "acme/e2"} {
		if _, err := e.InitState(ctx, n, nil, "tester"); err != nil {
			t.Errorf("creating empty state %s: %v", n, err)
		}
	}
	states, err := st.ListStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range states {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, " "); strings.Contains(got, "acme/y") || len(names) != 4 {
		t.Errorf("states = %s, want acme/x, acme/z and the two empty ones", got)
	}
}

// TestInitStateLineageRace: adoptions of one document under different
// names, racing on one SQLite file past the lineage check, create exactly
// one state; every loser is refused for the lineage, naming the winner —
// never for a name that does not exist.
func TestInitStateLineageRace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "kl.db")
	const lineage = "2c1d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
	doc := stateDoc(t, lineage, 3)
	const n = 8
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		// One store per goroutine, as separate kl processes would have.
		st, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatalf("opening store: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		e := engine.New(st, nil, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = e.InitState(ctx, fmt.Sprintf("r/s%d", i), doc, "tester")
		}()
	}
	close(start)
	wg.Wait()

	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	states, err := st.ListStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 1 {
		t.Fatalf("%d states after the race, want 1: %+v", len(states), states)
	}
	winner := states[0].Name
	for i, err := range errs {
		name := fmt.Sprintf("r/s%d", i)
		if name == winner {
			if err != nil {
				t.Errorf("%s was created, yet InitState said %v", name, err)
			}
			continue
		}
		if !errors.Is(err, engine.ErrConflict) {
			t.Errorf("%s: InitState = %v, want ErrConflict", name, err)
			continue
		}
		if strings.Contains(err.Error(), "of that name exists") || strings.Contains(err.Error(), "the state exists") {
			t.Errorf("%s: %q says the name exists; it does not", name, err)
		}
		if want := "state " + winner + " already has lineage " + lineage; !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %q does not say %q", name, err, want)
		}
	}
}

// TestInitStateSerialRange: a state is adopted only with a serial that can
// grow (at most tfstate.MaxAdoptSerial, 2^53−1): one near 2^63−1 is refused
// at adoption, with the range, instead of failing its first apply after
// Terraform ran; one past int64 is refused as out of range.
func TestInitStateSerialRange(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "kl.db"))
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	e := engine.New(st, nil, nil)
	if s, err := e.InitState(ctx, "acme/max", stateDoc(t, "11111111-3f0e-4d7a-9d53-6a1f2c9e8b70", tfstate.MaxAdoptSerial), "tester"); err != nil || s.HeadSerial != tfstate.MaxAdoptSerial {
		t.Errorf("adopting serial 2^53-1 = %+v, %v; want accepted", s, err)
	}
	for name, tc := range map[string]struct{ doc []byte }{
		"2^53":             {stateDoc(t, "22222222-3f0e-4d7a-9d53-6a1f2c9e8b70", tfstate.MaxAdoptSerial+1)},
		"near 2^63-1":      {stateDoc(t, "33333333-3f0e-4d7a-9d53-6a1f2c9e8b70", math.MaxInt64-3)},
		"2^64+5 (no int)":  {[]byte(`{"version": 4, "lineage": "44444444-3f0e-4d7a-9d53-6a1f2c9e8b70", "serial": 18446744073709551621, "resources": []}`)},
		"negative, in doc": {[]byte(`{"version": 4, "lineage": "55555555-3f0e-4d7a-9d53-6a1f2c9e8b70", "serial": -2, "resources": []}`)},
	} {
		_, err := e.InitState(ctx, "acme/big", tc.doc, "tester")
		if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "out of range: want 0 to ") {
			t.Errorf("%s: InitState = %v; want invalid: out of range, naming the range", name, err)
		}
	}
	if _, err := e.InitState(ctx, "acme/big2", stateDoc(t, "66666666-3f0e-4d7a-9d53-6a1f2c9e8b70", tfstate.MaxAdoptSerial+1), "tester"); err == nil ||
		!strings.Contains(err.Error(), "want 0 to 9007199254740991") {
		t.Errorf("InitState at 2^53 = %v; want the range 0 to 2^53-1", err)
	}
}

// stateDoc is an empty Terraform state v4 document of lineage at serial.
func stateDoc(t *testing.T, lineage string, serial int64) []byte {
	t.Helper()
	b, err := tfstate.Empty(lineage, serial, "1.5.7").Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
