package events

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func base() ServerConfig {
	return ServerConfig{Name: "gh", Transport: TransportStdio, Command: "npx", Args: []string{"-y", "gh-mcp"},
		Env: []KV{{"GITHUB_TOKEN", "ghp_s3cr3t_value"}, {"LOG", "debug"}}, Cwd: "/w"}
}

func TestConfigHashCanonical(t *testing.T) {
	a := base()
	h := ConfigHash(&a)
	if !strings.HasPrefix(h, "sha256:") || len(h) != 71 {
		t.Fatalf("hash %q", h)
	}
	// Env key order does not matter.
	b := base()
	b.Env = []KV{{"LOG", "debug"}, {"GITHUB_TOKEN", "ghp_s3cr3t_value"}}
	if ConfigHash(&b) != h {
		t.Error("env order changed the hash")
	}
	// Raw and redacted configs hash the same, so the hash can be recomputed
	// from the journal.
	r := base()
	r.Env = RedactKVs(r.Env)
	if ConfigHash(&r) != h {
		t.Error("redacted config hashes differently")
	}
	// Fields outside the hashed set do not change it: not the name (an
	// approval binds to the name besides), nor where the config came from,
	// nor the facts and filters that travel with it.
	n := base()
	n.Name, n.Source, n.Scope, n.Disabled, n.TimeoutMs, n.ProtocolVersion = "other", "elsewhere", ScopeUser, true, 9, "2025-06-18"
	n.IncludeTools, n.ExcludeTools, n.Hash, n.Invalid, n.Gated = []string{"x"}, []string{"y"}, "sha256:00", "bad", true
	n.Approval, n.RecentLaunches, n.RecentCrashes = ApprovalFact{Decision: DecisionApprove, Hash: "h"}, []int64{1}, []int64{2}
	if ConfigHash(&n) != h {
		t.Error("non-hashed field changed the hash")
	}
	// Every field of ServerConfig is set in n or by a hashed-field case
	// below: a new field must be placed on one side or the other.
	if got := reflect.TypeFor[ServerConfig]().NumField(); got != 22 {
		t.Errorf("ServerConfig has %d fields, this test knows 22: is the new one hashed?", got)
	}
	if got := reflect.TypeFor[OAuthConfig]().NumField(); got != 6 {
		t.Errorf("OAuthConfig has %d fields, this test knows 6: is the new one hashed?", got)
	}
	// Header order does not matter either.
	hd1, hd2 := base(), base()
	hd1.Headers = []KV{{"A", "1"}, {"B", "2"}}
	hd2.Headers = []KV{{"B", "2"}, {"A", "1"}}
	if ConfigHash(&hd1) != ConfigHash(&hd2) {
		t.Error("header order changed the hash")
	}
	// Each hashed field does, and ChangedFields names it.
	muts := map[string]func(*ServerConfig){
		"type":                  func(c *ServerConfig) { c.Transport = TransportHTTP },
		"command":               func(c *ServerConfig) { c.Command = "node" },
		"args":                  func(c *ServerConfig) { c.Args = []string{"gh-mcp", "-y"} },
		"env:GITHUB_TOKEN":      func(c *ServerConfig) { c.Env[0].Value = "other" },
		"env:NEW":               func(c *ServerConfig) { c.Env = append(c.Env, KV{"NEW", ""}) },
		"cwd":                   func(c *ServerConfig) { c.Cwd = "/x" },
		"url":                   func(c *ServerConfig) { c.URL = "http://127.0.0.1/mcp" },
		"headers:Authorization": func(c *ServerConfig) { c.Headers = []KV{{"Authorization", "Bearer t"}} },
		"oauth.clientId":        func(c *ServerConfig) { c.OAuth = &OAuthConfig{ClientID: "app"} },
		"oauth.clientSecret":    func(c *ServerConfig) { c.OAuth = &OAuthConfig{ClientSecret: "s3cr3t"} },
		"oauth.callbackPort":    func(c *ServerConfig) { c.OAuth = &OAuthConfig{CallbackPort: 8080} },
		"oauth.scopes":          func(c *ServerConfig) { c.OAuth = &OAuthConfig{Scopes: []string{"read"}} },
		"oauth.authServerMetadataUrl": func(c *ServerConfig) {
			c.OAuth = &OAuthConfig{AuthServerMetadataURL: "https://auth.example.com/.well-known/oauth-authorization-server"}
		},
		"oauth.clientMetadataUrl": func(c *ServerConfig) {
			c.OAuth = &OAuthConfig{ClientMetadataURL: "https://app.example.com/client.json"}
		},
	}
	for field, mut := range muts {
		c := base()
		c.Env = slices.Clone(c.Env)
		mut(&c)
		if ConfigHash(&c) == h {
			t.Errorf("%s: hash unchanged", field)
		}
		a := base()
		if got := ChangedFields(&a, &c); !slices.Equal(got, []string{field}) {
			t.Errorf("%s: ChangedFields = %v", field, got)
		}
	}
	// Within an oauth object, each field counts on its own.
	full := func() *OAuthConfig {
		return &OAuthConfig{ClientID: "app", ClientSecret: "s3cr3t", CallbackPort: 8080, Scopes: []string{"read", "write"},
			AuthServerMetadataURL: "https://a.example.com/m", ClientMetadataURL: "https://c.example.com/c.json"}
	}
	for field, mut := range map[string]func(*OAuthConfig){
		"oauth.clientId":              func(o *OAuthConfig) { o.ClientID = "app2" },
		"oauth.clientSecret":          func(o *OAuthConfig) { o.ClientSecret = "other" },
		"oauth.callbackPort":          func(o *OAuthConfig) { o.CallbackPort = 8081 },
		"oauth.scopes":                func(o *OAuthConfig) { o.Scopes = []string{"write", "read"} },
		"oauth.authServerMetadataUrl": func(o *OAuthConfig) { o.AuthServerMetadataURL = "https://a.example.com/n" },
		"oauth.clientMetadataUrl":     func(o *OAuthConfig) { o.ClientMetadataURL = "https://c.example.com/d.json" },
	} {
		a, c := base(), base()
		a.OAuth, c.OAuth = full(), full()
		mut(c.OAuth)
		if ConfigHash(&a) == ConfigHash(&c) {
			t.Errorf("%s (in a full oauth object): hash unchanged", field)
		}
		if got := ChangedFields(&a, &c); !slices.Equal(got, []string{field}) {
			t.Errorf("%s (in a full oauth object): ChangedFields = %v", field, got)
		}
	}
	// The client secret counts by its digest, raw or redacted; an empty
	// oauth object is no oauth object.
	raw, red := base(), base()
	raw.OAuth, red.OAuth = full(), full()
	red.OAuth.ClientSecret = HashValue("s3cr3t")
	if ConfigHash(&raw) != ConfigHash(&red) || len(ChangedFields(&raw, &red)) != 0 {
		t.Error("a raw and a redacted client secret hash differently")
	}
	empty, absent := base(), base()
	empty.OAuth = &OAuthConfig{Scopes: []string{}}
	if ConfigHash(&empty) != ConfigHash(&absent) || ConfigHash(&empty) != h || len(ChangedFields(&empty, &absent)) != 0 {
		t.Error("an empty oauth object changed the hash")
	}
	// Absent and empty collections are the same config.
	e1 := ServerConfig{Transport: TransportHTTP, URL: "u"}
	e2 := ServerConfig{Transport: TransportHTTP, URL: "u", Args: []string{}, Env: []KV{}, Headers: []KV{}}
	if ConfigHash(&e1) != ConfigHash(&e2) {
		t.Error("nil vs empty changed the hash")
	}
}

func TestFingerprint(t *testing.T) {
	a, b := base(), base()
	b.TimeoutMs = 1
	if Fingerprint(&a) == Fingerprint(&b) {
		t.Error("timeout does not change the fingerprint")
	}
	b = base()
	b.ProtocolVersion = "2025-06-18"
	if Fingerprint(&a) == Fingerprint(&b) {
		t.Error("protocol version does not change the fingerprint")
	}
	b = base()
	b.Cwd = "/elsewhere"
	if Fingerprint(&a) == Fingerprint(&b) {
		t.Error("a hashed field does not change the fingerprint")
	}
	b = base()
	b.OAuth = &OAuthConfig{Scopes: []string{"read"}}
	if Fingerprint(&a) == Fingerprint(&b) {
		t.Error("an oauth object does not change the fingerprint")
	}
	b = base()
	b.IncludeTools = []string{"x"}
	if Fingerprint(&a) != Fingerprint(&b) {
		t.Error("a tool filter changed the fingerprint (it needs no restart)")
	}
}

func TestSecretsNeverInRedactedEvents(t *testing.T) {
	c := base()
	c.Headers = []KV{{"Authorization", "Bearer tok_live_abcdef"}}
	c.Env = RedactKVs(c.Env)
	c.Headers = RedactKVs(c.Headers)
	c.Hash = ConfigHash(&c)
	e := Event{Kind: KindConfigObserved, Payload: &ConfigObserved{Servers: []ServerConfig{c}}}
	rec, err := Encode(&e)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"ghp_s3cr3t_value", "tok_live_abcdef"} {
		if bytes.Contains(rec, []byte(secret)) {
			t.Errorf("secret %q in the record", secret)
		}
	}
	if !IsHashedValue(c.Env[0].Value) || IsHashedValue("sha256:zz") {
		t.Error("IsHashedValue")
	}
}

func TestToolDefHash(t *testing.T) {
	h := ToolDefHash("a", "d", `{}`)
	if h == ToolDefHash("a", "d2", `{}`) || h == ToolDefHash("a", "d", `{"x":1}`) || h == ToolDefHash("b", "d", `{}`) {
		t.Error("a definition change kept the hash")
	}
	if h != ToolDefHash("a", "d", `{}`) {
		t.Error("not deterministic")
	}
}

// TestConfigHashGolden pins the config hash of two configs. Approvals are
// stored bound to this hash: if it changes, every stored approval silently
// stops matching and every approved server is pending again. The canonical
// text and the hashes were computed outside Go (printf | sha256sum) from
// the rule ConfigHash documents; HashValue's digests inside them too.
func TestConfigHashGolden(t *testing.T) {
	for _, tt := range []struct {
		name      string
		cfg       ServerConfig
		canonical string
		hash      string
	}{
		{"stdio", base(),
			`{"type":"stdio","command":"npx","args":["-y","gh-mcp"],"env":[{"key":"GITHUB_TOKEN","value":"sha256:1ab8d865f6f1b77a"},{"key":"LOG","value":"sha256:0b8e9e995d8d77f1"}],"cwd":"/w","url":"","headers":[]}`,
			"sha256:59b45d134546f33d6af580408fb6e9667b536f2ddc507dcb60a0fd6214b5a421"},
		{"http", ServerConfig{Name: "remote", Transport: TransportHTTP, URL: "https://mcp.example.com/mcp",
			Headers: []KV{{"Authorization", "Bearer tok"}}},
			`{"type":"http","command":"","args":[],"env":[],"cwd":"","url":"https://mcp.example.com/mcp","headers":[{"key":"Authorization","value":"sha256:72319f785566bc35"}]}`,
			"sha256:620a0c19ded798515cf0c1014f35d41b1b1ced7d4ab2fba54700e00efead9d1e"},
		{"http with oauth", ServerConfig{Name: "remote", Transport: TransportHTTP, URL: "https://mcp.example.com/mcp",
			OAuth: &OAuthConfig{ClientID: "app", ClientSecret: "s3cr3t", CallbackPort: 8080, Scopes: []string{"read", "write"},
				AuthServerMetadataURL: "https://auth.example.com/.well-known/oauth-authorization-server"}},
			`{"type":"http","command":"","args":[],"env":[],"cwd":"","url":"https://mcp.example.com/mcp","headers":[],"oauth":{"client_id":"app","client_secret":"sha256:4e738ca5563c06cf","callback_port":8080,"scopes":["read","write"],"auth_server_metadata_url":"https://auth.example.com/.well-known/oauth-authorization-server","client_metadata_url":""}}`,
			"sha256:0c0e6cd2c2d9a39dea04b87dcc6f44554ad6b7db8910f4ef63934abeb3fdb723"},
	} {
		b, err := json.Marshal(canonical(&tt.cfg))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(b); got != tt.canonical {
			t.Errorf("%s: canonical encoding\n got %s\nwant %s", tt.name, got, tt.canonical)
		}
		if got := ConfigHash(&tt.cfg); got != tt.hash {
			t.Errorf("%s: ConfigHash = %s, want %s", tt.name, got, tt.hash)
		}
	}
	// Tool pins are stored the same way: ToolDefHash is the first 16 bytes
	// of the SHA-256 of the JSON array [name, description, input schema].
	if got, want := ToolDefHash("search", "Search issues", `{"type":"object"}`), "sha256:74aa52671a9a87c6d6fe7207acddf319"; got != want {
		t.Errorf("ToolDefHash = %s, want %s", got, want)
	}
}

func TestIsHashedValue(t *testing.T) {
	digest := HashValue("v")
	for _, tt := range []struct {
		v    string
		want bool
	}{
		{digest, true},
		{"sha256:0123456789abcdef", true},
		{"sha256:0123456789abcde", false},   // 15 digits
		{"sha256:0123456789abcdef0", false}, // 17 digits
		{"sha256:0123456789abcdeg", false},  // not hex
		{"sha512:0123456789abcdef", false},
		{"0123456789abcdef", false},
		{"", false},
	} {
		if got := IsHashedValue(tt.v); got != tt.want {
			t.Errorf("IsHashedValue(%q) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

func TestRedactKVs(t *testing.T) {
	if got := RedactKVs(nil); got != nil {
		t.Errorf("RedactKVs(nil) = %v, want nil", got)
	}
	if got := RedactKVs([]KV{}); got != nil {
		t.Errorf("RedactKVs([]) = %v, want nil", got)
	}
	digest := HashValue("already")
	in := []KV{{"B", "secret"}, {"A", digest}, {"C", ""}}
	got := RedactKVs(in)
	want := []KV{{"A", digest}, {"B", HashValue("secret")}, {"C", HashValue("")}}
	if !slices.Equal(got, want) {
		t.Errorf("RedactKVs = %v, want %v", got, want)
	}
	if in[0] != (KV{"B", "secret"}) {
		t.Errorf("RedactKVs changed its input: %v", in)
	}
}

func TestSortKVs(t *testing.T) {
	kvs := []KV{{"b", "1"}, {"a", "2"}, {"a", "1"}, {"B", "0"}}
	SortKVs(kvs)
	if want := []KV{{"B", "0"}, {"a", "1"}, {"a", "2"}, {"b", "1"}}; !slices.Equal(kvs, want) {
		t.Errorf("SortKVs = %v, want %v", kvs, want)
	}
}

// TestChangedFieldsKVs: env and header entries count by key; a key added,
// removed or given another value is named, and an empty value is still a
// value.
func TestChangedFieldsKVs(t *testing.T) {
	a := ServerConfig{Env: []KV{{"A", "1"}, {"B", ""}}, Headers: []KV{{"H", "x"}}}
	for _, tt := range []struct {
		name string
		env  []KV
		hdr  []KV
		want []string
	}{
		{"same, other order", []KV{{"B", ""}, {"A", "1"}}, []KV{{"H", "x"}}, nil},
		{"value changed", []KV{{"A", "2"}, {"B", ""}}, []KV{{"H", "x"}}, []string{"env:A"}},
		{"empty value dropped", []KV{{"A", "1"}}, []KV{{"H", "x"}}, []string{"env:B"}},
		{"added, removed", []KV{{"A", "1"}, {"B", ""}, {"C", ""}}, nil, []string{"env:C", "headers:H"}},
		{"several", []KV{{"B", "1"}, {"Z", "1"}}, []KV{{"H", "y"}}, []string{"env:A", "env:B", "env:Z", "headers:H"}},
	} {
		b := ServerConfig{Env: tt.env, Headers: tt.hdr}
		if got := ChangedFields(&a, &b); !slices.Equal(got, tt.want) {
			t.Errorf("%s: ChangedFields = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestShortHash(t *testing.T) {
	for in, want := range map[string]string{
		"sha256:0123456789abcdef": "0123456789ab",
		"sha256:0123456789ab":     "0123456789ab",
		"sha256:0123":             "0123",
		"":                        "",
	} {
		if got := ShortHash(in); got != want {
			t.Errorf("ShortHash(%q) = %q, want %q", in, got, want)
		}
	}
}
