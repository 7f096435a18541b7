package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/config"
)

// add, add-json and remove: servers managed without editing JSON by
// hand, in Claude Code's files and keys (`claude mcp add` and friends),
// so that either tool reads what the other wrote. The file editing is
// runtime/config's (scopes.go, edit.go, write.go).

// defaultAddScope is the scope of add and add-json without --scope:
// local, as for `claude mcp add` (the server is yours and this
// workspace's only, so it needs neither trust nor approval).
const defaultAddScope = config.ScopeNameLocal

// scopeFlags are the flags that say where a server goes.
type scopeFlags struct {
	scope     string
	workspace string
}

func (s *scopeFlags) register(f *commandFlags, def string) {
	usage := "`SCOPE`, where the server goes, as Claude Code keeps it: project (WORKSPACE/.mcp.json), user (~/.claude.json) or local (~/.claude.json, this workspace only)"
	f.StringVar(&s.scope, "scope", def, usage)
	f.StringVar(&s.scope, "s", def, "shorthand for --scope `SCOPE`")
	f.StringVar(&s.workspace, "workspace", "", "workspace `DIR` (default: current directory)")
}

// place returns the place of the chosen scope.
func (s *scopeFlags) place(e *env) (config.Place, error) {
	ws := s.workspace
	if ws == "" {
		ws, _ = os.Getwd()
	}
	if s.scope != config.ScopeNameUser {
		if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
			return config.Place{}, usageErrorf("workspace %s is not a directory: check --workspace", ws)
		}
	}
	p, err := config.PlaceOf(s.scope, ws, claudeFile(e))
	if err != nil {
		return p, usageErrorf("--scope: %v", err)
	}
	return p, nil
}

// runsGateway reports whether a stdio entry runs `mcpledger serve` (this
// binary, or a program named mcpledger): the gateway that MCP clients are
// configured with, which the configuration must not make it launch
// itself (config.Sources.Self).
func runsGateway(command string, args []string) bool {
	if !slices.Contains(args, "serve") {
		return false
	}
	if strings.TrimSuffix(filepath.Base(command), ".exe") == "mcpledger" {
		return true
	}
	exe, err := os.Executable()
	return err == nil && command == exe
}

// claudeFile is Claude Code's ~/.claude.json as the loader finds it.
func claudeFile(e *env) string {
	return config.ClaudeFile(func(k string) (string, bool) { v := e.getenv(k); return v, v != "" }, e.getenv("HOME"))
}

// parseMixed parses flags that may come before, between and after the
// positional arguments, up to a "--": what follows "--" is returned as
// is (a server's own command line, whose flags are not ours).
func parseMixed(f *commandFlags, args []string) (pos, tail []string, err error) {
	if err := f.Parse(args); err != nil {
		return nil, nil, err
	}
	pos = f.Args()
	if i := f.ArgsLenAtDash(); i >= 0 {
		pos, tail = pos[:i], append([]string{}, pos[i:]...)
	}
	return pos, tail, nil
}

// AddCommand is `add` (a server from its command line or URL) and
// `add-json` (a server from its JSON entry).
type AddCommand struct {
	env      *env
	fromJSON bool
}

// Run parses args and adds the server.
func (c *AddCommand) Run(ctx context.Context, args []string) error {
	name := "add"
	synopsis := "[--scope local|project|user] [--env K=V]... NAME -- COMMAND [ARGS...]\n       mcpledger add --transport http|sse [--scope S] [--header 'K: V']... NAME URL"
	if c.fromJSON {
		name, synopsis = "add-json", "[--scope local|project|user] NAME JSON"
	}
	f := c.env.newCommandFlags(name, synopsis)
	var sf scopeFlags
	sf.register(f, defaultAddScope)
	force := f.Bool("force", false, "replace a server of the same name in that scope")
	var transport string
	var envs, headers []string
	if !c.fromJSON {
		f.StringVar(&transport, "transport", "stdio", "`TRANSPORT`: stdio, http or sse")
		f.StringVar(&transport, "t", "stdio", "shorthand for --transport `TRANSPORT`")
		f.Var(multiFlag{&envs}, "env", "`K=V` in the server's env (repeatable; ${VAR} is expanded when it runs)")
		f.Var(multiFlag{&envs}, "e", "shorthand for --env")
		f.Var(multiFlag{&headers}, "header", "`'K: V'` HTTP header of a remote server (repeatable)")
		f.Var(multiFlag{&headers}, "H", "shorthand for --header")
	}
	pos, tail, err := parseMixed(f, args)
	if err != nil {
		return err
	}
	entry, srv, err := c.entry(pos, tail, transport, envs, headers)
	if err != nil {
		return err
	}
	warnings, err := config.CheckEntry(srv, entry)
	if err != nil {
		return fmt.Errorf("%s %s: %w; nothing was written", name, srv, err)
	}
	p, err := sf.place(c.env)
	if err != nil {
		return err
	}
	replaced, err := p.Add(srv, entry, *force)
	if err != nil {
		return fmt.Errorf("%s %s: %w", name, srv, err)
	}
	for _, w := range warnings {
		fmt.Fprintf(c.env.stderr, "warning: server %q: %s\n", srv, w)
	}
	verb := "added"
	if replaced {
		verb = "replaced"
	}
	fmt.Fprintf(c.env.stdout, "%s server %q (%s scope) in %s\n", verb, srv, p.Scope, p)
	warnShared(c.env, p, srv, entry)
	c.env.afterEdit(f, p, srv, sf.workspace, false)
	return nil
}

// warnShared says when a project server's env or header values are
// written out in .mcp.json, a file meant to be committed and shared.
func warnShared(e *env, p config.Place, name string, entry []byte) {
	if p.Scope != config.ScopeNameProject {
		return
	}
	if keys := config.LiteralValues(entry); len(keys) > 0 {
		fmt.Fprintf(e.stderr, "note: %s of %q are written out in %s, which is usually committed: write ${VAR} instead (set in your environment), or use --scope local\n", strings.Join(keys, ", "), name, p.Path)
	}
}

// entry builds the JSON entry of the command line: NAME -- COMMAND ARGS,
// NAME URL, or NAME JSON.
func (c *AddCommand) entry(pos, tail []string, transport string, envs, headers []string) ([]byte, string, error) {
	if c.fromJSON {
		if len(pos) != 2 || tail != nil {
			return nil, "", usageErrorf(`add-json: want NAME JSON, like add-json gh '{"type":"stdio","command":"gh-mcp"}'`)
		}
		return []byte(pos[1]), pos[0], nil
	}
	if len(pos) == 0 {
		return nil, "", usageErrorf("add: name the server: add NAME -- COMMAND [ARGS...], or add --transport http NAME URL")
	}
	name := pos[0]
	switch transport {
	case "stdio":
		cmdline := append(pos[1:], tail...)
		if len(cmdline) == 0 {
			return nil, "", usageErrorf("add %s: give the command that starts the server after --, like add %s -- npx -y @modelcontextprotocol/server-memory", name, name)
		}
		if len(headers) > 0 {
			return nil, "", usageErrorf("add %s: --header is for --transport http or sse", name)
		}
		kvs, err := splitKVs(envs, "=", "--env", "K=V")
		if err != nil {
			return nil, "", err
		}
		return config.StdioEntry(cmdline[0], cmdline[1:], kvs), name, nil
	case "http", "sse":
		if len(pos) != 2 || len(tail) > 0 {
			return nil, "", usageErrorf("add --transport %s: want NAME URL, like add --transport %s notion https://mcp.notion.com/mcp", transport, transport)
		}
		if len(envs) > 0 {
			return nil, "", usageErrorf("add %s: --env is for stdio servers; a remote server takes --header", name)
		}
		kvs, err := splitKVs(headers, ":", "--header", "'K: V'")
		if err != nil {
			return nil, "", err
		}
		return config.RemoteEntry(transport, pos[1], kvs), name, nil
	}
	return nil, "", usageErrorf("--transport %q: want stdio, http or sse", transport)
}

// splitKVs splits each "K<sep>V" (values trimmed of the spaces after a
// ":"), later keys replacing earlier ones in place.
func splitKVs(list []string, sep, flagName, form string) ([]events.KV, error) {
	var out []events.KV
	for _, s := range list {
		k, v, ok := strings.Cut(s, sep)
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, usageErrorf("%s %q: want %s", flagName, s, form)
		}
		if sep == ":" {
			v = strings.TrimSpace(v)
		}
		if i := slices.IndexFunc(out, func(kv events.KV) bool { return kv.Key == k }); i >= 0 {
			out[i].Value = v
			continue
		}
		out = append(out, events.KV{Key: k, Value: v})
	}
	return out, nil
}

// afterEdit reads the configuration as run would and says what the edit
// means: another source's entry of the name that wins over the one just
// added (or is still there after a remove), the trust and approval a
// project server needs, and that a running mcpledger reloads by itself.
func (e *env) afterEdit(f *commandFlags, p config.Place, name, workspace string, removed bool) {
	cf := configFlags{workspace: workspace}
	r := cf.loader(e)()
	if err := r.Err(); err != nil {
		fmt.Fprintf(e.stderr, "note: mcpledger cannot use every config file yet:\n%v\n", err)
	}
	i := slices.IndexFunc(r.Observed.Servers, func(s events.ServerConfig) bool { return s.Name == name })
	if i >= 0 {
		s := r.Observed.Servers[i]
		ours := s.Source == p.Path && string(s.Scope) == p.Scope
		switch {
		case removed:
			fmt.Fprintf(e.stdout, "note: %q is still configured in %s (%s scope)\n", name, s.Source, s.Scope)
		case !ours:
			fmt.Fprintf(e.stderr, "note: %q from %s (%s scope) wins over the one just added; see mcpledger get %s\n", name, s.Source, s.Scope, name)
		case s.Disabled && runsGateway(s.Command, s.Args):
			fmt.Fprintf(e.stdout, "note: %q runs mcpledger serve, the gateway: Claude Code (or another MCP client) launches it; mcpledger itself leaves it alone\n", name)
		case s.Gated:
			if s.Transport == events.TransportStdio && !r.Observed.Trusted {
				fmt.Fprintf(e.stdout, "next: mcpledger trust %s  (a workspace's stdio servers spawn only in a trusted workspace)\n", r.Observed.Workspace)
			}
			fmt.Fprintf(e.stdout, "next: mcpledger approve %s  (a project server runs once approved)\n", name)
		}
	}
	if f.control() != nil {
		fmt.Fprintln(e.stdout, "the running mcpledger reloads its config by itself")
	}
}

// RemoveCommand is `remove NAME`: from the scope given, or from the one
// scope that has it.
type RemoveCommand struct{ env *env }

// Run parses args and removes the server.
func (c *RemoveCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("remove", "[--scope local|project|user] NAME")
	var sf scopeFlags
	sf.register(f, "")
	pos, tail, err := parseMixed(f, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || tail != nil {
		return usageErrorf("remove: name one server: remove [--scope S] NAME")
	}
	name := pos[0]
	var p config.Place
	if sf.scope != "" {
		if p, err = sf.place(c.env); err != nil {
			return err
		}
	} else {
		var found []config.Place
		for _, s := range []string{config.ScopeNameLocal, config.ScopeNameProject, config.ScopeNameUser} {
			sf.scope = s
			q, err := sf.place(c.env)
			if err != nil {
				continue
			}
			entries, err := q.Servers()
			if err == nil && slices.ContainsFunc(entries, func(e config.Entry) bool { return e.Name == name }) {
				found = append(found, q)
			}
		}
		switch len(found) {
		case 0:
			return fmt.Errorf("remove %s: %w in the local, project or user scope (mcpledger get %s shows where it is defined)", name, config.ErrNoServer, name)
		case 1:
			p = found[0]
		default:
			var where []string
			for _, q := range found {
				where = append(where, q.Scope+" ("+q.String()+")")
			}
			return usageErrorf("remove %s: it is in %d scopes: %s; pass --scope to say which", name, len(found), strings.Join(where, ", "))
		}
	}
	if err := p.Remove(name); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	fmt.Fprintf(c.env.stdout, "removed server %q (%s scope) from %s\n", name, p.Scope, p)
	c.env.afterEdit(f, p, name, sf.workspace, true)
	return nil
}
