package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// help prints cmd's help on stdout: the top-level help for the root, a
// table command's own (its Run, given --help), or, for help, version and
// completion, their usage line, description and flags.
func (e *env) help(cmd *cobra.Command, _ []string) {
	if !cmd.HasParent() {
		fmt.Fprint(e.stdout, usage)
		return
	}
	for _, c := range commands {
		if c.name == cmd.Name() && cmd.Parent() == cmd.Root() {
			_ = c.newRunner(e).Run(context.Background(), []string{"--help"})
			return
		}
	}
	cmd.InitDefaultHelpFlag()
	fmt.Fprintf(e.stdout, "usage: mcpledger %s\n", strings.TrimPrefix(cmd.UseLine(), "mcpledger "))
	text := cmd.Long
	if text == "" {
		text = cmd.Short
	}
	if text != "" {
		fmt.Fprintf(e.stdout, "\n%s\n", strings.TrimRight(text, "\n"))
	}
	if cmd.HasAvailableSubCommands() {
		fmt.Fprint(e.stdout, "\ncommands:\n")
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				fmt.Fprintf(e.stdout, "  %-12s %s\n", sub.Name(), sub.Short)
			}
		}
	}
	if cmd.HasAvailableFlags() {
		fmt.Fprint(e.stdout, "\nflags:\n")
		printFlags(e.stdout, cmd.Flags())
	}
}

// usage is the CLI contract (architecture.md "CLI contract").
const usage = `usage: mcpledger [--journal PATH] COMMAND [ARGS] [flags]

Flags may come before, after or among a command's arguments ("--" ends
them); --journal, -h and --version also before the command.
` + "`mcpledger COMMAND --help`" + ` (or help COMMAND) prints its usage and flags.

Commands:
  demo [--for DURATION] [--keep]
        run embedded demo servers in a temporary journal: watch them come up,
        crash and reconnect, then read what the journal recorded
  run [--once] [--mcp-config FILE]... [--workspace DIR] [--allowed-servers a,b]
        supervise the configured servers in the foreground (Ctrl-C stops them)
  serve --stdio | --http 127.0.0.1:PORT [--plain-names] [--token-file F]
        supervise the configured servers and serve them to any MCP client as one
        server (the gateway): namespaced tools, resources and prompts, every call
        journaled with the client's identity
  status | tools [--server NAME]... [--json]
        servers and tools of the running mcpledger, or of the last session;
        tools --json includes each tool's input and output schemas;
        status --cursor FILE: how far a ship --cursor FILE is behind
  call TOOL [--args JSON|@FILE|-] [--json]
        call a tool (through the running mcpledger, or in a one-shot session);
        --args @FILE or - reads the arguments from a file or standard input
  reconnect NAME | stop NAME | refresh NAME | reload
        act on the running mcpledger (reconnect --failed: every failed server);
        reconnect NAME with none running is journaled: it clears a storm hold
  approve NAME...|--all [--trust] | reject NAME...|--all | approvals [--json]
        decide on workspace (.mcp.json) servers' current configs; approvals are
        bound to the config hash and survive restarts; --trust also trusts the
        workspace (its stdio servers need both)
  trust DIR
        let stdio servers of the workspace DIR spawn
  add [--scope S] [--env K=V]... NAME -- COMMAND [ARGS...]
  add --transport http|sse [--scope S] [--header 'K: V']... NAME URL
  add-json [--scope S] NAME JSON
        add a server without editing JSON, where claude mcp add puts it:
        --scope local (the default: ~/.claude.json, this workspace only),
        project (WORKSPACE/.mcp.json, shared) or user (~/.claude.json, every
        workspace); --force replaces one of the same name; a running
        mcpledger picks it up
  remove NAME [--scope S] | get NAME [--json]
        remove a server; show one server: its config, where it comes from,
        what it shadows, and its status (status NAME is the same)
  import --from claude-desktop|claude-code|vscode|cursor [--scope S] [--dry-run]
        add the servers another MCP client configured (default --scope project),
        listing what was imported and what was skipped and why
  login NAME [--no-browser] [--json] | logout NAME [--json]
        sign in to a remote server that asks for OAuth (browser, PKCE): tokens
        go to your token store, never the journal; a running mcpledger
        relaunches the server; logout deletes and revokes them
  replay [SESSION|last] [--until SEQ|TIME] [--verify] [--json]
        the session's status, catalog and approvals as they were after an event;
        --verify re-runs the decider on the recorded inputs and compares
  export SESSION [--sign] > s.jsonl | import s.jsonl [--signer FP] [--unsealed]
        move a session between journals: the export is sealed (a digest
        chained over every line, a trailer; --sign adds your signature),
        import refuses any edit to it and verifies that it replays
  why TOOL [--session S] [--at SEQ|TIME]
        was the tool in the catalog then, and if not, the chain of reasons
  timeline SESSION -o FILE [--width PX]
        the session as one self-contained HTML page: a swimlane per server with
        states, failures, retries, approvals, reloads and calls over time
  sessions [--json]
        list sessions: start, last event, events, servers seen, how it ended
  log [--session ID|last] [--server N] [--kind K] [--from GPOS] [--follow] [--json]
        print events in journal order, one a line (--json: one object a line);
        --follow goes on with new ones as they land, across restarts of run
  ship [--follow] [--otlp-endpoint URL] [--otlp-protocol PROTOCOL] [--cursor FILE]
        ship the journal to an OpenTelemetry collector (OTLP/HTTP or gRPC,
        the OTEL_* variables apply): a span per call and connection, a log
        record per event, cumulative metrics folded from the journal, resent
        the same until acknowledged; --cursor FILE ships beside a running run
        or serve (status --cursor FILE shows how far behind it is)
  verify [--drop-checkpoints]
        check every record (CRC, decode, gapless seqs, hash chains, indexes),
        every checkpoint against the events, and the archives the journal names
  archive --older-than 30d [--to DIR] [--json]
        move sessions that ended before the cutoff into a sealed archive journal
        (read it with --journal FILE); approvals and the tool cache stay live
  salvage DAMAGED -o NEW [--json]
        copy every event of a damaged journal that still reads and verifies
        (each session up to its first bad record) into a new journal, and
        report what was lost; DAMAGED is never written
  help [COMMAND]
        print this help, or a command's usage and flags (as COMMAND --help)
  version [--json]
        the version, the commit it was built from and the Go version
  completion bash|zsh|fish|powershell
        print the shell's completion script (completion bash --help: how to
        install it); it completes commands and their flags

SESSION is a session ID, a unique prefix of one, or "last" (the most recent
session of run, serve or demo). Every read command works while run or serve
holds the journal.

Common flags:
  --journal PATH   the journal, before or after the command (env
                   MCPLEDGER_JOURNAL, default $XDG_STATE_HOME/mcpledger/journal.db,
                   or ~/.local/state/mcpledger/journal.db)
  -h, --help       this help; after a command, that command's help
  --version        the version (as mcpledger version)

Exit status:
  0    ok
  1    error (run --once: a server ended failed, or a config entry is invalid)
  2    bad command line
  3    a call's outcome is unknown (the server, or the mcpledger serving the
       call, was lost with the call in flight: it may or may not have run;
       mcpledger log shows it as lost)
  4    a config file cannot be used (run, serve, call, approve): missing --mcp-config
       file, a directory, unreadable, over the size limit (1 MiB; env
       MCPLEDGER_CONFIG_MAX_BYTES), empty, not JSON, not a JSON object, or
       "mcpServers" null or not an object; nothing was started
  5    run --once: the config names no server, or only invalid entries
  130  interrupted (Ctrl-C, SIGTERM)
`
