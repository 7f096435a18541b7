package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/edit/name (rewritten under -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "edit", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update if the change is right):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// untouched checks that every top-level member of before other than
// touched reads byte for byte the same in after, in the same order.
func untouched(t *testing.T, before, after []byte, touched string) {
	t.Helper()
	list := func(data []byte) []string {
		s := stripJSONC(data)
		ms, _ := objectSpans(s, skipWS(s, 0))
		var out []string
		for _, m := range ms {
			if m.key != touched {
				out = append(out, m.key+"="+string(data[m.valStart:m.valEnd]))
			}
		}
		return out
	}
	b, a := list(before), list(after)
	if strings.Join(b, "\x00") != strings.Join(a, "\x00") {
		t.Errorf("members other than %q changed:\nbefore %q\nafter  %q", touched, b, a)
	}
}

// TestEditGolden: each edit changes one member and nothing else: other
// keys keep their bytes and order, comments, tabs and trailing commas
// stay, the new member takes the file's indentation, and the result
// still parses with the server in it (or gone).
func TestEditGolden(t *testing.T) {
	memory := StdioEntry("npx", []string{"-y", "@modelcontextprotocol/server-memory"}, []events.KV{{Key: "Z_TOKEN", Value: "${TOKEN}"}, {Key: "A", Value: "1"}})
	cases := []struct {
		name, in string
		keys     []string
		value    []byte // nil: remove
		touched  string // the top-level key the edit may change
	}{
		{"claude-add-user", "claude.in.json", []string{"mcpServers", "memory"}, memory, "mcpServers"},
		{"claude-replace-user", "claude.in.json", []string{"mcpServers", "sentry"}, RemoteEntry("sse", "https://x.example/sse", nil), "mcpServers"},
		{"claude-add-local-existing-project", "claude.in.json", []string{"projects", "/home/ada/code/site", "mcpServers", "memory"}, memory, "projects"},
		{"claude-add-local-new-project", "claude.in.json", []string{"projects", "/home/ada/new", "mcpServers", "memory"}, memory, "projects"},
		{"claude-remove-user", "claude.in.json", []string{"mcpServers", "sentry"}, nil, "mcpServers"},
		{"jsonc-add", "jsonc.in.json", []string{"mcpServers", "memory"}, memory, "mcpServers"},
		{"jsonc-remove-first", "jsonc.in.json", []string{"mcpServers", "github"}, nil, "mcpServers"},
		{"jsonc-remove-last", "jsonc.in.json", []string{"mcpServers", "files"}, nil, "mcpServers"},
		{"comments-remove-first", "comments.in.json", []string{"mcpServers", "a"}, nil, "mcpServers"},
		{"comments-remove-last", "comments.in.json", []string{"mcpServers", "b"}, nil, "mcpServers"},
		{"crlf-add", "crlf.in.json", []string{"projects", "/w", "mcpServers", "memory"}, memory, "projects"},
		{"crlf-remove-last", "crlf.in.json", []string{"mcpServers", "b"}, nil, "mcpServers"},
		{"compact-add", "compact.in.json", []string{"mcpServers", "c"}, StdioEntry("c", nil, nil), "mcpServers"},
		{"compact-remove-duplicates", "compact.in.json", []string{"mcpServers", "a"}, nil, "mcpServers"},
		{"comment-only-add", "comment-only.in.json", []string{"mcpServers", "memory"}, StdioEntry("m", nil, nil), "mcpServers"},
		{"empty-add", "", []string{"mcpServers", "memory"}, memory, "mcpServers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var in []byte
			if c.in != "" {
				var err error
				if in, err = os.ReadFile(filepath.Join("testdata", "edit", c.in)); err != nil {
					t.Fatal(err)
				}
			}
			d, err := newEditDoc("f.json", in)
			if err != nil {
				t.Fatal(err)
			}
			var out []byte
			if c.value != nil {
				out, err = d.set(c.keys, c.value)
			} else {
				var ok bool
				out, ok, err = d.remove(c.keys)
				if !ok {
					t.Fatal("remove found nothing")
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.name+".golden", out)
			untouched(t, in, out, c.touched)
			// The result is one the reader takes, with the edit in it.
			after, err := newEditDoc("f.json", out)
			if err != nil {
				t.Fatalf("the edited text does not parse: %v\n%s", err, out)
			}
			got, err := after.get(c.keys)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case c.value == nil && got != nil:
				t.Errorf("removed member still there: %s", got)
			case c.value != nil && !jsonEqual(got, c.value):
				t.Errorf("member reads %s, want %s", got, c.value)
			}
		})
	}
}

func jsonEqual(a, b []byte) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

// TestEditRefusesWhatItCannotEdit: a file that is not JSON, not an
// object, or whose server list (or a key on the way to it) is not an
// object is refused with where and what to do; the file keeps every byte
// and its mtime.
func TestEditRefusesWhatItCannotEdit(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{"syntax", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"a\"\n  }\n}\n", "f.json:5:2: unexpected end of JSON input"},
		{"array", "[1, 2]", "not an object"},
		{"servers-null", `{"mcpServers": null}`, `"mcpServers" is null, not an object`},
		{"projects-array", `{"projects": []}`, `"projects" is an array`},
		{"unterminated-comment", "{ /* open \"mcpServers\": {} }", "fix the JSON syntax"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f.json")
			if err := os.WriteFile(path, []byte(c.text), 0o640); err != nil {
				t.Fatal(err)
			}
			before, _ := os.Stat(path)
			keys := []string{"mcpServers"}
			if strings.Contains(c.name, "projects") {
				keys = []string{"projects", "/w", "mcpServers"}
			}
			p := Place{Scope: ScopeNameUser, Path: path, Keys: keys}
			_, err := p.Add("x", StdioEntry("x", nil, nil), false)
			if !errors.Is(err, ErrNotEditable) {
				t.Fatalf("Add: %v, want ErrNotEditable", err)
			}
			for _, want := range []string{c.want, "not changed"} {
				if !strings.Contains(strings.ReplaceAll(err.Error(), path, "f.json"), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if err := p.Remove("x"); !errors.Is(err, ErrNotEditable) {
				t.Errorf("Remove: %v, want ErrNotEditable", err)
			}
			after, _ := os.Stat(path)
			if got, _ := os.ReadFile(path); string(got) != c.text || !after.ModTime().Equal(before.ModTime()) {
				t.Errorf("the file changed: %q", got)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("files left beside it: %v", ents)
			}
		})
	}
}
