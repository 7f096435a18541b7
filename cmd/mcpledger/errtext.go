package main

import (
	"fmt"
	"io"
	"regexp"
)

// packagePrefix matches the prefix of a sentinel error of a package
// ("runtime: ", "store: ") where a wrapped message part starts, after
// the ": " that wraps it. The packages keep their prefixes (they tell a
// developer where an error comes from); a user reads what happened and
// what to do, so errorText drops them.
var (
	packagePrefix = regexp.MustCompile(`: (?:runtime|store|oauth|replay|config|gateway|fsm|events|control|projections|guard|trust): `)
	leadingPrefix = regexp.MustCompile(`^(runtime|store|oauth|replay|config|gateway|fsm|events|control|projections|guard|trust): `)
)

// errorText is err as the CLI prints it, without package prefixes. At
// the start of the message a prefix that is also a command's name
// (replay, trust) is the command's own ("replay: unexpected argument")
// and stays.
func errorText(err error) string {
	s := err.Error()
	for {
		t := packagePrefix.ReplaceAllString(s, ": ")
		if m := leadingPrefix.FindStringSubmatch(t); m != nil && !isCommand(m[1]) {
			t = t[len(m[0]):]
		}
		if t == s {
			return s
		}
		s = t
	}
}

func isCommand(name string) bool {
	for _, c := range commands {
		if c.name == name {
			return true
		}
	}
	return false
}

// reportError prints err on w as the CLI reports a failed command, and
// returns the exit status it means.
func reportError(w io.Writer, err error) int {
	fmt.Fprintln(w, "mcpledger:", errorText(err))
	return exitCode(err)
}
