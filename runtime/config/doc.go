// Package config reads the MCP server configuration the way Claude Code,
// Cursor and VS Code users write it, and watches it for changes.
//
// [Load] reads every source ([Sources]: --mcp-config files, the project's
// .mcp.json, the user config and its drop-ins), applies their precedence,
// parses them with positions for every error (file:line:col), expands
// ${VAR} (from the process environment in command, args, env and cwd;
// only from the server's own env block in url, headers and
// oauth.clientSecret) and returns a [Reading]: what the journal may keep
// (Observed: configs as written, env and header values and the OAuth
// client secret replaced by their hash, with each server's config
// hash, the fingerprint approvals are bound to) beside what the runtime
// runs (Specs: resolved, secrets included, never journaled; a remote
// server's "oauth" object is [Spec.OAuth], see oauth.go), and the
// files that could not be used at all (Unusable, [Reading.Err]: a caller
// starting a session refuses them). Each file is bounded
// ([DefaultMaxFileBytes], Sources.MaxFileBytes) and refused, unread,
// beyond. [Equal] compares two readings as the journal sees them, and
// [Watch] calls back when a source changes.
//
// Claude Code's ~/.claude.json is a source too (Sources.ClaudeFile): its
// user scope and the workspace's local scope (claude.go). [PlaceOf],
// [Place.Add] and [Place.Remove] write servers where `claude mcp add
// --scope` does (scopes.go), one member at a time, every other byte of
// the file kept (edit.go), atomically (write.go); [ForeignFiles] and
// [Foreign] read what Claude Desktop, VS Code and Cursor configured
// (foreign.go).
//
// config owns the file formats, precedence, expansion and the trust of a
// workspace. It must not start servers, decide admission or journal
// anything: the runtime does, from a Reading. It reads the environment
// only through Sources.LookupEnv.
package config
