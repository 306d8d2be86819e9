package engine

import (
	"reflect"
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
