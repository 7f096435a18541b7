package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mcpledger/mcpledger/events"
)

// Reading Claude Code's ~/.claude.json (Sources.ClaudeFile). It holds
// Claude Code's own state beside two lists of servers, which are all
// that is read of it:
//
//	"mcpServers"                          the user scope
//	"projects" → WORKSPACE → "mcpServers" the local scope of WORKSPACE
//
// Everything else in it is Claude Code's and is ignored without a word.

// keySettingClaude is the user-config setting that turns the reading of
// ~/.claude.json off ("enableClaudeCodeConfig": false).
const keySettingClaude = "enableClaudeCodeConfig"

// parseClaudeFile returns the local servers of the first of workspaces
// that ~/.claude.json lists under "projects", and its user servers. A
// file that is not a JSON object is unusable: user holds the error.
func parseClaudeFile(path string, data []byte, workspaces []string) (local, user configFile) {
	// Claude Code reads and writes it as plain JSON (no comments).
	if len(bytes.TrimSpace(data)) == 0 {
		return local, user // an empty file holds no servers
	}
	if msg := syntaxProblem(path, data); msg != "" {
		user.errs = append(user.errs, msg)
		return local, user
	}
	// The file is large and its servers few: its objects are walked with
	// the edit scanner (a byte loop over JSON already checked), not
	// decoded.
	top, ok := scanMembers(data, firstNonSpace(data, 0))
	if !ok {
		user.errs = append(user.errs, position(path, data, firstNonSpace(data, 0))+": Claude Code's config must hold a JSON object; it is ignored until it does")
		return local, user
	}
	for _, m := range top {
		switch m.key {
		case keyServers:
			user.addServers(path, data, m, events.ScopeUser)
		case "projects":
			projects, ok := scanMembers(data, m.off)
			if !ok {
				continue
			}
			for _, ws := range workspaces {
				i := slices.IndexFunc(projects, func(p member) bool { return p.key == ws })
				if i < 0 {
					continue
				}
				fields, _ := scanMembers(data, projects[i].off)
				for _, f := range fields {
					if f.key == keyServers {
						local.addServers(path, data, f, events.ScopeLocal)
					}
				}
				break
			}
		}
	}
	if len(user.errs) > 0 || len(local.errs) > 0 {
		// Either list unusable: the file contributes nothing, as any
		// other unusable file.
		return configFile{}, configFile{errs: append(user.errs, local.errs...)}
	}
	return local, user
}

// scanMembers returns the members of the object at data[open] (valid
// JSON, comments stripped) with absolute offsets; ok is false when it is
// not an object.
func scanMembers(data []byte, open int) ([]member, bool) {
	if open >= len(data) || data[open] != '{' {
		return nil, false
	}
	spans, _ := objectSpans(data, open)
	out := make([]member, len(spans))
	for i, sp := range spans {
		out[i] = member{key: sp.key, val: data[sp.valStart:sp.valEnd], off: sp.valStart}
	}
	return out, true
}

// addServers parses the object of servers m into f (the last of
// duplicate names wins, with a warning).
func (f *configFile) addServers(path string, data []byte, m member, scope events.Scope) {
	ms, ok := objectMembers(m.val, m.off)
	if !ok || isNull(m.val) {
		f.errs = append(f.errs, fmt.Sprintf(`%s: %q must be an object mapping server names to entries; the file is ignored until it is fixed`, position(path, data, m.off), m.key))
		return
	}
	seen := map[string]int{}
	for _, sm := range ms {
		ps := parseServer(path, data, sm, scope)
		if i, dup := seen[sm.key]; dup {
			f.warnings = append(f.warnings, fmt.Sprintf("%s: server %q is defined twice here; the last entry is used", position(path, data, sm.off), sm.key))
			f.servers[i] = ps
			continue
		}
		seen[sm.key] = len(f.servers)
		f.servers = append(f.servers, ps)
	}
}

// syntaxProblem says where data (comments stripped) stops being JSON,
// "" when it is JSON.
func syntaxProblem(path string, data []byte) string {
	if json.Valid(data) {
		return ""
	}
	return parseConfigFile(path, data, events.ScopeUser, false).errs[0]
}
