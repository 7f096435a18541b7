package main

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mcpledger/mcpledger/store"
)

// describeCommands tells each table command's cobra command the flags its
// Run declares, for completion (cobra completes their names; argCompletion
// what its argument is): it runs each command in an env whose describe
// hook stops it at Parse, before it does anything.
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
	if err := c.newRunner(d).Run(context.Background(), nil); !errors.Is(err, errDescribed) {
		return nil
	}
	return fs
}
