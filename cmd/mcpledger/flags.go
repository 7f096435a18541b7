package main

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
)

// commandFlags is a command's flag set with the common flags every
// journal command takes. Commands add their own flags to FlagSet.
type commandFlags struct {
	*flag.FlagSet
	env     *env
	journal string
}

// newCommandFlags returns the flag set of command name, whose synopsis
// (flags only) is shown in its help, with the common flags registered.
func (e *env) newCommandFlags(name, synopsis string) *commandFlags {
	f := &commandFlags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), env: e}
	f.SetOutput(e.stderr)
	f.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: mcpledger %s %s\n\nflags:\n", name, synopsis)
		f.PrintDefaults()
	}
	f.StringVar(&f.journal, "journal", "", "journal `PATH` (env MCPLEDGER_JOURNAL, default $XDG_STATE_HOME/mcpledger/journal.db)")
	return f
}

// parse parses args, which must hold flags only. A bad flag or a stray
// argument is a usage error; -h returns flag.ErrHelp.
func (f *commandFlags) parse(args []string) error {
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{msg: err.Error()}
	}
	if f.NArg() > 0 {
		f.Usage()
		return usageErrorf("%s: unexpected argument %q", f.Name(), f.Arg(0))
	}
	return nil
}

// journalPath returns the journal's path and where that came from: the
// --journal flag, $MCPLEDGER_JOURNAL, or the XDG state default.
func (f *commandFlags) journalPath() (path, from string, err error) {
	defer func() { f.env.journal = path }()
	if f.journal != "" {
		return f.journal, "--journal", nil
	}
	if p := f.env.getenv("MCPLEDGER_JOURNAL"); p != "" {
		return p, "$MCPLEDGER_JOURNAL", nil
	}
	if d := f.env.getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "mcpledger", "journal.db"), "$XDG_STATE_HOME", nil
	}
	home := f.env.getenv("HOME")
	if home == "" {
		return "", "", errors.New("no journal path: set --journal PATH, MCPLEDGER_JOURNAL, XDG_STATE_HOME or HOME")
	}
	return filepath.Join(home, ".local", "state", "mcpledger", "journal.db"), "the default", nil
}
