package githubfake

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GitHub's rule for an app JWT (docs/github.md "Tokens and rate limits"):
// RS256, iss = app id, exp at most 10 minutes ahead. Installation tokens
// live one hour.
const (
	maxJWTLifetime = 10 * time.Minute
	jwtClockSkew   = 60 * time.Second
	tokenLifetime  = time.Hour
	linkLifetime   = 5 * time.Minute
)

// keyPool shares RSA keys between fakes: generating a 2048-bit key costs
// tens of milliseconds (far more under -race), and tests need distinct keys
// only within one fake.
var keyPool struct {
	mu   sync.Mutex
	keys []*rsa.PrivateKey
}

func poolKey(i int) *rsa.PrivateKey {
	keyPool.mu.Lock()
	defer keyPool.mu.Unlock()
	for len(keyPool.keys) <= i {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(fmt.Sprintf("githubfake: generating RSA key: %v", err))
		}
		keyPool.keys = append(keyPool.keys, k)
	}
	return keyPool.keys[i]
}

// NewAppKey registers GitHub App appID with an RSA key pair and
// returns the private key as PKCS#1 PEM, the form GitHub hands out. The
// fake verifies app JWTs against the public half. The app's bot login is
// BotLogin(appID). Keys differ within one fake; the n-th key of every fake
// is the same (keys are pooled: generating them is slow under -race).
func (f *Fake) NewAppKey(appID int64) []byte {
	f.mu.Lock()
	k := poolKey(f.keys)
	f.keys++
	f.apps[appID] = &k.PublicKey
	if f.slugs[appID] == "" {
		f.slugs[appID] = fmt.Sprintf("klbot-%d", appID)
	}
	f.mu.Unlock()
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}

// BotLogin is the login under which app appID's installation tokens act
// ("klbot-APPID[bot]", type Bot).
func (f *Fake) BotLogin(appID int64) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.botLoginLocked(appID)
}

func (f *Fake) botLoginLocked(appID int64) string {
	s := f.slugs[appID]
	if s == "" {
		s = fmt.Sprintf("klbot-%d", appID)
	}
	return s + "[bot]"
}

// caller is the authenticated identity of a request.
type caller struct {
	login          string
	installationID int64
}

func unauthorized(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusUnauthorized, map[string]any{"message": msg,
		"documentation_url": "https://docs.github.com/rest", "status": "401"})
}

// credential returns the token of an "Authorization: token X" or
// "Authorization: Bearer X" header.
func credential(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, v, ok := strings.Cut(h, " ")
	if !ok || v == "" {
		return "", false
	}
	switch strings.ToLower(scheme) {
	case "token", "bearer":
		return strings.TrimSpace(v), true
	}
	return "", false
}

// authToken authenticates an API call made with an installation or plain token.
func (f *Fake) authToken(w http.ResponseWriter, r *http.Request) (caller, bool) {
	v, ok := credential(r)
	if !ok {
		unauthorized(w, "Requires authentication")
		return caller{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tokens[v]
	if t == nil || t.expired || !f.Now().Before(t.expiresAt) {
		unauthorized(w, "Bad credentials")
		return caller{}, false
	}
	return caller{login: t.login, installationID: t.installationID}, true
}

// authJWT authenticates an app-level call (installation tokens) and
// returns the app id.
func (f *Fake) authJWT(w http.ResponseWriter, r *http.Request) (int64, bool) {
	v, ok := credential(r)
	if !ok {
		unauthorized(w, "A JSON web token could not be decoded")
		return 0, false
	}
	appID, msg := f.verifyJWT(v)
	if msg != "" {
		unauthorized(w, msg)
		return 0, false
	}
	return appID, true
}

// verifyJWT checks an app JWT as GitHub does and returns the app id, or a
// message saying what is wrong.
func (f *Fake) verifyJWT(tok string) (int64, string) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return 0, "A JSON web token could not be decoded"
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss json.RawMessage `json:"iss"`
		Iat *json.Number    `json:"iat"`
		Exp *json.Number    `json:"exp"`
	}
	if err := decodeSegment(parts[0], &hdr); err != nil {
		return 0, "A JSON web token could not be decoded"
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return 0, "A JSON web token could not be decoded"
	}
	if hdr.Alg != "RS256" {
		return 0, fmt.Sprintf("'alg' must be RS256, got %q", hdr.Alg)
	}
	var iss string
	if err := json.Unmarshal(claims.Iss, &iss); err != nil {
		iss = string(claims.Iss) // a number
	}
	appID, err := strconv.ParseInt(iss, 10, 64)
	if err != nil {
		return 0, "'Issuer' claim ('iss') must be the app id"
	}
	f.mu.Lock()
	pub := f.apps[appID]
	f.mu.Unlock()
	if pub == nil {
		return 0, "Integration not found"
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return 0, "A JSON web token could not be decoded"
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		return 0, "A JSON web token could not be decoded"
	}
	if claims.Exp == nil || claims.Iat == nil {
		return 0, "'Expiration time' claim ('exp') and 'Issued at' claim ('iat') are required"
	}
	exp, err1 := claims.Exp.Int64()
	iat, err2 := claims.Iat.Int64()
	if err1 != nil || err2 != nil {
		return 0, "'exp' and 'iat' must be integers"
	}
	now := f.Now()
	switch {
	case time.Unix(exp, 0).After(now.Add(maxJWTLifetime)):
		return 0, "'Expiration time' claim ('exp') is too far in the future"
	case !time.Unix(exp, 0).After(now):
		return 0, "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	case time.Unix(iat, 0).After(now.Add(jwtClockSkew)):
		return 0, "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	}
	return appID, ""
}

func decodeSegment(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	return dec.Decode(v)
}

func randomString(prefix string, n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	var sb strings.Builder
	sb.WriteString(prefix)
	for range n {
		i, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			panic(err)
		}
		sb.WriteByte(alphabet[i.Int64()])
	}
	return sb.String()
}

// issueToken issues an installation token for appID's installation id.
func (f *Fake) issueToken(appID, installationID int64) (*token, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.installations[installationID]
	if in == nil || in.appID != appID {
		return nil, false
	}
	t := &token{value: randomString("ghs_", 36), installationID: installationID,
		login: f.botLoginLocked(appID), expiresAt: f.now().Add(tokenLifetime)}
	f.tokens[t.value] = t
	return t, true
}

// canReach tells whether the caller's installation covers repository r.
// Call with f.mu held.
func (f *Fake) canReachLocked(c caller, r *repo) bool {
	if c.installationID == 0 {
		return true
	}
	in := f.installations[c.installationID]
	if in == nil {
		return false
	}
	return len(in.repos) == 0 || in.repos[strings.ToLower(r.owner+"/"+r.name)]
}
