package store_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
)

func TestCheckSnapshot(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		doc     string
		wantErr bool
	}{
		"empty document":           {"", false},
		"matching":                 {`{"version":4,"serial":3,"lineage":"l","resources":[]}`, false},
		"fields absent":            {`{"version":4}`, false},
		"serial later than data":   {`{"resources":[{"serial":9,"lineage":"x"}],"serial":3,"lineage":"l"}`, false},
		"nested fields ignored":    {`{"outputs":{"serial":{"value":9}},"serial":3}`, false},
		"serial differs":           {`{"serial":4,"lineage":"l"}`, true},
		"lineage differs":          {`{"serial":3,"lineage":"other"}`, true},
		"not json":                 {`serial: 3`, true},
		"not an object":            {`[1,2]`, true},
		"serial of the wrong type": {`{"serial":"3"}`, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := store.CheckSnapshot([]byte(tc.doc), "l", 3)
			if tc.wantErr != (err != nil) {
				t.Fatalf("CheckSnapshot(%s) = %v; want error %v", tc.doc, err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, engine.ErrInvalid) {
				t.Fatalf("CheckSnapshot error %v is not ErrInvalid", err)
			}
		})
	}
}

func TestSnapshotCompression(t *testing.T) {
	t.Parallel()
	doc := bytes.Repeat([]byte(`{"type":"terraform_data","name":"x"},`), 10_000)
	z, err := store.CompressSnapshot(doc)
	if err != nil {
		t.Fatalf("CompressSnapshot: %v", err)
	}
	if len(z) >= len(doc)/4 {
		t.Fatalf("compressed %d bytes to %d; want a real reduction", len(doc), len(z))
	}
	got, err := store.DecompressSnapshot(z, int64(len(doc)))
	if err != nil || !bytes.Equal(got, doc) {
		t.Fatalf("DecompressSnapshot = %d bytes, %v; want the %d compressed", len(got), err, len(doc))
	}
	if _, err := store.DecompressSnapshot(z, int64(len(doc))+1); err == nil {
		t.Fatal("DecompressSnapshot accepted a wrong stored size")
	}
	if _, err := store.DecompressSnapshot([]byte("not gzip"), 8); err == nil {
		t.Fatal("DecompressSnapshot accepted garbage")
	}
}

func TestWanted(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 7, 10, 12, 0, 0, 0, time.UTC)
	req := engine.AcquireRequest{
		State: "s", Run: "R", Holder: engine.Holder{Host: "h", PID: 1}, Lease: time.Minute,
		Reservations: []engine.Reservation{
			{Address: "terraform_data.a", Mode: engine.ModeWrite},
			{Address: "terraform_data.a", Mode: engine.ModeWrite},
			{Address: "terraform_data.a", Mode: engine.ModeRead},
		},
	}
	got := store.Wanted(req, now)
	if len(got) != 2 {
		t.Fatalf("Wanted kept %d rows; want one per (address, mode): 2", len(got))
	}
	for _, r := range got {
		if r.State != "s" || r.Run != "R" || r.Holder != req.Holder || !r.AcquiredAt.Equal(now) || !r.ExpiresAt.Equal(now.Add(time.Minute)) {
			t.Fatalf("Wanted row %+v lacks state, run, holder or lease", r)
		}
	}
}

func equal(a, b engine.AddressSet) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
