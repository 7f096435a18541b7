package events

// The payloads of a remote server's OAuth authorization: auth.signed_in,
// auth.refreshed, auth.failed and auth.signed_out. Each is an input about
// one server (Server on the envelope).
//
// None of them holds a secret: no access or refresh token, authorization
// code, PKCE verifier or client secret, in any field, ever. Tokens live in
// the token store outside the journal; what is journaled is who issued
// them, for which resource and scopes, and until when.

// OAuthConfig is a remote server's "oauth" config object as written
// (runtime/config reads it), journaled inside [ServerConfig]: ClientSecret
// holds the [HashValue] digest of the secret as written, never the secret.
// It is part of the config hash: approvals bind to the client a server
// signs in with.
type OAuthConfig struct {
	ClientID     string `msgpack:"client_id,omitempty" json:"client_id,omitempty"`
	ClientSecret string `msgpack:"client_secret,omitempty" json:"client_secret,omitempty"` // a digest
	// CallbackPort is the loopback port of the redirect URI
	// http://localhost:PORT/callback (0: any free port).
	CallbackPort          int      `msgpack:"callback_port,omitempty" json:"callback_port,omitempty"`
	Scopes                []string `msgpack:"scopes,omitempty" json:"scopes,omitempty"`
	AuthServerMetadataURL string   `msgpack:"auth_server_metadata_url,omitempty" json:"auth_server_metadata_url,omitempty"`
	ClientMetadataURL     string   `msgpack:"client_metadata_url,omitempty" json:"client_metadata_url,omitempty"`
}

// IsZero reports whether o is nil or sets nothing: the same config as no
// "oauth" object.
func (o *OAuthConfig) IsZero() bool {
	return o == nil || o.ClientID == "" && o.ClientSecret == "" && o.CallbackPort == 0 && len(o.Scopes) == 0 &&
		o.AuthServerMetadataURL == "" && o.ClientMetadataURL == ""
}

// How the client identified itself to the authorization server
// (AuthSignedIn.ClientKind).
const (
	// ClientPreRegistered: the config's oauth.clientId (and secret).
	ClientPreRegistered = "pre_registered"
	// ClientMetadataDocument: a client ID metadata document URL
	// (oauth.clientMetadataUrl).
	ClientMetadataDocument = "metadata_document"
	// ClientRegistered: dynamic client registration.
	ClientRegistered = "registered"
)

// Phases of an authorization that can fail (AuthFailed.Phase).
const (
	AuthPhaseDiscover = "discover" // protected-resource or authorization-server metadata
	AuthPhaseRegister = "register" // dynamic client registration
	AuthPhaseConsent  = "consent"  // the browser step: denied, state mismatch, no redirect
	AuthPhaseExchange = "exchange" // the code for tokens
	AuthPhaseRefresh  = "refresh"
	AuthPhaseStepUp   = "step_up" // a 403 insufficient_scope that could not be satisfied
	AuthPhaseStore    = "store"   // the token store could not be read or written
	AuthPhaseRevoke   = "revoke"
)

// AuthSignedIn records a completed authorization-code flow: tokens for
// Resource (the server's resource URL, redacted like a config URL) issued
// by Issuer for Scopes, held in the token store. StepUp is true when the
// sign-in widened the scopes of an earlier one (a 403 insufficient_scope).
// ExpiresAt is the access token's expiry (unix ns; 0 when the server gave
// none). It never holds a token, code, verifier or client secret.
type AuthSignedIn struct {
	Issuer     string   `msgpack:"issuer" json:"issuer"`
	Resource   string   `msgpack:"resource,omitempty" json:"resource,omitempty"`
	Scopes     []string `msgpack:"scopes,omitempty" json:"scopes,omitempty"`
	ClientKind string   `msgpack:"client_kind" json:"client_kind"` // pre_registered, metadata_document, registered
	ExpiresAt  int64    `msgpack:"expires_at,omitempty" json:"expires_at,omitempty"`
	StepUp     bool     `msgpack:"step_up,omitempty" json:"step_up,omitempty"`
}

// AuthRefreshed records that a server's access token was refreshed
// without the user: the new token's Scopes and ExpiresAt (unix ns; 0: no
// expiry given). It never holds a token.
type AuthRefreshed struct {
	Issuer    string   `msgpack:"issuer" json:"issuer"`
	Scopes    []string `msgpack:"scopes,omitempty" json:"scopes,omitempty"`
	ExpiresAt int64    `msgpack:"expires_at,omitempty" json:"expires_at,omitempty"`
}

// AuthFailed records an authorization step that failed: Phase (discover,
// register, consent, exchange, refresh, step_up, store, revoke), the
// Issuer when known, and Error, the message (redacted: it never quotes a
// token, code, verifier or client secret).
type AuthFailed struct {
	Phase  string `msgpack:"phase" json:"phase"`
	Issuer string `msgpack:"issuer,omitempty" json:"issuer,omitempty"`
	Error  string `msgpack:"error" json:"error"`
}

// AuthSignedOut records that a server's tokens were deleted from the
// token store; Revoked says whether the authorization server confirmed
// their revocation, RevokeError why not (empty when it was not tried:
// the server offers no revocation endpoint).
type AuthSignedOut struct {
	Issuer      string `msgpack:"issuer,omitempty" json:"issuer,omitempty"`
	Revoked     bool   `msgpack:"revoked,omitempty" json:"revoked,omitempty"`
	RevokeError string `msgpack:"revoke_error,omitempty" json:"revoke_error,omitempty"`
}

func (*AuthSignedIn) Kind() Kind  { return KindAuthSignedIn }
func (*AuthRefreshed) Kind() Kind { return KindAuthRefreshed }
func (*AuthFailed) Kind() Kind    { return KindAuthFailed }
func (*AuthSignedOut) Kind() Kind { return KindAuthSignedOut }
