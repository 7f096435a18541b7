package events

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
)

// HashValue returns the digest that stands in for a secret-bearing value
// (an env or header value) in the journal: "sha256:" and the first 16 hex
// digits of the value's SHA-256. The value itself never reaches an event.
func HashValue(v string) string {
	s := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(s[:8])
}

// IsHashedValue reports whether v is already a [HashValue] digest.
func IsHashedValue(v string) bool {
	if !strings.HasPrefix(v, "sha256:") || len(v) != len("sha256:")+16 {
		return false
	}
	_, err := hex.DecodeString(v[len("sha256:"):])
	return err == nil
}

// RedactKVs returns kvs sorted by key with every value replaced by its
// [HashValue] digest (values that already are digests are kept).
func RedactKVs(kvs []KV) []KV {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]KV, len(kvs))
	for i, kv := range kvs {
		v := kv.Value
		if !IsHashedValue(v) {
			v = HashValue(v)
		}
		out[i] = KV{Key: kv.Key, Value: v}
	}
	SortKVs(out)
	return out
}

// SortKVs sorts kvs by key, then value, in place.
func SortKVs(kvs []KV) {
	slices.SortFunc(kvs, func(a, b KV) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return strings.Compare(a.Value, b.Value)
	})
}

// hashedFields is the canonical encoding of the fields that decide what
// runs and where. Field order is fixed by the struct; env and headers are
// sorted by key and hold digests, so the hash can be recomputed from the
// journal and never needs a secret.
type hashedFields struct {
	Type    Transport `json:"type"`
	Command string    `json:"command"`
	Args    []string  `json:"args"`
	Env     []KV      `json:"env"`
	Cwd     string    `json:"cwd"`
	URL     string    `json:"url"`
	Headers []KV      `json:"headers"`
	// OAuth is omitted when the server has none, so the hash of every
	// config without one is what it was before "oauth" existed.
	OAuth *hashedOAuth `json:"oauth,omitempty"`
}

// hashedOAuth is the canonical encoding of an "oauth" object: every field,
// the client secret as its digest, scopes in the order written.
type hashedOAuth struct {
	ClientID              string   `json:"client_id"`
	ClientSecret          string   `json:"client_secret"`
	CallbackPort          int      `json:"callback_port"`
	Scopes                []string `json:"scopes"`
	AuthServerMetadataURL string   `json:"auth_server_metadata_url"`
	ClientMetadataURL     string   `json:"client_metadata_url"`
}

func canonicalOAuth(o *OAuthConfig) *hashedOAuth {
	if o.IsZero() {
		return nil
	}
	h := &hashedOAuth{ClientID: o.ClientID, ClientSecret: o.ClientSecret, CallbackPort: o.CallbackPort, Scopes: o.Scopes,
		AuthServerMetadataURL: o.AuthServerMetadataURL, ClientMetadataURL: o.ClientMetadataURL}
	if h.ClientSecret != "" && !IsHashedValue(h.ClientSecret) {
		h.ClientSecret = HashValue(h.ClientSecret)
	}
	if h.Scopes == nil {
		h.Scopes = []string{}
	}
	return h
}

func canonical(c *ServerConfig) hashedFields {
	f := hashedFields{Type: c.Transport, Command: c.Command, Args: c.Args, Env: RedactKVs(c.Env),
		Cwd: c.Cwd, URL: c.URL, Headers: RedactKVs(c.Headers), OAuth: canonicalOAuth(c.OAuth)}
	if f.Args == nil {
		f.Args = []string{}
	}
	if f.Env == nil {
		f.Env = []KV{}
	}
	if f.Headers == nil {
		f.Headers = []KV{}
	}
	return f
}

// ConfigHash returns the canonical config hash of c: SHA-256 over a
// canonical encoding of type, command, args, env, cwd, url, headers and
// (when set) the oauth object, as "sha256:" and 64 hex digits. Approvals
// bind to it. Env and header values and the OAuth client secret count by
// their digest, so c may be raw or already redacted: both hash the same.
// Order of env and header keys does not matter; order of args (and of
// scopes) does.
func ConfigHash(c *ServerConfig) string {
	b, _ := json.Marshal(canonical(c)) // cannot fail: strings and slices only
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// Fingerprint returns the hash of everything whose change needs a restart
// of the server: the hashed fields plus protocol version and timeout.
// Reload reconciles by it.
func Fingerprint(c *ServerConfig) string {
	b, _ := json.Marshal(struct {
		H  hashedFields `json:"h"`
		PV string       `json:"pv"`
		T  int64        `json:"t"`
	}{canonical(c), c.ProtocolVersion, c.TimeoutMs})
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// ChangedFields names the hashed fields that differ between a and b, in the
// canonical order: type, command, args, env:KEY, cwd, url, headers:KEY,
// then oauth.FIELD (FIELD as the config spells it: clientId,
// clientSecret, callbackPort, scopes, authServerMetadataUrl,
// clientMetadataUrl).
func ChangedFields(a, b *ServerConfig) []string {
	ca, cb := canonical(a), canonical(b)
	var out []string
	if ca.Type != cb.Type {
		out = append(out, "type")
	}
	if ca.Command != cb.Command {
		out = append(out, "command")
	}
	if !slices.Equal(ca.Args, cb.Args) {
		out = append(out, "args")
	}
	out = append(out, diffKVs("env", ca.Env, cb.Env)...)
	if ca.Cwd != cb.Cwd {
		out = append(out, "cwd")
	}
	if ca.URL != cb.URL {
		out = append(out, "url")
	}
	out = append(out, diffKVs("headers", ca.Headers, cb.Headers)...)
	return append(out, diffOAuth(ca.OAuth, cb.OAuth)...)
}

// diffOAuth names the fields of two canonical oauth objects that differ
// (an absent object is one with every field empty).
func diffOAuth(a, b *hashedOAuth) []string {
	var za, zb hashedOAuth
	if a == nil {
		a = &za
	}
	if b == nil {
		b = &zb
	}
	var out []string
	for _, f := range []struct {
		name string
		same bool
	}{
		{"oauth.clientId", a.ClientID == b.ClientID},
		{"oauth.clientSecret", a.ClientSecret == b.ClientSecret},
		{"oauth.callbackPort", a.CallbackPort == b.CallbackPort},
		{"oauth.scopes", slices.Equal(a.Scopes, b.Scopes)},
		{"oauth.authServerMetadataUrl", a.AuthServerMetadataURL == b.AuthServerMetadataURL},
		{"oauth.clientMetadataUrl", a.ClientMetadataURL == b.ClientMetadataURL},
	} {
		if !f.same {
			out = append(out, f.name)
		}
	}
	return out
}

func diffKVs(field string, a, b []KV) []string {
	keys := map[string][2]string{}
	for _, kv := range a {
		v := keys[kv.Key]
		v[0] = kv.Value
		keys[kv.Key] = v
	}
	for _, kv := range b {
		v := keys[kv.Key]
		v[1] = kv.Value + "\x00" // mark present even when empty
		keys[kv.Key] = v
	}
	var out []string
	for k, v := range keys {
		if v[0]+"\x00" != v[1] {
			out = append(out, field+":"+k)
		}
	}
	slices.Sort(out)
	return out
}

// ToolDefHash returns the hash of a tool's definition as approvals pin it:
// name, description and input schema (canonical JSON text).
func ToolDefHash(name, description, inputSchema string) string {
	b, _ := json.Marshal([3]string{name, description, inputSchema})
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:16])
}

// ShortHash returns the first 12 hex digits of a "sha256:…" hash, for
// display.
func ShortHash(h string) string {
	h = strings.TrimPrefix(h, "sha256:")
	return h[:min(len(h), 12)]
}
