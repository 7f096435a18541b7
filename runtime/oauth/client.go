package oauth

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// ClientConfig is a server's `oauth` settings, read as Claude Code writes
// them. Every field is optional.
//
//   - ClientID set: a pre-registered client, confidential with
//     ClientSecret, public (token endpoint auth "none") without.
//   - ClientMetadataURL set: a client ID metadata document (CIMD) URL,
//     used when the authorization server advertises support.
//   - Neither usable: dynamic client registration (RFC 7591) with the
//     loopback redirect URI.
//
// When several apply, go-sdk tries them in the spec's order: CIMD,
// pre-registration, DCR. DCR is always offered as the last resort.
type ClientConfig struct {
	ClientID string
	// ClientSecret is the secret of a pre-registered client, already
	// ${VAR}-expanded by the caller. It is never stored or logged.
	ClientSecret string
	// CallbackPort is the loopback redirect port: the redirect URI is
	// http://localhost:PORT/callback. 0 picks a free port.
	CallbackPort int
	// Scopes, when set, are requested exactly, instead of the scopes the
	// server challenges with or advertises.
	Scopes []string
	// AuthServerMetadataURL, when set, is where the authorization
	// server's metadata is read from instead of RFC 8414 / OIDC discovery
	// (see asMetaTransport).
	AuthServerMetadataURL string
	// ClientMetadataURL is a client ID metadata document URL (https, not
	// the root path).
	ClientMetadataURL string
}

// redirectURL is the loopback redirect URI for port.
func redirectURL(port int) string {
	return "http://localhost:" + strconv.Itoa(port) + "/callback"
}

// handlerConfig maps c onto go-sdk's handler configuration. The fetcher,
// HTTP client and token source hook are the caller's. Configured Scopes
// are requested exactly on the first authorization; during a 403
// insufficient_scope step-up (stepUp reports true) the challenged scopes
// are added to them (go-sdk then unions the result with the held ones).
// go-sdk adds offline_access to either when the authorization server
// advertises it, to get a refresh token.
func (c ClientConfig) handlerConfig(redirect string, stepUp func() bool) *auth.AuthorizationCodeHandlerConfig {
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:         redirect,
		RequestRefreshToken: true,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{
				RedirectURIs:  []string{redirect},
				GrantTypes:    []string{"authorization_code", "refresh_token"},
				ResponseTypes: []string{"code"},
				ClientName:    "mcpledger",
			},
		},
	}
	if c.ClientMetadataURL != "" {
		cfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: c.ClientMetadataURL}
	}
	if c.ClientID != "" {
		pre := &oauthex.ClientCredentials{ClientID: c.ClientID}
		if c.ClientSecret != "" {
			pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: c.ClientSecret}
		}
		cfg.PreregisteredClient = pre
	}
	if len(c.Scopes) > 0 {
		scopes := append([]string(nil), c.Scopes...)
		cfg.ScopeFilter = func(discovered []string) []string {
			out := append([]string(nil), scopes...)
			if stepUp != nil && stepUp() {
				// A step-up must ask for what the server challenged with,
				// or it would repeat the request that was refused.
				for _, d := range discovered {
					if !slices.Contains(out, d) {
						out = append(out, d)
					}
				}
			}
			return out
		}
	}
	return cfg
}

// kind says which client identity go-sdk chose, from the client ID it
// put in the oauth2.Config.
func (c ClientConfig) kind(clientID string) ClientKind {
	switch {
	case c.ClientMetadataURL != "" && clientID == c.ClientMetadataURL:
		return ClientMetadataDocument
	case c.ClientID != "" && clientID == c.ClientID:
		return ClientPreRegistered
	default:
		return ClientRegistered
	}
}

// asMetaTransport is the RoundTripper of the HTTP client given to go-sdk's
// handler (discovery, registration, token requests). It does two things:
//
//  1. With metadataURL set, a GET of an authorization-server metadata
//     well-known path (/.well-known/oauth-authorization-server… or
//     …openid-configuration…) is answered by a GET of metadataURL
//     instead, so the configured document replaces discovery while
//     go-sdk still validates it (issuer, PKCE support, URL schemes).
//  2. It remembers the last authorization-server metadata document it
//     saw, for the issuer and revocation endpoint the entry records
//     (go-sdk's handler does not expose them).
//
// A custom RoundTripper opts out of go-sdk's dial-time guard against
// private addresses during discovery (oauthex.newDiscoveryTransport only
// wraps a plain *http.Transport); the redirect checks still apply.
type asMetaTransport struct {
	base        http.RoundTripper
	metadataURL string

	mu   sync.Mutex
	meta *oauthex.AuthServerMeta
}

func isASMetadataPath(p string) bool {
	return strings.HasPrefix(p, "/.well-known/oauth-authorization-server") ||
		strings.HasPrefix(p, "/.well-known/openid-configuration") ||
		strings.HasSuffix(p, "/.well-known/openid-configuration")
}

func (t *asMetaTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || !isASMetadataPath(req.URL.Path) {
		return t.base.RoundTrip(req)
	}
	if t.metadataURL != "" {
		u, err := url.Parse(t.metadataURL)
		if err != nil {
			return nil, err
		}
		r2 := req.Clone(req.Context())
		r2.URL = u
		r2.Host = ""
		req = r2
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var m oauthex.AuthServerMeta
	if json.Unmarshal(body, &m) == nil && m.Issuer != "" {
		t.mu.Lock()
		t.meta = &m
		t.mu.Unlock()
	}
	return resp, nil
}

// lastMeta is the last authorization-server metadata seen, or nil.
func (t *asMetaTransport) lastMeta() *oauthex.AuthServerMeta {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.meta
}
