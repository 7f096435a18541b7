package events

import (
	"bytes"
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
	// Fields outside the hashed set do not change it.
	n := base()
	n.Disabled, n.TimeoutMs, n.IncludeTools, n.Source = true, 9, []string{"x"}, "elsewhere"
	if ConfigHash(&n) != h {
		t.Error("non-hashed field changed the hash")
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
