package projections

import (
	"slices"

	"github.com/mcpledger/mcpledger/events"
)

// AuthStatus is a remote server's OAuth authorization as one session's
// events tell it: whether it waits for a sign-in, and what the session's
// auth.* events recorded (never a token: the events hold none).
type AuthStatus struct {
	// NeedsAuth is true while the server is failed with reason needs_auth:
	// it waits for a sign-in (`mcpledger login NAME`).
	NeedsAuth bool `json:"needs_auth"`
	// SignedIn is true after an auth.signed_in with no auth.signed_out
	// since.
	SignedIn bool `json:"signed_in"`
	// Issuer is the authorization server of the latest sign-in, refresh
	// or sign-out that named one.
	Issuer string `json:"issuer,omitempty"`
	// Scopes, ClientKind and ExpiresAt (unix ns, 0: no expiry given) are
	// those of the tokens held: the latest sign-in's, the scopes and
	// expiry updated by each refresh; cleared by a sign-out.
	Scopes     []string `json:"scopes,omitempty"`
	ClientKind string   `json:"client_kind,omitempty"`
	ExpiresAt  int64    `json:"expires_at,omitempty"`
	// SignedInAt is when the latest sign-in was recorded (unix ns); StepUp
	// says it widened the scopes of an earlier one.
	SignedInAt int64 `json:"signed_in_at,omitempty"`
	StepUp     bool  `json:"step_up,omitempty"`
	// RefreshedAt is when the tokens were last refreshed (unix ns).
	RefreshedAt int64 `json:"refreshed_at,omitempty"`
	// SignedOutAt is when the latest sign-out was recorded (unix ns);
	// Revoked and RevokeError say how its revocation went.
	SignedOutAt int64  `json:"signed_out_at,omitempty"`
	Revoked     bool   `json:"revoked,omitempty"`
	RevokeError string `json:"revoke_error,omitempty"`
	// Failure is the latest auth.failed since the last successful sign-in
	// or refresh (nil: none).
	Failure *AuthFailure `json:"failure,omitempty"`
}

// AuthFailure is one recorded auth.failed.
type AuthFailure struct {
	Phase  string `json:"phase"`
	Issuer string `json:"issuer,omitempty"`
	Error  string `json:"error"`
	At     int64  `json:"at"`
}

// authRecord is what a server's record keeps of its auth.* events
// (absent until the first one).
type authRecord struct {
	AuthStatus
	seen bool // an auth.* event named the server
}

// applyAuth folds one auth.* event into s.
func (s *server) applyAuth(p events.Payload, t int64) {
	a := &s.auth
	a.seen = true
	switch p := p.(type) {
	case *events.AuthSignedIn:
		a.SignedIn, a.Issuer, a.Scopes, a.ClientKind, a.ExpiresAt = true, p.Issuer, slices.Clone(p.Scopes), p.ClientKind, p.ExpiresAt
		a.SignedInAt, a.StepUp, a.Failure = t, p.StepUp, nil
	case *events.AuthRefreshed:
		if p.Issuer != "" {
			a.Issuer = p.Issuer
		}
		a.Scopes, a.ExpiresAt, a.RefreshedAt, a.Failure = slices.Clone(p.Scopes), p.ExpiresAt, t, nil
	case *events.AuthFailed:
		a.Failure = &AuthFailure{Phase: p.Phase, Issuer: p.Issuer, Error: p.Error, At: t}
	case *events.AuthSignedOut:
		if p.Issuer != "" {
			a.Issuer = p.Issuer
		}
		a.SignedIn, a.Scopes, a.ClientKind, a.ExpiresAt, a.StepUp = false, nil, "", 0, false
		a.SignedOutAt, a.Revoked, a.RevokeError = t, p.Revoked, p.RevokeError
	}
}

// authStatus returns s's auth view for its status row: nil for a server
// that neither waits for a sign-in nor had an auth.* event this session.
func (s *server) authStatus() *AuthStatus {
	needs := s.state == events.StateFailed && s.reason == events.ReasonNeedsAuth
	if !needs && !s.auth.seen {
		return nil
	}
	out := s.auth.AuthStatus
	out.NeedsAuth = needs
	out.Scopes = slices.Clone(out.Scopes)
	if out.Failure != nil {
		f := *out.Failure
		out.Failure = &f
	}
	return &out
}
