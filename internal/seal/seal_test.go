package seal_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/seal"
)

// b64 is a base64 key of n bytes, each b.
func b64(b byte, n int) string {
	return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, n))
}

func mustParse(t *testing.T, value string) *seal.Keyring {
	t.Helper()
	kr, err := seal.Parse("KL_ENCRYPTION_KEY", value)
	if err != nil {
		t.Fatalf("Parse(%q): %v", value, err)
	}
	return kr
}

// TestParseErrors: each bad value is refused naming the variable and the
// problem, never the key material.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	k1 := b64(1, 32)
	for name, tc := range map[string]struct{ value, want string }{
		"no id":        {k1, "entry 1 has no key id"},
		"empty id":     {":" + k1, "entry 1 has an empty key id"},
		"bad id":       {"a/b:" + k1, `key id "a/b" has '/'`},
		"long id":      {strings.Repeat("x", 65) + ":" + k1, "is longer than 64 bytes"},
		"not base64":   {"k1:not*base64", `entry 1 (key id "k1"): the key is not base64`},
		"short key":    {"k1:" + b64(1, 16), "the key is 16 bytes, want 32"},
		"long key":     {"k1:" + b64(1, 33), "the key is 33 bytes, want 32"},
		"duplicate id": {"k1:" + k1 + ",k1:" + b64(2, 32), `entry 2: key id "k1" is used twice`},
		"empty entry":  {"k1:" + k1 + ",,k2:" + b64(2, 32), "entry 2 is empty"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := seal.Parse("KL_ENCRYPTION_KEY", tc.value)
			if err == nil {
				t.Fatalf("Parse(%q): no error, want %q", tc.value, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "KL_ENCRYPTION_KEY: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%q): %v, want KL_ENCRYPTION_KEY: …%s…", tc.value, err, tc.want)
			}
			if strings.Contains(err.Error(), k1) {
				t.Fatalf("the error shows the key: %v", err)
			}
		})
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	kr := mustParse(t, " new:"+b64(2, 32)+" , old:"+b64(1, 32)+" ")
	if !kr.Enabled() || kr.SealingID() != "new" || strings.Join(kr.IDs(), ",") != "new,old" || !kr.Has("old") || kr.Has("other") {
		t.Fatalf("keyring: enabled %v, sealing %q, ids %v", kr.Enabled(), kr.SealingID(), kr.IDs())
	}
	empty := mustParse(t, "  ")
	if empty.Enabled() || empty.Variable() != "KL_ENCRYPTION_KEY" {
		t.Fatalf("empty value: enabled %v, variable %q", empty.Enabled(), empty.Variable())
	}
}

// TestSealOpen: a round trip; the blob is marked, names its key, and does
// not hold the plain text; two seals of one text differ (random nonces).
func TestSealOpen(t *testing.T) {
	t.Parallel()
	kr := mustParse(t, "k1:"+b64(1, 32))
	plain := []byte(`{"password":"hunter2"}`)
	blob, err := kr.Seal("artifact/R/plan.tfplan", plain)
	if err != nil {
		t.Fatal(err)
	}
	if !seal.IsSealed(blob) || bytes.Contains(blob, []byte("hunter2")) || len(blob) != len(plain)+seal.Overhead("k1") {
		t.Fatalf("blob %q: sealed %v, len %d", blob, seal.IsSealed(blob), len(blob))
	}
	if id, ok := seal.KeyID(blob); !ok || id != "k1" {
		t.Fatalf("KeyID = %q, %v", id, ok)
	}
	again, _ := kr.Seal("artifact/R/plan.tfplan", plain)
	if bytes.Equal(again, blob) {
		t.Fatal("two seals of one text are equal: the nonce is not random")
	}
	got, err := kr.Open("artifact/R/plan.tfplan", blob)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	// Empty content seals and opens as empty.
	e, _ := kr.Seal("p", nil)
	if got, err := kr.Open("p", e); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("empty: %q, %v", got, err)
	}
}

// TestOpenClear: a clear blob (written before a key) opens as itself, with
// or without a keyring.
func TestOpenClear(t *testing.T) {
	t.Parallel()
	clear := []byte("\x1f\x8b gzip or {json}")
	for _, kr := range []*seal.Keyring{nil, mustParse(t, ""), mustParse(t, "k1:"+b64(1, 32))} {
		got, err := kr.Open("version/prod/3", clear)
		if err != nil || !bytes.Equal(got, clear) {
			t.Fatalf("Open(clear) = %q, %v", got, err)
		}
	}
	var none *seal.Keyring
	if b, _ := none.Seal("p", clear); !bytes.Equal(b, clear) {
		t.Fatal("Seal without a key changed the blob")
	}
}

// TestOpenRefused: no key, an unknown key id, another key under the same
// id, a tampered byte, a blob moved to another place, and a relabelled key
// id are each refused with a clear error naming the place and the
// variable.
func TestOpenRefused(t *testing.T) {
	t.Parallel()
	kr := mustParse(t, "k1:"+b64(1, 32))
	place := "artifact/R1/plan.tfplan"
	blob, err := kr.Seal(place, []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Clone(blob)
	tampered[len(tampered)-20] ^= 1
	// The same ciphertext with its header naming k2, which both holds.
	relabelled := append(append([]byte(seal.Magic+"\x01\x02"), "k2"...), blob[len(seal.Magic)+4:]...)
	both := mustParse(t, "k2:"+b64(2, 32)+",k1:"+b64(1, 32))
	for name, tc := range map[string]struct {
		kr    *seal.Keyring
		place string
		blob  []byte
		is    error
		want  string
	}{
		"no key":       {mustParse(t, ""), place, blob, seal.ErrNoKey, `opening artifact/R1/plan.tfplan: it is sealed with key "k1" and no encryption key configured: set KL_ENCRYPTION_KEY`},
		"nil keyring":  {nil, place, blob, seal.ErrNoKey, "set KL_ENCRYPTION_KEY"},
		"unknown key":  {mustParse(t, "k2:"+b64(2, 32)), place, blob, seal.ErrUnknownKey, `sealed with key "k1", which KL_ENCRYPTION_KEY does not hold (it holds k2)`},
		"same id":      {mustParse(t, "k1:"+b64(3, 32)), place, blob, seal.ErrAuth, `opening artifact/R1/plan.tfplan with key "k1" of KL_ENCRYPTION_KEY`},
		"tampered":     {kr, place, tampered, seal.ErrAuth, "authentication failed"},
		"moved":        {kr, "artifact/R2/plan.tfplan", blob, seal.ErrAuth, "opening artifact/R2/plan.tfplan"},
		"relabelled":   {both, place, relabelled, seal.ErrAuth, `with key "k2"`},
		"truncated":    {kr, place, blob[:len(seal.Magic)+3], seal.ErrAuth, "malformed header"},
		"short cipher": {kr, place, blob[:len(blob)-17], seal.ErrAuth, "authentication failed"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := tc.kr.Open(tc.place, tc.blob)
			if err == nil {
				t.Fatalf("Open = %q, want an error", got)
			}
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want errors.Is %v and …%s…", err, tc.is, tc.want)
			}
		})
	}
}

// TestRotation: the first key seals, every key opens; a blob sealed under
// the old key opens after the new key is put first, and re-sealed it opens
// with the new key alone.
func TestRotation(t *testing.T) {
	t.Parallel()
	old := mustParse(t, "old:"+b64(1, 32))
	rotating := mustParse(t, "new:"+b64(2, 32)+",old:"+b64(1, 32))
	newOnly := mustParse(t, "new:"+b64(2, 32))
	blob, _ := old.Seal("version/prod/1", []byte("state"))
	plain, err := rotating.Open("version/prod/1", blob)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newOnly.Open("version/prod/1", blob); !errors.Is(err, seal.ErrUnknownKey) {
		t.Fatalf("the new key alone opened the old blob: %v", err)
	}
	resealed, err := rotating.Seal("version/prod/1", plain)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := seal.KeyID(resealed); id != "new" {
		t.Fatalf("re-sealed under %q, want new", id)
	}
	if got, err := newOnly.Open("version/prod/1", resealed); err != nil || string(got) != "state" {
		t.Fatalf("Open after rotation = %q, %v", got, err)
	}
}

// TestHash: plain SHA-256 without a key; with one, HMAC-SHA256 under a
// derived key — not the SHA-256, not an HMAC under the sealing key itself,
// equal for equal content under one key and different under another.
func TestHash(t *testing.T) {
	t.Parallel()
	b := []byte(`{"password":"hunter2"}`)
	plain := sha256.Sum256(b)
	if got := (*seal.Keyring)(nil).Hash(b); !bytes.Equal(got, plain[:]) {
		t.Fatalf("no key: %x, want SHA-256 %x", got, plain)
	}
	if got := mustParse(t, "").Hash(b); !bytes.Equal(got, plain[:]) {
		t.Fatalf("empty keyring: %x, want SHA-256 %x", got, plain)
	}
	k1 := mustParse(t, "k1:"+b64(1, 32))
	h := k1.Hash(b)
	m := hmac.New(sha256.New, bytes.Repeat([]byte{1}, 32))
	m.Write(b)
	if len(h) != 32 || bytes.Equal(h, plain[:]) || bytes.Equal(h, m.Sum(nil)) {
		t.Fatalf("keyed hash %x: the plain hash or an HMAC under the sealing key itself", h)
	}
	if !bytes.Equal(h, mustParse(t, "k1:"+b64(1, 32)+",k2:"+b64(2, 32)).Hash(b)) {
		t.Fatal("the hash depends on a key other than the first")
	}
	if bytes.Equal(h, mustParse(t, "k1:"+b64(2, 32)).Hash(b)) {
		t.Fatal("another key gives the same hash")
	}
}

// BenchmarkSeal and BenchmarkOpen: one 1 MiB blob (a large snapshot,
// compressed) per operation.
func BenchmarkSeal(b *testing.B) {
	kr, _ := seal.Parse("KL_ENCRYPTION_KEY", "k1:"+b64(1, 32))
	plain := bytes.Repeat([]byte("x"), 1<<20)
	b.SetBytes(int64(len(plain)))
	for b.Loop() {
		if _, err := kr.Seal("version/prod/1", plain); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	kr, _ := seal.Parse("KL_ENCRYPTION_KEY", "k1:"+b64(1, 32))
	blob, _ := kr.Seal("version/prod/1", bytes.Repeat([]byte("x"), 1<<20))
	b.SetBytes(1 << 20)
	for b.Loop() {
		if _, err := kr.Open("version/prod/1", blob); err != nil {
			b.Fatal(err)
		}
	}
}
