package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestFlagsAnywhere: flags may come before or after the command and
// before, after or among its arguments, in either spelling (--name VALUE,
// --name=VALUE, -name VALUE): each group of command lines prints the same.
// (mcpledger --journal X status was an unknown command, replay --until 5
// last a usage error.)
func TestFlagsAnywhere(t *testing.T) {
	f := newFixture(t)
	p := f.path
	for _, group := range [][][]string{
		{{"sessions", "--journal", p}, {"--journal", p, "sessions"}, {"-journal", p, "sessions"}, {"-journal=" + p, "sessions"}, {"--journal=" + p, "sessions"}, {"sessions", "-journal", p}, {"sessions", "--journal=" + p}},
		{{"sessions", "--json", "--journal", p}, {"sessions", "-json", "--journal", p}, {"--journal", p, "sessions", "--json"}},
		{{"log", "--server", "github", "--journal", p}, {"--journal", p, "log", "--server", "github"}, {"log", "-server=github", "-journal", p}},
		{{"replay", "last", "--until", "1", "--journal", p}, {"replay", "--until", "1", "last", "--journal", p}, {"--journal", p, "replay", "--until=1", "last"}},
		{{"replay", "--journal", p}, {"replay", "last", "--journal", p}},
		{{"timeline", "last", "-o", "-", "--journal", p}, {"timeline", "-o", "-", "last", "--journal", p}, {"--journal", p, "timeline", "-o=-", "last"}, {"timeline", "--o", "-", "--journal", p, "last"}},
		{{"why", "mcp__github__x", "--session", "last", "--at", "1", "--journal", p}, {"why", "--at", "1", "mcp__github__x", "--journal", p}, {"--journal", p, "why", "--session=last", "--at=1", "mcp__github__x"}},
	} {
		first := runCLI(t, group[0]...)
		if first.err != nil || first.stdout == "" {
			t.Errorf("%q: %v\n%s", group[0], first.err, first.stderr)
			continue
		}
		for _, args := range group[1:] {
			if r := runCLI(t, args...); r.err != nil || r.stdout != first.stdout {
				t.Errorf("%q: %v, stdout:\n%s\nwant, as %q:\n%s", args, r.err, r.stdout, group[0], first.stdout)
			}
		}
	}
}

// TestStrayArguments: an argument a command does not take is a usage
// error that names it, wherever it is; after "--" a flag is an argument.
func TestStrayArguments(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"log", "--", "--json"}, `log: unexpected argument "--json"`},
		{[]string{"replay", "last", "extra"}, `replay: unexpected argument "extra"`},
		{[]string{"replay", "--until", "1", "last", "extra"}, `replay: unexpected argument "extra"`},
		{[]string{"timeline", "last", "extra", "-o", "-"}, `timeline: unexpected argument "extra"`},
		{[]string{"sessions", "--json=maybe"}, `sessions: invalid argument "maybe" for "--json" flag: must be true or false`},
		{[]string{"replay", "--until"}, `replay: flag needs an argument: --until`},
	} {
		r := runCLI(t, append([]string{"--journal", f.path}, c.args...)...)
		if codeOf(r.err) != 2 || r.err.Error() != c.want {
			t.Errorf("%q: %v (exit %d), want %q (exit 2)", c.args, r.err, codeOf(r.err), c.want)
		}
		if !strings.HasPrefix(r.stderr, "usage: mcpledger "+c.args[0]) {
			t.Errorf("%q: stderr does not start with the command's usage:\n%s", c.args, r.stderr)
		}
	}
}

// TestDoubleDash: single-dash long flags become double-dash ones; values
// (even one that looks like a flag), unknown flags, -h, "-" and whatever
// follows "--" are left as they are.
func TestDoubleDash(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.Bool("json", false, "")
	fs.String("args", "", "")
	fs.String("o", "", "")
	fs.Int("width", 0, "")
	for _, c := range []struct{ in, want []string }{
		{[]string{"-json", "-o", "f", "-width=5"}, []string{"--json", "--o", "f", "--width=5"}},
		{[]string{"--args", "-json", "-json"}, []string{"--args", "-json", "--json"}},
		{[]string{"-args", "-", "pos", "-h", "-x", "--json"}, []string{"--args", "-", "pos", "-h", "-x", "--json"}},
		{[]string{"--width", "-5", "-json=false"}, []string{"--width", "-5", "--json=false"}},
		{[]string{"a", "--", "-json", "-o"}, []string{"a", "--", "-json", "-o"}},
		{[]string{"-json", "-args"}, []string{"--json", "--args"}},
		{nil, []string{}},
	} {
		if got := doubleDash(fs, c.in); !slices.Equal(got, c.want) {
			t.Errorf("doubleDash(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// Before the command, only the common flags; the command's arguments
	// are left to it.
	root := (&env{}).rootCommand(t.Context())
	for _, c := range []struct{ in, want []string }{
		{[]string{"-journal", "-x", "-help", "call", "t", "--args", "-journal"}, []string{"--journal", "-x", "--help", "call", "t", "--args", "-journal"}},
		{[]string{"-journal=j", "-version", "-json", "log", "-json"}, []string{"--journal=j", "--version", "-json", "log", "-json"}},
		{[]string{"-journal"}, []string{"--journal"}},
		{[]string{"--", "-help"}, []string{"--", "-help"}},
	} {
		if got := rootDoubleDash(root, c.in); !slices.Equal(got, c.want) {
			t.Errorf("rootDoubleDash(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
