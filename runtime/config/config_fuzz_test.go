package config

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// fuzzSecret is in the fuzz environment; it may reach the journaled form
// only when the input itself spells it.
const fuzzSecret = "fuzz-S3CRET-value"

// FuzzParseConfig feeds arbitrary bytes as a config file (with settings,
// as the user config is read). It must never panic; a file-level error
// yields no servers; every server is either valid (and resolvable) or
// Invalid with a message naming it; env and header values and the OAuth
// client secret are digests;
// and a secret from the environment never reaches the journaled form.
func FuzzParseConfig(f *testing.F) {
	for _, name := range []string{"mixed.json", "vscode.json", "claude.json"} {
		f.Add(mustRead(f, filepath.Join("testdata", name)))
	}
	for _, s := range []string{
		``, `{}`, `[]`, `null`, `{"mcpServers": null}`, `{"mcpServers": {"a": null}}`,
		`{"mcpServers": {"a": {"command": "x", "args": ["${S}", "${S:-d}", "${"]}}}`,
		`{"mcpServers": {"a": {"url": "https://h/${S}", "env": {"S": "${S}"}, "headers": {"A": "${S}"}}}}`,
		`{"mcpServers": {"a": {"url": "https://h", "headers": {"A": "${S}"}}}}`,
		`{"servers": {"a": {"type": "sse", "url": "http://h"}}, "mcpServers": {"a": {"command": "~/x", "cwd": "~"}}}`,
		`{"allowed": [], "excluded": "x", "trustedFolders": [1], "enableProjectConfig": 0}`,
		`{"mcpServers": {"a": {"command": "x", "timeout": 1e400}, "b": {"command": "x", "timeout": -0.0}}}`,
		"{\"mcpServers\": {\"a\": {\"command\": \"x\",}, // c\n}} /*",
		`{"mcpServers": {"a": {"command": "x"}, "a": {"url": "x"}}}`,
		`{"allowed": "x", "mcpServers": {"a": {"command": "x"}}}`,
		`{"servers": {"a": {"command": "x"}}, "mcpServers": []}`,
		`{"mcpServers": {"a": {"url": "https://h", "env": {"S": "${S}"}, "oauth": {"clientId": "c", "clientSecret": "${S}", "callbackPort": 8080, "scopes": "a b", "authServerMetadataUrl": "http://127.0.0.1/m", "clientMetadataUrl": "https://c/d.json", "x": 1}}}}`,
		`{"mcpServers": {"a": {"command": "x", "oauth": {"clientSecret": "s", "callbackPort": 70000, "clientMetadataUrl": "https://c/"}}}}`,
	} {
		f.Add([]byte(s))
	}
	src := Sources{LookupEnv: envMap{"S": fuzzSecret, "HOME": "/h"}.lookup, Home: "/h"}
	f.Fuzz(func(t *testing.T, data []byte) {
		cf := parseConfigFile("/fuzz.json", data, events.ScopeUser, true)
		if len(cf.errs) > 0 && len(cf.servers) > 0 {
			t.Fatalf("errors %q and %d servers", cf.errs, len(cf.servers))
		}
		for _, e := range cf.errs {
			if !strings.HasPrefix(e, "/fuzz.json:") {
				t.Errorf("error %q does not name the file", e)
			}
		}
		obs := events.ConfigObserved{Trigger: "start", Allowed: cf.settings.allowed, HasAllowed: cf.settings.hasAllowed, Errors: cf.errs}
		for i := range cf.servers {
			ps := &cf.servers[i]
			spec, ok := settle(ps, &src, "/ws")
			c := ps.cfg
			obs.Servers = append(obs.Servers, c)
			if c.Hash != events.ConfigHash(&c) {
				t.Errorf("%q: Hash is not ConfigHash", c.Name)
			}
			for _, kv := range append(c.Env, c.Headers...) {
				if !events.IsHashedValue(kv.Value) {
					t.Errorf("%q: %s is not a digest", c.Name, kv.Key)
				}
			}
			if c.OAuth != nil && (c.OAuth.IsZero() || c.OAuth.ClientSecret != "" && !events.IsHashedValue(c.OAuth.ClientSecret)) {
				t.Errorf("%q: oauth %+v is empty or its client secret is not a digest", c.Name, c.OAuth)
			}
			if ok && (spec.OAuth == nil) != (c.OAuth == nil) {
				t.Errorf("%q: journaled oauth %v, resolved %v", c.Name, c.OAuth, spec.OAuth)
			}
			switch {
			case c.Invalid != "":
				if ok || !strings.HasPrefix(c.Invalid, "server "+strconv.Quote(c.Name)+": ") || len(c.Invalid) <= len(c.Name)+12 {
					t.Errorf("%q: bad Invalid %q (runnable %v)", c.Name, c.Invalid, ok)
				}
			case c.Disabled:
				if ok {
					t.Errorf("%q: disabled but runnable", c.Name)
				}
			case !ok:
				t.Errorf("%q: valid but not runnable", c.Name)
			case c.Transport == events.TransportStdio:
				if spec.Command == "" || !filepath.IsAbs(spec.Cwd) {
					t.Errorf("%q: stdio spec %q in %q", c.Name, spec.Command, spec.Cwd)
				}
			case c.Transport == events.TransportHTTP || c.Transport == events.TransportSSE:
				if checkURL(spec.URL) != "" {
					t.Errorf("%q: remote spec with a bad url", c.Name)
				}
			default:
				t.Errorf("%q: valid with transport %q", c.Name, c.Transport)
			}
		}
		if bytes.Contains(data, []byte(fuzzSecret)) {
			return
		}
		js, err := json.Marshal(obs)
		if err != nil {
			t.Fatal(err)
		}
		mp, err := events.Encode(&events.Event{Kind: events.KindConfigObserved, Payload: &obs})
		if err != nil {
			t.Fatal(err)
		}
		warn := strings.Join(cf.warnings, "\n")
		for _, ps := range cf.servers {
			warn += strings.Join(ps.warnings, "\n")
		}
		if bytes.Contains(js, []byte(fuzzSecret)) || bytes.Contains(mp, []byte(fuzzSecret)) || strings.Contains(warn, fuzzSecret) {
			t.Errorf("the journaled form holds a secret from the environment: %s", js)
		}
	})
}
