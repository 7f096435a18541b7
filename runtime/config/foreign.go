package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// Reading the servers other MCP clients configured, for `mcpledger
// import --from`. Each client's files, most specific first:
//
//	claude-desktop  claude_desktop_config.json "mcpServers": macOS
//	                ~/Library/Application Support/Claude/, Windows
//	                %APPDATA%\Claude\, Linux $XDG_CONFIG_HOME/Claude/
//	                (~/.config/Claude/)
//	claude-code     ~/.claude.json local scope, WORKSPACE/.mcp.json,
//	                ~/.claude.json user scope (see scopes.go)
//	vscode          WORKSPACE/.vscode/mcp.json, then the user profile's
//	                Code/User/mcp.json (beside Claude Desktop's
//	                directory), both "servers"
//	cursor          WORKSPACE/.cursor/mcp.json, ~/.cursor/mcp.json,
//	                "mcpServers"
//
// VS Code and Cursor expand ${workspaceFolder}, ${userHome} and
// ${env:NAME} themselves: an import writes the first two out and turns
// ${env:NAME} into ${NAME}, which mcpledger and Claude Code expand. An
// entry with any other ${...:...} (VS Code's ${input:ID} prompts, above
// all) or an "envFile" cannot be carried over and is skipped, with why.

// Import sources.
var ImportSources = []string{"claude-desktop", "claude-code", "vscode", "cursor"}

// ForeignEnv is what locating another client's files needs.
type ForeignEnv struct {
	Workspace  string // canonical workspace
	Home       string
	ClaudeFile string // see ClaudeFile
	GOOS       string // runtime.GOOS
	// LookupEnv reads XDG_CONFIG_HOME and APPDATA.
	LookupEnv func(string) (string, bool)
}

// ForeignFiles returns the places another client keeps servers, most
// specific first (an earlier one wins a name).
func ForeignFiles(from string, fe ForeignEnv) ([]Place, error) {
	appDir := func(name string) string { // the OS's per-user application directory
		switch fe.GOOS {
		case "darwin":
			return filepath.Join(fe.Home, "Library", "Application Support", name)
		case "windows":
			if d, ok := lookup(fe.LookupEnv, "APPDATA"); ok {
				return filepath.Join(d, name)
			}
			return filepath.Join(fe.Home, "AppData", "Roaming", name)
		}
		if d, ok := lookup(fe.LookupEnv, "XDG_CONFIG_HOME"); ok && filepath.IsAbs(d) {
			return filepath.Join(d, name)
		}
		return filepath.Join(fe.Home, ".config", name)
	}
	servers := []string{keyServers}
	switch from {
	case "claude-desktop":
		return []Place{{Scope: from, Path: filepath.Join(appDir("Claude"), "claude_desktop_config.json"), Keys: servers}}, nil
	case "claude-code":
		var out []Place
		for _, s := range []string{ScopeNameLocal, ScopeNameProject, ScopeNameUser} {
			if p, err := PlaceOf(s, fe.Workspace, fe.ClaudeFile); err == nil {
				out = append(out, p)
			}
		}
		return out, nil
	case "vscode":
		return []Place{
			{Scope: from, Path: filepath.Join(fe.Workspace, ".vscode", "mcp.json"), Keys: []string{keyServersAlias}},
			{Scope: from, Path: filepath.Join(appDir("Code"), "User", "mcp.json"), Keys: []string{keyServersAlias}},
		}, nil
	case "cursor":
		return []Place{
			{Scope: from, Path: filepath.Join(fe.Workspace, ".cursor", "mcp.json"), Keys: servers},
			{Scope: from, Path: filepath.Join(fe.Home, ".cursor", "mcp.json"), Keys: servers},
		}, nil
	}
	return nil, fmt.Errorf("--from %q: want one of %s", from, strings.Join(ImportSources, ", "))
}

func lookup(f func(string) (string, bool), k string) (string, bool) {
	if f == nil {
		return "", false
	}
	v, ok := f(k)
	return v, ok && v != ""
}

// varRef is a ${...} reference in JSON text.
var varRef = regexp.MustCompile(`\$\{[^}]*\}`)

// Foreign converts one entry another client wrote into one mcpledger and
// Claude Code read: VS Code's and Cursor's variables rewritten (see
// above), "type" added to a remote entry without one (Claude Code needs
// it). skip says why the entry cannot be imported ("" when it can);
// notes say what was changed.
func Foreign(entry []byte, fe ForeignEnv) (out []byte, notes []string, skip string) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(entry, &fields) != nil {
		return nil, nil, "the entry is not a JSON object"
	}
	if _, ok := fields["envFile"]; ok {
		return nil, nil, `"envFile" is not supported: copy its variables into "env"`
	}
	var bad []string
	text := varRef.ReplaceAllFunc(entry, func(ref []byte) []byte {
		name := string(ref[2 : len(ref)-1])
		switch {
		case name == "workspaceFolder" && fe.Workspace != "":
			notes = appendOnce(notes, "${workspaceFolder} written as "+fe.Workspace)
			return jsonText(fe.Workspace)
		case name == "userHome" && fe.Home != "":
			notes = appendOnce(notes, "${userHome} written as "+fe.Home)
			return jsonText(fe.Home)
		case strings.HasPrefix(name, "env:"):
			notes = appendOnce(notes, "${env:NAME} written as ${NAME}")
			return []byte("${" + strings.TrimPrefix(name, "env:") + "}")
		case strings.Contains(name, ":") && !strings.Contains(name, ":-"):
			bad = appendOnce(bad, string(ref))
		case name == "workspaceFolder" || name == "userHome":
			bad = appendOnce(bad, string(ref))
		}
		return ref
	})
	if len(bad) > 0 {
		return nil, nil, fmt.Sprintf("it uses %s, which only its own client can resolve (an input prompt or editor variable): add it with mcpledger add, giving the value or a ${VAR}", strings.Join(bad, ", "))
	}
	if _, typed := fields["type"]; !typed {
		if _, remote := fields["url"]; remote {
			i := bytes.IndexByte(text, '{')
			text = append(append(append([]byte{}, text[:i+1]...), `"type":"http",`...), text[i+1:]...)
			notes = append(notes, `"type": "http" added`)
		}
	}
	return text, notes, ""
}

// jsonText is s as it reads inside a JSON string.
func jsonText(s string) []byte {
	b, _ := json.Marshal(s)
	return b[1 : len(b)-1]
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
