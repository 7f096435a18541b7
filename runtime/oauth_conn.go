package runtime

import (
	"net/http"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/guard"
	"github.com/mcpledger/mcpledger/runtime/oauth"
)

// A remote connection's sign-in. With Options.OAuthStore set, every
// request of an http or sse attempt goes through an oauth.Transport: it
// carries the server's stored access token, refreshes it when it expires
// or when the server answers 401 (once per request), and writes refreshed
// tokens back to the store. What it does is journaled here:
//
//   - a refresh as auth.refreshed, a failed one as auth.failed (phase
//     refresh);
//   - a 401 that no stored token can answer marks the connection as
//     needing a sign-in: its failure is then journaled with class auth,
//     which the decider turns into failed/needs_auth at once (no backoff:
//     retrying cannot sign in). `mcpledger login NAME` journals
//     auth.signed_in, which relaunches it.
//
// The tokens themselves reach neither the journal nor a log: each one the
// transport loads or refreshes is added to the connection's redactor
// before any request carries it.

// authTransport wraps base with the sign-in of the connection's server,
// or returns base when the Manager has no token store.
func (c *conn) authTransport(base http.RoundTripper) http.RoundTripper {
	st := c.m.opts.OAuthStore
	if st == nil {
		return base
	}
	secret := ""
	if c.spec.OAuth != nil {
		secret = c.spec.OAuth.ClientSecret
	}
	return oauth.NewTransport(oauth.TransportOptions{
		Server: c.server, URL: c.spec.URL, Store: st, Base: base, ClientSecret: secret,
		Logger: c.m.log,
		OnSecrets: func(secrets []string) {
			red := guard.NewRedactor(append(c.spec.Secrets(), secrets...))
			c.red.Store(&red)
		},
		OnNeedsAuth: func(reason string) { c.needsAuth.Store(&reason) },
		OnRefreshed: func(expiry time.Time, scopes []string) {
			c.needsAuth.Store(nil)
			ev := &events.AuthRefreshed{Issuer: c.issuer(), Scopes: scopes}
			if !expiry.IsZero() {
				ev.ExpiresAt = expiry.UnixNano()
			}
			c.m.observe(c, ev)
		},
		OnRefreshFailed: func(err error) {
			c.m.observe(c, &events.AuthFailed{Phase: events.AuthPhaseRefresh, Issuer: c.issuer(), Error: err.Error()})
		},
	})
}

// issuer is the issuer of the server's stored sign-in, "" when unknown.
func (c *conn) issuer() string {
	e, err := c.m.opts.OAuthStore.Get(c.server, c.spec.URL)
	if err != nil {
		return ""
	}
	return e.Issuer
}

// authClass returns cerr, or, when the server refused the connection for
// want of a sign-in, a failure of class auth that says so and names the
// command that signs in.
func (c *conn) authClass(cerr events.ClassifiedError) events.ClassifiedError {
	r := c.needsAuth.Load()
	if r == nil {
		return cerr
	}
	return events.ClassifiedError{Class: events.ErrAuth,
		Message: "needs a sign-in (" + *r + "): run `mcpledger login " + c.server + "`"}
}
