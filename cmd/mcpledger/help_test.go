package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The -update flag rewrites the golden files under testdata/. Other
// tests of the package may declare it too: register it only when nobody
// has (package-level vars initialize before init functions run).
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files under testdata/")
	}
}

func updateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// golden compares got with testdata/NAME, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if updateGolden() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (go test -run %s -update rewrites it):\n%s", name, path, t.Name(), got)
	}
}

// helpCommands is every command that has a help page: the command table
// and the commands the command tree adds.
func helpCommands() []string {
	names := []string{"help", "version", "completion"}
	for _, c := range commands {
		names = append(names, c.name)
	}
	return names
}

// TestHelpOfEveryCommand: help CMD, CMD --help and CMD -h print the same
// help once, on stdout, and exit 0, for every command; the help is the
// golden testdata/help/CMD.txt. (help approve used to print the usage
// twice, on stderr, and exit 2.)
func TestHelpOfEveryCommand(t *testing.T) {
	for _, name := range helpCommands() {
		t.Run(name, func(t *testing.T) {
			var first string
			for _, args := range [][]string{{"help", name}, {name, "--help"}, {name, "-h"}, {name, "-h", "-h"}, {"-h", name}} {
				r := runCLI(t, args...)
				if r.err != nil || r.stderr != "" {
					t.Errorf("%q: %v (exit %d), stderr:\n%s", args, r.err, codeOf(r.err), r.stderr)
				}
				if n := strings.Count(r.stdout, "usage: mcpledger "+name); n != 1 {
					t.Errorf("%q: the usage line is printed %d times:\n%s", args, n, r.stdout)
				}
				if first == "" {
					first = r.stdout
					golden(t, filepath.Join("help", name+".txt"), r.stdout)
				} else if r.stdout != first {
					t.Errorf("%q prints another help than help %s:\n%s", args, name, r.stdout)
				}
			}
		})
	}
}

// TestTopLevelHelp: help, -h, --help, -h -h and help help exit 0 with the
// help on stdout (help help and -h -h used to overflow the stack).
func TestTopLevelHelp(t *testing.T) {
	top := runCLI(t, "help")
	if top.err != nil || top.stderr != "" {
		t.Fatalf("help: %v\n%s", top.err, top.stderr)
	}
	golden(t, "help/mcpledger.txt", top.stdout)
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"-h", "-h"}, {"--help", "--help"}} {
		r := runCLI(t, args...)
		if r.err != nil || r.stdout != top.stdout || r.stderr != "" {
			t.Errorf("%q: %v, stderr %q, stdout differs from help's: %v", args, r.err, r.stderr, r.stdout != top.stdout)
		}
	}
	for _, args := range [][]string{{"help", "help"}, {"help", "help", "-h"}} {
		r := runCLI(t, args...)
		if r.err != nil || !strings.HasPrefix(r.stdout, "usage: mcpledger help [COMMAND]") {
			t.Errorf("%q: %v\n%s", args, r.err, r.stdout)
		}
	}
	// Every command of the table is in the top-level help, and has a
	// summary for its own help and for completion.
	for _, c := range commands {
		if !strings.Contains(top.stdout, "\n  "+c.name+" ") && !strings.Contains(top.stdout, "| "+c.name+" ") &&
			!strings.Contains(top.stdout, "\n  "+c.name+"\n") && !strings.Contains(top.stdout, "| "+c.name+"\n") {
			t.Errorf("command %s is not in the top-level help", c.name)
		}
		if c.summary == "" {
			t.Errorf("command %s has no summary", c.name)
		}
	}
}

// TestHelpErrors: help of an unknown command, or a mistyped command, is a
// usage error (exit 2) that suggests the command meant.
func TestHelpErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "statsu"}, `help: unknown command "statsu" (did you mean "status"?)`},
		{[]string{"statsu"}, `unknown command "statsu" (did you mean "status"?)`},
		{[]string{"help", "nothing-like-it"}, `help: unknown command "nothing-like-it"`},
		{[]string{"help", "status", "log"}, `accepts at most 1 arg(s), received 2`},
		{[]string{"--bogus", "status"}, `unknown flag: --bogus`},
		{[]string{"version", "extra"}, `unknown command "extra" for "mcpledger version"`},
	} {
		r := runCLI(t, c.args...)
		if codeOf(r.err) != 2 || r.err.Error() != c.want {
			t.Errorf("%q: %v (exit %d), want %q (exit 2)", c.args, r.err, codeOf(r.err), c.want)
		}
	}
}

// TestDescribeEveryCommand: every command's Run declares its flags and
// reaches Parse before it does anything else (describeCommand, which
// completion relies on, stops it there), with the common --journal.
func TestDescribeEveryCommand(t *testing.T) {
	for _, c := range commands {
		fs := describeCommand(c)
		if fs == nil {
			t.Errorf("%s: Run did not reach Parse in describe mode", c.name)
			continue
		}
		if fs.Lookup("journal") == nil {
			t.Errorf("%s: no --journal flag", c.name)
		}
	}
}
