package runtime

import (
	"bytes"
	"slices"
	"strings"

	"github.com/mcpledger/mcpledger/events"
)

// minSecretLen is the shortest resolved value treated as a secret: shorter
// values (ports, "1", "true") would redact unrelated text.
const minSecretLen = 6

// redactor replaces every occurrence of a server's resolved secrets (env
// and header values) in text bound for the journal with a digest marker.
type redactor struct{ secrets []string }

func newRedactor(secrets []string) redactor {
	var s []string
	for _, v := range secrets {
		if len(v) >= minSecretLen {
			s = append(s, v)
		}
	}
	// Longest first, so a secret containing another is replaced whole.
	slices.SortFunc(s, func(a, b string) int { return len(b) - len(a) })
	return redactor{secrets: s}
}

func (r redactor) redact(b []byte) []byte {
	for _, s := range r.secrets {
		if bytes.Contains(b, []byte(s)) {
			b = bytes.ReplaceAll(b, []byte(s), []byte("[REDACTED "+events.HashValue(s)+"]"))
		}
	}
	return b
}

// secrets returns the resolved values of a server's env and headers.
func (s *ServerSpec) secrets() []string {
	var out []string
	for _, kv := range s.Env {
		if _, v, ok := strings.Cut(kv, "="); ok {
			out = append(out, v)
		}
	}
	for _, v := range s.Headers {
		out = append(out, v)
	}
	return out
}
