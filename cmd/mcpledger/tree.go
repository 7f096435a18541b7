package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
				err := c.newRunner(e).Run(ctx, args)
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
