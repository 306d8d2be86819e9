package cli_test

import (
	"strings"
	"testing"
)

// tokenDoc is the part of kilolock/token-created/v1 and the entries of
// kilolock/tokens/v1 the tests read.
type tokenDoc struct {
	ID        string `json:"id"`
	Actor     string `json:"actor"`
	ReadOnly  bool   `json:"read_only"`
	States    string `json:"states"`
	Status    string `json:"status"`
	CreatedBy string `json:"created_by"`
	ExpiresAt string `json:"expires_at"`
	RevokedBy string `json:"revoked_by"`
}

type tokenCreated struct {
	Schema string   `json:"schema"`
	Token  tokenDoc `json:"token"`
	Secret string   `json:"secret"`
}

type tokenList struct {
	Schema string     `json:"schema"`
	Tokens []tokenDoc `json:"tokens"`
}

// kits are a kit of each store kind.
var kits = map[string]func(t *testing.T) *kit{"sqlite": setup, "postgres": setupPostgres}

func TestTokenCommands(t *testing.T) {
	t.Parallel()
	for kind, newKit := range kits {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			k := newKit(t)
			kl, printed := k.recording(nil)
			kl("state", "init", "acme/prod")
			text := kl("token", "create", "--actor", "ci-deployer", "--state", "acme/**", "--expires", "30d")
			var secret string
			for _, f := range strings.Fields(text) {
				if strings.HasPrefix(f, "klt_") {
					secret = f
				}
			}
			if secret == "" || !strings.Contains(text, "for ci-deployer: read and write, states acme/**, expires ") ||
				!strings.Contains(text, "shown only this once") {
				t.Fatalf("kl token create printed:\n%s", text)
			}
			var made tokenCreated
			k.jsonOf(&made, "token", "create", "--actor", "dashboards", "--read-only")
			if made.Schema != "kilolock/token-created/v1" || !strings.HasPrefix(made.Secret, "klt_"+made.Token.ID+"_") ||
				made.Token != (tokenDoc{ID: made.Token.ID, Actor: "dashboards", ReadOnly: true, States: "**", Status: "live", CreatedBy: "alice"}) {
				t.Errorf("kl token create --json: %+v", made)
			}

			list := kl("token", "list")
			if !strings.Contains(list, "Tokens (2)") || !strings.Contains(list, "ci-deployer") || !strings.Contains(list, "read-only") {
				t.Errorf("kl token list:\n%s", list)
			}
			out := kl("token", "revoke", made.Token.ID)
			if !strings.Contains(out, "Revoked token "+made.Token.ID+" of dashboards (by alice at ") {
				t.Errorf("kl token revoke:\n%s", out)
			}
			var l tokenList
			k.jsonOf(&l, "token", "list")
			if l.Schema != "kilolock/tokens/v1" || len(l.Tokens) != 2 || l.Tokens[0].Status != "live" || l.Tokens[0].ExpiresAt == "" ||
				l.Tokens[1].Status != "revoked" || l.Tokens[1].RevokedBy != "alice" {
				t.Errorf("kl token list --json after revoking: %+v", l)
			}
			// Revoking again keeps the first revocation.
			kl2 := k.runWith(append(k.env, "KL_ACTOR=bob"), "", "token", "revoke", made.Token.ID)
			if kl2.err != nil || !strings.Contains(kl2.out, "(by alice at ") {
				t.Errorf("revoking twice: %v\n%s", kl2.err, kl2.out)
			}
			// The secrets were printed by create only.
			all := printed.String()
			if strings.Count(all, secret) != 1 || strings.Contains(list, made.Secret) {
				t.Errorf("a secret was printed again:\n%s", all)
			}
		})
	}
}

func TestTokenBadInput(t *testing.T) {
	t.Parallel()
	k := setup(t)
	k.ok("state", "init", "acme/prod")
	_, tokenText := func() (string, string) {
		var made tokenCreated
		k.jsonOf(&made, "token", "create", "--actor", "probe")
		return made.Token.ID, made.Secret
	}()
	cases := map[string]struct {
		args []string
		want string
	}{
		"no actor":          {[]string{"token", "create"}, "--actor is required"},
		"blank actor":       {[]string{"token", "create", "--actor", " "}, `--actor " ": blank`},
		"actor with a tab":  {[]string{"token", "create", "--actor", "a\tb"}, "control character"},
		"long actor":        {[]string{"token", "create", "--actor", strings.Repeat("a", 201)}, "too long: 201 characters, at most 200"},
		"empty glob":        {[]string{"token", "create", "--actor", "ci", "--state", ""}, "--state: state glob is empty: use ** for every state"},
		"bad glob":          {[]string{"token", "create", "--actor", "ci", "--state", "acme/{a,b"}, "not a valid pattern"},
		"expires: banana":   {[]string{"token", "create", "--actor", "ci", "--expires", "banana"}, `--expires "banana": not a duration: use e.g. 90m, 720h or 30d`},
		"expires: 0d":       {[]string{"token", "create", "--actor", "ci", "--expires", "0d"}, "not a duration"},
		"expires: seconds":  {[]string{"token", "create", "--actor", "ci", "--expires", "30s"}, "too short: use at least 1m"},
		"expires: negative": {[]string{"token", "create", "--actor", "ci", "--expires", "-1h"}, "too short"},
		"expires: forever":  {[]string{"token", "create", "--actor", "ci", "--expires", "4000d"}, "not a duration"},
		"expires: 11 years": {[]string{"token", "create", "--actor", "ci", "--expires", "96360h"}, "too long: use at most 3650d"},
		"revoke: no id":     {[]string{"token", "revoke"}, "accepts 1 arg(s), received 0"},
		"revoke: not an id": {[]string{"token", "revoke", "tok-1"}, `token id "tok-1": not a token id`},
		"revoke: unknown":   {[]string{"token", "revoke", "01J0000000000000000000000X"}, "no such token"},
		"revoke: the token": {[]string{"token", "revoke", tokenText}, "that is a token, not a token id: its id is "},
		"list: an argument": {[]string{"token", "list", "x"}, `unknown command "x"`},
	}
	for name, c := range cases {
		r := k.run(c.args...)
		if r.err == nil || !strings.Contains(r.err.Error(), c.want) {
			t.Errorf("%s: kl %q: %v; want an error saying %q", name, c.args, r.err, c.want)
		}
		if strings.Contains(r.out+r.errOut, tokenText) || (r.err != nil && strings.Contains(r.err.Error(), tokenText[30:])) {
			t.Errorf("%s: the token was echoed", name)
		}
	}
	var l tokenList
	k.jsonOf(&l, "token", "list")
	if len(l.Tokens) != 1 || l.Tokens[0].Status != "live" {
		t.Errorf("after refused commands the store holds %+v, want the one live token", l.Tokens)
	}
}
