package testprovider

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/dirhash"
)

// SynthCreatedAt is when the objects Synthesize writes were created (to the
// second, as the API stores it).
var SynthCreatedAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// SynthName is the name of synthetic object i: "r00000", "r00001", …; it
// is also its resource name in SynthesizeConfig.
func SynthName(i int) string { return fmt.Sprintf("r%05d", i) }

// Synthesize writes n objects of the fake cloud API into apiDir (created
// 0700 when missing) — SynthName(i), each with the given delay (a Go
// duration, e.g. "20ms": every Read of it during a refresh waits that long;
// "" for none) — and returns a Terraform state v4 document (lineage, serial)
// that holds them as kltest_object resources of the root module exactly as
// the provider would have written them at schema version 0: a plan of
// SynthesizeConfig(n, delay) against it has no changes. The objects' ids
// are derived from lineage and name (16 hex digits), so one lineage always
// gives the same ids. Errors: n < 0, a delay that is not a duration of 0
// or more, or a write that fails.
func Synthesize(apiDir string, n int, delay, lineage string, serial int64) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("synthesizing %d objects: want 0 or more", n)
	}
	var d *string
	if delay != "" {
		if v, err := time.ParseDuration(delay); err != nil || v < 0 {
			return nil, fmt.Errorf("synthesizing objects: delay %q is not a duration of 0 or more (e.g. \"20ms\")", delay)
		}
		d = &delay
	}
	if err := os.MkdirAll(apiDir, 0o700); err != nil {
		return nil, fmt.Errorf("synthesizing objects: %w", err)
	}
	a := api{dir: apiDir}
	type instance struct {
		SchemaVersion       int                   `json:"schema_version"`
		Attributes          map[string]any        `json:"attributes"`
		SensitiveAttributes [][]map[string]string `json:"sensitive_attributes"`
	}
	type resource struct {
		Mode      string     `json:"mode"`
		Type      string     `json:"type"`
		Name      string     `json:"name"`
		Provider  string     `json:"provider"`
		Instances []instance `json:"instances"`
	}
	resources := make([]resource, 0, n)
	for i := range n {
		name := SynthName(i)
		sum := sha256.Sum256([]byte(lineage + "\x00" + name))
		o := object{ID: hex.EncodeToString(sum[:8]), Name: name, Delay: d, Rules: []rule{}, CreatedAt: SynthCreatedAt}
		if err := a.put(o); err != nil {
			return nil, fmt.Errorf("synthesizing objects: %w", err)
		}
		resources = append(resources, resource{Mode: "managed", Type: Type + "_object", Name: name,
			Provider: `provider["` + Source + `"]`,
			Instances: []instance{{Attributes: map[string]any{
				"created_at": createdAt(o.CreatedAt, 0), "delay": d, "fingerprint": o.fingerprint(), "id": o.ID,
				"name": name, "rule": []any{}, "secret": nil, "settings": nil,
			}, SensitiveAttributes: [][]map[string]string{{{"type": "get_attr", "value": "secret"}}}}},
		})
	}
	b, err := json.MarshalIndent(map[string]any{
		"version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": lineage,
		"outputs": map[string]any{}, "resources": resources, "check_results": nil,
	}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("synthesizing objects: encoding the state: %w", err)
	}
	return append(b, '\n'), nil
}

// SynthesizeConfig is the root module (main.tf) of Synthesize's objects:
// RequiredProvidersBlock, an empty provider block (the API dir comes from
// EnvAPIDir) and one kltest_object per object, named SynthName(i), with
// the delay ("" leaves it out).
func SynthesizeConfig(n int, delay string) []byte {
	var b strings.Builder
	b.WriteString(RequiredProvidersBlock)
	b.WriteString("\nprovider \"kltest\" {}\n")
	for i := range n {
		fmt.Fprintf(&b, "\nresource \"kltest_object\" %q {\n  name  = %q\n", SynthName(i), SynthName(i))
		if delay != "" {
			fmt.Fprintf(&b, "  delay = %q\n", delay)
		}
		b.WriteString("}\n")
	}
	return []byte(b.String())
}

// LockFile is a dependency lock file (.terraform.lock.hcl) selecting this
// provider's Version with the h1: hash of the package in the filesystem
// mirror at mirror (WriteMirror): what `terraform init` writes for it, so
// that a plugin cache is used (Terraform 1.4+ takes a provider from a cache
// only when the lock file records its hash). Error: no package there.
func LockFile(mirror string) ([]byte, error) {
	h, err := dirhash.HashZip(filepath.Join(mirror, MirrorPackage()), dirhash.Hash1)
	if err != nil {
		return nil, fmt.Errorf("hashing the provider package of mirror %s: %w", mirror, err)
	}
	return fmt.Appendf(nil, "provider %s {\n  version     = %s\n  constraints = %s\n  hashes = [\n    %s,\n  ]\n}\n",
		strconv.Quote(Source), strconv.Quote(Version), strconv.Quote(Version), strconv.Quote(h)), nil
}
