package oauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// testAS is a small OAuth 2.1 authorization server on loopback: RFC 8414
// metadata, /authorize (redirects with a code, or error=access_denied),
// /token (authorization_code with PKCE S256, refresh_token), /register
// (RFC 7591) and /revoke (RFC 7009). It records every secret it issues
// or receives so tests can search logs and errors for them.
type testAS struct {
	t   *testing.T
	srv *httptest.Server

	mu sync.Mutex
	// settings (set before use, under mu)
	deny         bool          // /authorize answers error=access_denied
	wrongState   bool          // /authorize returns another state
	accessTTL    time.Duration // default 1h
	cimd         bool          // advertises and accepts client ID metadata documents
	noRevocation bool
	failRefresh  bool              // refresh_token grant answers invalid_grant
	grantable    []string          // scopes it grants (nil: any requested)
	preClients   map[string]string // pre-registered client id -> secret ("" public)
	metaAt       string            // serve metadata only at this path (discovery finds none)
	rejectTokens bool              // the resource server refuses every access token
	omitScope    bool              // token responses carry no "scope"
	refreshScope []string          // a refresh grants these scopes (nil: the original ones)

	// state
	clients   map[string]asClient
	codes     map[string]asCode
	access    map[string]asToken
	refresh   map[string]asToken
	revoked   []string
	secrets   []string // every token, code, secret, verifier seen
	n         int
	registers int
	refreshes int
	authorize []url.Values // the /authorize queries
	leaked    int          // requests that carried the MCP server's X-Test header
}

type asClient struct {
	secret string
	method string // token_endpoint_auth_method
}

type asCode struct {
	client, challenge, redirect, resource string
	scopes                                []string
}

type asToken struct {
	client string
	scopes []string
	exp    time.Time
}

func newTestAS(t *testing.T) *testAS {
	a := &testAS{t: t, accessTTL: time.Hour, preClients: map[string]string{},
		clients: map[string]asClient{}, codes: map[string]asCode{}, access: map[string]asToken{}, refresh: map[string]asToken{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		hidden := a.metaAt != ""
		a.mu.Unlock()
		if hidden {
			http.NotFound(w, r)
			return
		}
		a.metadata(w, r)
	})
	mux.HandleFunc("GET /custom/meta", a.metadata)
	mux.HandleFunc("GET /as/authorize", a.authorizeEP)
	mux.HandleFunc("POST /as/token", a.token)
	mux.HandleFunc("POST /as/register", a.register)
	mux.HandleFunc("POST /as/revoke", a.revoke)
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Test") != "" {
			a.mu.Lock()
			a.leaked++
			a.mu.Unlock()
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *testAS) set(f func(a *testAS)) { a.mu.Lock(); f(a); a.mu.Unlock() }

func (a *testAS) secret(prefix string) string {
	s := prefix + "-" + rand.Text()
	a.secrets = append(a.secrets, s)
	return s
}

func (a *testAS) allSecrets() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.secrets)
}

func (a *testAS) metadata(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := oauthex.AuthServerMeta{
		Issuer:                            a.srv.URL,
		AuthorizationEndpoint:             a.srv.URL + "/as/authorize",
		TokenEndpoint:                     a.srv.URL + "/as/token",
		RegistrationEndpoint:              a.srv.URL + "/as/register",
		ResponseTypesSupported:            []string{"code"},
		CodeChallengeMethodsSupported:     []string{"S256"},
		ScopesSupported:                   []string{"read", "write", "offline_access"},
		TokenEndpointAuthMethodsSupported: []string{"client_secret_basic", "client_secret_post", "none"},
		ClientIDMetadataDocumentSupported: a.cimd,
	}
	if !a.noRevocation {
		m.RevocationEndpoint = a.srv.URL + "/as/revoke"
	}
	writeJSON(w, http.StatusOK, m)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (a *testAS) knownClient(id string) (asClient, bool) {
	if c, ok := a.clients[id]; ok {
		return c, true
	}
	if s, ok := a.preClients[id]; ok {
		return asClient{secret: s}, true
	}
	if a.cimd && strings.HasPrefix(id, "https://") {
		return asClient{}, true
	}
	return asClient{}, false
}

func (a *testAS) authorizeEP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.authorize = append(a.authorize, q)
	if _, ok := a.knownClient(q.Get("client_id")); !ok || q.Get("response_type") != "code" ||
		q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	back, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	v := url.Values{"state": {q.Get("state")}}
	switch {
	case a.deny:
		v.Set("error", "access_denied")
		v.Set("error_description", "the user said no")
	default:
		code := a.secret("code")
		a.codes[code] = asCode{client: q.Get("client_id"), challenge: q.Get("code_challenge"),
			redirect: q.Get("redirect_uri"), resource: q.Get("resource"), scopes: strings.Fields(q.Get("scope"))}
		v.Set("code", code)
		if a.wrongState {
			v.Set("state", "not-the-state")
		}
	}
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// clientAuth checks the client's authentication at /token and /revoke.
func (a *testAS) clientAuth(r *http.Request) (string, bool) {
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if secret != "" {
		a.secrets = append(a.secrets, secret)
	}
	c, ok := a.knownClient(id)
	// A registered client must use the method it registered with.
	switch c.method {
	case "client_secret_basic":
		ok = ok && basic
	case "client_secret_post":
		ok = ok && !basic
	}
	return id, ok && c.secret == secret
}

func (a *testAS) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	a.mu.Lock()
	defer a.mu.Unlock()
	client, ok := a.clientAuth(r)
	if !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	var scopes []string
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		c, ok := a.codes[r.PostForm.Get("code")]
		delete(a.codes, r.PostForm.Get("code"))
		verifier := r.PostForm.Get("code_verifier")
		a.secrets = append(a.secrets, verifier)
		sum := sha256.Sum256([]byte(verifier))
		if !ok || c.client != client || c.redirect != r.PostForm.Get("redirect_uri") ||
			base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "code, client, redirect or PKCE verifier mismatch"})
			return
		}
		scopes = c.scopes
		if a.grantable != nil {
			scopes = slices.DeleteFunc(slices.Clone(scopes), func(s string) bool { return !slices.Contains(a.grantable, s) })
		}
	case "refresh_token":
		a.refreshes++
		rt, ok := a.refresh[r.PostForm.Get("refresh_token")]
		if a.failRefresh || !ok || rt.client != client {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "refresh token revoked"})
			return
		}
		delete(a.refresh, r.PostForm.Get("refresh_token"))
		scopes = rt.scopes
		if a.refreshScope != nil {
			scopes = a.refreshScope
		}
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	at, rt := a.secret("at"), a.secret("rt")
	a.access[at] = asToken{client: client, scopes: scopes, exp: time.Now().Add(a.accessTTL)}
	a.refresh[rt] = asToken{client: client, scopes: scopes}
	resp := map[string]any{"access_token": at, "refresh_token": rt, "token_type": "Bearer",
		"expires_in": int(a.accessTTL / time.Second), "scope": strings.Join(scopes, " ")}
	if a.omitScope {
		delete(resp, "scope")
	}
	writeJSON(w, http.StatusOK, resp)
}

func (a *testAS) register(w http.ResponseWriter, r *http.Request) {
	var m oauthex.ClientRegistrationMetadata
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil || len(m.RedirectURIs) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.registers++
	a.n++
	id := fmt.Sprintf("dcr-%d", a.n)
	sec := a.secret("dcrsecret")
	a.clients[id] = asClient{secret: sec, method: "client_secret_basic"}
	writeJSON(w, http.StatusCreated, map[string]any{"client_id": id, "client_secret": sec,
		"redirect_uris": m.RedirectURIs, "token_endpoint_auth_method": "client_secret_basic"})
}

func (a *testAS) revoke(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.clientAuth(r); !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	tok := r.PostForm.Get("token")
	a.revoked = append(a.revoked, tok)
	delete(a.access, tok)
	delete(a.refresh, tok)
	w.WriteHeader(http.StatusOK)
}

// verify is the MCP server's auth.TokenVerifier.
func (a *testAS) verify(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.access[tok]
	if !ok || a.rejectTokens || time.Now().After(at.exp) {
		return nil, fmt.Errorf("%w: unknown or expired", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{Scopes: at.scopes, Expiration: at.exp}, nil
}

func (a *testAS) scopesOf(tok string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.access[tok].scopes
}

// expireAll makes every issued access token expired at the server.
func (a *testAS) expireAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, v := range a.access {
		v.exp = time.Now().Add(-time.Minute)
		a.access[k] = v
	}
}

// testMCP is a protected MCP server: go-sdk's Streamable HTTP handler
// (and SSE handler at /sse) behind auth.RequireBearerToken, with
// protected-resource metadata naming the test AS. stepUp, when set, is a
// scope tools/list and tools/call need beyond "read": without it the server answers
// 403 with an insufficient_scope challenge (go-sdk's middleware answers
// 403 without the error parameter, which go-sdk's client needs for a
// step-up).
type testMCP struct {
	srv *httptest.Server
	as  *testAS

	mu     sync.Mutex
	stepUp string
	auths  []string // Authorization headers received, in order
	xtest  []string // X-Test headers received
	status []int
}

func newTestMCP(t *testing.T, as *testAS) *testMCP {
	m := &testMCP{as: as}
	server := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct{ Text string }) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	mux := http.NewServeMux()
	m.srv = httptest.NewServer(mux)
	t.Cleanup(m.srv.Close)
	for _, path := range []string{"/mcp", "/sse"} {
		prmPath := "/.well-known/oauth-protected-resource" + path
		mux.Handle(prmPath, auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource: m.srv.URL + path, AuthorizationServers: []string{as.srv.URL}, ScopesSupported: []string{"read", "write"},
		}))
		var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
		if path == "/sse" {
			h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, nil)
		}
		protected := auth.RequireBearerToken(as.verify, &auth.RequireBearerTokenOptions{
			ResourceMetadataURL: m.srv.URL + prmPath, Scopes: []string{"read"}})(m.stepUpGate(h, m.srv.URL+prmPath))
		mux.Handle(path, m.record(protected))
		if path == "/sse" {
			mux.Handle("/sse/", m.record(protected))
		}
	}
	return m
}

func (m *testMCP) url() string { return m.srv.URL + "/mcp" }

func (m *testMCP) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.auths = append(m.auths, r.Header.Get("Authorization"))
		m.xtest = append(m.xtest, r.Header.Get("X-Test"))
		m.xtest = append(m.xtest, r.Header.Get("X-Test"))
		m.mu.Unlock()
		sw := &statusWriter{ResponseWriter: w, code: 200}
		h.ServeHTTP(sw, r)
		m.mu.Lock()
		m.status = append(m.status, sw.code)
		m.mu.Unlock()
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(c int) { s.code = c; s.ResponseWriter.WriteHeader(c) }
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (m *testMCP) stepUpGate(next http.Handler, prm string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		need := m.stepUp
		m.mu.Unlock()
		if need == "" || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		ti := auth.TokenInfoFromContext(r.Context())
		if bytes.Contains(body, []byte(`"tools/`)) && (ti == nil || !slices.Contains(ti.Scopes, need)) {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope="read %s", resource_metadata=%q`, need, prm))
			http.Error(w, "insufficient scope", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (m *testMCP) authHeaders() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.auths)
}

func (m *testMCP) statuses() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.status)
}

// browser follows the authorization URL like a user who approves: GET
// it, and GET the redirect it answers with (the loopback callback). It
// records the URLs it opened.
type browser struct {
	mu     sync.Mutex
	opened []string
	// rewrite, if set, changes the callback URL before it is followed.
	rewrite func(*url.URL)
}

func (b *browser) open(authURL string) error {
	b.mu.Lock()
	b.opened = append(b.opened, authURL)
	rw := b.rewrite
	b.mu.Unlock()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(authURL)
	if err != nil {
		return err
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		return fmt.Errorf("authorize answered %d without a redirect", resp.StatusCode)
	}
	if rw != nil {
		rw(loc)
	}
	// The fetcher waits before it opens, so the callback is answered
	// at once (its channel is buffered).
	r, err := http.Get(loc.String())
	if err != nil {
		return err
	}
	r.Body.Close()
	return nil
}

func (b *browser) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.opened)
}

func (a *testAS) nRefreshes() int { a.mu.Lock(); defer a.mu.Unlock(); return a.refreshes }
func (a *testAS) nRegisters() int { a.mu.Lock(); defer a.mu.Unlock(); return a.registers }
func (a *testAS) authorizeQueries() []url.Values {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.authorize)
}
func (a *testAS) lastAuthorize() url.Values { q := a.authorizeQueries(); return q[len(q)-1] }
