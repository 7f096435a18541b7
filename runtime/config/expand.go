package config

import (
	"errors"
	"fmt"
	"strings"
)

// ${NAME} expansion in a server entry's command, args, env, url and
// headers, and how an unresolved one is reported.

// missingVarError is an unresolved ${NAME}.
type missingVarError struct{ name string }

func (e *missingVarError) Error() string { return "${" + e.name + "} is not set" }

// errMalformedVar is a "${" that does not start ${NAME} or ${NAME:-default}.
var errMalformedVar = errors.New("malformed ${...}")

// expand replaces ${NAME} and ${NAME:-default} in s using lookup. The
// default applies when NAME is unset or empty (as in the shell) and is
// taken literally up to the first "}". A "$" not followed by "{" is kept.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var sb strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			sb.WriteString(s)
			return sb.String(), nil
		}
		sb.WriteString(s[:i])
		s = s[i+2:]
		n := 0
		for n < len(s) && (s[n] == '_' || 'A' <= s[n] && s[n] <= 'Z' || 'a' <= s[n] && s[n] <= 'z' || n > 0 && '0' <= s[n] && s[n] <= '9') {
			n++
		}
		if n == 0 {
			return "", errMalformedVar
		}
		name, rest := s[:n], s[n:]
		var def string
		hasDef := false
		switch {
		case strings.HasPrefix(rest, "}"):
			rest = rest[1:]
		case strings.HasPrefix(rest, ":-"):
			j := strings.IndexByte(rest, '}')
			if j < 0 {
				return "", errMalformedVar
			}
			def, hasDef, rest = rest[2:j], true, rest[j+1:]
		default:
			return "", errMalformedVar
		}
		v, ok := "", false
		if lookup != nil {
			v, ok = lookup(name)
		}
		switch {
		case ok && (v != "" || !hasDef):
			sb.WriteString(v)
		case hasDef:
			sb.WriteString(def)
		default:
			return "", &missingVarError{name}
		}
		s = rest
	}
}

func varProblem(err error, where string, scoped bool) string {
	var me *missingVarError
	switch {
	case !errors.As(err, &me):
		return where + ` has a malformed ${...}: write ${NAME} or ${NAME:-default}`
	case scoped:
		return fmt.Sprintf(`%s uses ${%s}, which the server's "env" block does not set: add %q to "env" (headers and url read only the server's own env, never mcpledger's environment)`, where, me.name, me.name)
	}
	return fmt.Sprintf(`%s uses ${%s}, which is not set: set %s in mcpledger's environment or write ${%s:-default}`, where, me.name, me.name, me.name)
}
