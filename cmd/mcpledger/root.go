package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

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
	// terminal reports whether a writer is a terminal, where text output
	// takes colour and health marks (styleFor); nil is isTerminal. Tests
	// set it to fake one.
	terminal func(io.Writer) bool
	// describe, when set, makes commandFlags.Parse hand it the command's
	// flag set and stop the command (describeCommand).
	describe func(*commandFlags)
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

// command is one entry of the command table: its name, the line its help
// shows under the usage line, and the value that runs it. Each command
// parses its own arguments with newCommandFlags (flags anywhere).
type command struct {
	name, summary string
	newRunner     func(e *env) runner
}

// runner runs one command with its arguments (flags and positional
// arguments as the user gave them, the command's name removed).
type runner interface {
	Run(ctx context.Context, args []string) error
}

// commands is the command table, in the order of the top-level help.
var commands = []command{
	{"demo", "Run embedded demo servers in a temporary journal: watch them come up, crash and reconnect, then read what the journal recorded.", func(e *env) runner { return &DemoCommand{env: e} }},
	{"run", "Supervise the configured servers in the foreground (Ctrl-C stops them).", func(e *env) runner { return &RunCommand{env: e} }},
	{"serve", "Supervise the configured servers and serve them to any MCP client as one server (the gateway).", func(e *env) runner { return &ServeCommand{env: e} }},
	{"status", "Show the servers of the running mcpledger, or of the last session.", func(e *env) runner { return &StatusCommand{env: e} }},
	{"tools", "List the tools of the running mcpledger, or of the last session.", func(e *env) runner { return &ToolsCommand{env: e} }},
	{"call", "Call a tool (through the running mcpledger, or in a one-shot session).", func(e *env) runner { return &CallCommand{env: e} }},
	{"reconnect", "Reconnect a server of the running mcpledger (with none running: clear its storm hold).", func(e *env) runner { return &ControlCommand{env: e, op: "reconnect"} }},
	{"stop", "Stop a server of the running mcpledger.", func(e *env) runner { return &ControlCommand{env: e, op: "stop"} }},
	{"refresh", "Refresh a server's tools, resources and prompts in the running mcpledger.", func(e *env) runner { return &ControlCommand{env: e, op: "refresh"} }},
	{"reload", "Make the running mcpledger reread its config files.", func(e *env) runner { return &ControlCommand{env: e, op: "reload"} }},
	{"approve", "Approve a workspace (.mcp.json) server's current config (bound to its config hash).", func(e *env) runner { return &ApproveCommand{env: e, decision: events.DecisionApprove} }},
	{"reject", "Reject a workspace (.mcp.json) server's current config (bound to its config hash).", func(e *env) runner { return &ApproveCommand{env: e, decision: events.DecisionReject} }},
	{"approvals", "List the workspace's gated servers and the decisions on their current configs.", func(e *env) runner { return &ApprovalsCommand{env: e} }},
	{"trust", "Let stdio servers of the workspace DIR spawn.", func(e *env) runner { return &TrustCommand{env: e} }},
	{"add", "Add a server without editing JSON, where claude mcp add puts it (--scope local, project or user); a running mcpledger picks it up.", func(e *env) runner { return &AddCommand{env: e} }},
	{"add-json", "Add a server given as its JSON entry, where claude mcp add-json puts it.", func(e *env) runner { return &AddCommand{env: e, fromJSON: true} }},
	{"remove", "Remove a server from the config file of its scope.", func(e *env) runner { return &RemoveCommand{env: e} }},
	{"get", "Show one server: its config, where it comes from, what it shadows, and its status.", func(e *env) runner { return &GetCommand{env: e} }},
	{"login", "Sign in to a remote server that asks for OAuth (browser, PKCE); tokens go to your token store, never the journal.", func(e *env) runner { return &AuthCommand{env: e} }},
	{"logout", "Delete and revoke a remote server's OAuth tokens.", func(e *env) runner { return &AuthCommand{env: e, logout: true} }},
	{"replay", "Show a session's status, catalog and approvals as they were after an event; --verify re-runs the decider on the recorded inputs.", func(e *env) runner { return &ReplayCommand{env: e} }},
	{"export", "Write a session as sealed JSONL (a digest chained over every line; --sign adds your signature).", func(e *env) runner { return &ExportCommand{env: e} }},
	{"import", "Read an exported session into this journal: refuses any edit to it and verifies that it replays.", func(e *env) runner { return &ImportCommand{env: e} }},
	{"why", "Was the tool in the catalog then, and if not, the chain of reasons.", func(e *env) runner { return &WhyCommand{env: e} }},
	{"timeline", "Write a session as one self-contained HTML page: a swimlane per server over time.", func(e *env) runner { return &TimelineCommand{env: e} }},
	{"sessions", "List sessions: start, last event, events, servers seen, how it ended.", func(e *env) runner { return &SessionsCommand{env: e} }},
	{"log", "Print events in journal order, one a line; --follow goes on with new ones as they land.", func(e *env) runner { return &LogCommand{env: e} }},
	{"ship", "Ship the journal to an OpenTelemetry collector (OTLP/HTTP or gRPC): spans per call and connection, a log record per event, metrics, from a durable cursor.", func(e *env) runner { return &ShipCommand{env: e} }},
	{"verify", "Check every record, checkpoint and archive of the journal.", func(e *env) runner { return &VerifyCommand{env: e} }},
	{"archive", "Move sessions that ended before the cutoff into a sealed archive journal.", func(e *env) runner { return &ArchiveCommand{env: e} }},
	{"salvage", "Copy every event of a damaged journal that still reads and verifies into a new journal, and report what was lost.", func(e *env) runner { return &SalvageCommand{env: e} }},
}

// commandSummary is the summary line of the command name, or "".
func commandSummary(name string) string {
	for _, c := range commands {
		if c.name == name {
			return c.summary
		}
	}
	return ""
}

// run parses the command line with the command tree (rootCommand), runs
// the command, and turns what went wrong into an error exitCode maps.
func (e *env) run(ctx context.Context, args []string) error {
	if args == nil {
		args = []string{} // cobra reads os.Args when given nil
	}
	root := e.rootCommand(ctx)
	args = rootDoubleDash(root, args)
	if len(args) > 0 && strings.HasPrefix(args[0], cobra.ShellCompRequestCmd) {
		e.describeCommands(root) // flag names for completion
	}
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var ce *commandError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		err = ce.err
	default:
		// The command tree refused the line before a command ran: a bad
		// flag before the command, an unknown help topic.
		var ue *usageError
		if !errors.As(err, &ue) {
			err = &usageError{msg: err.Error()}
		}
	}
	err = damagedHint(err, e.journal)
	if err != nil && ctx.Err() != nil {
		return &interruptedError{err: err}
	}
	return err
}

// commandError carries a command's own error out of the command tree, so
// run tells it from the tree's errors about the command line.
type commandError struct{ err error }

func (e *commandError) Error() string { return e.err.Error() }

// interruptedError is the error of a command that Ctrl-C (or SIGTERM)
// cut short. It exits with status 130, as a shell reports a command
// killed by SIGINT.
type interruptedError struct{ err error }

func (e *interruptedError) Error() string { return "interrupted: " + e.err.Error() }
func (e *interruptedError) Unwrap() error { return e.err }

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
