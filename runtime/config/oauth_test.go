package config

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// ---- the "oauth" object of a remote server ----

// TestConfigOAuth reads the oauth object as Claude Code writes it: each
// field resolved into Spec.OAuth, scopes split, the client secret
// expanded from the server's env for what runs and a digest in what is
// journaled, unknown keys warned about.
func TestConfigOAuth(t *testing.T) {
	ws, user := configDirs(t)
	writeConfig(t, filepath.Join(user, "config.json"), servers(
		`"gh": {"type": "http", "url": "https://mcp.example.com/mcp", "env": {"CS": "${PROC_CS}"},
		  "oauth": {"clientId": "app-123", "clientSecret": "${CS}", "callbackPort": 8765, "scopes": "  repo  read:org ",
		            "authServerMetadataUrl": "https://auth.example.com/.well-known/oauth-authorization-server",
		            "clientMetadataUrl": "https://app.example.com/oauth/client.json", "audience": "x", "extra": 1}}`,
		`"sse": {"type": "sse", "url": "https://sse.example.com/sse",
		  "oauth": {"authServerMetadataUrl": "http://127.0.0.1:9000/meta", "scopes": ""}}`,
		`"loop": {"url": "https://h/mcp", "oauth": {"authServerMetadataUrl": "http://localhost:9000/meta", "clientId": null}}`,
		`"v6": {"url": "https://h/mcp", "oauth": {"authServerMetadataUrl": "http://[::1]:9000/meta"}}`,
		`"plain": {"url": "https://h/mcp"}`,
		`"empty": {"url": "https://h/mcp", "oauth": {}}`,
		`"nulled": {"url": "https://h/mcp", "oauth": null}`,
		`"keyed": {"url": "https://h/mcp", "oauth": {"authServerMetadataUrl": "https://auth.example.com/m?api_key=url-S3CRET-value"}}`,
	))
	lc := Load(Sources{Workspace: ws, UserDir: user, LookupEnv: envMap{"PROC_CS": "cs-S3CRET-value"}.lookup})
	for _, s := range lc.Observed.Servers {
		if s.Invalid != "" {
			t.Errorf("%s: Invalid %q", s.Name, s.Invalid)
		}
	}
	spec := lc.Specs["gh"].OAuth
	want := &OAuthSpec{ClientID: "app-123", ClientSecret: "cs-S3CRET-value", CallbackPort: 8765, Scopes: []string{"repo", "read:org"},
		AuthServerMetadataURL: "https://auth.example.com/.well-known/oauth-authorization-server",
		ClientMetadataURL:     "https://app.example.com/oauth/client.json"}
	if spec == nil || spec.ClientID != want.ClientID || spec.ClientSecret != want.ClientSecret || spec.CallbackPort != want.CallbackPort ||
		!slices.Equal(spec.Scopes, want.Scopes) || spec.AuthServerMetadataURL != want.AuthServerMetadataURL || spec.ClientMetadataURL != want.ClientMetadataURL {
		t.Fatalf("gh: OAuth = %+v, want %+v", spec, want)
	}
	if got := spec.RedirectURL(); got != "http://localhost:8765/callback" {
		t.Errorf("RedirectURL = %q", got)
	}
	ghSpec := lc.Specs["gh"]
	if !slices.Contains(ghSpec.Secrets(), "cs-S3CRET-value") {
		t.Errorf("Secrets() = %q lacks the client secret", ghSpec.Secrets())
	}
	j := server(t, lc, "gh").OAuth
	if j == nil || j.ClientSecret != events.HashValue("${CS}") || j.ClientID != "app-123" || j.CallbackPort != 8765 ||
		!slices.Equal(j.Scopes, want.Scopes) || j.AuthServerMetadataURL != want.AuthServerMetadataURL || j.ClientMetadataURL != want.ClientMetadataURL {
		t.Errorf("journaled oauth %+v: want the as-written secret's digest and every other field as written", j)
	}
	if !slices.ContainsFunc(lc.Warnings, func(w string) bool {
		return strings.Contains(w, `server "gh": unknown fields in "oauth" ignored: "audience", "extra" (known: clientId, clientSecret, callbackPort, scopes, authServerMetadataUrl, clientMetadataUrl)`)
	}) {
		t.Errorf("no unknown-field warning for gh's oauth: %q", lc.Warnings)
	}
	// http on a loopback host is allowed for the metadata URL; an empty
	// scopes string asks for none.
	for _, name := range []string{"sse", "loop", "v6"} {
		if o := lc.Specs[name].OAuth; o == nil || o.Scopes != nil || o.RedirectURL() != "" || !strings.HasPrefix(o.AuthServerMetadataURL, "http://") {
			t.Errorf("%s: OAuth = %+v", name, o)
		}
	}
	// No oauth, an empty one and a null one are the same config.
	for _, name := range []string{"plain", "empty", "nulled"} {
		if lc.Specs[name].OAuth != nil || server(t, lc, name).OAuth != nil {
			t.Errorf("%s: an oauth object that sets nothing was kept", name)
		}
		if server(t, lc, name).Hash != server(t, lc, "plain").Hash {
			t.Errorf("%s: hash differs from the same server without oauth", name)
		}
	}
	plain := lc.Specs["plain"]
	if len(plain.Secrets()) != 0 {
		t.Errorf("plain: Secrets() = %q", plain.Secrets())
	}
	// The secret never reaches the journaled form or a warning.
	obs := lc.Observed
	js, err := json.Marshal(obs)
	if err != nil {
		t.Fatal(err)
	}
	mp, err := events.Encode(&events.Event{Kind: events.KindConfigObserved, Payload: &obs})
	if err != nil {
		t.Fatal(err)
	}
	for what, b := range map[string][]byte{"json": js, "msgpack": mp, "warnings": []byte(strings.Join(lc.Warnings, "\n"))} {
		for _, secret := range []string{"cs-S3CRET-value", "url-S3CRET-value"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds secret %q", what, secret)
			}
		}
	}
	// A credential in a metadata URL is redacted in the journal, kept for
	// what runs.
	if got := lc.Specs["keyed"].OAuth.AuthServerMetadataURL; got != "https://auth.example.com/m?api_key=url-S3CRET-value" {
		t.Errorf("keyed: resolved metadata URL %q", got)
	}
	if got := server(t, lc, "keyed").OAuth.AuthServerMetadataURL; !strings.HasPrefix(got, "https://auth.example.com/m?api_key=") {
		t.Errorf("keyed: journaled metadata URL %q", got)
	}
}

// TestConfigOAuthInvalid: each malformed oauth object makes its entry
// invalid with a message saying what to write; the entry's other servers
// are unaffected.
func TestConfigOAuthInvalid(t *testing.T) {
	for _, tt := range []struct {
		name, entry, want string
	}{
		{"notobject", `{"url": "https://h/mcp", "oauth": "github"}`, `"oauth" must be an object like {"clientId": "...", "callbackPort": 8080, "scopes": "read write"}`},
		{"stdio", `{"command": "srv", "oauth": {"clientId": "x"}}`, `"oauth" applies only to "http" and "sse" servers: remove it from this stdio entry`},
		{"stdioempty", `{"type": "stdio", "command": "srv", "oauth": {}}`, `"oauth" applies only to "http" and "sse" servers`},
		{"clientid", `{"url": "https://h/mcp", "oauth": {"clientId": 42}}`, `"oauth.clientId" must be a string`},
		{"secrettype", `{"url": "https://h/mcp", "oauth": {"clientId": "a", "clientSecret": ["x"]}}`, `"oauth.clientSecret" must be a string (write "${NAME}"`},
		{"secretnul", `{"url": "https://h/mcp", "oauth": {"clientId": "a", "clientSecret": "a\u0000b"}}`, `"oauth.clientSecret" has a NUL byte: remove it`},
		{"secretalone", `{"url": "https://h/mcp", "oauth": {"clientSecret": "s"}}`, `"oauth.clientSecret" is set without "oauth.clientId": add the client ID`},
		{"port0", `{"url": "https://h/mcp", "oauth": {"callbackPort": 0}}`, `"oauth.callbackPort" must be a port number from 1 to 65535, like 8080`},
		{"portneg", `{"url": "https://h/mcp", "oauth": {"callbackPort": -1}}`, `"oauth.callbackPort" must be a port number`},
		{"porthigh", `{"url": "https://h/mcp", "oauth": {"callbackPort": 65536}}`, `"oauth.callbackPort" must be a port number`},
		{"portfrac", `{"url": "https://h/mcp", "oauth": {"callbackPort": 80.5}}`, `"oauth.callbackPort" must be a port number`},
		{"portstring", `{"url": "https://h/mcp", "oauth": {"callbackPort": "8080"}}`, `"oauth.callbackPort" must be a port number`},
		{"scopesarray", `{"url": "https://h/mcp", "oauth": {"scopes": ["read", "write"]}}`, `"oauth.scopes" must be one string of space-separated scopes, like "read write"`},
		{"asmtype", `{"url": "https://h/mcp", "oauth": {"authServerMetadataUrl": 1}}`, `"oauth.authServerMetadataUrl" must be a string URL`},
		{"asmhttp", `{"url": "https://h/mcp", "oauth": {"authServerMetadataUrl": "http://auth.example.com/meta"}}`, `"oauth.authServerMetadataUrl" must be an absolute https:// URL (http:// only on localhost)`},
		{"asmscheme", `{"url": "https://h/mcp", "oauth": {"authServerMetadataUrl": "ftp://auth.example.com/meta"}}`, `"oauth.authServerMetadataUrl" must be an absolute https:// URL`},
		{"asmrelative", `{"url": "https://h/mcp", "oauth": {"authServerMetadataUrl": "/meta"}}`, `"oauth.authServerMetadataUrl" must be an absolute https:// URL`},
		{"asmparse", `{"url": "https://h/mcp", "oauth": {"authServerMetadataUrl": "https://a b/%zz"}}`, `"oauth.authServerMetadataUrl" must be an absolute https:// URL`},
		{"cmdtype", `{"url": "https://h/mcp", "oauth": {"clientMetadataUrl": true}}`, `"oauth.clientMetadataUrl" must be a string URL`},
		{"cmdhttp", `{"url": "https://h/mcp", "oauth": {"clientMetadataUrl": "http://localhost/client.json"}}`, `"oauth.clientMetadataUrl" must be an absolute https:// URL without credentials or #fragment`},
		{"cmdnohost", `{"url": "https://h/mcp", "oauth": {"clientMetadataUrl": "https:///client.json"}}`, `"oauth.clientMetadataUrl" must be an absolute https:// URL`},
		{"cmdroot", `{"url": "https://h/mcp", "oauth": {"clientMetadataUrl": "https://app.example.com/"}}`, `"oauth.clientMetadataUrl" needs a path after the host, like "https://app.example.com/oauth/client.json"`},
		{"cmdbare", `{"url": "https://h/mcp", "oauth": {"clientMetadataUrl": "https://app.example.com"}}`, `"oauth.clientMetadataUrl" needs a path after the host`},
		{"cmdfragment", `{"url": "https://h/mcp", "oauth": {"clientMetadataUrl": "https://app.example.com/c.json#x"}}`, `without credentials or #fragment`},
		{"cmdemptyfragment", `{"url": "https://h/mcp", "oauth": {"clientMetadataUrl": "https://app.example.com/c.json#"}}`, `without credentials or #fragment`},
		{"cmduser", `{"url": "https://h/mcp", "oauth": {"clientMetadataUrl": "https://u@app.example.com/c.json"}}`, `without credentials or #fragment`},
		{"cmddot", `{"url": "https://h/mcp", "oauth": {"clientMetadataUrl": "https://app.example.com/a/../c.json"}}`, `"oauth.clientMetadataUrl" must not hold "." or ".." path segments`},
		{"cmdsingledot", `{"url": "https://h/mcp", "oauth": {"clientMetadataUrl": "https://app.example.com/./c.json"}}`, `must not hold "." or ".." path segments`},
		{"secretunset", `{"url": "https://h/mcp", "oauth": {"clientId": "a", "clientSecret": "${NOPE}"}}`, `"oauth.clientSecret" uses ${NOPE}, which the server's "env" block does not set: add "NOPE" to "env"`},
		{"secretproc", `{"url": "https://h/mcp", "oauth": {"clientId": "a", "clientSecret": "${PROC_CS}"}}`, `"oauth.clientSecret" uses ${PROC_CS}, which the server's "env" block does not set`},
		{"secretbreak", `{"url": "https://h/mcp", "env": {"S": "a\nb"}, "oauth": {"clientId": "a", "clientSecret": "${S}"}}`, `"oauth.clientSecret" has a line break in its value: remove it`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws, user := configDirs(t)
			writeConfig(t, filepath.Join(user, "config.json"), servers(`"bad": `+tt.entry, `"ok": {"url": "https://h/mcp"}`))
			lc := Load(Sources{Workspace: ws, UserDir: user, LookupEnv: envMap{"PROC_CS": "x"}.lookup})
			s := server(t, lc, "bad")
			if !strings.HasPrefix(s.Invalid, `server "bad": `) || !strings.Contains(s.Invalid, tt.want) {
				t.Errorf("Invalid = %q, want it to name the server and say %q", s.Invalid, tt.want)
			}
			if _, ok := lc.Specs["bad"]; ok {
				t.Error("an invalid entry has a spec")
			}
			if _, ok := lc.Specs["ok"]; !ok || server(t, lc, "ok").Invalid != "" {
				t.Error("the other server was affected")
			}
		})
	}
}

// TestConfigOAuthHash: approvals bind to the config hash, so every field
// of the oauth object must change it (and the fingerprint, so a reload
// restarts the server), while the secret counts by its as-written digest.
func TestConfigOAuthHash(t *testing.T) {
	read := func(oauth string) events.ServerConfig {
		t.Helper()
		f := parseConfigFile("/x.json", []byte(servers(`"s": {"url": "https://h/mcp", "env": {"A": "1", "B": "2"}, "oauth": `+oauth+`}`)), events.ScopeProject, false)
		if len(f.servers) != 1 || f.servers[0].cfg.Invalid != "" {
			t.Fatalf("%s: %+v", oauth, f.servers)
		}
		return f.servers[0].cfg
	}
	base := read(`{"clientId": "a", "clientSecret": "${A}", "callbackPort": 8080, "scopes": "r w", "authServerMetadataUrl": "https://as/m", "clientMetadataUrl": "https://c/d.json"}`)
	for field, oauth := range map[string]string{
		"oauth.clientId":              `{"clientId": "b", "clientSecret": "${A}", "callbackPort": 8080, "scopes": "r w", "authServerMetadataUrl": "https://as/m", "clientMetadataUrl": "https://c/d.json"}`,
		"oauth.clientSecret":          `{"clientId": "a", "clientSecret": "${B}", "callbackPort": 8080, "scopes": "r w", "authServerMetadataUrl": "https://as/m", "clientMetadataUrl": "https://c/d.json"}`,
		"oauth.callbackPort":          `{"clientId": "a", "clientSecret": "${A}", "callbackPort": 8081, "scopes": "r w", "authServerMetadataUrl": "https://as/m", "clientMetadataUrl": "https://c/d.json"}`,
		"oauth.scopes":                `{"clientId": "a", "clientSecret": "${A}", "callbackPort": 8080, "scopes": "r", "authServerMetadataUrl": "https://as/m", "clientMetadataUrl": "https://c/d.json"}`,
		"oauth.authServerMetadataUrl": `{"clientId": "a", "clientSecret": "${A}", "callbackPort": 8080, "scopes": "r w", "authServerMetadataUrl": "https://as/n", "clientMetadataUrl": "https://c/d.json"}`,
		"oauth.clientMetadataUrl":     `{"clientId": "a", "clientSecret": "${A}", "callbackPort": 8080, "scopes": "r w", "authServerMetadataUrl": "https://as/m", "clientMetadataUrl": "https://c/e.json"}`,
	} {
		c := read(oauth)
		if c.Hash == base.Hash || events.Fingerprint(&c) == events.Fingerprint(&base) {
			t.Errorf("%s: the hash or fingerprint did not change", field)
		}
		if got := events.ChangedFields(&base, &c); !slices.Equal(got, []string{field}) {
			t.Errorf("%s: ChangedFields = %v", field, got)
		}
	}
	// Whitespace between scopes is not a change.
	if c := read(`{"clientId": "a", "clientSecret": "${A}", "callbackPort": 8080, "scopes": " r   w ", "authServerMetadataUrl": "https://as/m", "clientMetadataUrl": "https://c/d.json"}`); c.Hash != base.Hash {
		t.Error("spacing between scopes changed the hash")
	}
}

// TestConfigEqualOAuth: a reload that changes only the oauth object is a
// change, even with the hash left alone; an empty object is no object.
func TestConfigEqualOAuth(t *testing.T) {
	o := func(oa *events.OAuthConfig) events.ConfigObserved {
		return events.ConfigObserved{Servers: []events.ServerConfig{{Name: "s", Transport: events.TransportHTTP, URL: "u", Hash: "h", OAuth: oa}}}
	}
	full := func() *events.OAuthConfig {
		return &events.OAuthConfig{ClientID: "a", ClientSecret: "d", CallbackPort: 1, Scopes: []string{"r"}, AuthServerMetadataURL: "m", ClientMetadataURL: "c"}
	}
	for _, tt := range []struct {
		name string
		a, b *events.OAuthConfig
		want bool
	}{
		{"both absent", nil, nil, true},
		{"absent vs empty", nil, &events.OAuthConfig{Scopes: []string{}}, true},
		{"absent vs set", nil, full(), false},
		{"same", full(), full(), true},
		{"clientId", full(), func() *events.OAuthConfig { x := full(); x.ClientID = "b"; return x }(), false},
		{"clientSecret", full(), func() *events.OAuthConfig { x := full(); x.ClientSecret = "e"; return x }(), false},
		{"callbackPort", full(), func() *events.OAuthConfig { x := full(); x.CallbackPort = 2; return x }(), false},
		{"scopes", full(), func() *events.OAuthConfig { x := full(); x.Scopes = []string{"r", "w"}; return x }(), false},
		{"authServerMetadataUrl", full(), func() *events.OAuthConfig { x := full(); x.AuthServerMetadataURL = "n"; return x }(), false},
		{"clientMetadataUrl", full(), func() *events.OAuthConfig { x := full(); x.ClientMetadataURL = "d"; return x }(), false},
	} {
		if got := Equal(o(tt.a), o(tt.b)); got != tt.want {
			t.Errorf("%s: Equal = %v, want %v", tt.name, got, tt.want)
		}
		if got := Equal(o(tt.b), o(tt.a)); got != tt.want {
			t.Errorf("%s (swapped): Equal = %v, want %v", tt.name, got, tt.want)
		}
	}
}
