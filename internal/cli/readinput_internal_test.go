package cli

import (
	"strings"
	"testing"
)

// TestReadJSONBounded: a document over the bound is refused naming the
// input and the bound; one at the bound, with the whitespace after it, is
// returned byte for byte; bytes that are not JSON stop the read early.
func TestReadJSONBounded(t *testing.T) {
	doc := `{"version": 4, "resources": []}` + "\n"
	got, err := readJSON("s.tfstate", strings.NewReader(doc), int64(len(doc)))
	if err != nil || string(got) != doc {
		t.Fatalf("at the bound: %q, %v; want the document as it is", got, err)
	}
	_, err = readJSON("s.tfstate", strings.NewReader(doc), int64(len(doc))-1)
	if err == nil || err.Error() != "reading s.tfstate: over 31 bytes, the largest document kl reads" {
		t.Fatalf("over the bound: %v", err)
	}
	_, err = readJSON("big.tfstate", strings.NewReader(`{"a": "`+strings.Repeat("x", 3<<20)+`"}`), 2<<20)
	if err == nil || err.Error() != "reading big.tfstate: over 2 MiB, the largest document kl reads" {
		t.Fatalf("a string over the bound: %v", err)
	}
	endless := strings.NewReader("\x00" + strings.Repeat("\x00", 10<<20))
	got, err = readJSON("/dev/zero", endless, 1<<30)
	if err != nil || len(got) >= 1<<20 || endless.Len() == 0 {
		t.Fatalf("not JSON: read %d bytes (%d left), %v; want an early stop", len(got), endless.Len(), err)
	}
}
