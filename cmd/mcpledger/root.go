package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/mcpledger/mcpledger/events"
	rt "github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/control"

	"github.com/mcpledger/mcpledger/store"
)

// env is everything a command touches besides its arguments. run builds
// the real one; tests build their own.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// getenv reads an environment variable (os.Getenv).
	getenv func(string) string
	// openJournal opens a journal (store.Open). Tests may hand out a
	// journal they hold open, to append while a command follows it.
	openJournal func(path string, opts *store.Options) (*store.Journal, error)
	// renice lowers this process's CPU priority to a nice value
	// (lowerPriority); nil leaves it (tests that run commands in the test
	// process).
	renice func(nice int)
	// journal is the journal path the command resolved (journalPath), for
	// the hint on a damaged one (damagedHint).
	journal string
}

// lowerPriority lowers the process's priority when it runs as mcpledger.
func (e *env) lowerPriority(nice int) {
	if e.renice != nil {
		e.renice(nice)
	}
}

// run runs the command line args (without the program name).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv, openJournal: store.Open, renice: lowerPriority}
	return e.run(ctx, args)
}

func (e *env) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		e.usage()
		return usageErrorf("no command")
	}
	cmd, args := args[0], args[1:]
	var err error
	switch cmd {
	case "sessions":
		err = (&SessionsCommand{env: e}).Run(ctx, args)
	case "log":
		err = (&LogCommand{env: e}).Run(ctx, args)
	case "verify":
		err = (&VerifyCommand{env: e}).Run(ctx, args)
	case "archive":
		err = (&ArchiveCommand{env: e}).Run(ctx, args)
	case "salvage":
		err = (&SalvageCommand{env: e}).Run(ctx, args)
	case "run":
		err = (&RunCommand{env: e}).Run(ctx, args)
	case "serve":
		err = (&ServeCommand{env: e}).Run(ctx, args)
	case "status":
		err = (&StatusCommand{env: e}).Run(ctx, args)
	case "tools":
		err = (&ToolsCommand{env: e}).Run(ctx, args)
	case "call":
		err = (&CallCommand{env: e}).Run(ctx, args)
	case "demo":
		err = (&DemoCommand{env: e}).Run(ctx, args)
	case "approve":
		err = (&ApproveCommand{env: e, decision: events.DecisionApprove}).Run(ctx, args)
	case "reject":
		err = (&ApproveCommand{env: e, decision: events.DecisionReject}).Run(ctx, args)
	case "approvals":
		err = (&ApprovalsCommand{env: e}).Run(ctx, args)
	case "replay":
		err = (&ReplayCommand{env: e}).Run(ctx, args)
	case "export":
		err = (&ExportCommand{env: e}).Run(ctx, args)
	case "import":
		err = (&ImportCommand{env: e}).Run(ctx, args)
	case "why":
		err = (&WhyCommand{env: e}).Run(ctx, args)
	case "timeline":
		err = (&TimelineCommand{env: e}).Run(ctx, args)
	case "trust":
		err = (&TrustCommand{env: e}).Run(ctx, args)
	case "add":
		err = (&AddCommand{env: e}).Run(ctx, args)
	case "add-json":
		err = (&AddCommand{env: e, fromJSON: true}).Run(ctx, args)
	case "remove":
		err = (&RemoveCommand{env: e}).Run(ctx, args)
	case "get":
		err = (&GetCommand{env: e}).Run(ctx, args)
	case "login":
		err = (&AuthCommand{env: e}).Run(ctx, args)
	case "logout":
		err = (&AuthCommand{env: e, logout: true}).Run(ctx, args)
	case "reconnect", "refresh", "reload", "stop":
		err = (&ControlCommand{env: e, op: cmd}).Run(ctx, args)
	case demoServerCmd:
		if len(args) != 1 {
			return usageErrorf("%s KIND", demoServerCmd)
		}
		return runDemoServer(ctx, args[0])
	case "help", "-h", "-help", "--help":
		if len(args) > 0 {
			return e.run(ctx, []string{args[0], "-h"})
		}
		fmt.Fprint(e.stdout, usage)
		return nil
	default:
		e.usage()
		return usageErrorf("unknown command %q", cmd)
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil // the flag set printed the command's help
	}
	err = damagedHint(err, e.journal)
	if err != nil && ctx.Err() != nil {
		return &interruptedError{err: err}
	}
	return err
}

// interruptedError is the error of a command that Ctrl-C (or SIGTERM)
// cut short. It exits with status 130, as a shell reports a command
// killed by SIGINT.
type interruptedError struct{ err error }

func (e *interruptedError) Error() string { return "interrupted: " + e.err.Error() }
func (e *interruptedError) Unwrap() error { return e.err }

func (e *env) usage() { fmt.Fprint(e.stderr, usage) }

// usage is the CLI contract (architecture.md "CLI contract").
const usage = `usage: mcpledger COMMAND [flags]   (flags go after the command)

Commands:
  demo
        run embedded demo servers in a temporary journal: watch them come up,
        crash and reconnect, then read what the journal recorded
  run [--once] [--mcp-config FILE]... [--workspace DIR] [--allowed-servers a,b]
        supervise the configured servers in the foreground (Ctrl-C stops them)
  serve --stdio | --http 127.0.0.1:PORT [--plain-names] [--token-file F]
        supervise the configured servers and serve them to any MCP client as one
        server (the gateway): namespaced tools, resources and prompts, every call
        journaled with the client's identity
  status | tools [--json]
        servers and tools of the running mcpledger, or of the last session
  call TOOL [--args JSON] [--json]
        call a tool (through the running mcpledger, or in a one-shot session)
  reconnect NAME | stop NAME | refresh NAME | reload
        act on the running mcpledger (reconnect --failed: every failed server);
        reconnect NAME with none running is journaled: it clears a storm hold
  approve NAME | reject NAME | approvals [--json]
        decide on a workspace (.mcp.json) server's current config; approvals are
        bound to its config hash and survive restarts
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
        print this help, or a command's flags

SESSION is a session ID, a unique prefix of one, or "last" (the most recent
session of run, serve or demo). Every read command works while run or serve
holds the journal.

Common flags:
  --journal PATH   the journal (env MCPLEDGER_JOURNAL,
                   default $XDG_STATE_HOME/mcpledger/journal.db,
                   or ~/.local/state/mcpledger/journal.db)

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

// usageError is a command line that cannot run. It exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// exitOutcomeUnknown is the exit status of a call whose outcome is
// unknown: the server's connection, or the mcpledger process serving the
// call, was lost with the call in flight.
const exitOutcomeUnknown = 3

// exitCode maps an error returned by run to the process exit status.
func exitCode(err error) int {
	var ue *usageError
	var ie *interruptedError
	switch {
	case errors.As(err, &ue):
		return 2
	case errors.As(err, &ie):
		return 130
	case errors.Is(err, control.ErrOutcomeUnknown), errors.Is(err, rt.ErrOutcomeUnknown):
		return exitOutcomeUnknown
	}
	return configExitCode(err)
}
