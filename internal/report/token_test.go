package report

import "github.com/kilolock/kilolock/internal/token"

// tokensList is a token of each status: live without expiry, live with
// one, expired, revoked.
func tokensList() []token.Token {
	return []token.Token{
		{ID: "01M8TJNY6SH45N4NEG6N665RZJ", Actor: "ci-deployer", States: "acme/**", CreatedAt: at(-86400), CreatedBy: "alice", ExpiresAt: at(30 * 86400)},
		{ID: "01M8TJNY733DK41CDFMXNSMJ72", Actor: "dashboards", ReadOnly: true, States: token.AllStates, CreatedAt: at(-7200), CreatedBy: "alice"},
		{ID: "01M8TJNY7B2QWJ0C9V5EYF3XKM", Actor: "old-ci", States: "acme/*/prod", CreatedAt: at(-40 * 86400), CreatedBy: "bob", ExpiresAt: at(-86400)},
		{ID: "01M8TJNY7K8ZR6T2D4H1N0PQSW", Actor: "laptop", States: token.AllStates, CreatedAt: at(-3 * 86400), CreatedBy: "bob",
			RevokedAt: at(-600), RevokedBy: "alice"},
	}
}

// secretOf is a token string of t's id, of the real shape (not a real
// secret).
func secretOf(t token.Token) token.Secret {
	return token.Secret(token.Prefix + t.ID + "_c2VjcmV0LXRoYXQtaXMtbm90LWEtcmVhbC1vbmUtYWF")
}
