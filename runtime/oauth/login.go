package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// MaxStepUps bounds the 403 insufficient_scope step-ups of one login.
const MaxStepUps = 3

// DefaultLoginTimeout bounds a login when LoginOptions.Timeout is zero.
const DefaultLoginTimeout = 5 * time.Minute

// LoginOptions configure Login.
type LoginOptions struct {
	Server    string            // server name (the store key and every message)
	URL       string            // the MCP endpoint
	Transport string            // "http" (Streamable HTTP, the default) or "sse"
	Headers   map[string]string // the server's configured headers, sent to the MCP server only
	Client    ClientConfig
	Store     *Store
	// Open shows the authorization URL to the user (the browser opener).
	// Required.
	Open func(url string) error
	// Timeout bounds the whole login, browser included
	// (DefaultLoginTimeout when zero).
	Timeout time.Duration
	// HTTPClient carries the requests to the authorization server and the
	// MCP server (nil: a client over http.DefaultTransport).
	HTTPClient *http.Client
	Logger     *slog.Logger // nil: silent
}

// Grant is what a successful Login obtained. It holds no secret.
type Grant struct {
	Issuer     string
	Resource   string
	Scopes     []string
	ClientKind ClientKind
	ClientID   string
	Expiry     time.Time // zero when the server gave no lifetime
	StepUps    int       // 403 insufficient_scope rounds during the login
}

// Login signs in to one server: it listens on the loopback redirect port,
// connects to the MCP server with go-sdk's client and an
// auth.AuthorizationCodeHandler (PKCE, discovery, CIMD / pre-registered /
// DCR client), lets the handler run the browser flow on the server's 401,
// completes initialize and tools/list (so a 403 insufficient_scope
// step-up happens now, asking for the union of held and challenged
// scopes, at most MaxStepUps times), and stores the token. A previous
// entry for the server is replaced only on success.
func Login(ctx context.Context, o LoginOptions) (Grant, error) {
	if o.Server == "" || o.Store == nil || o.Open == nil {
		return Grant{}, errors.New("oauth: Login needs Server, Store and Open")
	}
	resource, err := CanonicalResource(o.URL)
	if err != nil {
		return Grant{}, fmt.Errorf("server %s: %w", o.Server, err)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultLoginTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// A store that cannot hold the result fails now, not after the
	// user went through the browser.
	if _, err := o.Store.Get(o.Server, o.URL); err != nil && !errors.Is(err, ErrNotFound) {
		return Grant{}, fmt.Errorf("oauth: server %s: cannot sign in: %w", o.Server, err)
	}
	cb, err := listenCallback(o.Server, o.Client.CallbackPort)
	if err != nil {
		return Grant{}, err
	}
	defer cb.close()
	redirect := redirectURL(cb.port)

	base := http.DefaultTransport
	if o.HTTPClient != nil && o.HTTPClient.Transport != nil {
		base = o.HTTPClient.Transport
	}
	asRT := &asMetaTransport{base: base, metadataURL: o.Client.AuthServerMetadataURL}
	bh := &boundedHandler{server: o.Server}
	cfg := o.Client.handlerConfig(redirect, bh.inStepUp)
	cfg.Client = &http.Client{Transport: asRT}
	cfg.AuthorizationCodeFetcher = cb.fetcher(func(u string) error {
		log.Info("oauth: opening the authorization URL", "server", o.Server, "redirect", redirect)
		return o.Open(u)
	})
	capt := &capture{}
	cfg.NewTokenSource = capt.newTokenSource
	h, err := auth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		return Grant{}, fmt.Errorf("oauth: server %s: invalid `oauth` settings: %w", o.Server, err)
	}
	bh.inner = h

	hc := &http.Client{Transport: &headerTransport{base: base, headers: o.Headers}}
	var transport func() mcp.Transport
	switch o.Transport {
	case "", "http":
		transport = func() mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: o.URL, HTTPClient: hc, OAuthHandler: bh, MaxRetries: -1}
		}
	case "sse":
		// SSEClientTransport has no OAuthHandler: the handler runs in a
		// RoundTripper under its HTTP client instead.
		hc.Transport = &handlerTransport{base: hc.Transport, h: bh, endpoint: o.URL}
		transport = func() mcp.Transport { return &mcp.SSEClientTransport{Endpoint: o.URL, HTTPClient: hc} }
	default:
		return Grant{}, fmt.Errorf("oauth: server %s: transport %q cannot sign in (only http and sse servers use OAuth)", o.Server, o.Transport)
	}

	log.Info("oauth: login started", "server", o.Server, "resource", resource)
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpledger", Version: "login"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	// go-sdk authorizes once per request and fails the session when the
	// retry after a step-up is refused again; each further step-up needs
	// a new session (the handler keeps the granted scopes for the union).
	for {
		before := bh.stepUps()
		cs, cerr := client.Connect(ctx, transport(), &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if cerr == nil {
			_, cerr = cs.ListTools(ctx, nil)
			_ = cs.Close()
		}
		if cerr == nil {
			break
		}
		// Reconnect only when a step-up obtained a token and the retry
		// was refused anyway; any other failure is the answer.
		if bh.stepUps() == before || errors.Is(cerr, ErrStepUpLimit) || ctx.Err() != nil {
			return Grant{}, loginError(o.Server, cerr)
		}
		log.Info("oauth: step-up refused on retry; reconnecting", "server", o.Server, "step_ups", bh.stepUps())
	}
	tok, ocfg := capt.latest()
	if tok == nil {
		return Grant{}, fmt.Errorf("%w: server %s answered without asking for a token, so nothing was stored; it needs no `mcpledger login`",
			ErrNoChallenge, o.Server)
	}
	e := Entry{
		Server:        o.Server,
		Resource:      resource,
		AccessToken:   tok.AccessToken,
		RefreshToken:  tok.RefreshToken,
		TokenType:     tok.Type(),
		Expiry:        tok.Expiry,
		Scopes:        tokenScopes(tok, ocfg.Scopes),
		TokenEndpoint: ocfg.Endpoint.TokenURL,
		AuthStyle:     ocfg.Endpoint.AuthStyle,
		ClientKind:    o.Client.kind(ocfg.ClientID),
		ClientID:      ocfg.ClientID,
	}
	if e.ClientKind == ClientRegistered {
		e.ClientSecret = ocfg.ClientSecret
	}
	if m := asRT.lastMeta(); m != nil && m.TokenEndpoint == ocfg.Endpoint.TokenURL {
		e.Issuer, e.RevocationEndpoint = m.Issuer, m.RevocationEndpoint
	} else {
		e.Issuer = issuerGuess(ocfg.Endpoint.TokenURL)
	}
	if err := o.Store.Put(e); err != nil {
		return Grant{}, fmt.Errorf("oauth: server %s: signed in, but the token could not be stored: %w", o.Server, err)
	}
	g := Grant{Issuer: e.Issuer, Resource: resource, Scopes: e.Scopes, ClientKind: e.ClientKind, ClientID: e.ClientID,
		Expiry: e.Expiry, StepUps: bh.stepUps()}
	log.Info("oauth: login done", "server", o.Server, "issuer", g.Issuer, "scopes", strings.Join(g.Scopes, " "),
		"client_kind", string(g.ClientKind), "step_ups", g.StepUps)
	return g, nil
}

// loginError names the server and what to do around a failure that
// came back through go-sdk's client (which may have wrapped it twice).
// Our own errors (consent denied, state mismatch, step-up limit) already
// say both, so they are returned without go-sdk's layers around them.
func loginError(server string, err error) error {
	for _, s := range []error{ErrConsentDenied, ErrStateMismatch, ErrStepUpLimit} {
		if errors.Is(err, s) {
			if own := ownError(err, s); own != nil {
				return own
			}
			return fmt.Errorf("oauth: sign-in to server %s failed: %w", server, err)
		}
	}
	return fmt.Errorf("oauth: sign-in to server %s failed: %w; check that the server and its authorization server are reachable and the server's `oauth` settings, then run `mcpledger login %s` again",
		server, err, server)
}

// ownError finds, in err's chain, the error this package made around
// sentinel ("SENTINEL: server …").
func ownError(err, sentinel error) error {
	if err == nil {
		return nil
	}
	if strings.HasPrefix(err.Error(), sentinel.Error()+": server ") {
		return err
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return ownError(u.Unwrap(), sentinel)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if own := ownError(e, sentinel); own != nil {
				return own
			}
		}
	}
	return nil
}

// issuerGuess is the authorization server's origin, when no metadata
// was found (the 2025-03-26 fallback endpoints).
func issuerGuess(tokenURL string) string {
	if i := strings.Index(tokenURL, "://"); i >= 0 {
		if j := strings.IndexByte(tokenURL[i+3:], '/'); j >= 0 {
			return tokenURL[:i+3+j]
		}
	}
	return tokenURL
}

// tokenScopes are the scopes the token response granted ("scope"), else
// the ones requested.
func tokenScopes(tok *oauth2.Token, requested []string) []string {
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		return strings.Fields(s)
	}
	return append([]string(nil), requested...)
}

// capture is the handler's NewTokenSource hook: it keeps the oauth2
// config go-sdk built and the token source it returns, so Login can read
// the final token and the endpoint/client to store.
type capture struct {
	mu  sync.Mutex
	cfg *oauth2.Config
	ts  oauth2.TokenSource
}

func (c *capture) newTokenSource(ctx context.Context, cfg *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
	ts := cfg.TokenSource(ctx, tok)
	c.mu.Lock()
	c.cfg, c.ts = cfg, ts
	c.mu.Unlock()
	return ts, nil
}

func (c *capture) latest() (*oauth2.Token, *oauth2.Config) {
	c.mu.Lock()
	ts, cfg := c.ts, c.cfg
	c.mu.Unlock()
	if ts == nil {
		return nil, nil
	}
	tok, err := ts.Token()
	if err != nil || tok == nil || tok.AccessToken == "" {
		return nil, nil
	}
	return tok, cfg
}

// boundedHandler wraps go-sdk's handler: it counts step-ups (403
// insufficient_scope) and stops after MaxStepUps. Other authorizations
// (a 401) need no bound here: go-sdk authorizes once per request, and
// Login reconnects only after a step-up.
type boundedHandler struct {
	inner  *auth.AuthorizationCodeHandler
	server string

	mu       sync.Mutex
	steps    int  // step-ups attempted (the bound)
	granted  int  // step-ups that obtained a token
	stepping bool // an Authorize for a 403 insufficient_scope is running
}

// inStepUp reports whether the running Authorize is a step-up (read by
// the ScopeFilter, which go-sdk calls from inside Authorize).
func (b *boundedHandler) inStepUp() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stepping
}

func (b *boundedHandler) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	return b.inner.TokenSource(ctx)
}

func (b *boundedHandler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	scopeErr := resp.StatusCode == http.StatusForbidden && challengeError(resp.Header) == "insufficient_scope"
	b.mu.Lock()
	if scopeErr {
		b.steps++
	}
	steps := b.steps
	b.stepping = scopeErr
	b.mu.Unlock()
	if scopeErr && steps > MaxStepUps {
		resp.Body.Close()
		return fmt.Errorf("%w: server %s still answers 403 insufficient_scope (wants %q) after %d step-ups; check the scopes its authorization server grants and the `scopes` setting",
			ErrStepUpLimit, b.server, challengeScope(resp.Header), MaxStepUps)
	}
	err := b.inner.Authorize(ctx, req, resp)
	b.mu.Lock()
	b.stepping = false
	if scopeErr && err == nil {
		b.granted++
	}
	b.mu.Unlock()
	return err
}

// stepUps is the number of step-ups that obtained a new token.
func (b *boundedHandler) stepUps() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.granted
}

// challengeError and challengeScope read the Bearer challenge's error
// and scope parameters.
func challengeError(h http.Header) string { return bearerParam(h, "error") }
func challengeScope(h http.Header) string { return bearerParam(h, "scope") }

func bearerParam(h http.Header, name string) string {
	cs, err := oauthex.ParseWWWAuthenticate(h.Values("WWW-Authenticate"))
	if err != nil {
		return ""
	}
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params[name] != "" {
			return c.Params[name]
		}
	}
	return ""
}

// handlerTransport runs an auth.OAuthHandler under an HTTP client the
// way StreamableClientTransport does (token on every request; on a 401
// or 403, Authorize and one retry), for the SSE client, which takes no
// handler.
//
// go-sdk's handler takes the failed request's URL as the resource to
// look up protected-resource metadata for; an SSE message POST goes to
// the session's message endpoint (…?sessionid=…), which no metadata
// names, so the handler would fall back to treating the MCP host as its
// own authorization server. Authorize is given the request with its URL
// set to the configured SSE endpoint instead.
type handlerTransport struct {
	base     http.RoundTripper
	h        auth.OAuthHandler
	endpoint string
}

func (t *handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	send := func() (*http.Request, *http.Response, error) {
		r := req.Clone(req.Context())
		if req.Body != nil && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, nil, err
			}
			r.Body = body
		}
		if ts, err := t.h.TokenSource(req.Context()); err != nil {
			return nil, nil, err
		} else if ts != nil {
			if tok, err := ts.Token(); err == nil && tok != nil {
				r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
			}
		}
		resp, err := t.base.RoundTrip(r)
		return r, resp, err
	}
	r, resp, err := send()
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return resp, nil
	}
	if req.Body != nil && req.GetBody == nil {
		return resp, nil // cannot resend
	}
	if u, err := url.Parse(t.endpoint); err == nil {
		r.URL = u
	}
	if err := t.h.Authorize(req.Context(), r, resp); err != nil {
		return nil, err
	}
	_, resp, err = send()
	return resp, err
}

// headerTransport sets the server's configured headers on each request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) == 0 {
		return t.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}
