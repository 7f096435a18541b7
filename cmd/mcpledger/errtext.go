package main

import (
	"regexp"
)

// packagePrefix matches the package prefix of a sentinel error
// ("runtime: ", "store: ") where a message part starts: at the start, or
// after the ": " that wraps it. The packages keep their prefixes (they
// tell a developer where an error comes from); a user reads what
// happened and what to do, so errorText drops them.
var packagePrefix = regexp.MustCompile(`(^|: )(?:runtime|store|oauth|replay|config|gateway|fsm|events|control|projections|guard|trust): `)

// errorText is err as the CLI prints it: without package prefixes, and
// without the empty parts and repeated separators that leaves.
func errorText(err error) string {
	s := err.Error()
	for {
		t := packagePrefix.ReplaceAllString(s, "$1")
		if t == s {
			return s
		}
		s = t
	}
}
