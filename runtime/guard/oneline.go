package guard

import "strings"

// OneLine returns a name that comes from outside (an approver, a client's
// implementation name and version) as the journal keeps it: control
// characters removed, at most 64 bytes.
func OneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}
