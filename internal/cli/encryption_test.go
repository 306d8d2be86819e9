package cli_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// storeBytes is every byte of k's SQLite store at rest: the file and its
// WAL.
func (k *kit) storeBytes() []byte {
	k.t.Helper()
	var all []byte
	for _, p := range []string{k.store, k.store + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			k.t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// key is a KL_ENCRYPTION_KEY entry id:BASE64 of 32 bytes of b.
func key(id string, b byte) string {
	return id + ":" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))
}

// TestEncryptionAtRest: with KL_ENCRYPTION_KEY, kl plan and kl apply with
// a sensitive -var value against real Terraform leave no copy of it in the
// SQLite file (without a key its -var values are there in clear), the
// state reads back whole; a kl without the key is refused naming
// KL_ENCRYPTION_KEY; a bad key is refused naming the variable and not the
// key; kl store reseal rotates to a new key, after which the old one can
// go (ADR 0066).
func TestEncryptionAtRest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	const secret = "pa55-w0rd-7f3c9e1d-not-in-the-file"
	cfgText := `
variable "password" {
  type      = string
  sensitive = true
}
resource "terraform_data" "db" { input = var.password }
`
	cycle := func(k *kit, env []string) {
		t.Helper()
		cfg := filepath.Join(k.dir, "cfg")
		write(t, filepath.Join(cfg, "main.tf"), cfgText)
		for _, args := range [][]string{{"state", "init", "prod"}} {
			if r := k.runWith(env, "", args...); r.err != nil {
				t.Fatalf("kl %v: %v\n%s", args, r.err, r.errOut)
			}
		}
		r := k.runWith(env, "", "plan", "--state", "prod", "-C", cfg, "--", "-var", "password="+secret)
		if r.err != nil {
			t.Fatalf("kl plan: %v\n%s", r.err, r.errOut)
		}
		plan := reULID.FindString(r.out)
		if r := k.runWith(env, "", "apply", plan); r.err != nil {
			t.Fatalf("kl apply: %v\n%s%s", r.err, r.out, r.errOut)
		}
		if r := k.runWith(env, "", "state", "pull", "prod"); r.err != nil || !strings.Contains(r.out, secret) {
			t.Fatalf("kl state pull: %v, the secret in it: %v\n%s", r.err, strings.Contains(r.out, secret), r.errOut)
		}
	}

	// Without a key the search finds the -var value: it works.
	clear := setup(t)
	cycle(clear, clear.env)
	if !bytes.Contains(clear.storeBytes(), []byte(secret)) {
		t.Fatal("without a key the secret is not in the SQLite file: the search finds nothing")
	}

	// A re-seal leaves no clear copy in the file: SQLite keeps the bytes
	// of freed pages and old WAL frames until it rewrites the file. 9
	// blobs: 6 artifacts, the headers of versions 0 and 1 (stored as
	// manifests, ADR 0068) and the one resource entry.
	r := clear.runWith(append(append([]string{}, clear.env...), "KL_ENCRYPTION_KEY="+key("k1", 1)), "", "store", "reseal")
	if r.err != nil || !strings.Contains(r.out, "Re-sealed 9 blobs with key k1") || !strings.Contains(r.out, "rewritten") {
		t.Fatalf("kl store reseal of a clear store: %v\n%s%s", r.err, r.out, r.errOut)
	}
	if bytes.Contains(clear.storeBytes(), []byte(secret)) {
		t.Fatal("after kl store reseal of a clear store the secret is still in the SQLite file")
	}

	k := setup(t)
	withKey := func(v string) []string { return append(append([]string{}, k.env...), "KL_ENCRYPTION_KEY="+v) }
	k1 := withKey(key("k1", 1))
	cycle(k, k1)
	if bytes.Contains(k.storeBytes(), []byte(secret)) {
		t.Fatal("with KL_ENCRYPTION_KEY the secret is in the SQLite file in clear")
	}

	// Without the key: refused at open, naming the variable.
	if r := k.run("state", "pull", "prod"); r.err == nil || !strings.Contains(r.err.Error(), "the store is encrypted (sealed with key k1) but KL_ENCRYPTION_KEY is not set") {
		t.Fatalf("kl state pull without the key: %v\n%s", r.err, r.out)
	}
	// A bad key: refused naming the variable, never the value.
	bad := base64.StdEncoding.EncodeToString([]byte("sixteen byte key"))
	if r := k.runWith(withKey("k1:"+bad), "", "state", "list"); r.err == nil ||
		!strings.Contains(r.err.Error(), `KL_ENCRYPTION_KEY: entry 1 (key id "k1"): the key is 16 bytes, want 32`) || strings.Contains(r.err.Error(), bad) {
		t.Fatalf("kl with a short key: %v", r.err)
	}

	// Rotation: the new key first, reseal, then the new key alone.
	r = k.runWith(withKey(key("k2", 2)+","+key("k1", 1)), "", "store", "reseal")
	if r.err != nil || !strings.Contains(r.out, "Re-sealed") || !strings.Contains(r.out, "with key k2") || !strings.Contains(r.out, "Retired key k1") {
		t.Fatalf("kl store reseal: %v\n%s%s", r.err, r.out, r.errOut)
	}
	if r := k.runWith(withKey(key("k2", 2)), "", "state", "pull", "prod"); r.err != nil || !strings.Contains(r.out, secret) {
		t.Fatalf("kl state pull with the new key alone: %v\n%s", r.err, r.errOut)
	}
	// Again, in JSON: nothing left to re-seal, nothing to retire.
	r = k.runWith(withKey(key("k2", 2)), "", "--json", "store", "reseal")
	var doc struct {
		Schema string `json:"schema"`
		Key    string `json:"key"`
		Kinds  []struct {
			Kind                      string
			Read, Resealed, Unchanged int
		} `json:"kinds"`
		Retired   []string `json:"retired"`
		Compacted bool     `json:"compacted"`
	}
	if r.err != nil {
		t.Fatalf("kl --json store reseal: %v\n%s", r.err, r.errOut)
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatalf("kl --json store reseal: %v\n%s", err, r.out)
	}
	kinds := map[string][3]int{}
	for _, kd := range doc.Kinds {
		kinds[kd.Kind] = [3]int{kd.Read, kd.Resealed, kd.Unchanged}
	}
	if doc.Schema != "kilolock/reseal/v1" || doc.Key != "k2" || len(doc.Kinds) != 4 || doc.Kinds[0].Kind != "artifacts" ||
		kinds["artifacts"][1] != 0 || kinds["artifacts"][2] == 0 || kinds["versions"] != [3]int{} ||
		kinds["headers"] != [3]int{2, 0, 2} || kinds["entries"] != [3]int{1, 0, 1} || len(doc.Retired) != 0 || !doc.Compacted {
		t.Fatalf("kl --json store reseal, a second time: %s", r.out)
	}
	if r := k.runWith(k1, "", "state", "pull", "prod"); r.err == nil || !strings.Contains(r.err.Error(), `"k1", was retired by kl store reseal`) {
		t.Fatalf("kl state pull with the retired key: %v", r.err)
	}
	if bytes.Contains(k.storeBytes(), []byte(secret)) {
		t.Fatal("after kl store reseal the secret is in the SQLite file in clear")
	}
	// Without a key there is nothing to re-seal with.
	if r := k.run("store", "reseal"); r.err == nil || !strings.Contains(r.err.Error(), "KL_ENCRYPTION_KEY is not set") {
		t.Fatalf("kl store reseal without a key: %v", r.err)
	}
}
