package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mcpledger/mcpledger/events"
)

// Where `mcpledger add` writes, in Claude Code's own files and keys, so
// that a server added by either tool is read by both (`claude mcp add
// --scope`):
//
//	project  WORKSPACE/.mcp.json                 "mcpServers"
//	user     ~/.claude.json                      "mcpServers"
//	local    ~/.claude.json  "projects" → "/abs/workspace" → "mcpServers"
//
// ~/.claude.json is $CLAUDE_CONFIG_DIR/.claude.json when that is set
// (see [ClaudeFile]). Load reads all three (see Sources.ClaudeFile).

// Scope names, as `claude mcp add --scope` spells them.
const (
	ScopeNameProject = "project"
	ScopeNameUser    = "user"
	ScopeNameLocal   = "local"
)

// Errors of [Place.Add] and [Place.Remove].
var (
	// ErrServerExists: the name is taken at that place (pass force to
	// replace it).
	ErrServerExists = errors.New("config: a server of that name is already there")
	// ErrNoServer: the name is not at that place.
	ErrNoServer = errors.New("config: no server of that name there")
	// ErrInvalidEntry: the entry would not load (it is not written).
	ErrInvalidEntry = errors.New("config: the entry is not valid")
)

// claudeFileName is Claude Code's user file in the home directory.
const claudeFileName = ".claude.json"

// ClaudeFile returns the path of Claude Code's user config file:
// $CLAUDE_CONFIG_DIR/.claude.json when that is set and absolute,
// home/.claude.json otherwise, "" when neither is known.
func ClaudeFile(lookupEnv func(string) (string, bool), home string) string {
	if lookupEnv != nil {
		if d, ok := lookupEnv("CLAUDE_CONFIG_DIR"); ok && filepath.IsAbs(d) {
			return filepath.Join(d, claudeFileName)
		}
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, claudeFileName)
}

// Place is where one scope keeps its servers: a file and the keys that
// lead to its object of servers.
type Place struct {
	Scope string
	Path  string
	Keys  []string
}

// String names the place for a message: the file, and the keys when they
// are not just "mcpServers".
func (p Place) String() string {
	if len(p.Keys) == 1 {
		return p.Path
	}
	return p.Path + " (" + keyPath(p.Keys) + ")"
}

// PlaceOf returns the place of a scope: "project" (workspace/.mcp.json),
// "user" or "local" (claudeFile, see [ClaudeFile]). workspace is made
// canonical (absolute, symlinks resolved) as Load does, so that the local
// scope's key is the one Load looks up.
func PlaceOf(scope, workspace, claudeFile string) (Place, error) {
	ws, _ := canonicalPath(workspace)
	switch scope {
	case ScopeNameProject:
		if workspace == "" {
			return Place{}, errors.New("the project scope needs a workspace: pass --workspace DIR")
		}
		return Place{Scope: scope, Path: filepath.Join(ws, ".mcp.json"), Keys: []string{keyServers}}, nil
	case ScopeNameUser, ScopeNameLocal:
		if claudeFile == "" {
			return Place{}, errors.New("no home directory: set HOME (or CLAUDE_CONFIG_DIR)")
		}
		if scope == ScopeNameUser {
			return Place{Scope: scope, Path: claudeFile, Keys: []string{keyServers}}, nil
		}
		if workspace == "" {
			return Place{}, errors.New("the local scope needs a workspace: pass --workspace DIR")
		}
		return Place{Scope: scope, Path: claudeFile, Keys: []string{"projects", ws, keyServers}}, nil
	}
	return Place{}, fmt.Errorf("scope %q is not one of project, user, local", scope)
}

// Entry is one server entry as written: its name and its JSON.
type Entry struct {
	Name string
	JSON json.RawMessage
}

// Servers returns the entries at p in file order (none when the file or
// the keys are missing).
func (p Place) Servers() ([]Entry, error) {
	data, _, err := readForEdit(p.Path, 0)
	if err != nil || data == nil {
		return nil, err
	}
	d, err := newEditDoc(p.Path, data)
	if err != nil {
		return nil, err
	}
	raw, err := d.get(p.Keys)
	if err != nil || raw == nil {
		return nil, err
	}
	return entriesOf(stripJSONC(raw), raw)
}

// entriesOf lists the members of the object s (its comment-stripped
// text; raw is the text as written).
func entriesOf(s, raw []byte) ([]Entry, error) {
	i := skipWS(s, 0)
	if i >= len(s) || s[i] != '{' {
		return nil, fmt.Errorf("%w: the servers are %s, not an object", ErrNotEditable, jsonKind(s[i]))
	}
	ms, _ := objectSpans(s, i)
	out := make([]Entry, 0, len(ms))
	for _, m := range ms {
		out = append(out, Entry{Name: m.key, JSON: json.RawMessage(raw[m.valStart:m.valEnd])})
	}
	return out, nil
}

// Add writes entry (a JSON object) as server name at p, atomically,
// every other byte of the file kept. An existing name is refused with
// ErrServerExists unless force; replaced says whether one was replaced.
// A new file is created with mode 0600, except a project file whose
// entry holds no env or header values (0644: it is meant to be shared).
func (p Place) Add(name string, entry []byte, force bool) (replaced bool, err error) {
	keys := append(append([]string{}, p.Keys...), name)
	mode := fs.FileMode(0o600)
	if p.Scope == ScopeNameProject && !holdsValues(entry) {
		mode = 0o644
	}
	err = editFile(p.Path, mode, func(old []byte) ([]byte, error) {
		d, err := newEditDoc(p.Path, old)
		if err != nil {
			return nil, err
		}
		cur, err := d.get(keys)
		if err != nil {
			return nil, err
		}
		if replaced = cur != nil; replaced && !force {
			return nil, fmt.Errorf("%w: %q in %s; pass --force to replace it, or remove it first", ErrServerExists, name, p)
		}
		out, err := d.set(keys, entry)
		if err == nil && len(bytes.TrimSpace(old)) == 0 { // a new file
			out = append(bytes.TrimRight(out, "\n"), '\n')
		}
		return out, err
	})
	return replaced, err
}

// AddMany writes entries at p in one atomic edit, in order, each as Add
// would. A name already there is left as it is and listed in taken,
// unless force.
func (p Place) AddMany(entries []Entry, force bool) (added, taken []string, err error) {
	mode := fs.FileMode(0o600)
	if p.Scope == ScopeNameProject && !slices.ContainsFunc(entries, func(e Entry) bool { return holdsValues(e.JSON) }) {
		mode = 0o644
	}
	err = editFile(p.Path, mode, func(old []byte) ([]byte, error) {
		added, taken = nil, nil
		text := old
		for _, e := range entries {
			d, err := newEditDoc(p.Path, text)
			if err != nil {
				return nil, err
			}
			keys := append(append([]string{}, p.Keys...), e.Name)
			cur, err := d.get(keys)
			if err != nil {
				return nil, err
			}
			if cur != nil && !force {
				taken = append(taken, e.Name)
				continue
			}
			if text, err = d.set(keys, e.JSON); err != nil {
				return nil, err
			}
			added = append(added, e.Name)
		}
		if len(added) > 0 && len(bytes.TrimSpace(old)) == 0 {
			text = append(bytes.TrimRight(text, "\n"), '\n')
		}
		return text, nil
	})
	return added, taken, err
}

// Remove deletes server name from p, atomically, every other byte of the
// file kept. A name that is not there is ErrNoServer.
func (p Place) Remove(name string) error {
	keys := append(append([]string{}, p.Keys...), name)
	return editFile(p.Path, 0o600, func(old []byte) ([]byte, error) {
		if old == nil {
			return nil, fmt.Errorf("%w: %q (%s does not exist)", ErrNoServer, name, p.Path)
		}
		d, err := newEditDoc(p.Path, old)
		if err != nil {
			return nil, err
		}
		out, ok, err := d.remove(keys)
		if err == nil && !ok {
			err = fmt.Errorf("%w: %q in %s", ErrNoServer, name, p)
		}
		return out, err
	})
}

// CheckEntry parses entry as server name the way Load does. It returns
// the warnings Load would print, and an error wrapping ErrInvalidEntry
// saying what to fix when the entry would not load. It expands nothing:
// ${VAR} is left for the runtime.
func CheckEntry(name string, entry []byte) ([]string, error) {
	if !json.Valid(entry) {
		var v any
		err := json.Unmarshal(entry, &v)
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidEntry, name, strings.TrimPrefix(err.Error(), "json: "))
	}
	if s := bytes.TrimSpace(entry); len(s) == 0 || s[0] != '{' {
		return nil, fmt.Errorf(`%w: %s: the entry must be a JSON object like {"command": "..."} or {"type": "http", "url": "..."}`, ErrInvalidEntry, name)
	}
	if !utf8.ValidString(name) {
		return nil, fmt.Errorf("%w: the server name is not valid UTF-8: rename it", ErrInvalidEntry)
	}
	nb, _ := json.Marshal(name)
	doc := []byte(`{"mcpServers":{` + string(nb) + `:` + string(entry) + `}}`)
	f := parseConfigFile("entry", doc, events.ScopeUser, false)
	if len(f.errs) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrInvalidEntry, strings.Join(f.errs, "; "))
	}
	var warnings []string
	for _, ps := range f.servers {
		if ps.cfg.Invalid != "" {
			return nil, fmt.Errorf("%w: %s", ErrInvalidEntry, strings.TrimSuffix(ps.cfg.Invalid, " ("+ps.pos+")"))
		}
		warnings = append(warnings, ps.warnings...)
	}
	return warnings, nil
}

// LiteralValues returns the "env" and "header" keys of entry whose
// values are written out rather than taken from a variable (no "${"):
// secrets, often, that a shared file such as .mcp.json should not hold.
func LiteralValues(entry []byte) []string {
	var e struct{ Env, Headers map[string]string }
	_ = json.Unmarshal(entry, &e)
	var out []string
	for _, m := range []map[string]string{e.Env, e.Headers} {
		for k, v := range m {
			if v != "" && !strings.Contains(v, "${") {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// holdsValues reports whether entry has a non-empty "env" or "headers".
func holdsValues(entry []byte) bool {
	var e struct{ Env, Headers map[string]any }
	_ = json.Unmarshal(entry, &e)
	return len(e.Env) > 0 || len(e.Headers) > 0
}

// StdioEntry returns a stdio entry as Claude Code writes one:
// {"type": "stdio", "command", "args", "env"}, env in the order given.
func StdioEntry(command string, args []string, env []events.KV) []byte {
	if args == nil {
		args = []string{}
	}
	var b bytes.Buffer
	b.WriteString(`{"type":"stdio","command":`)
	writeJSON(&b, command)
	b.WriteString(`,"args":`)
	writeJSON(&b, args)
	b.WriteString(`,"env":`)
	writeKVs(&b, env)
	b.WriteString(`}`)
	return b.Bytes()
}

// RemoteEntry returns an "http" or "sse" entry as Claude Code writes
// one: {"type", "url", "headers"}, headers (when any) in the order given.
func RemoteEntry(transport, url string, headers []events.KV) []byte {
	var b bytes.Buffer
	b.WriteString(`{"type":`)
	writeJSON(&b, transport)
	b.WriteString(`,"url":`)
	writeJSON(&b, url)
	if len(headers) > 0 {
		b.WriteString(`,"headers":`)
		writeKVs(&b, headers)
	}
	b.WriteString(`}`)
	return b.Bytes()
}

func writeJSON(b *bytes.Buffer, v any) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	b.Truncate(b.Len() - 1) // Encode's newline
}

func writeKVs(b *bytes.Buffer, kvs []events.KV) {
	b.WriteString(`{`)
	for i, kv := range kvs {
		if i > 0 {
			b.WriteString(`,`)
		}
		writeJSON(b, kv.Key)
		b.WriteString(`:`)
		writeJSON(b, kv.Value)
	}
	b.WriteString(`}`)
}
