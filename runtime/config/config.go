package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/guard"
)

// Sources says where [Load] looks for configuration and what
// it may read from the process. Library code never reads the environment
// itself: the caller passes os.LookupEnv and the home directory.
//
// Sources, highest priority first; the first source that defines a name
// wins it whole (entries are never merged field by field; the entries it
// shadows are listed in ConfigObserved.Shadowed):
//
//  1. each of Flags (--mcp-config FILE, repeatable): an earlier flag wins
//     over a later one, as the first source named wins everywhere else;
//  2. the project file Workspace/.mcp.json (gated: it needs approval),
//     unless the user config sets "enableProjectConfig": false;
//  3. the user config UserDir/config.json, which also holds the settings
//     "allowed", "excluded", "trustedFolders" and "enableProjectConfig";
//  4. drop-ins UserDir/servers.d/*.json, by file name: an earlier name
//     wins (dot files are skipped).
//
// Claude Code's ~/.claude.json (ClaudeFile) adds two sources, placed as
// Claude Code ranks them (local, then project, then user): its local
// scope for the workspace right after the flags, its user scope last.
// The user config's "enableClaudeCodeConfig": false turns both off.
type Sources struct {
	// Flags are the --mcp-config files in command-line order. A missing
	// flag file is an error; a missing file of any other source is not.
	Flags []string
	// Workspace is the project directory ("" for none: no project config,
	// untrusted).
	Workspace string
	// UserDir is $XDG_CONFIG_HOME/mcpledger ("" for none); see
	// [UserDir].
	UserDir string
	// ClaudeFile is Claude Code's ~/.claude.json ("" for none); see
	// [ClaudeFile]. Only its "mcpServers" (scope user) and
	// "projects" → Workspace → "mcpServers" (scope local) are read.
	// It is bounded by the larger of MaxFileBytes and 64 MiB: Claude
	// Code keeps its own state in it.
	ClaudeFile string
	// LaunchBound is the --allowed-servers upper bound, meaningful when
	// HasLaunchBound is true (an empty bound denies all).
	LaunchBound    []string
	HasLaunchBound bool
	// LookupEnv reads the process environment for ${VAR} in command,
	// args, env values and cwd. Nil means an empty environment.
	LookupEnv func(string) (string, bool)
	// Home is the home directory, for a leading ~ in command, cwd and
	// trustedFolders. Empty makes such a server invalid.
	Home string
	// MaxFileBytes bounds the size of each config file: a larger one is
	// refused before it is parsed (it is unusable, see Reading.Unusable).
	// 0 means DefaultMaxFileBytes.
	MaxFileBytes int64
	// RaiseLimit says how the user raises MaxFileBytes (for example "set
	// MCPLEDGER_CONFIG_MAX_BYTES"); the refusal quotes it.
	RaiseLimit string
	// Self reports whether a stdio entry (its command and args as
	// written) runs the caller's own gateway, `mcpledger serve`: such an
	// entry is disabled, with a warning, so that the gateway an MCP
	// client is configured with (in ~/.claude.json, say) is never
	// launched by the gateway itself, which would launch it again. Nil
	// disables nothing.
	Self func(command string, args []string) bool
}

// DefaultMaxFileBytes is the size limit of one config file: 1 MiB, room
// for thousands of hand-written entries (a few hundred bytes each). A
// config file is read whole, and what it says is journaled with every
// reading that changes it.
const DefaultMaxFileBytes = 1 << 20

// ErrUnusable is returned by [Reading.Err] when a config file cannot be
// used at all.
var ErrUnusable = errors.New("config: a config file cannot be used")

// Spec is one server's resolved configuration: what the runtime
// runs. It holds expanded secrets and lives in memory only; only Config
// (as written, redacted) may be journaled.
type Spec struct {
	// Config is the journaled form: as written, env and header values
	// replaced by digests.
	Config events.ServerConfig
	// Command and Args start a stdio server (~ and ${VAR} expanded).
	Command string
	Args    []string
	// Env is the server's own "env" block resolved, as sorted KEY=VALUE.
	// It does not include the process environment: the spawner appends it
	// to the inherited one (exec.Cmd.Environ() followed by Env).
	Env []string
	// Cwd is the stdio server's working directory: as written and
	// expanded, relative paths joined to the workspace (or to the config
	// file's directory without one); the workspace when not set.
	Cwd string
	// URL and Headers reach a remote server; ${VAR} in them is expanded
	// from the server's own env block only.
	URL     string
	Headers map[string]string
	// Timeout is the server's "timeout" (0: use the runtime default).
	Timeout time.Duration
	// Call holds "callPolicy", "toolPolicies", "toolTimeouts" and
	// "maxResultChars".
	Call CallSettings
	// OAuth is a remote server's "oauth" object resolved (nil when it has
	// none or it sets nothing).
	OAuth *OAuthSpec
}

// Secrets returns the resolved values of s that must never reach the
// journal or a log (see guard.Secrets), the OAuth client secret included.
func (s *Spec) Secrets() []string {
	out := guard.Secrets(s.Env, s.Headers)
	if s.OAuth != nil && s.OAuth.ClientSecret != "" {
		out = append(out, s.OAuth.ClientSecret)
	}
	return out
}

// Reading is one complete reading of every config source.
type Reading struct {
	// Observed is what is journaled. The caller sets Trigger. Servers are
	// sorted by name, Workspace is canonical (absolute, symlinks
	// resolved), Trusted says whether it is equal to or under a
	// canonicalized trustedFolders entry, and Errors lists problems with
	// whole sources ("path:line:col: message" or "path: message").
	Observed events.ConfigObserved
	// Specs holds the resolved spec of every server that is valid and not
	// disabled, by name. Secrets: never journal or log it.
	Specs map[string]Spec
	// Warnings are problems that do not stop anything (unknown fields,
	// ignored settings; shadowed servers are in Observed.Shadowed). They
	// never quote env or header values.
	Warnings []string
	// Files is every path consulted, existing or not, and the drop-in
	// directory, in the order read: what a watcher should watch.
	Files []string
	// Unusable are the problems, also in Observed.Errors, of files that
	// contribute nothing: a --mcp-config file that does not exist, a
	// directory, a file that cannot be read, is over the size limit, is
	// empty, is not JSON or not an object, or whose "mcpServers" is null
	// or not an object; and a drop-in directory that cannot be listed.
	// Each is "path[:line:col]: what is wrong; what to do". The servers
	// such a file defines are missing from the reading, so a caller
	// starting a session should refuse (see [Reading.Err]).
	Unusable []string
}

// Err returns nil when every config file could be used, and otherwise an
// error wrapping [ErrUnusable] that lists Unusable, one a line.
func (r *Reading) Err() error {
	if len(r.Unusable) == 0 {
		return nil
	}
	return fmt.Errorf("%w:\n  %s", ErrUnusable, strings.Join(r.Unusable, "\n  "))
}

// UserDir returns $XDG_CONFIG_HOME/mcpledger, falling back to
// home/.config/mcpledger when XDG_CONFIG_HOME is unset or relative, and
// "" when neither is known.
func UserDir(lookupEnv func(string) (string, bool), home string) string {
	if lookupEnv != nil {
		if x, ok := lookupEnv("XDG_CONFIG_HOME"); ok && filepath.IsAbs(x) {
			return filepath.Join(x, "mcpledger")
		}
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".config", "mcpledger")
}

// Load reads every source in src, merges them by priority, expands
// variables and validates each entry. It never fails as a whole: a
// source that cannot be read or parsed (or is over src.MaxFileBytes, or
// empty) is reported in Observed.Errors and Unusable and contributes
// nothing, and an entry that cannot be used is reported in
// its ServerConfig.Invalid without affecting the others. It reads only
// the files and src (never the process environment), and is safe to call
// from several goroutines.
//
// Every file has the .mcp.json format: {"mcpServers": {NAME: ENTRY}}, with
// VS Code's "servers" as an alias ("mcpServers" wins a name in both), and
// comments and trailing commas allowed; of ~/.claude.json (plain JSON)
// only "mcpServers" and "projects" → Workspace → "mcpServers" are read
// (claude.go). ENTRY fields: "command", "args",
// "env", "cwd" for stdio; "type" ("stdio", "http", "streamable-http",
// "streamableHttp" or "sse", in any case), "url", "headers" for remote;
// without "type", "command" means stdio and "url" means http. Also
// "disabled" (or "enabled": false), "timeout" in milliseconds,
// "includeTools" and "excludeTools" (kept as sorted sets; the
// "tools": {include, exclude} form is not read) and "protocolVersion".
// A remote entry may have "oauth" (see oauth.go): "clientId",
// "clientSecret", "callbackPort", "scopes" (one space-separated string),
// "authServerMetadataUrl" and "clientMetadataUrl".
// null means absent; unknown fields are ignored with a warning.
//
// ${NAME} and ${NAME:-default} (the default applies when NAME is unset or
// empty, and is literal up to "}") expand in command, args, env values
// and cwd from src.LookupEnv, and in url, header values and
// oauth.clientSecret only from the server's own env block after it is
// expanded. A leading ~ in command and
// cwd is src.Home. An unset variable makes the server invalid. Disabled
// servers are checked as written but not expanded. The journaled form
// (ServerConfig) keeps the text as written with env and header values
// and the OAuth client secret replaced by [events.HashValue] digests, and
// Hash is [events.ConfigHash] of it.
func Load(src Sources) Reading {
	var lc Reading
	obs := &lc.Observed
	obs.Servers = []events.ServerConfig{}
	if src.Workspace != "" {
		ws, err := canonicalPath(src.Workspace)
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if err != nil {
			lc.Warnings = append(lc.Warnings, fmt.Sprintf("workspace %s: %v; check --workspace", ws, err))
		}
		obs.Workspace = ws
	}

	type file struct {
		path string
		cf   configFile
	}
	var files []file
	limit := src.MaxFileBytes
	if limit <= 0 {
		limit = DefaultMaxFileBytes
	}
	read := func(path string, scope events.Scope, explicit bool) configFile {
		lc.Files = append(lc.Files, path)
		data, err := readLimited(path, limit)
		var tl *tooLargeError
		switch {
		case err == nil:
			return parseConfigFile(path, data, scope, scope == events.ScopeUser)
		case errors.Is(err, fs.ErrNotExist) && !explicit:
			return configFile{}
		case errors.Is(err, fs.ErrNotExist):
			return configFile{errs: []string{path + ": --mcp-config file does not exist: check the path"}}
		case errors.As(err, &tl):
			msg := fmt.Sprintf("%s: the file is larger than the %s limit for a config file; it is not read: shrink it (one file per server in servers.d/ works too)", path, byteSize(limit))
			if src.RaiseLimit != "" {
				msg += ", or " + src.RaiseLimit
			}
			return configFile{errs: []string{msg}}
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return configFile{errs: []string{fmt.Sprintf("%s: cannot read: %v; check that it is a readable file", path, err)}}
	}

	seen := map[string]bool{}
	for _, f := range src.Flags {
		p := absPath(f)
		if seen[p] {
			continue
		}
		seen[p] = true
		cf := read(p, events.ScopeFlag, true)
		files = append(files, file{p, cf})
	}
	var user configFile
	var userPath string
	if src.UserDir != "" {
		userPath = filepath.Join(absPath(src.UserDir), "config.json")
		user = read(userPath, events.ScopeUser, false)
	}
	var claudeUser configFile
	var claudePath string
	if src.ClaudeFile != "" && !user.settings.claudeOff {
		claudePath = absPath(src.ClaudeFile)
		lc.Files = append(lc.Files, claudePath)
		var local configFile
		data, err := readLimited(claudePath, max(limit, maxEditBytes))
		var tl *tooLargeError
		switch {
		case err == nil:
			var ws []string
			if obs.Workspace != "" {
				ws = []string{obs.Workspace, absPath(src.Workspace)}
			}
			local, claudeUser = parseClaudeFile(claudePath, data, ws)
			where := userPath
			if where == "" {
				where = "mcpledger's config.json"
			}
			for i := range claudeUser.errs {
				claudeUser.errs[i] += fmt.Sprintf(`; or set "%s": false in %s to stop reading Claude Code's file`, keySettingClaude, where)
			}
		case errors.Is(err, fs.ErrNotExist):
		case errors.As(err, &tl):
			claudeUser.errs = []string{fmt.Sprintf(`%s: Claude Code's config is larger than %s; it is not read: shrink it, or set "%s": false in %s`, claudePath, byteSize(tl.limit), keySettingClaude, userPath)}
		default:
			claudeUser.errs = []string{fmt.Sprintf("%s: cannot read Claude Code's config: %v; check that it is a readable file", claudePath, err)}
		}
		files = append(files, file{claudePath, local})
	}
	if obs.Workspace != "" {
		p := filepath.Join(obs.Workspace, ".mcp.json")
		if !user.settings.projectOff {
			cf := read(p, events.ScopeProject, false)
			files = append(files, file{p, cf})
		} else if _, err := os.Stat(p); err == nil {
			lc.Warnings = append(lc.Warnings, fmt.Sprintf(`%s: ignored because %s sets "enableProjectConfig": false`, p, userPath))
		}
	}
	if userPath != "" {
		files = append(files, file{userPath, user})
		dir := filepath.Join(absPath(src.UserDir), "servers.d")
		lc.Files = append(lc.Files, dir)
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			msg := fmt.Sprintf("%s: cannot list drop-ins: %v; check that it is a readable directory", dir, err)
			obs.Errors = append(obs.Errors, msg)
			lc.Unusable = append(lc.Unusable, msg)
		}
		for _, e := range entries { // sorted by name
			if e.IsDir() || strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			p := filepath.Join(dir, e.Name())
			cf := read(p, events.ScopeDropIn, false)
			files = append(files, file{p, cf})
		}
	}
	if claudePath != "" {
		files = append(files, file{claudePath, claudeUser})
	}

	// Merge: the first source that names a server wins it.
	var order []parsedServer
	winner := map[string]*parsedServer{}
	for _, f := range files {
		obs.Errors = append(obs.Errors, f.cf.errs...)
		lc.Unusable = append(lc.Unusable, f.cf.errs...)
		obs.Errors = append(obs.Errors, f.cf.settingErrs...)
		lc.Warnings = append(lc.Warnings, f.cf.warnings...)
		for i, ps := range f.cf.servers {
			if w, ok := winner[ps.cfg.Name]; ok {
				obs.Shadowed = append(obs.Shadowed, events.ShadowedServer{Name: ps.cfg.Name, At: ps.pos, Winner: w.pos})
				continue
			}
			winner[ps.cfg.Name] = &f.cf.servers[i]
			for _, w := range ps.warnings {
				lc.Warnings = append(lc.Warnings, fmt.Sprintf("%s: server %q: %s", f.path, ps.cfg.Name, w))
			}
			order = append(order, ps)
		}
	}

	lc.Specs = map[string]Spec{}
	for i := range order {
		ps := &order[i]
		if src.Self != nil && ps.cfg.Invalid == "" && !ps.cfg.Disabled && ps.cfg.Transport == events.TransportStdio && src.Self(ps.cfg.Command, ps.args) {
			ps.cfg.Disabled = true
			ps.cfg.Hash = events.ConfigHash(&ps.cfg)
			lc.Warnings = append(lc.Warnings, fmt.Sprintf("%s: server %q runs mcpledger serve, the gateway itself: it is disabled here (an MCP client launches it; mcpledger does not launch itself)", ps.pos, ps.cfg.Name))
		}
		base := obs.Workspace
		if base == "" {
			base = filepath.Dir(ps.cfg.Source)
		}
		if spec, ok := settle(ps, &src, base); ok {
			lc.Specs[ps.cfg.Name] = spec
		}
		obs.Servers = append(obs.Servers, ps.cfg)
	}
	slices.SortFunc(obs.Servers, func(a, b events.ServerConfig) int { return strings.Compare(a.Name, b.Name) })
	slices.SortStableFunc(obs.Shadowed, func(a, b events.ShadowedServer) int { return strings.Compare(a.Name, b.Name) })

	s := user.settings
	obs.Allowed, obs.HasAllowed, obs.Excluded = s.allowed, s.hasAllowed, s.excluded
	if src.HasLaunchBound {
		obs.LaunchBound, obs.HasLaunchBound = sortedSet(src.LaunchBound), true
	}
	var trustErrs []string
	obs.Trusted, trustErrs = trusted(obs.Workspace, s.trustedFolders, src.Home, userPath)
	obs.Errors = append(obs.Errors, trustErrs...)
	return lc
}

// settle resolves ps unless it is invalid or disabled. A resolution
// problem makes ps invalid; ok reports whether spec may run.
func settle(ps *parsedServer, src *Sources, base string) (spec Spec, ok bool) {
	if ps.cfg.Invalid != "" || ps.cfg.Disabled {
		return Spec{}, false
	}
	spec, problems := resolve(ps, src.LookupEnv, src.Home, base)
	if len(problems) > 0 {
		ps.cfg.Invalid = fmt.Sprintf("server %q: %s (%s)", ps.cfg.Name, strings.Join(problems, "; "), ps.pos)
		return Spec{}, false
	}
	return spec, true
}

// resolve expands one valid entry into what runs. problems say what to do;
// they name variables and fields, never values.
func resolve(ps *parsedServer, lookupEnv func(string) (string, bool), home, base string) (Spec, []string) {
	c := ps.cfg
	spec := Spec{Config: c, Timeout: time.Duration(c.TimeoutMs) * time.Millisecond, Call: ps.call}
	var problems []string
	exp := func(s, where string, lookup func(string) (string, bool), scoped bool) string {
		v, err := expand(s, lookup)
		if err != nil {
			problems = append(problems, varProblem(err, where, scoped))
		}
		return v
	}
	home1 := func(s, where string) string {
		if s != "~" && !strings.HasPrefix(s, "~/") {
			return s
		}
		if home == "" {
			problems = append(problems, where+` starts with ~ but the home directory is unknown: write an absolute path`)
			return s
		}
		return home + s[1:]
	}
	env := make(map[string]string, len(ps.env))
	for _, kv := range ps.env {
		v := exp(kv.Value, fmt.Sprintf(`"env" key %q`, kv.Key), lookupEnv, false)
		env[kv.Key] = v
		spec.Env = append(spec.Env, kv.Key+"="+v) // ps.env is sorted
	}
	if c.Transport == events.TransportStdio {
		spec.Command = home1(exp(c.Command, `"command"`, lookupEnv, false), `"command"`)
		for i, a := range ps.args {
			spec.Args = append(spec.Args, exp(a, fmt.Sprintf(`"args"[%d]`, i), lookupEnv, false))
		}
		cwd := home1(exp(c.Cwd, `"cwd"`, lookupEnv, false), `"cwd"`)
		switch {
		case cwd == "":
			cwd = base
		case !filepath.IsAbs(cwd):
			cwd = filepath.Join(base, cwd)
		}
		spec.Cwd = cwd
		if spec.Command == "" && len(problems) == 0 {
			problems = append(problems, `"command" is empty after expansion: set the variable it uses or write the command`)
		}
		return spec, problems
	}
	scope := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	spec.URL = exp(ps.url, `"url"`, scope, true)
	if len(problems) == 0 {
		if msg := checkURL(spec.URL); msg != "" {
			problems = append(problems, msg+" after expansion")
		}
	}
	for _, kv := range ps.headers {
		where := fmt.Sprintf(`header %q`, kv.Key)
		v := exp(kv.Value, where, scope, true)
		if strings.ContainsAny(v, "\r\n") {
			problems = append(problems, where+` has a line break in its value: remove it`)
		}
		if spec.Headers == nil {
			spec.Headers = map[string]string{}
		}
		spec.Headers[kv.Key] = v
	}
	var oauthProblems []string
	spec.OAuth, oauthProblems = resolveOAuth(ps.oauth, func(s, where string) string { return exp(s, where, scope, true) })
	return spec, append(problems, oauthProblems...)
}

// trusted reports whether ws (canonical) is equal to or under one of the
// trusted folders, each canonicalized the same way.
func trusted(ws string, folders []string, home, userPath string) (bool, []string) {
	var errs []string
	ok := false
	for _, f := range folders {
		if f == "~" || strings.HasPrefix(f, "~/") {
			if home == "" {
				errs = append(errs, fmt.Sprintf(`%s: "trustedFolders" entry %q starts with ~ but the home directory is unknown: write an absolute path`, userPath, f))
				continue
			}
			f = home + f[1:]
		}
		if !filepath.IsAbs(f) {
			errs = append(errs, fmt.Sprintf(`%s: "trustedFolders" entry %q is not absolute: write an absolute path`, userPath, f))
			continue
		}
		t, _ := canonicalPath(f)
		if ws != "" && within(ws, t) {
			ok = true
		}
	}
	return ok, errs
}

// within reports whether path p is dir or under it (both clean, absolute).
func within(p, dir string) bool {
	if p == dir {
		return true
	}
	if !strings.HasSuffix(dir, string(filepath.Separator)) {
		dir += string(filepath.Separator)
	}
	return strings.HasPrefix(p, dir)
}

// canonicalPath returns p absolute, clean and with symlinks resolved; when
// resolving fails (p does not exist) it returns the absolute path and
// the error.
func canonicalPath(p string) (string, error) {
	abs := absPath(p)
	r, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return abs, err
	}
	return r, nil
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}
