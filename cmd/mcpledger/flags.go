package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
)

// commandFlags is a command's flag set with the common flags every
// journal command takes. Commands add their own flags to FlagSet (a
// pflag set: --name VALUE, --name=VALUE, -h and --help), then call Parse
// or parse, which accept flags anywhere among the positional arguments.
type commandFlags struct {
	*pflag.FlagSet
	env      *env
	synopsis string
	journal  string
}

// errDescribed is what Parse returns to a command run by describeCommand:
// its flags are defined, and it must stop there, before doing anything.
var errDescribed = errors.New("flags described")

// newCommandFlags returns the flag set of command name, whose synopsis
// (positional arguments and flags) is shown in its help, with the common
// flags registered.
func (e *env) newCommandFlags(name, synopsis string) *commandFlags {
	f := &commandFlags{FlagSet: pflag.NewFlagSet(name, pflag.ContinueOnError), env: e, synopsis: synopsis}
	f.SetOutput(io.Discard) // Parse returns its errors; help is printed by printHelp
	f.Usage = func() { f.printHelp(e.stderr) }
	f.StringVar(&f.journal, "journal", "", "journal `PATH` (env MCPLEDGER_JOURNAL, default $XDG_STATE_HOME/mcpledger/journal.db)")
	return f
}

// Parse parses args: flags before, after or among the positional
// arguments, which f.Args returns ("--" ends the flags). -h or --help
// prints the command's help on stdout and returns the standard library's
// flag.ErrHelp, which callers test for (the command returns it: exit 0). A bad flag prints the help on stderr
// and returns a usage error. A single-dash long flag (-json) is read as
// its double-dash form (--json), as the standard library's flag sets did.
func (f *commandFlags) Parse(args []string) error {
	if f.env.describe != nil {
		f.env.describe(f)
		return errDescribed
	}
	usage := f.Usage
	f.Usage = func() {} // pflag calls it on --help; printed below, once
	err := f.FlagSet.Parse(doubleDash(f.FlagSet, args))
	f.Usage = usage
	switch {
	case errors.Is(err, pflag.ErrHelp):
		f.printHelp(f.env.stdout)
		return flag.ErrHelp
	case err != nil:
		f.Usage()
		return &usageError{msg: f.Name() + ": " + err.Error()}
	}
	return nil
}

// parse parses args, which must hold flags only: a positional argument is
// a usage error.
func (f *commandFlags) parse(args []string) error {
	if err := f.Parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		f.Usage()
		return usageErrorf("%s: unexpected argument %q", f.Name(), f.Arg(0))
	}
	return nil
}

// oneArg returns the one positional argument Parse left, or def when
// there is none; a second one is a usage error.
func (f *commandFlags) oneArg(def string) (string, error) {
	switch f.NArg() {
	case 0:
		return def, nil
	case 1:
		return f.Arg(0), nil
	}
	f.Usage()
	return "", usageErrorf("%s: unexpected argument %q", f.Name(), f.Arg(1))
}

// doubleDash rewrites each single-dash long flag that fs defines (-json,
// -o FILE, -until=5) to its double-dash form, which pflag requires; it
// leaves flag values, positional arguments and everything after "--"
// alone.
func doubleDash(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) < 2 || a[0] != '-' {
			out = append(out, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		fl := fs.Lookup(name)
		if fl != nil && a[1] != '-' {
			a = "-" + a
		}
		out = append(out, a)
		if fl != nil && fl.NoOptDefVal == "" && !hasValue && i+1 < len(args) {
			i++ // the flag's value, taken as it is
			out = append(out, args[i])
		}
	}
	return out
}

// printHelp writes the command's help: its usage line, what it does, and
// its flags.
func (f *commandFlags) printHelp(w io.Writer) {
	fmt.Fprintln(w, strings.TrimSpace("usage: mcpledger "+f.Name()+" "+f.synopsis))
	if s := commandSummary(f.Name()); s != "" {
		fmt.Fprintf(w, "\n%s\n", s)
	}
	fmt.Fprint(w, "\nflags:\n")
	fs := pflag.NewFlagSet(f.Name(), pflag.ContinueOnError)
	fs.AddFlagSet(f.FlagSet)
	fs.BoolP("help", "h", false, "print this help")
	printFlags(w, fs)
}

// printFlags writes the flags of fs, sorted, one a line: the flag and its
// value's name in one column, then what it does and its default.
func printFlags(w io.Writer, fs *pflag.FlagSet) {
	type row struct{ flag, usage string }
	var rows []row
	width := 0
	short := false // a one-letter flag: long-only ones are indented past "-x, "
	fs.VisitAll(func(fl *pflag.Flag) { short = short || fl.Shorthand != "" || len(fl.Name) == 1 })
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Hidden {
			return
		}
		name, usage := pflag.UnquoteUsage(fl)
		s := "--" + fl.Name
		switch {
		case len(fl.Name) == 1:
			s = "-" + fl.Name
		case fl.Shorthand != "":
			s = "-" + fl.Shorthand + ", " + s
		case short:
			s = "    " + s
		}
		if name != "" {
			s += " " + name
		}
		switch fl.DefValue {
		case "", "0", "false", "[]", "0s":
		default:
			usage += fmt.Sprintf(" (default %s)", fl.DefValue)
		}
		rows = append(rows, row{s, usage})
		width = max(width, len(s))
	})
	for _, r := range rows {
		fmt.Fprintf(w, "  %-*s  %s\n", width, r.flag, r.usage)
	}
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
