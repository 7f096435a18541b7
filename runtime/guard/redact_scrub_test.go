package guard

import (
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// TestScrubAuth: the messages of a failed sign-in and of a failed
// revocation are redacted before they are journaled (they quote URLs and
// the authorization server's answers).
func TestScrubAuth(t *testing.T) {
	const secret = "cs-0123456789abcdef"
	r := NewRedactor([]string{secret})
	f := &events.AuthFailed{Phase: events.AuthPhaseExchange, Error: "token endpoint said: client_secret " + secret + " is wrong"}
	o := &events.AuthSignedOut{RevokeError: "POST https://as.example/revoke?api_key=k-12345678: 500 with " + secret}
	r.Scrub(f)
	r.Scrub(o)
	for _, s := range []string{f.Error, o.RevokeError} {
		if strings.Contains(s, secret) || strings.Contains(s, "k-12345678") || !strings.Contains(s, "[REDACTED sha256:") {
			t.Errorf("not redacted: %q", s)
		}
	}
}
