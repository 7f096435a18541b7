package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"

	"github.com/mcpledger/mcpledger/runtime/config"
)

// ImportFromCommand is `import --from claude-desktop|claude-code|vscode|
// cursor`: the servers another MCP client configured, added to a scope
// (the project's .mcp.json by default). `import FILE.jsonl` (no --from)
// is ImportCommand, which imports an exported session.
type ImportFromCommand struct{ env *env }

// importFromSynopsis is import --from's usage line.
const importFromSynopsis = "--from claude-desktop|claude-code|vscode|cursor [--file FILE] [--scope project|user|local] [--force] [--dry-run]"

// importsFrom reports whether args ask for import --from.
func importsFrom(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		return a == "--from" || a == "-from" || strings.HasPrefix(a, "--from=") || strings.HasPrefix(a, "-from=")
	})
}

// Run parses args and imports.
func (c *ImportFromCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("import", importFromSynopsis+"\n       (import FILE.jsonl imports an exported session: mcpledger import -h without --from)")
	var sf scopeFlags
	sf.register(f, config.ScopeNameProject)
	from := f.String("from", "", "the client whose servers to import: `SOURCE` "+strings.Join(config.ImportSources, ", "))
	force := f.Bool("force", false, "replace servers of the same name in the target scope")
	dry := f.Bool("dry-run", false, "list what would be imported; write nothing")
	file := f.String("file", "", "read this `FILE` (in SOURCE's format) instead of SOURCE's usual files: another profile, VS Code Insiders, a copy")
	if err := f.parse(args); err != nil {
		return err
	}
	target, err := sf.place(c.env)
	if err != nil {
		return err
	}
	ws := sf.workspace
	if ws == "" {
		ws, _ = os.Getwd()
	}
	lookup := func(k string) (string, bool) { v := c.env.getenv(k); return v, v != "" }
	fe := config.ForeignEnv{Workspace: canonicalDir(ws), Home: c.env.getenv("HOME"), ClaudeFile: claudeFile(c.env), GOOS: goruntime.GOOS, LookupEnv: lookup}
	places, err := config.ForeignFiles(*from, fe)
	if err != nil {
		return usageErrorf("import: %v", err)
	}
	if *file != "" {
		keys := []string{"mcpServers"}
		if *from == "vscode" {
			keys = []string{"servers"}
		}
		places = []config.Place{{Scope: *from, Path: *file, Keys: keys}}
	}
	var entries []config.Entry
	origin := map[string]string{}
	var skipped []string
	read := 0
	for _, p := range places {
		if p.Path == target.Path && slices.Equal(p.Keys, target.Keys) {
			continue // the target itself
		}
		list, err := p.Servers()
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		if list != nil {
			read++
		}
		for _, e := range list {
			if prev, dup := origin[e.Name]; dup {
				skipped = append(skipped, fmt.Sprintf("%s (%s): %s defines it too, and wins", e.Name, p, prev))
				continue
			}
			text, notes, why := config.Foreign(e.JSON, fe)
			if why == "" {
				if _, err := config.CheckEntry(e.Name, text); err != nil {
					why = strings.TrimPrefix(err.Error(), config.ErrInvalidEntry.Error()+": ")
				}
			}
			if why != "" {
				skipped = append(skipped, fmt.Sprintf("%s (%s): %s", e.Name, p, why))
				continue
			}
			origin[e.Name] = p.String()
			entries = append(entries, config.Entry{Name: e.Name, JSON: text})
			if len(notes) > 0 {
				origin[e.Name] += "; " + strings.Join(notes, "; ")
			}
		}
	}
	if read == 0 && len(skipped) == 0 {
		var where []string
		for _, p := range places {
			where = append(where, p.String())
		}
		return fmt.Errorf("import --from %s: no config file found (looked at %s); give the file with --file F", *from, strings.Join(where, ", "))
	}
	added, taken := namesOf(entries), []string(nil)
	if !*dry && len(entries) > 0 {
		if added, taken, err = target.AddMany(entries, *force); err != nil {
			return fmt.Errorf("import --from %s: %w; nothing was imported", *from, err)
		}
	} else if *dry {
		existing, err := target.Servers()
		if err != nil {
			return fmt.Errorf("import --from %s: %w", *from, err)
		}
		added = nil
		for _, e := range entries {
			if !*force && slices.ContainsFunc(existing, func(x config.Entry) bool { return x.Name == e.Name }) {
				taken = append(taken, e.Name)
			} else {
				added = append(added, e.Name)
			}
		}
	}
	verb := "imported"
	if *dry {
		verb = "would import"
	}
	w := c.env.stdout
	fmt.Fprintf(w, "%s %d server(s) from %s into %s (%s scope)\n", verb, len(added), *from, target, target.Scope)
	for _, n := range added {
		fmt.Fprintf(w, "  + %s  (from %s)\n", n, origin[n])
	}
	if !*dry {
		for _, e := range entries {
			if slices.Contains(added, e.Name) {
				warnShared(c.env, target, e.Name, e.JSON)
			}
		}
	}
	for _, n := range taken {
		fmt.Fprintf(w, "  skipped %s: already in %s (--force replaces it)\n", n, target)
	}
	for _, s := range skipped {
		fmt.Fprintf(w, "  skipped %s\n", s)
	}
	if !*dry && len(added) > 0 {
		c.env.afterImport(f, target, sf.workspace)
	}
	return nil
}

// afterImport says what the import means for a running mcpledger and a
// project's approvals.
func (e *env) afterImport(f *commandFlags, p config.Place, workspace string) {
	if p.Scope == config.ScopeNameProject {
		fmt.Fprintln(e.stdout, "next: mcpledger approvals --workspace "+canonicalDir(workspaceOr(workspace))+"  (project servers run once approved; stdio ones once the workspace is trusted)")
	}
	if f.control() != nil {
		fmt.Fprintln(e.stdout, "the running mcpledger reloads its config by itself")
	}
}

func namesOf(entries []config.Entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Name
	}
	return out
}

func workspaceOr(ws string) string {
	if ws == "" {
		ws, _ = os.Getwd()
	}
	return ws
}

// canonicalDir is dir absolute with symlinks resolved (as the config
// reading makes a workspace), or as given when that fails.
func canonicalDir(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	if p, err := filepath.EvalSymlinks(abs); err == nil {
		return p
	}
	return abs
}
