package config

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// FuzzEdit feeds arbitrary bytes as a file to edit. It must never panic
// or loop; text that is not a JSONC object is refused; otherwise setting
// a server yields text that parses, holds the value at its keys and
// still holds every other top-level key; removing it yields text that
// parses without it.
func FuzzEdit(f *testing.F) {
	for _, name := range []string{"claude.in.json", "jsonc.in.json", "compact.in.json", "comments.in.json", "crlf.in.json"} {
		f.Add(mustRead(f, filepath.Join("testdata", "edit", name)), "a", false)
	}
	for _, s := range []string{
		``, `{}`, `[]`, `{"mcpServers": null}`, `{"projects": {"/w": 1}}`, `{"a":"\"}{","mcpServers":{"a":{}}}`,
		"{\"mcpServers\": {\"a\": {}, // c\n\"b\": {},}, /* x */}", `{"mcpServers":{"a":1,"a":2,"a":3}}`, "\xef\xbb\xbf{}",
	} {
		f.Add([]byte(s), "a", true)
		f.Add([]byte(s), "b", false)
	}
	f.Fuzz(func(t *testing.T, data []byte, name string, local bool) {
		keys := []string{"mcpServers", name}
		if local {
			keys = []string{"projects", "/w", "mcpServers", name}
		}
		d, err := newEditDoc("f", data)
		if err != nil {
			return
		}
		value := []byte(`{"command":"x","args":["}"]}`)
		out, err := d.set(keys, value)
		if err != nil {
			return // a key on the way is not an object
		}
		after, err := newEditDoc("f", out)
		if err != nil {
			t.Fatalf("set made text that does not parse: %v\n%q\n->\n%q", err, data, out)
		}
		got, err := after.get(keys)
		if err != nil || !jsonEqual(got, value) {
			t.Fatalf("set: reads %s (%v)\n%q", got, err, out)
		}
		var before, now map[string]json.RawMessage
		_ = json.Unmarshal(stripJSONC(d.orig), &before)
		_ = json.Unmarshal(stripJSONC(out), &now)
		for k := range before {
			if _, ok := now[k]; !ok {
				t.Fatalf("set lost key %q\n%q", k, out)
			}
		}
		rm, ok, err := after.remove(keys)
		if err != nil || !ok {
			t.Fatalf("remove: %v %v", ok, err)
		}
		gone, err := newEditDoc("f", rm)
		if err != nil {
			t.Fatalf("remove made text that does not parse: %v\n%q\n->\n%q", err, out, rm)
		}
		if v, _ := gone.get(keys); v != nil {
			t.Fatalf("removed member still there: %s\n%q", v, rm)
		}
	})
}
