package main

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseTFVars(t *testing.T) {
	t.Parallel()
	for in, tc := range map[string]struct {
		want    []string
		wantErr string
	}{
		"":                                 {},
		"  ":                               {},
		"TF_VAR_region":                    {want: []string{"TF_VAR_region"}},
		" TF_VAR_region , TF_VAR_db-pass ": {want: []string{"TF_VAR_region", "TF_VAR_db-pass"}},
		"TF_VAR_a,TF_VAR_a":                {want: []string{"TF_VAR_a"}},
		"TF_VAR_a,":                        {wantErr: "an empty entry"},
		"region":                           {wantErr: `"region" is not a TF_VAR_ variable: list environment variable names such as TF_VAR_region`},
		"TF_VAR_":                          {wantErr: "TF_VAR_: the variable name is empty"},
		"TF_VAR_a.b":                       {wantErr: `"a.b" is not a Terraform variable name`},
		"TF_VAR_for_each":                  {wantErr: `"for_each" is reserved by Terraform`},
		"TF_VAR_db*":                       {wantErr: "patterns are not accepted"},
	} {
		got, err := parseTFVars(in)
		if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("parseTFVars(%q) error = %v, want %q", in, err, tc.wantErr)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseTFVars(%q) = %q, want %q", in, got, tc.want)
		}
	}
}

// TestTerraformEnv: klbot hands Terraform only the TF_VAR_* that
// KLBOT_TF_VARS lists; everything else of its environment is passed on as
// it is (the Runner then withholds KLBOT_* and KL_*).
func TestTerraformEnv(t *testing.T) {
	t.Parallel()
	env := []string{"PATH=/bin", "TF_VAR_region=eu", "TF_VAR_db_password=secret", "TF_VAR_other=x", "AWS_PROFILE=p",
		"KLBOT_TF_VARS=TF_VAR_region,TF_VAR_token", "TF_VAR_other=y", "TF_VAR_Region=case"}
	out, withheld, unset := terraformEnv(env, []string{"TF_VAR_region", "TF_VAR_token"})
	if want := []string{"PATH=/bin", "TF_VAR_region=eu", "AWS_PROFILE=p", "KLBOT_TF_VARS=TF_VAR_region,TF_VAR_token"}; !reflect.DeepEqual(out, want) {
		t.Errorf("environment = %q, want %q", out, want)
	}
	if want := []string{"TF_VAR_Region", "TF_VAR_db_password", "TF_VAR_other"}; !reflect.DeepEqual(withheld, want) {
		t.Errorf("withheld = %q, want %q", withheld, want)
	}
	if want := []string{"TF_VAR_token"}; !reflect.DeepEqual(unset, want) {
		t.Errorf("unset = %q, want %q", unset, want)
	}
	out, withheld, _ = terraformEnv(env, nil)
	for _, kv := range out {
		if strings.HasPrefix(kv, "TF_VAR_") {
			t.Errorf("without KLBOT_TF_VARS: %s passed", kv)
		}
	}
	if len(withheld) != 4 {
		t.Errorf("without KLBOT_TF_VARS: withheld %q, want all four", withheld)
	}
}

// TestLinkConfig: KLBOT_LINK_KEY, KLBOT_LINK_TTL and KLBOT_PUBLIC_URL are
// checked as klbot starts, each error naming the variable; a valid pair
// signs run page links under the public URL.
func TestLinkConfig(t *testing.T) {
	base := []string{"KLBOT_APP_ID=1", "KLBOT_PRIVATE_KEY=pem", "KLBOT_WEBHOOK_SECRET=s", "KLBOT_DATABASE_URL=postgres://x"}
	for env, want := range map[string]string{
		"KLBOT_LINK_KEY=short":                                      "KLBOT_LINK_KEY or KLBOT_LINK_TTL: link signing key is 5 bytes: want at least 32",
		"KLBOT_LINK_TTL=-1h":                                        "KLBOT_LINK_KEY or KLBOT_LINK_TTL: link TTL -1h0m0s is negative",
		"KLBOT_PUBLIC_URL=klbot.example.com":                        `KLBOT_PUBLIC_URL="klbot.example.com": want klbot's public base URL`,
		"KLBOT_PUBLIC_URL=javascript:alert(1)":                      `KLBOT_PUBLIC_URL="javascript:alert(1)"`,
		"KLBOT_PUBLIC_URL=https://klbot.example.com/?x=1":           "want klbot's public base URL",
		"KLBOT_LINK_TTL=forever":                                    "KLBOT_LINK_TTL",
		"KLBOT_LINK_TTL=9000h":                                      "link TTL 9000h0m0s is longer than",
		"KLBOT_PUBLIC_URL=https://klbot.example.com/kl/":            "",
		"KLBOT_LINK_KEY=0123456789abcdef0123456789abcdef-ok-key-42": "",
	} {
		e := append(slices.Clone(base), env)
		if strings.HasPrefix(env, "KLBOT_LINK_TTL") {
			e = append(e, "KLBOT_LINK_KEY=0123456789abcdef0123456789abcdef-ok-key-42")
		}
		_, _, err := loadConfig(t.Context(), e)
		if (err == nil) != (want == "") || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", env, err, want)
		}
	}
	cfg, _, err := loadConfig(t.Context(), append(base, "KLBOT_PUBLIC_URL=https://klbot.example.com/", "KLBOT_LINK_KEY=0123456789abcdef0123456789abcdef-ok-key-42"))
	if err != nil {
		t.Fatal(err)
	}
	link := runLink(cfg)("01J0000000000000000000000X")
	if !strings.HasPrefix(link, "https://klbot.example.com/runs/01J0000000000000000000000X?exp=") || !strings.Contains(link, "&sig=") {
		t.Errorf("run link %q, want a signed link under the public URL", link)
	}
	cfg, _, _ = loadConfig(t.Context(), append(base, "KLBOT_PUBLIC_URL=https://klbot.example.com/"))
	if runLink(cfg) != nil {
		t.Errorf("without KLBOT_LINK_KEY klbot signs run links")
	}
}
