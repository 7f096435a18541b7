package oauth

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/oauth2"
)

// Sentinel errors. Every error this package returns that has one of these
// causes wraps it (test with errors.Is); the message around it names the
// server and says what to do.
var (
	// ErrNeedsAuth: the server asks for authorization and there is no
	// usable token (none stored, expired without a refresh token, the
	// refresh refused). The cure is `mcpledger login NAME`.
	ErrNeedsAuth = errors.New("oauth: sign-in needed")
	// ErrInsufficientScope: the server answered 403 insufficient_scope
	// to a request made with a stored token, outside an interactive login.
	ErrInsufficientScope = errors.New("oauth: insufficient scope")
	// ErrConsentDenied: the user (or the authorization server) refused
	// the authorization request (error=access_denied on the callback).
	ErrConsentDenied = errors.New("oauth: consent denied")
	// ErrStateMismatch: the callback's state is not the one sent in the
	// authorization URL (a stale tab or a forged redirect).
	ErrStateMismatch = errors.New("oauth: state mismatch")
	// ErrCallbackPort: the loopback redirect port could not be listened on.
	ErrCallbackPort = errors.New("oauth: callback port unavailable")
	// ErrStepUpLimit: the server kept asking for more scope after the
	// bounded number of step-up attempts.
	ErrStepUpLimit = errors.New("oauth: step-up limit reached")
	// ErrNotFound: the store holds no entry for (server name, resource URL).
	ErrNotFound = errors.New("oauth: no stored sign-in")
	// ErrStore: the token store file cannot be read, parsed or written,
	// or is readable by other users.
	ErrStore = errors.New("oauth: token store unusable")
	// ErrNoChallenge: login reached the server, which never asked for
	// authorization, so there is nothing to sign in to.
	ErrNoChallenge = errors.New("oauth: server did not ask for authorization")
)

// loginHint is the command that fixes ErrNeedsAuth for server name.
func loginHint(name string) string { return "run `mcpledger login " + name + "`" }

// needsAuthError wraps ErrNeedsAuth with the server name, the reason and
// the command to run.
func needsAuthError(name, reason string) error {
	return fmt.Errorf("%w: server %s (%s): %s", ErrNeedsAuth, name, reason, loginHint(name))
}

// describeTokenErr renders an error from a token endpoint without the
// response body x/oauth2 puts in RetrieveError.Error (a misbehaving
// server could echo a token or a code there): the status, the OAuth error
// code and its description only.
func describeTokenErr(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		var b strings.Builder
		b.WriteString("token endpoint refused")
		if re.Response != nil {
			fmt.Fprintf(&b, " (HTTP %d)", re.Response.StatusCode)
		}
		if re.ErrorCode != "" {
			b.WriteString(": " + re.ErrorCode)
		}
		if re.ErrorDescription != "" {
			b.WriteString(": " + re.ErrorDescription)
		}
		return b.String()
	}
	return err.Error()
}
