package report

import (
	"fmt"
	"io"

	"github.com/kilolock/kilolock/internal/token"
)

// Schemas of the token views (docs/json.md).
const (
	SchemaTokens       = "kilolock/tokens/v1"
	SchemaTokenCreated = "kilolock/token-created/v1"
	SchemaTokenRevoked = "kilolock/token-revoked/v1"
)

// TokenCreated renders `kl token create`: the token's record, and the
// token string itself — the one time it is shown (ADR 0054).
func TokenCreated(w io.Writer, t token.Token, secret token.Secret, o Options) error {
	title := words(toned(toneGood, "Created"), " token ", code(t.ID), " for ", strong(t.Actor), ": "+tokenTerms(t))
	return emit(w, o, func() *doc {
		return &doc{tone: toneGood, title: title, summary: []block{
			para(words(code(secret.Reveal()))),
			para(words("It is shown only this once: Kilolock keeps its SHA-256, not the token.")),
			para(words("Send it to kl serve as the password of HTTP Basic auth or as a bearer token. kl serve ignores the username (the token alone says who acts), "+
				"but Terraform's http backend sends the password only when ", code("username"), " is set: set it to any non-empty name (",
				code(t.Actor), ", say). ", code("kl token revoke "+t.ID), " revokes it.")),
		}}
	}, func() any {
		return tokenCreatedDocument{Schema: SchemaTokenCreated, Token: toToken(t, o), Secret: secret.Reveal(), Text: title.plain()}
	})
}

// TokenRevoked renders `kl token revoke`.
func TokenRevoked(w io.Writer, t token.Token, o Options) error {
	title := words(toned(toneWarn, "Revoked"), " token ", code(t.ID), " of ", strong(t.Actor),
		fmt.Sprintf(" (by %s at %s): requests with it are refused from now on", t.RevokedBy, fmtTime(t.RevokedAt)))
	return emit(w, o, func() *doc { return &doc{tone: toneWarn, title: title} }, func() any {
		return tokenRevokedDocument{Schema: SchemaTokenRevoked, Token: toToken(t, o), Text: title.plain()}
	})
}

// Tokens renders `kl token list`: every token, oldest first, with its
// status at o.Now.
func Tokens(w io.Writer, tokens []token.Token, o Options) error {
	return emit(w, o, func() *doc {
		d := &doc{tone: toneInfo, title: words(fmt.Sprintf("Tokens (%d)", len(tokens)))}
		if len(tokens) == 0 {
			d.summary = append(d.summary, para(words("no tokens: make one with ", code("kl token create --actor NAME"))))
			return d
		}
		t := table{head: []string{"id", "actor", "access", "states", "status", "created", "expires"}}
		for _, tok := range tokens {
			t.rows = append(t.rows, []sentence{{code(tok.ID)}, {strong(tok.Actor)}, words(access(tok)), {code(tok.States)},
				{toned(statusToneOf(tok.StatusAt(o.Now)), statusWords(tok, o))}, whenWords(tok.CreatedAt, o.Now), words(expiresColumn(tok))})
		}
		d.summary = append(d.summary, t)
		return d
	}, func() any {
		j := tokensDocument{Schema: SchemaTokens, Tokens: []jToken{}}
		for _, t := range tokens {
			j.Tokens = append(j.Tokens, toToken(t, o))
		}
		return j
	})
}

// tokenTerms says what a token may do: "read and write, states **, no
// expiry".
func tokenTerms(t token.Token) string {
	return fmt.Sprintf("%s, states %s, %s", access(t), t.States, expiryWords(t))
}

func access(t token.Token) string {
	if t.ReadOnly {
		return "read-only"
	}
	return "read and write"
}

func expiryWords(t token.Token) string {
	if t.ExpiresAt.IsZero() {
		return "no expiry"
	}
	return "expires " + fmtTime(t.ExpiresAt)
}

// expiresColumn is the expires column of kl token list: the time, or
// "never".
func expiresColumn(t token.Token) string {
	if t.ExpiresAt.IsZero() {
		return "never"
	}
	return fmtTime(t.ExpiresAt)
}

func statusWords(t token.Token, o Options) string {
	switch t.StatusAt(o.Now) {
	case token.Revoked:
		return "revoked by " + t.RevokedBy
	case token.Expired:
		return "expired"
	}
	return "live"
}

func statusToneOf(s token.Status) tone {
	if s == token.Live {
		return toneGood
	}
	return toneBad
}

type jToken struct {
	ID        string `json:"id"`
	Actor     string `json:"actor"`
	ReadOnly  bool   `json:"read_only"`
	States    string `json:"states"`
	Status    string `json:"status"`
	CreatedAt jtime  `json:"created_at"`
	CreatedBy string `json:"created_by"`
	ExpiresAt *jtime `json:"expires_at,omitempty"`
	RevokedAt *jtime `json:"revoked_at,omitempty"`
	RevokedBy string `json:"revoked_by,omitempty"`
}

func toToken(t token.Token, o Options) jToken {
	j := jToken{ID: t.ID, Actor: t.Actor, ReadOnly: t.ReadOnly, States: t.States, Status: string(t.StatusAt(o.Now)),
		CreatedAt: jtime(t.CreatedAt), CreatedBy: t.CreatedBy, RevokedBy: t.RevokedBy}
	if !t.ExpiresAt.IsZero() {
		e := jtime(t.ExpiresAt)
		j.ExpiresAt = &e
	}
	if !t.RevokedAt.IsZero() {
		r := jtime(t.RevokedAt)
		j.RevokedAt = &r
	}
	return j
}

type tokensDocument struct {
	Schema string   `json:"schema"`
	Tokens []jToken `json:"tokens"`
}

type tokenCreatedDocument struct {
	Schema string `json:"schema"`
	Token  jToken `json:"token"`
	Secret string `json:"secret"`
	Text   string `json:"text"`
}

type tokenRevokedDocument struct {
	Schema string `json:"schema"`
	Token  jToken `json:"token"`
	Text   string `json:"text"`
}
