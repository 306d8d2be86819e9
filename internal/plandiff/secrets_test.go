package plandiff

import (
	"fmt"
	"testing"
)

// TestSecrets: the values a state marks sensitive (sensitive_attributes,
// sensitive outputs) and the extra secrets, 8 bytes or more, longest
// first, each once; a plan may be absent; a state that is not one is an
// error.
func TestSecrets(t *testing.T) {
	t.Parallel()
	state := `{"version":4,"terraform_version":"1.11.4","serial":3,"lineage":"l","outputs":{
	  "token":{"value":"output-secret-1","type":"string","sensitive":true},
	  "plain":{"value":"not-a-secret-at-all","type":"string"}},
	"resources":[{"mode":"managed","type":"terraform_data","name":"s","provider":"provider[\"terraform.io/builtin/terraform\"]",
	  "instances":[{"schema_version":0,"attributes":{"id":"6a1c6f0e-0000-4000-8000-000000000000",
	    "input":{"value":"input-secret-22","type":"string"},"output":{"value":"input-secret-22","type":"string"},"triggers_replace":null},
	    "sensitive_attributes":[[{"type":"get_attr","value":"input"}]]}]},
	 {"mode":"managed","type":"terraform_data","name":"short","provider":"provider[\"terraform.io/builtin/terraform\"]",
	  "instances":[{"schema_version":0,"attributes":{"id":"x","input":{"value":"prod","type":"string"},"output":null,"triggers_replace":null},
	    "sensitive_attributes":[[{"type":"get_attr","value":"input"}]]}]}]}`
	got, err := Secrets(nil, Options{PriorState: []byte(state), Secrets: []string{"tf-var-value-333", "short", "input-secret-22"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"tf-var-value-333", "input-secret-22", "output-secret-1"} // by length, then bytes
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Secrets = %q, want %q", got, want)
	}
	if _, err := Secrets(nil, Options{PriorState: []byte(`{"version":3}`)}); err == nil {
		t.Error("a state v3 document: no error")
	}
}
