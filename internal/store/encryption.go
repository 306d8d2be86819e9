package store

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/seal"
)

// EncryptionVersion is the schema version of migrations/*/00018_encryption.sql,
// which creates kl_encryption (ADR 0066).
const EncryptionVersion = 18

// The places of sealed blobs: the additional data that binds each to its
// row (seal.Keyring.Seal), so that a sealed blob copied to another row does
// not open.

// ArtifactPlace is the place of run's artifact name: "artifact/RUN/NAME".
func ArtifactPlace(run, name string) string { return "artifact/" + run + "/" + name }

// VersionPlace is the place of a version's snapshot:
// "version/STATE/SERIAL".
func VersionPlace(state string, serial int64) string {
	return "version/" + state + "/" + strconv.FormatInt(serial, 10)
}

// HeaderPlace is the place of the header of a version stored as a
// manifest (ADR 0068): "header/STATE/SERIAL".
func HeaderPlace(state string, serial int64) string {
	return "header/" + state + "/" + strconv.FormatInt(serial, 10)
}

// EntryPlace is the place of a resource entry's body: "entry/STATE/HASH"
// (the hash in hex).
func EntryPlace(state string, hash []byte) string {
	return "entry/" + state + "/" + hex.EncodeToString(hash)
}

// CanaryPlace is the place of key id's canary in kl_encryption:
// "encryption/ID".
func CanaryPlace(id string) string { return "encryption/" + id }

// CanaryText is what a kl_encryption canary holds, sealed.
const CanaryText = "kilolock encryption canary"

// EncryptionKey is one kl_encryption row: a key id that has sealed the
// store, its sealed canary, when it was first used, and when a re-seal
// retired it (zero while it may seal).
type EncryptionKey struct {
	ID        string
	Canary    []byte
	AddedAt   time.Time
	RetiredAt time.Time
}

// ErrEncryption is what every refusal of CheckEncryption errors.Is: the
// store and the configured keys do not go together.
var ErrEncryption = errors.New("the store's encryption and the configured keys do not match")

// CheckEncryption decides whether a binary with keyring kr may use a store
// whose kl_encryption rows are keys (ADR 0066). A store with no row is
// clear: any binary uses it, and with a key it becomes encrypted. A store
// with rows is encrypted, and is refused (errors.Is ErrEncryption, naming
// the variable and the key ids on both sides, never a key) when kr has no
// key; holds none of its live (not retired) key ids; holds one of its ids
// with another key (its canary does not open); or would seal with a key a
// re-seal retired. When kr may use the store and its sealing key has no
// row yet, add is the row to insert (its canary sealed now, added at now);
// nil otherwise.
func CheckEncryption(kr *seal.Keyring, keys []EncryptionKey, now time.Time) (add *EncryptionKey, err error) {
	variable := kr.VariableOr(seal.DefaultVariable)
	var live, retired []string
	for _, k := range keys {
		if k.RetiredAt.IsZero() {
			live = append(live, k.ID)
		} else {
			retired = append(retired, k.ID)
		}
	}
	slices.Sort(live)
	slices.Sort(retired)
	if !kr.Enabled() {
		if len(keys) == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: the store is encrypted (sealed with key %s) but %s is not set: set it to the keys that sealed it "+
			"(docs/operating.md, \"Encryption at rest\")", ErrEncryption, strings.Join(append(live, retired...), ", "), variable)
	}
	matched := false
	for _, k := range keys {
		if !kr.Has(k.ID) {
			continue
		}
		got, err := kr.Open(CanaryPlace(k.ID), k.Canary)
		if err != nil || string(got) != CanaryText {
			return nil, fmt.Errorf("%w: the key %q of %s is not the key %q that sealed the store: give that id the key that sealed it, "+
				"and a new key a new id", ErrEncryption, k.ID, variable, k.ID)
		}
		if k.RetiredAt.IsZero() {
			matched = true
		}
	}
	id := kr.SealingID()
	if slices.Contains(retired, id) {
		return nil, fmt.Errorf("%w: the first key of %s, %q, was retired by kl store reseal on %s: the store is sealed with key %s; put that key first",
			ErrEncryption, variable, id, retiredAt(keys, id), strings.Join(live, ", "))
	}
	if len(live) > 0 && !matched {
		return nil, fmt.Errorf("%w: the store is sealed with key %s, and %s holds none of them (it holds %s): "+
			"add the key that sealed it after your new one (docs/operating.md, \"Encryption at rest\")",
			ErrEncryption, strings.Join(live, ", "), variable, strings.Join(kr.IDs(), ", "))
	}
	if slices.Contains(live, id) {
		return nil, nil
	}
	canary, err := kr.SealCanary(CanaryPlace(id), []byte(CanaryText))
	if err != nil {
		return nil, err
	}
	return &EncryptionKey{ID: id, Canary: canary, AddedAt: now.UTC()}, nil
}

// retiredAt is when key id of keys was retired, as a date.
func retiredAt(keys []EncryptionKey, id string) string {
	for _, k := range keys {
		if k.ID == id {
			return k.RetiredAt.UTC().Format(time.DateOnly)
		}
	}
	return "?"
}

// ResealResult is what a re-seal did (`kl store reseal`): per kind of blob
// ("artifacts", "versions"), how many it read, how many it re-sealed under
// the sealing key (clear ones and those under another key), and how many
// were already sealed under it; and the key ids it retired in
// kl_encryption (every other live key: nothing is sealed under them any
// more, and a binary whose keys are only those is refused from then on).
type ResealResult struct {
	Key       string         // the sealing key's id
	Read      map[string]int // blobs read, by kind
	Resealed  map[string]int // blobs re-sealed, by kind
	Unchanged map[string]int // blobs already under Key, by kind
	Retired   []string       // key ids retired, sorted
	// Compacted (SQLite): the file was rewritten (VACUUM) and its WAL
	// truncated, so no copy of a blob as it was before stays in them.
	// Always false for PostgreSQL, whose old row versions stay in its data
	// files until VACUUM FULL (docs/operating.md).
	Compacted bool
}

// Resealer is a store that re-seals (both adapters): Reseal seals every
// artifact and version snapshot under the keyring's first key, a batch of
// rows per transaction, and retires the other keys.
type Resealer interface {
	Reseal(ctx context.Context) (ResealResult, error)
}

// ResealKinds are the kinds of blob a re-seal goes through, in order.
var ResealKinds = []string{"artifacts", "versions", "headers", "entries"}

// NewResealResult is a ResealResult under key with every count of every
// kind at 0.
func NewResealResult(key string) ResealResult {
	r := ResealResult{Key: key, Read: map[string]int{}, Resealed: map[string]int{}, Unchanged: map[string]int{}}
	for _, k := range ResealKinds {
		r.Read[k], r.Resealed[k], r.Unchanged[k] = 0, 0, 0
	}
	return r
}

// Reseal returns blob, read at place, sealed under kr's sealing key: nil
// (unchanged) when it already is, an error when it does not open.
func Reseal(kr *seal.Keyring, place string, blob []byte) ([]byte, error) {
	if id, ok := seal.KeyID(blob); ok && id == kr.SealingID() {
		if _, err := kr.Open(place, blob); err != nil {
			return nil, err
		}
		return nil, nil
	}
	plain, err := kr.Open(place, blob)
	if err != nil {
		return nil, err
	}
	return kr.Seal(place, plain)
}

// ResealBatch is how many rows a re-seal rewrites per transaction.
const ResealBatch = 50
