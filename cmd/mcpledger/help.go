package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mcpledger/mcpledger/store"
)

// rootCommand is the command tree of one command line: the command table
// under a root that takes the common flags, plus help, version,
// completion and the demo's hidden server. cobra dispatches, completes
// and suggests; each command parses its own flags (DisableFlagParsing),
// as its Run declares them (newCommandFlags).
func (e *env) rootCommand(ctx context.Context) *cobra.Command {
	var root *cobra.Command
	root = &cobra.Command{
		Use:           "mcpledger",
		Short:         "runs the MCP servers an agent depends on and keeps a ledger of everything that happens to them",
		SilenceErrors: true,
		SilenceUsage:  true,
		// A word that names no command arrives here as an argument.
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				fmt.Fprint(e.stderr, usage)
				return usageErrorf("unknown command %q%s", args[0], suggest(root, args[0]))
			}
			return nil
		},
		RunE: func(c *cobra.Command, _ []string) error {
			if v, _ := c.Flags().GetBool("version"); v {
				_, err := fmt.Fprint(e.stdout, thisBuild())
				return err
			}
			fmt.Fprint(e.stderr, usage)
			return usageErrorf("no command")
		},
		SuggestionsMinimumDistance: 2,
	}
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	// No cobra template (SetVersionTemplate and the like): executing one
	// links text/template, whose MethodByName stops the linker from
	// dropping unused methods (+3.9 MB on this binary).
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		fmt.Fprint(e.stderr, usage)
		return &usageError{msg: err.Error()}
	})
	// The common flags, defined here so that they may come before the
	// command too: cobra then knows that --journal takes a value. The
	// command's own flag set parses them.
	root.Flags().String("journal", "", "journal `PATH` (env MCPLEDGER_JOURNAL)")
	root.PersistentFlags().BoolP("help", "h", false, "print this help")
	root.Flags().Bool("version", false, "print the version, the commit and the Go version")
	root.SetHelpFunc(e.help)
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [COMMAND]",
		Short: "Print the top-level help, or a command's help.",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				e.help(root, nil)
				return nil
			}
			sub, _, err := root.Find(args)
			if err != nil || sub == root {
				return usageErrorf("help: unknown command %q%s", args[0], suggest(root, args[0]))
			}
			e.help(sub, nil)
			return nil
		},
		ValidArgsFunction: func(_ *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
			var names []cobra.Completion
			for _, c := range commands {
				if len(args) == 0 && strings.HasPrefix(c.name, prefix) {
					names = append(names, cobra.CompletionWithDesc(c.name, c.summary))
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
	})
	for _, c := range commands {
		root.AddCommand(&cobra.Command{
			Use:                c.name,
			Short:              c.summary,
			DisableFlagParsing: true,
			RunE: func(_ *cobra.Command, args []string) error {
				err := c.new(e).Run(ctx, args)
				if err == nil || errors.Is(err, flag.ErrHelp) {
					return nil // on --help, Parse printed the command's help
				}
				return &commandError{err: err}
			},
		})
	}
	root.AddCommand(e.versionCommand())
	// cobra's completion command, with its bash, zsh, fish and powershell
	// subcommands; a shell it does not know is a usage error.
	root.InitDefaultCompletionCmd()
	if comp, _, err := root.Find([]string{"completion"}); err == nil && comp != root {
		comp.Use = "completion bash|zsh|fish|powershell"
		comp.Args = cobra.ArbitraryArgs
		comp.RunE = func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("completion: name the shell: bash, zsh, fish or powershell")
			}
			return usageErrorf("completion: no completion for %q; there is for bash, zsh, fish and powershell", args[0])
		}
	}
	root.AddCommand(&cobra.Command{
		Use:    demoServerCmd + " KIND",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := runDemoServer(ctx, args[0]); err != nil {
				return &commandError{err: err}
			}
			return nil
		},
	})
	return root
}

// rootDoubleDash rewrites the single-dash spellings of the common flags
// before the command (-journal X, -help, -version) to the double-dash ones
// cobra reads. The command's own arguments are its own to parse.
func rootDoubleDash(root *cobra.Command, args []string) []string {
	fs := pflag.NewFlagSet("mcpledger", pflag.ContinueOnError)
	fs.AddFlagSet(root.Flags())
	fs.AddFlagSet(root.PersistentFlags())
	n := 0 // the flags and their values before the command
	for n < len(args) && len(args[n]) > 1 && args[n][0] == '-' && args[n] != "--" {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[n], "-"), "=")
		if fl := fs.Lookup(name); fl != nil && fl.NoOptDefVal == "" && !hasValue {
			n++
		}
		n++
	}
	n = min(n, len(args))
	return append(doubleDash(fs, args[:n]), args[n:]...)
}

// suggest is ` (did you mean "x"?)` for a mistyped command name, or "".
func suggest(root *cobra.Command, typed string) string {
	if s := root.SuggestionsFor(typed); len(s) > 0 {
		return fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return ""
}

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
			_ = c.new(e).Run(context.Background(), []string{"--help"})
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

// describeCommands tells each table command's cobra command the flags its
// Run declares, for flag-name completion: it runs each command in an env
// whose describe hook stops it at Parse, before it does anything.
func (e *env) describeCommands(root *cobra.Command) {
	for _, c := range commands {
		sub, _, err := root.Find([]string{c.name})
		if err != nil {
			continue
		}
		f := describeCommand(c)
		if f == nil {
			continue
		}
		f.VisitAll(func(fl *pflag.Flag) { _, fl.Usage = pflag.UnquoteUsage(fl) })
		sub.Flags().AddFlagSet(f.FlagSet)
		sub.ValidArgsFunction = func(_ *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if n := len(args); n > 0 {
				if fl := f.Lookup(strings.TrimLeft(args[n-1], "-")); fl != nil && fl.NoOptDefVal == "" && !strings.Contains(args[n-1], "=") {
					return nil, cobra.ShellCompDirectiveDefault // a flag's value: a file, say
				}
			}
			if f.FlagSet.Parse(doubleDash(f.FlagSet, args)) == nil && f.NArg() > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp // its argument is given
			}
			return argCompletion(f.synopsis, prefix)
		}
	}
}

// argCompletion completes a command's positional argument from the first
// word of its synopsis: "last" for a SESSION, directories for a DIR, files
// for a FILE, nothing for a name (TOOL, NAME) or a command that takes none.
func argCompletion(synopsis, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	first, _, _ := strings.Cut(synopsis, " ")
	first = strings.Trim(first, "[]")
	switch {
	case strings.HasPrefix(first, "SESSION"):
		if strings.HasPrefix("last", prefix) {
			return []cobra.Completion{cobra.CompletionWithDesc("last", "the most recent session of run, serve or demo")}, cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	case first == "DIR":
		return nil, cobra.ShellCompDirectiveFilterDirs
	case strings.HasPrefix(first, "FILE"), first == "DAMAGED":
		return nil, cobra.ShellCompDirectiveDefault
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// describeCommand returns the flags c's Run declares, or nil if Run did
// not reach Parse (a bug: TestDescribeEveryCommand).
func describeCommand(c command) *commandFlags {
	var fs *commandFlags
	d := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard,
		getenv: func(string) string { return "" },
		openJournal: func(string, *store.Options) (*store.Journal, error) {
			return nil, errors.New("describing flags: no journal")
		},
		describe: func(f *commandFlags) { fs = f }}
	if err := c.new(d).Run(context.Background(), nil); !errors.Is(err, errDescribed) {
		return nil
	}
	return fs
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
