package oauth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type env struct {
	t     *testing.T
	as    *testAS
	mcp   *testMCP
	store *Store
	br    *browser
	logs  *syncBuffer
	log   *slog.Logger
}

func newEnv(t *testing.T) *env {
	as := newTestAS(t)
	logs := &syncBuffer{}
	return &env{t: t, as: as, mcp: newTestMCP(t, as), store: NewStore(filepath.Join(t.TempDir(), "state", "oauth-tokens.json")),
		br: &browser{}, logs: logs, log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
}

func (e *env) opts(c ClientConfig) LoginOptions {
	return LoginOptions{Server: "hosted", URL: e.mcp.url(), Client: c, Store: e.store, Open: e.br.open,
		Timeout: 20 * time.Second, Logger: e.log}
}

func (e *env) login(c ClientConfig) (Grant, error) {
	return Login(context.Background(), e.opts(c))
}

// noLeak fails if any secret the AS issued or received appears in s.
func (e *env) noLeak(what, s string) {
	e.t.Helper()
	for _, sec := range e.as.allSecrets() {
		if sec != "" && strings.Contains(s, sec) {
			e.t.Errorf("%s contains the secret %.6s…", what, sec)
		}
	}
}

func TestLoginDynamicRegistration(t *testing.T) {
	e := newEnv(t)
	g, err := e.login(ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if g.ClientKind != ClientRegistered || g.Issuer != e.as.srv.URL || g.StepUps != 0 {
		t.Errorf("grant = %+v, want registered client of issuer %s", g, e.as.srv.URL)
	}
	// offline_access is added because the AS advertises it (RequestRefreshToken).
	if got := slices.Sorted(slices.Values(g.Scopes)); !slices.Equal(got, []string{"offline_access", "read"}) {
		t.Errorf("scopes = %v, want the challenged read plus offline_access", g.Scopes)
	}
	ent, err := e.store.Get("hosted", e.mcp.url())
	if err != nil {
		t.Fatal(err)
	}
	if ent.ClientSecret == "" || !strings.HasPrefix(ent.ClientID, "dcr-") || ent.RefreshToken == "" ||
		ent.RevocationEndpoint != e.as.srv.URL+"/as/revoke" || ent.TokenEndpoint != e.as.srv.URL+"/as/token" {
		t.Errorf("entry lacks what refresh/revoke need: %+v", redacted(ent))
	}
	if e.as.nRegisters() != 1 {
		t.Errorf("registrations = %d, want 1", e.as.nRegisters())
	}
	fi, err := os.Stat(e.store.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("store mode = %v, want 0600", fi.Mode().Perm())
	}
	di, _ := os.Stat(filepath.Dir(e.store.Path()))
	if di.Mode().Perm() != 0o700 {
		t.Errorf("store dir mode = %v, want 0700", di.Mode().Perm())
	}
	e.noLeak("log", e.logs.String())
}

func redacted(e Entry) Entry {
	e.AccessToken, e.RefreshToken, e.ClientSecret = "<a>", "<r>", "<s>"
	return e
}

func TestLoginPreRegistered(t *testing.T) {
	for _, tc := range []struct {
		name, secret string
	}{{"confidential", "pre-secret-xyz"}, {"public", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.as.set(func(a *testAS) { a.preClients["pre-client"] = tc.secret })
			g, err := e.login(ClientConfig{ClientID: "pre-client", ClientSecret: tc.secret})
			if err != nil {
				t.Fatal(err)
			}
			if g.ClientKind != ClientPreRegistered || g.ClientID != "pre-client" {
				t.Errorf("grant = %+v, want pre-registered pre-client", g)
			}
			if e.as.nRegisters() != 0 {
				t.Errorf("a pre-registered client registered dynamically %d times", e.as.nRegisters())
			}
			ent, err := e.store.Get("hosted", e.mcp.url())
			if err != nil {
				t.Fatal(err)
			}
			if ent.ClientSecret != "" {
				t.Error("the configured client secret was written to the store")
			}
			data, _ := os.ReadFile(e.store.Path())
			if tc.secret != "" && bytes.Contains(data, []byte(tc.secret)) {
				t.Error("store file contains the configured client secret")
			}
			// Refresh works with the secret from the config (the clock is
			// past the expiry, so the transport refreshes first).
			tr := NewTransport(TransportOptions{Server: "hosted", URL: e.mcp.url(), Store: e.store, ClientSecret: tc.secret,
				Now: func() time.Time { return ent.Expiry.Add(time.Second) }})
			if st, err := post(tr, e.mcp.url()); err != nil || st == http.StatusUnauthorized {
				t.Fatalf("request after forced refresh: status %d, %v", st, err)
			}
			if e.as.nRefreshes() != 1 {
				t.Errorf("refreshes = %d, want 1", e.as.nRefreshes())
			}
			if err := callEcho(t, NewTransport(TransportOptions{Server: "hosted", URL: e.mcp.url(), Store: e.store}), e.mcp.url()); err != nil {
				t.Fatalf("call with the refreshed token: %v", err)
			}
			// Revocation authenticates with the configured secret.
			res, err := Logout(context.Background(), e.store, "hosted", e.mcp.url(), LogoutOptions{ClientSecret: tc.secret})
			if err != nil || !res.Revoked {
				t.Errorf("logout = %+v, %v; want revoked", res, err)
			}
		})
	}
}

func TestLoginClientMetadataDocument(t *testing.T) {
	e := newEnv(t)
	e.as.set(func(a *testAS) { a.cimd = true })
	const doc = "https://client.example/mcpledger/client.json"
	g, err := e.login(ClientConfig{ClientMetadataURL: doc, ClientID: "ignored-when-cimd-is-supported"})
	if err != nil {
		t.Fatal(err)
	}
	if g.ClientKind != ClientMetadataDocument || g.ClientID != doc || e.as.nRegisters() != 0 {
		t.Errorf("grant = %+v (registrations %d), want the metadata document as client id", g, e.as.nRegisters())
	}
}

func TestLoginAuthServerMetadataURL(t *testing.T) {
	e := newEnv(t)
	// The AS answers its metadata only at a custom path; discovery at the
	// well-known path finds nothing there.
	e.as.set(func(a *testAS) { a.metaAt = "/custom/meta" })
	if _, err := e.login(ClientConfig{}); err == nil {
		t.Fatal("login without the metadata URL succeeded; the test cannot tell the setting is used")
	}
	g, err := e.login(ClientConfig{AuthServerMetadataURL: e.as.srv.URL + "/custom/meta"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Issuer != e.as.srv.URL {
		t.Errorf("issuer = %q", g.Issuer)
	}
}

func TestLoginStepUpUnion(t *testing.T) {
	e := newEnv(t)
	e.mcp.mu.Lock()
	e.mcp.stepUp = "write"
	e.mcp.mu.Unlock()
	g, err := e.login(ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if g.StepUps != 1 || e.br.count() != 2 {
		t.Errorf("step-ups = %d, browser opened %d times; want 1 and 2", g.StepUps, e.br.count())
	}
	last := e.as.lastAuthorize().Get("scope")
	if got := strings.Fields(last); !slices.Contains(got, "read") || !slices.Contains(got, "write") || !slices.Contains(got, "offline_access") {
		t.Errorf("step-up requested %q, want the union of held (read offline_access) and challenged (read write)", last)
	}
	if !slices.Contains(g.Scopes, "write") {
		t.Errorf("grant scopes = %v, want write included", g.Scopes)
	}
}

func TestLoginStepUpBounded(t *testing.T) {
	e := newEnv(t)
	e.mcp.mu.Lock()
	e.mcp.stepUp = "admin"
	e.mcp.mu.Unlock()
	e.as.set(func(a *testAS) { a.grantable = []string{"read", "write", "offline_access"} }) // never admin
	_, err := e.login(ClientConfig{})
	if !errors.Is(err, ErrStepUpLimit) || !strings.HasPrefix(err.Error(), "oauth: step-up limit reached: server hosted ") {
		t.Fatalf("err = %v, want ErrStepUpLimit, without go-sdk's layers", err)
	}
	if n := e.br.count(); n != 1+MaxStepUps {
		t.Errorf("browser opened %d times, want %d (sign-in + %d step-ups)", n, 1+MaxStepUps, MaxStepUps)
	}
	if !strings.Contains(err.Error(), "hosted") || !strings.Contains(err.Error(), "admin") {
		t.Errorf("error does not name the server and scope: %v", err)
	}
	if _, err := e.store.Get("hosted", e.mcp.url()); !errors.Is(err, ErrNotFound) {
		t.Errorf("a failed login stored an entry: %v", err)
	}
}

func TestLoginBadInput(t *testing.T) {
	t.Run("consent denied", func(t *testing.T) {
		e := newEnv(t)
		e.as.set(func(a *testAS) { a.deny = true })
		_, err := e.login(ClientConfig{})
		wantErr(t, err, ErrConsentDenied, "hosted", "mcpledger login hosted")
		if want := "oauth: consent denied: server hosted: "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("error %q does not start with %q (go-sdk's layers kept)", err, want)
		}
	})
	t.Run("state mismatch", func(t *testing.T) {
		e := newEnv(t)
		e.as.set(func(a *testAS) { a.wrongState = true })
		_, err := e.login(ClientConfig{})
		wantErr(t, err, ErrStateMismatch, "hosted", "mcpledger login hosted")
		e.noLeak("error", err.Error())
	})
	t.Run("port in use", func(t *testing.T) {
		e := newEnv(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		port := ln.Addr().(*net.TCPAddr).Port
		_, err = e.login(ClientConfig{CallbackPort: port})
		wantErr(t, err, ErrCallbackPort, "hosted", strconv.Itoa(port), "callbackPort")
	})
	t.Run("unreachable authorization server", func(t *testing.T) {
		e := newEnv(t)
		e.as.srv.Close()
		_, err := e.login(ClientConfig{})
		wantErr(t, err, nil, "hosted", "reachable", "mcpledger login hosted")
		if e.br.count() != 0 {
			t.Error("the browser was opened although the AS is down")
		}
	})
	t.Run("unreadable store", func(t *testing.T) {
		e := newEnv(t)
		if err := os.MkdirAll(filepath.Dir(e.store.Path()), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(e.store.Path(), []byte("{not json"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := e.login(ClientConfig{})
		wantErr(t, err, ErrStore, "hosted", e.store.Path(), "delete it")
		if e.br.count() != 0 {
			t.Error("the browser was opened although the token could not be stored")
		}
		data, _ := os.ReadFile(e.store.Path())
		if string(data) != "{not json" {
			t.Error("a corrupt store was rewritten")
		}
	})
	t.Run("server without OAuth", func(t *testing.T) {
		e := newEnv(t)
		plain := newPlainMCP(t)
		o := e.opts(ClientConfig{})
		o.URL = plain
		_, err := Login(context.Background(), o)
		wantErr(t, err, ErrNoChallenge, "hosted")
	})
}

func wantErr(t *testing.T, err, sentinel error, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Errorf("err = %v, want %v", err, sentinel)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Errorf("error %q does not mention %q", err, c)
		}
	}
}

func TestLoginSSE(t *testing.T) {
	e := newEnv(t)
	o := e.opts(ClientConfig{})
	o.URL, o.Transport = e.mcp.srv.URL+"/sse", "sse"
	g, err := Login(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if g.Resource != e.mcp.srv.URL+"/sse" {
		t.Errorf("resource = %q", g.Resource)
	}
	if _, err := e.store.Get("hosted", e.mcp.srv.URL+"/sse"); err != nil {
		t.Fatal(err)
	}
	// The runtime's Transport carries the stored token over SSE too
	// (the stream's GET and the message POSTs), refreshing after a 401.
	e.as.expireAll()
	tr := NewTransport(TransportOptions{Server: "hosted", URL: o.URL, Store: e.store})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.SSEClientTransport{Endpoint: o.URL, HTTPClient: &http.Client{Transport: tr}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"Text": "x"}}); err != nil {
		t.Fatal(err)
	}
	if e.as.nRefreshes() != 1 {
		t.Errorf("refreshes = %d, want 1", e.as.nRefreshes())
	}
}

func TestLoginConfiguredScopes(t *testing.T) {
	e := newEnv(t)
	g, err := e.login(ClientConfig{Scopes: []string{"read", "write"}})
	if err != nil {
		t.Fatal(err)
	}
	first := strings.Fields(e.as.authorizeQueries()[0].Get("scope"))
	slices.Sort(first)
	if !slices.Equal(first, []string{"offline_access", "read", "write"}) {
		t.Errorf("requested %v, want the configured read write (plus offline_access, advertised)", first)
	}
	if !slices.Contains(g.Scopes, "write") {
		t.Errorf("grant scopes %v", g.Scopes)
	}

	// Configured scopes that lack what the server challenges with on a
	// step-up: the step-up adds the challenged scope.
	e = newEnv(t)
	e.mcp.mu.Lock()
	e.mcp.stepUp = "write"
	e.mcp.mu.Unlock()
	g, err = e.login(ClientConfig{Scopes: []string{"read"}})
	if err != nil {
		t.Fatal(err)
	}
	if g.StepUps != 1 || !slices.Contains(g.Scopes, "write") {
		t.Errorf("grant = %+v, want one step-up that obtained write", g)
	}
}

func TestLoginHeadersAndHTTPClient(t *testing.T) {
	e := newEnv(t)
	e.as.set(func(a *testAS) { a.omitScope = true })
	var n atomic.Int32
	o := e.opts(ClientConfig{})
	o.Headers = map[string]string{"X-Test": "for-the-mcp-server"}
	o.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})}
	g, err := Login(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if n.Load() == 0 {
		t.Error("LoginOptions.HTTPClient was not used")
	}
	e.mcp.mu.Lock()
	xt := slices.Clone(e.mcp.xtest)
	e.mcp.mu.Unlock()
	if len(xt) == 0 || slices.Contains(xt, "") {
		t.Errorf("the MCP server saw X-Test %q, want it on every request", xt)
	}
	e.as.mu.Lock()
	leaked := e.as.leaked
	e.as.mu.Unlock()
	if leaked != 0 {
		t.Errorf("the server's headers reached the authorization server %d times", leaked)
	}
	// Without "scope" in the token response, the requested scopes are
	// what the entry records.
	if got := slices.Sorted(slices.Values(g.Scopes)); !slices.Equal(got, []string{"offline_access", "read"}) {
		t.Errorf("scopes = %v, want the requested ones", g.Scopes)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestLoginSSEStepUp(t *testing.T) {
	e := newEnv(t)
	e.mcp.mu.Lock()
	e.mcp.stepUp = "write"
	e.mcp.mu.Unlock()
	o := e.opts(ClientConfig{})
	o.URL, o.Transport = e.mcp.srv.URL+"/sse", "sse"
	g, err := Login(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if g.StepUps != 1 || !slices.Contains(g.Scopes, "write") {
		t.Errorf("grant = %+v, want one step-up to write over SSE (the POST resent with its body)", g)
	}
}

func TestCallbackPages(t *testing.T) {
	cb, err := listenCallback("hosted", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.close()
	get := func(q string) (int, string) {
		resp, err := http.Get(redirectURL(cb.port) + q)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := get("?code=x&state=y"); st != http.StatusConflict || !strings.Contains(body, "mcpledger login") {
		t.Errorf("callback while nobody waits = %d %q", st, body)
	}
	for _, tc := range []struct {
		q    string
		code int
		page string
	}{{"?error=access_denied&state=s", http.StatusForbidden, "not completed"}, {"?code=c&state=s", http.StatusOK, "Signed in to hosted"}} {
		ch := make(chan callbackResult, 1)
		cb.mu.Lock()
		cb.waiting = ch
		cb.mu.Unlock()
		if st, body := get(tc.q); st != tc.code || !strings.Contains(body, tc.page) {
			t.Errorf("callback %s = %d %q", tc.q, st, body)
		}
		if r := <-ch; r.query.Get("state") != "s" {
			t.Errorf("callback %s delivered %v", tc.q, r.query)
		}
	}
}

func TestOneLineAndDescribeTokenErr(t *testing.T) {
	if got := oneLine("a\nb\x7fc\td"); got != "a b c d" {
		t.Errorf("oneLine = %q", got)
	}
	long := strings.Repeat("é", 300)
	if got := oneLine(long); got != strings.Repeat("é", 200)+"…" {
		t.Errorf("oneLine of 300 runes has %d runes", len([]rune(got)))
	}
	if got := oneLine(strings.Repeat("x", 200)); got != strings.Repeat("x", 200) {
		t.Errorf("oneLine cut a 200-rune string: %q", got[190:])
	}
	re := &oauth2.RetrieveError{Response: &http.Response{StatusCode: 400}, Body: []byte(`{"access_token":"leaked"}`),
		ErrorCode: "invalid_grant", ErrorDescription: "expired"}
	if got := describeTokenErr(fmt.Errorf("wrapped: %w", re)); got != "token endpoint refused (HTTP 400): invalid_grant: expired" {
		t.Errorf("describeTokenErr = %q", got)
	}
	if got := describeTokenErr(&oauth2.RetrieveError{}); got != "token endpoint refused" {
		t.Errorf("describeTokenErr(empty) = %q", got)
	}
	if got := describeTokenErr(errors.New("dial tcp: refused")); got != "dial tcp: refused" {
		t.Errorf("describeTokenErr(other) = %q", got)
	}
}

func TestLoginStepUpFailureIsNotRetried(t *testing.T) {
	e := newEnv(t)
	e.mcp.mu.Lock()
	e.mcp.stepUp = "write"
	e.mcp.mu.Unlock()
	o := e.opts(ClientConfig{})
	o.Open = func(u string) error {
		if e.br.count() == 1 { // the user declines the step-up
			e.as.set(func(a *testAS) { a.deny = true })
		}
		return e.br.open(u)
	}
	_, err := Login(context.Background(), o)
	wantErr(t, err, ErrConsentDenied, "hosted")
	if n := e.br.count(); n != 2 {
		t.Errorf("browser opened %d times, want 2 (sign-in, the declined step-up)", n)
	}
}
