package store_test

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/seal"
	"github.com/kilolock/kilolock/internal/store"
)

// TestArtifactEncoding: artifacts that compress well are stored
// compressed, others as they are, every one reads back byte for byte,
// sealed or not; a damaged compressed row is an error naming it.
func TestArtifactEncoding(t *testing.T) {
	t.Parallel()
	random := make([]byte, 4096)
	rand.Read(random)
	json := []byte(strings.Repeat(`{"address":"terraform_data.x","value":"same"},`, 200))
	kr, err := seal.Parse("KL_ENCRYPTION_KEY", "k1:"+strings.Repeat("A", 43)+"=")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		data       []byte
		compressed bool
	}{
		"empty":                   {[]byte{}, false},
		"small json":              {[]byte(`{"a":1}`), false},
		"large json":              {json, true},
		"random (incompressible)": {random, false},
		"begins with the marker":  {[]byte("\x00KLZ1 not compressed"), true},
	} {
		for _, k := range []*seal.Keyring{nil, kr} {
			stored, err := store.EncodeArtifact(k, "R", "a.json", tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if k == nil {
				if got := bytes.HasPrefix(stored, []byte("\x00KLZ1")) && !bytes.Equal(stored, tc.data); got != tc.compressed {
					t.Errorf("%s: stored compressed %v; want %v", name, got, tc.compressed)
				}
				if tc.compressed && len(stored) >= len(tc.data) && name == "large json" {
					t.Errorf("%s: %d bytes stored for %d", name, len(stored), len(tc.data))
				}
			}
			got, err := store.DecodeArtifact(k, "R", "a.json", stored)
			if err != nil || !bytes.Equal(got, tc.data) {
				t.Errorf("%s (key %v): read back %d bytes, %v; want the %d stored", name, k != nil, len(got), err, len(tc.data))
			}
		}
	}
	stored, err := store.EncodeArtifact(nil, "R", "a.json", json)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.DecodeArtifact(nil, "R", "a.json", stored[:len(stored)-10]); err == nil || !strings.Contains(err.Error(), "artifact a.json of run R") {
		t.Fatalf("a truncated compressed row: %v; want an error naming it", err)
	}
}
