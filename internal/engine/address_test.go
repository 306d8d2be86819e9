package engine

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseAddress(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		in, want string
		err      bool
	}{
		"resource":              {in: "terraform_data.web", want: "terraform_data.web"},
		"instance count":        {in: "terraform_data.web[3]", want: "terraform_data.web"},
		"instance for_each":     {in: `terraform_data.web["a.b[0]"]`, want: "terraform_data.web"},
		"module instance":       {in: `module.app["eu"].module.db[0].terraform_data.main["x"]`, want: "module.app.module.db.terraform_data.main"},
		"data source":           {in: "module.net.data.terraform_remote_state.vpc", want: "module.net.data.terraform_remote_state.vpc"},
		"output":                {in: "output.url", want: "output.url"},
		"prefix":                {in: "module.app.*", want: "module.app.*"},
		"prefix nested":         {in: `module.app["x"].module.db.*`, want: "module.app.module.db.*"},
		"all":                   {in: "*", want: "*"},
		"empty":                 {in: "", err: true},
		"bare module":           {in: "module.app", err: true},
		"attribute reference":   {in: "terraform_data.web.output", err: true},
		"module output":         {in: "module.app.output.x", err: true},
		"prefix without module": {in: "terraform_data.*", err: true},
		"junk":                  {in: "terraform_data.web[", err: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseAddress(tc.in)
			if tc.err {
				if err == nil {
					t.Fatalf("ParseAddress(%q) = %q; want an error", tc.in, got)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("ParseAddress(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestOverlapsAndCovers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b             Address
		overlaps, covers bool
	}{
		{"terraform_data.a", "terraform_data.a", true, true},
		{"terraform_data.a", "terraform_data.b", false, false},
		{"module.app.*", "module.app.terraform_data.x", true, true},
		{"module.app.*", "module.app.module.db.terraform_data.x", true, true},
		{"module.app.*", "module.application.terraform_data.x", false, false},
		{"module.app.*", "module.app.module.db.*", true, true},
		{"module.app.module.db.*", "module.app.*", true, false},
		{"module.app.*", "output.x", false, false},
		{"*", "output.x", true, true},
		{"output.x", "*", true, false},
		{"terraform_data.a", "*", true, false},
		{"module.app.*", "*", true, false},
		{"*", "*", true, true},
		{"output.x", "output.x", true, true},
	}
	for _, tc := range tests {
		if got := tc.a.Overlaps(tc.b); got != tc.overlaps {
			t.Errorf("%s.Overlaps(%s) = %v; want %v", tc.a, tc.b, got, tc.overlaps)
		}
		if got := tc.b.Overlaps(tc.a); got != tc.overlaps {
			t.Errorf("%s.Overlaps(%s) = %v; want %v (symmetry)", tc.b, tc.a, got, tc.overlaps)
		}
		if got := tc.a.Covers(tc.b); got != tc.covers {
			t.Errorf("%s.Covers(%s) = %v; want %v", tc.a, tc.b, got, tc.covers)
		}
	}
}

func TestAddressSet(t *testing.T) {
	t.Parallel()
	s := NewAddressSet("b.x", "a.x", "b.x", "module.m.*")
	if want := (AddressSet{"a.x", "b.x", "module.m.*"}); !reflect.DeepEqual(s, want) {
		t.Fatalf("NewAddressSet = %v; want %v", s, want)
	}
	if got := s.Minus(AddressSet{"b.x"}); !reflect.DeepEqual(got, AddressSet{"a.x", "module.m.*"}) {
		t.Errorf("Minus = %v", got)
	}
	if got := (AddressSet{"module.m.t.n", "c.d"}).Overlapping(s); !reflect.DeepEqual(got, AddressSet{"module.m.t.n"}) {
		t.Errorf("Overlapping = %v", got)
	}
}

func TestReservationsOfFootprint(t *testing.T) {
	t.Parallel()
	fp := Footprint{Write: NewAddressSet("a.x", "output.o"), Read: NewAddressSet("a.x", "b.y", "module.m.*")}
	got := fp.Reservations()
	want := []Reservation{
		{Address: "a.x", Mode: ModeWrite}, {Address: "output.o", Mode: ModeWrite},
		{Address: "b.y", Mode: ModeRead}, {Address: "module.m.*", Mode: ModeRead},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Reservations = %v; want %v", got, want)
	}
}

func TestConflictsNameEveryBlockedAddress(t *testing.T) {
	t.Parallel()
	held := []Reservation{
		{Address: "*", Mode: ModeRead, Run: "A"},
		{Address: "module.app.*", Mode: ModeWrite, Run: "B"},
		{Address: "terraform_data.mine", Mode: ModeWrite, Run: "ME"},
	}
	want := []Reservation{
		{Address: "terraform_data.x", Mode: ModeWrite},
		{Address: "module.app.terraform_data.y", Mode: ModeRead},
		{Address: "module.app.terraform_data.z", Mode: ModeWrite},
		{Address: "terraform_data.mine", Mode: ModeWrite},
	}
	got := map[string]AddressSet{}
	for _, b := range Conflicts("ME", want, held) {
		got[b.Run] = b.Addresses
	}
	wantBlocked := map[string]AddressSet{
		"A": NewAddressSet("terraform_data.x", "module.app.terraform_data.z", "terraform_data.mine"),
		"B": NewAddressSet("module.app.terraform_data.y", "module.app.terraform_data.z"),
	}
	for run, addrs := range wantBlocked {
		if !reflect.DeepEqual(got[run], addrs) {
			t.Errorf("run %s blocks %v; want %v", run, got[run], addrs)
		}
	}
	if len(got) != len(wantBlocked) {
		t.Errorf("blockers %v; want runs A and B only", got)
	}
}

func TestParseInstanceAddress(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		in, want string
		err      bool
	}{
		"resource":        {in: "terraform_data.web", want: "terraform_data.web"},
		"count":           {in: "terraform_data.web[3]", want: "terraform_data.web[3]"},
		"for_each":        {in: `terraform_data.web["a.b[0]"]`, want: `terraform_data.web["a.b[0]"]`},
		"module instance": {in: `module.app["eu"].module.db[0].terraform_data.main["x"]`, want: `module.app["eu"].module.db[0].terraform_data.main["x"]`},
		"module key only": {in: `module.app["eu"].terraform_data.main`, want: `module.app["eu"].terraform_data.main`},
		"spaces trimmed":  {in: ` terraform_data.web["a"] `, want: `terraform_data.web["a"]`},
		"escaped quote":   {in: `terraform_data.web["q\"x"]`, want: `terraform_data.web["q\"x"]`},
		"data instance":   {in: `data.terraform_remote_state.net[1]`, want: `data.terraform_remote_state.net[1]`},
		"prefix no keys":  {in: `module.app["x"].*`, want: "module.app.*"},
		"output":          {in: "output.url", want: "output.url"},
		"negative key":    {in: "terraform_data.web[-1]", err: true},
		"fraction key":    {in: "terraform_data.web[1.5]", err: true},
		"unterminated":    {in: `terraform_data.web["a`, err: true},
		"bare module":     {in: `module.app["x"]`, err: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseInstanceAddress(tc.in)
			if tc.err {
				if err == nil {
					t.Fatalf("ParseInstanceAddress(%q) = %q; want an error", tc.in, got)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("ParseInstanceAddress(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			if r := MustParseAddress(tc.in); got.Resource() != r {
				t.Errorf("%q.Resource() = %q; want ParseAddress's %q", got, got.Resource(), r)
			}
		})
	}
}

// TestInstanceOverlap is the rule of ADR 0065: instances of one resource are
// disjoint unless equal, a resource overlaps its instances, module instances
// follow the same rule, prefixes cover every module instance.
func TestInstanceOverlap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b             Address
		overlaps, covers bool
	}{
		{`x.y["a"]`, `x.y["a"]`, true, true},
		{`x.y["a"]`, `x.y["b"]`, false, false},
		{`x.y[3]`, `x.y[4]`, false, false},
		{`x.y[3]`, `x.y["3"]`, false, false},
		{`x.y`, `x.y["a"]`, true, true},
		{`x.y["a"]`, `x.y`, true, false},
		{`x.y["a"]`, `x.z["a"]`, false, false},
		{`x.y["a"]`, `data.x.y["a"]`, false, false},
		{`module.a.x.y`, `module.a.x.y["k"]`, true, true},
		{`module.a.x.y["k"]`, `module.b.x.y["k"]`, false, false},
		{`module.m["k"].x.y`, `module.m["j"].x.y`, false, false},
		{`module.m["k"].x.y`, `module.m["k"].x.y`, true, true},
		{`module.m["k"].x.y`, `module.m["k"].x.y["a"]`, true, true},
		{`module.m["k"].x.y["a"]`, `module.m["k"].x.y["b"]`, false, false},
		{`module.m["k"].x.y["a"]`, `module.m["j"].x.y["a"]`, false, false},
		{`module.m.x.y`, `module.m["k"].x.y["a"]`, true, true},
		{`module.m["k"].x.y`, `module.m.x.y`, true, false},
		{`module.m["k"].x.y`, `module.m.x.y["a"]`, true, false}, // keys agree where both have one
		{`module.m.*`, `module.m["k"].x.y["a"]`, true, true},
		{`module.m["k"].x.y["a"]`, `module.m.*`, true, false},
		{`module.mm.*`, `module.m["k"].x.y`, false, false},
		{`*`, `x.y["a"]`, true, true},
		{`x.y["a"]`, `output.y`, false, false},
		{`x.y["a.b"]`, `x.y["a"]`, false, false},
		{`x.y["a.b"]`, `x.y["a.b"]`, true, true},
		{`x.y["q\"]"]`, `x.y["q\"]"]`, true, true},
		{`x.y["q\"]"]`, `x.y["q"]`, false, false},
	}
	for _, tc := range tests {
		if got := tc.a.Overlaps(tc.b); got != tc.overlaps {
			t.Errorf("%s.Overlaps(%s) = %v; want %v", tc.a, tc.b, got, tc.overlaps)
		}
		if got := tc.b.Overlaps(tc.a); got != tc.overlaps {
			t.Errorf("%s.Overlaps(%s) = %v; want %v (symmetry)", tc.b, tc.a, got, tc.overlaps)
		}
		if got := tc.a.Covers(tc.b); got != tc.covers {
			t.Errorf("%s.Covers(%s) = %v; want %v", tc.a, tc.b, got, tc.covers)
		}
	}
}

// TestInstanceConflicts: reservations on different instances of one
// resource are held at once; a stored resource-level one (a run planned
// before ADR 0065) still blocks every instance.
func TestInstanceConflicts(t *testing.T) {
	t.Parallel()
	a := Reservation{Run: "r1", Address: MustParseInstanceAddress(`aws_route53_record.r["a"]`), Mode: ModeWrite}
	b := Reservation{Run: "r2", Address: MustParseInstanceAddress(`aws_route53_record.r["b"]`), Mode: ModeWrite}
	old := Reservation{Run: "r0", Address: "aws_route53_record.r", Mode: ModeWrite}
	if bs := Conflicts("r2", []Reservation{b}, []Reservation{a}); len(bs) != 0 {
		t.Errorf("[\"b\"] blocked by [\"a\"]: %+v", bs)
	}
	bs := Conflicts("r2", []Reservation{b}, []Reservation{a, old})
	if len(bs) != 1 || bs[0].Run != "r0" {
		t.Errorf("[\"b\"] beside a resource-level write: blockers %+v; want run r0 only", bs)
	}
}

// FuzzOverlaps checks the algebra of the rule on random instance
// addresses: Overlaps is symmetric, Covers implies Overlaps, a resource
// covers each of its instances, and two instances overlap exactly when one
// covers the other or they agree where both have keys.
func FuzzOverlaps(f *testing.F) {
	f.Add(uint8(0), uint8(1), uint8(2), uint8(3), true)
	f.Add(uint8(5), uint8(5), uint8(0), uint8(0), false)
	keys := []string{"", `["a"]`, `["b"]`, "[0]", "[1]", `["a.b"]`}
	f.Fuzz(func(t *testing.T, m1, m2, k1, k2 uint8, sameRes bool) {
		mk := func(m, k uint8) Address {
			return Address("module.m" + keys[int(m)%len(keys)] + ".x.y" + keys[int(k)%len(keys)])
		}
		a, b := mk(m1, k1), mk(m2, k2)
		if !sameRes {
			b = Address(strings.Replace(string(b), ".x.y", ".x.z", 1))
		}
		if a.Overlaps(b) != b.Overlaps(a) {
			t.Fatalf("asymmetric: %s, %s", a, b)
		}
		if a.Covers(b) && !a.Overlaps(b) {
			t.Fatalf("%s covers %s without overlapping it", a, b)
		}
		if a.Covers(b) && b.Covers(a) && a != b {
			t.Fatalf("%s and %s cover each other", a, b)
		}
		if !a.Resource().Covers(a) || !a.Resource().Overlaps(b) && a.Resource() == b.Resource() {
			t.Fatalf("resource %s of %s does not cover it or overlap %s", a.Resource(), a, b)
		}
		if a.Resource() != b.Resource() && a.Overlaps(b) {
			t.Fatalf("%s overlaps %s of another resource", a, b)
		}
	})
}
