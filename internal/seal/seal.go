// Package seal is encryption at rest (ADR 0066): a keyring of AES-256-GCM
// keys that seals the blobs a store keeps (artifacts, version snapshots)
// and opens them again, and the keyed content hash that names stored
// content without confirming it.
//
// A keyring comes from one variable (KL_ENCRYPTION_KEY, KLBOT_ENCRYPTION_KEY)
// holding one or more keys, "ID:BASE64" separated by commas: the first key
// seals, every key opens. Rotation is: put the new key first (the old one
// after it) everywhere, re-seal (`kl store reseal`), then drop the old key.
//
// A sealed blob is
//
//	magic "\xffKLS" | format 1 | len(id) | id | nonce (12 bytes) | AES-256-GCM ciphertext and tag (16 bytes)
//
// (NIST SP 800-38D; Go's crypto/cipher.NewGCM, random 96-bit nonces from
// crypto/rand). The additional data is the header (magic to id) followed by
// the blob's place ("artifact/RUN/NAME", "version/STATE/SERIAL"), so a
// sealed blob copied to another row, or relabelled with another key id,
// does not open. A blob without the magic is clear (written before a key
// was configured) and opens as itself; no clear blob Kilolock stores begins
// with 0xff (gzip, zip, JSON and tar archives do not).
package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
)

// DefaultVariable is the variable an error names when no keyring (so no
// variable) is at hand: kl's; klbot passes its own to Parse.
const DefaultVariable = "KL_ENCRYPTION_KEY"

// KeySize is the length of a key in bytes: AES-256.
const KeySize = 32

// MaxIDLen is the longest key id, in bytes (the header stores its length
// in one byte).
const MaxIDLen = 64

// Magic begins every sealed blob; Format follows it.
const (
	Magic  = "\xffKLS"
	Format = 1
)

// nonceSize is GCM's standard nonce length (96 bits).
const nonceSize = 12

// hashInfo is the HKDF info (RFC 5869) that derives the content-hash key
// from the sealing key, so the hash key is never the sealing key itself.
const hashInfo = "kilolock content hash v1"

// ErrNoKey: a sealed blob was read, or an encrypted store opened, with no
// key configured.
var ErrNoKey = errors.New("no encryption key configured")

// ErrUnknownKey: a sealed blob names a key id the keyring does not hold.
var ErrUnknownKey = errors.New("sealed with a key that is not configured")

// ErrAuth: a sealed blob failed authentication (tampered, moved to another
// place, or sealed under another key of the same id).
var ErrAuth = errors.New("does not open (authentication failed)")

// key is one keyring entry.
type key struct {
	id   string
	aead cipher.AEAD
}

// Keyring holds the keys of one variable. The zero value and nil are "no
// key configured": Seal returns its input, Open opens clear blobs only,
// Hash is plain SHA-256. A Keyring is safe for concurrent use.
type Keyring struct {
	variable string      // where the keys came from, for errors
	keys     []key       // keys[0] seals
	hashKey  []byte      // HKDF-SHA256 of keys[0]
	used     atomic.Bool // Seal or Hash ran (Used)
}

// Used reports whether Seal or Hash has run with a key: whether this
// keyring has put anything of its own into a store, which then must
// record its key (ADR 0066 §5; a binary that only reads records none).
func (kr *Keyring) Used() bool { return kr != nil && kr.used.Load() }

// Parse reads a keyring from value, the text of variable (named in every
// error): "ID:BASE64[,ID:BASE64…]", blanks around entries ignored. An id is
// 1 to MaxIDLen of A-Z a-z 0-9 . _ - ; BASE64 is standard base64 (as
// `openssl rand -base64 32` prints it) of exactly KeySize bytes; ids are
// unique. An empty value is a keyring with no key (Enabled false) that
// still names variable in the errors of a sealed blob or an encrypted
// store. Errors name the variable and the entry by position, never the key.
func Parse(variable, value string) (*Keyring, error) {
	kr := &Keyring{variable: variable}
	if strings.TrimSpace(value) == "" {
		return kr, nil
	}
	seen := map[string]bool{}
	for i, entry := range strings.Split(value, ",") {
		n := i + 1
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return nil, fmt.Errorf("%s: entry %d is empty: want ID:BASE64, entries separated by commas", variable, n)
		}
		id, b64, ok := strings.Cut(entry, ":")
		if !ok {
			return nil, fmt.Errorf("%s: entry %d has no key id: want ID:BASE64 (e.g. k1:$(openssl rand -base64 32))", variable, n)
		}
		id, b64 = strings.TrimSpace(id), strings.TrimSpace(b64)
		if id == "" {
			return nil, fmt.Errorf("%s: entry %d has an empty key id: want ID:BASE64", variable, n)
		}
		if p := idProblem(id); p != "" {
			return nil, fmt.Errorf("%s: entry %d: key id %q %s", variable, n, id, p)
		}
		if seen[id] {
			return nil, fmt.Errorf("%s: entry %d: key id %q is used twice: each key needs its own id", variable, n, id)
		}
		seen[id] = true
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("%s: entry %d (key id %q): the key is not base64 (make one with: openssl rand -base64 32)", variable, n, id)
		}
		if len(raw) != KeySize {
			return nil, fmt.Errorf("%s: entry %d (key id %q): the key is %d bytes, want %d (make one with: openssl rand -base64 32)", variable, n, id, len(raw), KeySize)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: entry %d (key id %q): %w", variable, n, id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("%s: entry %d (key id %q): %w", variable, n, id, err)
		}
		if len(kr.keys) == 0 {
			if kr.hashKey, err = hkdf.Key(sha256.New, raw, nil, hashInfo, sha256.Size); err != nil {
				return nil, fmt.Errorf("%s: entry %d (key id %q): deriving the hash key: %w", variable, n, id, err)
			}
		}
		kr.keys = append(kr.keys, key{id: id, aead: aead})
	}
	return kr, nil
}

// idProblem says what is wrong with a key id, "" if nothing.
func idProblem(id string) string {
	if len(id) > MaxIDLen {
		return fmt.Sprintf("is longer than %d bytes", MaxIDLen)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Sprintf("has %q: use letters, digits, '.', '_' and '-'", c)
		}
	}
	return ""
}

// Enabled reports whether a key is configured.
func (kr *Keyring) Enabled() bool { return kr != nil && len(kr.keys) > 0 }

// Variable is the variable the keys came from ("" without a keyring).
func (kr *Keyring) Variable() string {
	if kr == nil {
		return ""
	}
	return kr.variable
}

// VariableOr is Variable, or def when there is no keyring: the variable an
// error about a missing key names.
func (kr *Keyring) VariableOr(def string) string {
	if v := kr.Variable(); v != "" {
		return v
	}
	return def
}

// SealingID is the id of the key that seals ("" without a key).
func (kr *Keyring) SealingID() string {
	if !kr.Enabled() {
		return ""
	}
	return kr.keys[0].id
}

// IDs are the key ids, the sealing one first.
func (kr *Keyring) IDs() []string {
	if kr == nil {
		return nil
	}
	out := make([]string, len(kr.keys))
	for i, k := range kr.keys {
		out[i] = k.id
	}
	return out
}

// Has reports whether the keyring holds a key of id.
func (kr *Keyring) Has(id string) bool {
	return kr.find(id) != nil
}

func (kr *Keyring) find(id string) *key {
	if kr == nil {
		return nil
	}
	for i := range kr.keys {
		if kr.keys[i].id == id {
			return &kr.keys[i]
		}
	}
	return nil
}

// header is the sealed blob's header for key id.
func header(id string) []byte {
	h := make([]byte, 0, len(Magic)+2+len(id))
	h = append(h, Magic...)
	h = append(h, Format, byte(len(id)))
	return append(h, id...)
}

// Seal seals plain for place (its additional data) under the first key.
// Without a key it returns plain itself. The result is len(plain) +
// Overhead(id) bytes.
func (kr *Keyring) Seal(place string, plain []byte) ([]byte, error) {
	if kr.Enabled() {
		kr.used.Store(true)
	}
	return kr.seal(place, plain)
}

// SealCanary is Seal without counting as Used: the store's record of its
// own key (a canary) is not content the keyring put into the store.
func (kr *Keyring) SealCanary(place string, plain []byte) ([]byte, error) {
	return kr.seal(place, plain)
}

func (kr *Keyring) seal(place string, plain []byte) ([]byte, error) {
	if !kr.Enabled() {
		return plain, nil
	}
	k := kr.keys[0]
	h := header(k.id)
	out := make([]byte, len(h), len(h)+nonceSize+len(plain)+k.aead.Overhead())
	copy(out, h)
	nonce := out[len(h) : len(h)+nonceSize]
	out = out[:len(h)+nonceSize]
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("sealing %s: %w", place, err)
	}
	return k.aead.Seal(out, nonce, plain, additional(h, place)), nil
}

// Overhead is the bytes Seal adds under a key of id.
func Overhead(id string) int { return len(header(id)) + nonceSize + 16 }

// additional is the AEAD additional data: the header, then the place.
func additional(h []byte, place string) []byte {
	ad := make([]byte, 0, len(h)+len(place))
	ad = append(ad, h...)
	return append(ad, place...)
}

// IsSealed reports whether b is a sealed blob (begins with Magic).
func IsSealed(b []byte) bool { return bytes.HasPrefix(b, []byte(Magic)) }

// KeyID is the id of the key that sealed b, ok false if b is not a
// well-formed sealed blob.
func KeyID(b []byte) (id string, ok bool) {
	if !IsSealed(b) || len(b) < len(Magic)+2 || b[len(Magic)] != Format {
		return "", false
	}
	n := int(b[len(Magic)+1])
	if len(b) < len(Magic)+2+n+nonceSize {
		return "", false
	}
	return string(b[len(Magic)+2 : len(Magic)+2+n]), true
}

// Open returns the plain content of blob, which was stored at place: a
// clear blob (no Magic) as it is, a sealed one opened with the key its
// header names. Errors (each naming place and the variable): a sealed blob
// with no key configured (ErrNoKey), one sealed with a key id the keyring
// lacks (ErrUnknownKey), one that is malformed or fails authentication
// (ErrAuth) — never a garbled result.
func (kr *Keyring) Open(place string, blob []byte) ([]byte, error) {
	if !IsSealed(blob) {
		return blob, nil
	}
	id, ok := KeyID(blob)
	if !ok {
		return nil, fmt.Errorf("opening %s: a sealed blob with a malformed header: %w", place, ErrAuth)
	}
	if !kr.Enabled() {
		return nil, fmt.Errorf("opening %s: it is sealed with key %q and %w: set %s", place, id, ErrNoKey, kr.VariableOr(DefaultVariable))
	}
	k := kr.find(id)
	if k == nil {
		return nil, fmt.Errorf("opening %s: it is sealed with key %q, which %s does not hold (it holds %s): %w", place, id, kr.variable, strings.Join(kr.IDs(), ", "), ErrUnknownKey)
	}
	hl := len(Magic) + 2 + len(id)
	nonce, ct := blob[hl:hl+nonceSize], blob[hl+nonceSize:]
	plain, err := k.aead.Open(nil, nonce, ct, additional(blob[:hl], place))
	if err != nil {
		return nil, fmt.Errorf("opening %s with key %q of %s: it %w: tampered, copied from another row, or sealed by another key under the same id", place, id, kr.variable, ErrAuth)
	}
	if plain == nil {
		plain = []byte{}
	}
	return plain, nil
}

// Hash is the content hash of b: HMAC-SHA256 (RFC 2104) under a key
// derived from the sealing key (HKDF-SHA256, RFC 5869) when a key is
// configured, so that equal content cannot be confirmed by its hash without
// the key; plain SHA-256 otherwise. 32 bytes. A rotation of the sealing key
// changes every keyed hash.
func (kr *Keyring) Hash(b []byte) []byte {
	if !kr.Enabled() {
		s := sha256.Sum256(b)
		return s[:]
	}
	kr.used.Store(true)
	m := hmac.New(sha256.New, kr.hashKey)
	m.Write(b)
	return m.Sum(nil)
}
