package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// expirySkew refreshes a token this long before it expires.
const expirySkew = 10 * time.Second

// TransportOptions configure a runtime Transport.
type TransportOptions struct {
	Server string // server name (store key, messages)
	URL    string // the MCP endpoint (store key)
	Store  *Store
	// Base carries the requests (nil: http.DefaultTransport). Token
	// refreshes go through it too, without the Authorization header.
	Base http.RoundTripper
	// ClientSecret is the configured secret of a pre-registered client
	// (the store never holds it), used for refreshes of such an entry.
	ClientSecret string
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Callbacks for the runtime's journal. Each may be nil; they are
	// called without locks held, never with a token.
	OnNeedsAuth     func(reason string)
	OnRefreshed     func(expiry time.Time, scopes []string)
	OnRefreshFailed func(err error)
	// OnSecrets receives the secret values (Entry.Secrets) of each entry
	// the Transport loads or refreshes, for the caller's redactor. It is
	// called under the Transport's lock: it must return quickly and must
	// not use the Transport.
	OnSecrets func(secrets []string)
	Logger    *slog.Logger // nil: silent
}

// Transport is the non-interactive OAuth side of a runtime connection,
// an http.RoundTripper for the HTTP client of either MCP transport
// (Streamable HTTP and SSE alike; go-sdk's SSE client takes no
// auth.OAuthHandler, so both use this instead of one):
//
//   - it attaches the stored access token of (Server, URL) to every
//     request, refreshing an expired one first (refresh-token grant with
//     x/oauth2) and persisting the result to the Store;
//   - a 401 with a WWW-Authenticate challenge refreshes (or picks up a
//     token another process stored) and retries the request once;
//   - with no usable token, a 401 challenge is an error wrapping
//     ErrNeedsAuth, and OnNeedsAuth is called (go-sdk may flatten the
//     error on its way up);
//   - a 403 insufficient_scope is an error wrapping ErrInsufficientScope
//     naming the scopes to add (step-up needs the browser: `mcpledger
//     login`);
//   - with no stored entry and no 401, requests pass through untouched.
//
// It is safe for concurrent use; one refresh runs at a time.
type Transport struct {
	o   TransportOptions
	log *slog.Logger

	mu     sync.Mutex // serializes loads and refreshes
	loaded bool
	entry  *Entry // nil: no stored sign-in
}

// NewTransport returns the Transport for one server connection. Nothing
// is read until the first request.
func NewTransport(o TransportOptions) *Transport {
	if o.Base == nil {
		o.Base = http.DefaultTransport
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Transport{o: o, log: log}
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.token(req.Context())
	if err != nil {
		return nil, err
	}
	resp, err := t.send(req, tok)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		// A 401 without a challenge is not OAuth's; a body that cannot
		// be resent cannot be retried (go-sdk's bodies always can).
		if len(resp.Header.Values("WWW-Authenticate")) == 0 ||
			req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
			return resp, nil
		}
		drain(resp)
		next, err := t.afterUnauthorized(req.Context(), tok)
		if err != nil {
			return nil, err
		}
		resp, err = t.send(req, next)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusUnauthorized {
			drain(resp)
			return nil, t.needsAuth("the server refused the refreshed token")
		}
		if e := t.checkScope(resp); e != nil {
			return nil, e
		}
		return resp, nil
	case http.StatusForbidden:
		if challengeError(resp.Header) != "insufficient_scope" {
			return resp, nil
		}
		// A sign-in with more scope may have been stored since this
		// token was loaded (`mcpledger login`, or a one-shot call's
		// step-up): retry once with it.
		if next := t.newerToken(tok); next != "" && (req.Body == nil || req.Body == http.NoBody || req.GetBody != nil) {
			drain(resp)
			if resp, err = t.send(req, next); err != nil {
				return nil, err
			}
		}
		if e := t.checkScope(resp); e != nil {
			return nil, e
		}
	}
	return resp, nil
}

// newerToken returns the stored access token when it is not sent (the
// one a request was refused with), after reading the store again; "" when
// there is none.
func (t *Transport) newerToken(sent string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.loadLocked(); err != nil || t.entry == nil || t.entry.AccessToken == sent || t.expiredLocked() {
		return ""
	}
	return t.entry.AccessToken
}

// checkScope turns a 403 insufficient_scope into ErrInsufficientScope.
func (t *Transport) checkScope(resp *http.Response) error {
	if resp.StatusCode != http.StatusForbidden || challengeError(resp.Header) != "insufficient_scope" {
		return nil
	}
	want := challengeScope(resp.Header)
	drain(resp)
	var held []string
	t.mu.Lock()
	if t.entry != nil {
		held = t.entry.Scopes
	}
	t.mu.Unlock()
	missing := missingScopes(held, strings.Fields(want))
	t.log.Warn("oauth: insufficient scope", "server", t.o.Server, "missing", strings.Join(missing, " "))
	return &ScopeError{Server: t.o.Server, Want: strings.Fields(want), Held: held, Missing: missing}
}

// ScopeError is a server's 403 insufficient_scope to a request made with
// a stored sign-in, outside an interactive login. It is
// ErrInsufficientScope. Want are the scopes the server's challenge named
// (the whole set it asks for, as the spec has it), Held those of the
// stored sign-in, Missing those of Want not held. A step-up signs in
// again asking for Held and Want together.
type ScopeError struct {
	Server              string
	Want, Held, Missing []string
}

func (e *ScopeError) Error() string {
	return fmt.Sprintf("%s: server %s needs the scopes %q (missing %q) that the stored sign-in lacks; %s to grant them",
		ErrInsufficientScope, e.Server, strings.Join(e.Want, " "), strings.Join(e.Missing, " "), loginHint(e.Server))
}

// Is makes a ScopeError ErrInsufficientScope.
func (e *ScopeError) Is(target error) bool { return target == ErrInsufficientScope }

func missingScopes(held, want []string) []string {
	var out []string
	for _, w := range want {
		found := false
		for _, h := range held {
			found = found || h == w
		}
		if !found {
			out = append(out, w)
		}
	}
	return out
}

// send clones req with tok (if any) and a fresh body.
func (t *Transport) send(req *http.Request, tok string) (*http.Response, error) {
	if tok == "" {
		return t.o.Base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	if req.GetBody != nil && req.Body != nil && req.Body != http.NoBody {
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = b
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return t.o.Base.RoundTrip(r)
}

// token returns the access token to send ("" when there is no entry),
// loading the entry on first use and refreshing it when expired.
func (t *Transport) token(ctx context.Context) (string, error) {
	t.mu.Lock()
	if !t.loaded {
		if err := t.loadLocked(); err != nil {
			t.mu.Unlock()
			return "", err
		}
	}
	if t.entry == nil {
		t.mu.Unlock()
		return "", nil
	}
	if !t.expiredLocked() {
		tok := t.entry.AccessToken
		t.mu.Unlock()
		return tok, nil
	}
	tok, notify, err := t.refreshLocked(ctx, "the access token expired")
	t.mu.Unlock()
	return tok, t.after(notify, err)
}

// afterUnauthorized picks the token for the one retry after a 401 to
// the request sent with sent: a newer token in the store (another
// process refreshed or signed in), else a refresh.
func (t *Transport) afterUnauthorized(ctx context.Context, sent string) (string, error) {
	t.mu.Lock()
	if err := t.loadLocked(); err != nil {
		t.mu.Unlock()
		return "", err
	}
	if t.entry == nil {
		t.mu.Unlock()
		return "", t.needsAuth("no stored sign-in")
	}
	if t.entry.AccessToken != sent && !t.expiredLocked() {
		tok := t.entry.AccessToken
		t.mu.Unlock()
		return tok, nil
	}
	tok, notify, err := t.refreshLocked(ctx, "the server answered 401")
	t.mu.Unlock()
	return tok, t.after(notify, err)
}

// after runs the callbacks of a refresh (outside the lock): notify on
// success, OnRefreshFailed and OnNeedsAuth on a needs-auth error.
func (t *Transport) after(notify func(), err error) error {
	if err == nil && notify != nil {
		notify()
	}
	var na *needsAuthErr
	if errors.As(err, &na) {
		if na.refreshErr != nil && t.o.OnRefreshFailed != nil {
			t.o.OnRefreshFailed(na.refreshErr)
		}
		if t.o.OnNeedsAuth != nil {
			t.o.OnNeedsAuth(na.reason)
		}
		return na.err
	}
	return err
}

// needsAuthErr carries a needs-auth outcome from under the lock to after.
type needsAuthErr struct {
	reason     string
	refreshErr error
	err        error
}

func (e *needsAuthErr) Error() string { return e.err.Error() }

// needsAuth reports ErrNeedsAuth (with the callback) for reason.
func (t *Transport) needsAuth(reason string) error {
	return t.after(nil, &needsAuthErr{reason: reason, err: needsAuthError(t.o.Server, reason)})
}

func (t *Transport) loadLocked() error {
	e, err := t.o.Store.Get(t.o.Server, t.o.URL)
	switch {
	case errors.Is(err, ErrNotFound):
		t.entry = nil
	case err != nil:
		return fmt.Errorf("oauth: server %s: %w", t.o.Server, err)
	default:
		t.entry = &e
		t.secretsLocked()
	}
	t.loaded = true
	return nil
}

func (t *Transport) secretsLocked() {
	if t.o.OnSecrets != nil && t.entry != nil {
		t.o.OnSecrets(t.entry.Secrets())
	}
}

func (t *Transport) expiredLocked() bool {
	return !t.entry.Expiry.IsZero() && !t.o.Now().Add(expirySkew).Before(t.entry.Expiry)
}

// refreshLocked runs the refresh-token grant and persists the result.
// notify runs OnRefreshed; the caller calls it after unlocking. Its failure is a *needsAuthErr (the entry stays: a later login
// replaces it, and a transient failure may pass).
func (t *Transport) refreshLocked(ctx context.Context, why string) (tok string, notify func(), err error) {
	e := *t.entry
	if e.RefreshToken == "" {
		return "", nil, &needsAuthErr{reason: why + " and there is no refresh token", err: needsAuthError(t.o.Server, why+" and there is no refresh token")}
	}
	secret := e.ClientSecret
	if e.ClientKind == ClientPreRegistered {
		secret = t.o.ClientSecret
	}
	cfg := oauth2.Config{ClientID: e.ClientID, ClientSecret: secret,
		Endpoint: oauth2.Endpoint{TokenURL: e.TokenEndpoint, AuthStyle: e.AuthStyle}}
	rctx := context.WithValue(context.WithoutCancel(ctx), oauth2.HTTPClient, &http.Client{Transport: t.o.Base, Timeout: 30 * time.Second})
	nt, err := cfg.TokenSource(rctx, &oauth2.Token{RefreshToken: e.RefreshToken}).Token()
	if err != nil {
		desc := describeTokenErr(err)
		t.log.Warn("oauth: refresh failed", "server", t.o.Server, "error", desc)
		ferr := fmt.Errorf("oauth: server %s: refresh failed: %s", t.o.Server, desc)
		reason := "refresh failed: " + desc
		return "", nil, &needsAuthErr{reason: reason, refreshErr: ferr, err: needsAuthError(t.o.Server, reason)}
	}
	e.AccessToken = nt.AccessToken
	if nt.RefreshToken != "" {
		e.RefreshToken = nt.RefreshToken
	}
	if tt := nt.Type(); tt != "" {
		e.TokenType = tt
	}
	e.Expiry = nt.Expiry
	if s, ok := nt.Extra("scope").(string); ok && s != "" {
		e.Scopes = strings.Fields(s)
	}
	if err := t.o.Store.Put(e); err != nil {
		// The new token still works for this process; say why the next
		// one will sign in again.
		t.log.Warn("oauth: refreshed token not stored", "server", t.o.Server, "error", err.Error())
	}
	t.entry = &e
	t.secretsLocked()
	t.log.Info("oauth: token refreshed", "server", t.o.Server, "expiry", e.Expiry)
	notify = func() {}
	if cb := t.o.OnRefreshed; cb != nil {
		exp, scopes := e.Expiry, append([]string(nil), e.Scopes...)
		notify = func() { cb(exp, scopes) }
	}
	return e.AccessToken, notify, nil
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}
