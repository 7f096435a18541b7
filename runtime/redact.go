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

// secrets returns the resolved values that must never reach the journal:
// every header value (and, for "Bearer X"-style values, X alone), and the
// env values whose key names a secret or whose value looks like a token.
// Plain settings (LOG_LEVEL=debug, REGION=eu-west-1) are not secrets and
// would otherwise blank unrelated text in results.
func (s *ServerSpec) secrets() []string {
	var out []string
	for _, kv := range s.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && (secretKey(k) || tokenLike(v)) {
			out = append(out, v)
		}
	}
	for _, v := range s.Headers {
		out = append(out, v)
		if _, cred, ok := strings.Cut(v, " "); ok {
			out = append(out, cred)
		}
	}
	return out
}

var secretKeyParts = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "KEY", "AUTH", "CREDENTIAL", "COOKIE", "SESSION", "PRIVATE", "SIGNATURE"}

// secretKey reports whether an env key names a secret.
func secretKey(k string) bool {
	k = strings.ToUpper(k)
	for _, p := range secretKeyParts {
		if strings.Contains(k, p) {
			return true
		}
	}
	return false
}

// tokenLike reports whether v looks like a credential: long, one word, and
// mixing letters and digits.
func tokenLike(v string) bool {
	if len(v) < 16 || strings.ContainsAny(v, " /\\") {
		return false
	}
	var letters, digits bool
	for _, r := range v {
		switch {
		case r >= '0' && r <= '9':
			digits = true
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			letters = true
		}
	}
	return letters && digits
}
