package oauth

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callEcho connects to url through tr with go-sdk's client and calls the
// echo tool.
func callEcho(t *testing.T, tr http.RoundTripper, url string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: tr}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return err
	}
	defer cs.Close()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"Text": "hi"}})
	return err
}

// post sends one raw JSON-RPC POST through tr; the status says whether
// authorization passed (anything but 401/403).
func post(tr http.RoundTripper, url string) (int, error) {
	resp, err := (&http.Client{Transport: tr}).Post(url, "application/json",
		bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// newPlainMCP is an MCP server without OAuth; it returns its URL.
func newPlainMCP(t *testing.T) string {
	server := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct{ Text string }) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

type callbacks struct {
	mu        sync.Mutex
	needs     []string
	refreshed []time.Time
	failed    []error
	secrets   []string
}

func (c *callbacks) set(o *TransportOptions) {
	o.OnNeedsAuth = func(r string) { c.mu.Lock(); c.needs = append(c.needs, r); c.mu.Unlock() }
	o.OnRefreshed = func(exp time.Time, _ []string) { c.mu.Lock(); c.refreshed = append(c.refreshed, exp); c.mu.Unlock() }
	o.OnRefreshFailed = func(err error) { c.mu.Lock(); c.failed = append(c.failed, err); c.mu.Unlock() }
	o.OnSecrets = func(s []string) { c.mu.Lock(); c.secrets = append(c.secrets, s...); c.mu.Unlock() }
}

func (e *env) transport(cb *callbacks, now func() time.Time) *Transport {
	o := TransportOptions{Server: "hosted", URL: e.mcp.url(), Store: e.store, Now: now, Logger: e.log}
	if cb != nil {
		cb.set(&o)
	}
	return NewTransport(o)
}

func (e *env) mustLogin() Entry {
	e.t.Helper()
	if _, err := e.login(ClientConfig{}); err != nil {
		e.t.Fatal(err)
	}
	ent, err := e.store.Get("hosted", e.mcp.url())
	if err != nil {
		e.t.Fatal(err)
	}
	return ent
}

func TestTransportCarriesStoredToken(t *testing.T) {
	e := newEnv(t)
	ent := e.mustLogin()
	before := len(e.mcp.authHeaders())
	if err := callEcho(t, e.transport(nil, nil), e.mcp.url()); err != nil {
		t.Fatal(err)
	}
	for _, h := range e.mcp.authHeaders()[before:] {
		if h != "Bearer "+ent.AccessToken {
			t.Fatalf("a request carried %q, want the stored token", h[:min(len(h), 12)])
		}
	}
	if e.as.nRefreshes() != 0 {
		t.Errorf("a valid token was refreshed %d times", e.as.nRefreshes())
	}
}

func TestTransportRefreshesExpiredToken(t *testing.T) {
	e := newEnv(t)
	old := e.mustLogin()
	e.as.set(func(a *testAS) { a.refreshScope = []string{"read"} }) // the refresh drops offline_access
	var cb callbacks
	// The clock is past the token's expiry: the transport refreshes
	// before sending, without a 401.
	tr := e.transport(&cb, func() time.Time { return old.Expiry.Add(time.Second) })
	st, err := post(tr, e.mcp.url())
	if err != nil || st == http.StatusUnauthorized {
		t.Fatalf("status %d, err %v", st, err)
	}
	if e.as.nRefreshes() != 1 || len(cb.refreshed) != 1 {
		t.Fatalf("refreshes = %d, OnRefreshed calls = %d, want 1 and 1", e.as.nRefreshes(), len(cb.refreshed))
	}
	now, err := e.store.Get("hosted", e.mcp.url())
	if err != nil {
		t.Fatal(err)
	}
	if now.AccessToken == old.AccessToken || now.RefreshToken == old.RefreshToken {
		t.Error("the refreshed token was not persisted")
	}
	if hs := e.mcp.authHeaders(); hs[len(hs)-1] != "Bearer "+now.AccessToken {
		t.Error("the request did not carry the refreshed token")
	}
	// The redactor learns the stored and the refreshed secrets.
	for _, sec := range append(old.Secrets(), now.AccessToken, now.RefreshToken) {
		if !slices.Contains(cb.secrets, sec) {
			t.Errorf("OnSecrets never received the secret %.6s…", sec)
		}
	}
	if !slices.Equal(now.Scopes, []string{"read"}) {
		t.Errorf("stored scopes after refresh = %v, want the refreshed grant's", now.Scopes)
	}
	if !cb.refreshed[0].Equal(now.Expiry) {
		t.Errorf("OnRefreshed expiry %v, stored %v", cb.refreshed[0], now.Expiry)
	}
	e.noLeak("log", e.logs.String())
}

func TestTransport401RefreshesAndRetriesOnce(t *testing.T) {
	e := newEnv(t)
	old := e.mustLogin()
	e.as.expireAll() // the server refuses the token; the client thinks it valid
	tr := e.transport(nil, nil)
	n := len(e.mcp.statuses())
	st, err := post(tr, e.mcp.url())
	if err != nil || st == http.StatusUnauthorized {
		t.Fatalf("status %d, err %v", st, err)
	}
	got := e.mcp.statuses()[n:]
	if len(got) != 2 || got[0] != http.StatusUnauthorized {
		t.Fatalf("server saw statuses %v, want a 401 then the retry", got)
	}
	hs := e.mcp.authHeaders()
	if hs[len(hs)-2] != "Bearer "+old.AccessToken || hs[len(hs)-1] == hs[len(hs)-2] {
		t.Error("the retry did not carry a new token")
	}
	if e.as.nRefreshes() != 1 {
		t.Errorf("refreshes = %d, want 1", e.as.nRefreshes())
	}

	// A server that refuses the refreshed token too: one retry only.
	e.as.set(func(a *testAS) { a.rejectTokens = true })
	var cb callbacks
	tr = e.transport(&cb, nil)
	n = len(e.mcp.statuses())
	_, err = post(tr, e.mcp.url())
	wantErr(t, err, ErrNeedsAuth, "hosted", "mcpledger login hosted")
	if got := e.mcp.statuses()[n:]; len(got) != 2 {
		t.Errorf("server saw %d requests, want 2 (one retry)", len(got))
	}
	if len(cb.needs) != 1 {
		t.Errorf("OnNeedsAuth calls = %d, want 1", len(cb.needs))
	}
	e.noLeak("error", err.Error())
}

func TestTransportConcurrent401OneRefresh(t *testing.T) {
	e := newEnv(t)
	e.mustLogin()
	e.as.expireAll()
	tr := e.transport(nil, nil)
	var wg sync.WaitGroup
	var bad atomic.Int32
	for range 8 {
		wg.Go(func() {
			if st, err := post(tr, e.mcp.url()); err != nil || st == http.StatusUnauthorized {
				bad.Add(1)
			}
		})
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Errorf("%d requests failed", bad.Load())
	}
	if e.as.nRefreshes() != 1 {
		t.Errorf("refreshes = %d for 8 concurrent 401s, want 1", e.as.nRefreshes())
	}
}

func TestTransportRefreshFailureNeedsAuth(t *testing.T) {
	e := newEnv(t)
	old := e.mustLogin()
	e.as.set(func(a *testAS) { a.failRefresh = true })
	var cb callbacks
	tr := e.transport(&cb, func() time.Time { return old.Expiry.Add(time.Second) })
	_, err := post(tr, e.mcp.url())
	wantErr(t, err, ErrNeedsAuth, "hosted", "mcpledger login hosted", "invalid_grant")
	if len(cb.needs) != 1 || len(cb.failed) != 1 {
		t.Errorf("OnNeedsAuth %d, OnRefreshFailed %d calls; want 1 and 1", len(cb.needs), len(cb.failed))
	}
	// go-sdk's client surfaces the sentinel through Connect.
	err = callEcho(t, tr, e.mcp.url())
	if !errors.Is(err, ErrNeedsAuth) {
		t.Errorf("go-sdk connect error %v does not wrap ErrNeedsAuth", err)
	}
	e.noLeak("error", err.Error())
	e.noLeak("callback error", cb.failed[0].Error())
	e.noLeak("log", e.logs.String())
}

func TestTransportWithoutEntry(t *testing.T) {
	t.Run("server without OAuth passes through", func(t *testing.T) {
		e := newEnv(t)
		plain := newPlainMCP(t)
		tr := NewTransport(TransportOptions{Server: "plain", URL: plain, Store: e.store})
		if err := callEcho(t, tr, plain); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(e.store.Path()); err == nil {
			t.Error("a read created the store file")
		}
	})
	t.Run("401 without a challenge is the server's answer", func(t *testing.T) {
		e := newEnv(t)
		e.mustLogin()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "basic auth only", http.StatusUnauthorized)
		}))
		defer srv.Close()
		tr := NewTransport(TransportOptions{Server: "hosted", URL: e.mcp.url(), Store: e.store})
		st, err := post(tr, srv.URL)
		if err != nil || st != http.StatusUnauthorized {
			t.Errorf("status %d, err %v; want the 401 passed through", st, err)
		}
		if e.as.nRefreshes() != 0 {
			t.Error("a 401 without a Bearer challenge caused a refresh")
		}
	})
	t.Run("a body that cannot be resent is not retried", func(t *testing.T) {
		e := newEnv(t)
		e.mustLogin()
		e.as.expireAll()
		tr := NewTransport(TransportOptions{Server: "hosted", URL: e.mcp.url(), Store: e.store})
		req, _ := http.NewRequest(http.MethodPost, e.mcp.url(), io.NopCloser(strings.NewReader(`{}`)))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || e.as.nRefreshes() != 0 {
			t.Errorf("status %d after %d refreshes; want the 401 back, no refresh", resp.StatusCode, e.as.nRefreshes())
		}
	})
	t.Run("challenge without sign-in", func(t *testing.T) {
		e := newEnv(t)
		var cb callbacks
		_, err := post(e.transport(&cb, nil), e.mcp.url())
		wantErr(t, err, ErrNeedsAuth, "hosted", "mcpledger login hosted")
		if len(cb.needs) != 1 {
			t.Errorf("OnNeedsAuth calls = %d", len(cb.needs))
		}
	})
	t.Run("changed URL never gets the token", func(t *testing.T) {
		e := newEnv(t)
		ent := e.mustLogin()
		// The same server name now points at another URL (another path
		// on the same host, which the protected-resource metadata also
		// covers): the old token must not be sent.
		moved := e.mcp.srv.URL + "/sse"
		if _, err := e.store.Get("hosted", moved); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get at a changed URL = %v, want ErrNotFound", err)
		}
		tr := NewTransport(TransportOptions{Server: "hosted", URL: moved, Store: e.store})
		n := len(e.mcp.authHeaders())
		_, err := post(tr, moved)
		wantErr(t, err, ErrNeedsAuth, "hosted")
		for _, h := range e.mcp.authHeaders()[n:] {
			if strings.Contains(h, ent.AccessToken) {
				t.Fatal("the token of the old URL was sent to the new one")
			}
		}
	})
}

func TestTransportInsufficientScope(t *testing.T) {
	e := newEnv(t)
	e.mustLogin()
	e.mcp.mu.Lock()
	e.mcp.stepUp = "write"
	e.mcp.mu.Unlock()
	err := callEcho(t, e.transport(nil, nil), e.mcp.url())
	wantErr(t, err, ErrInsufficientScope, "hosted", `(missing "write")`, "mcpledger login hosted")
	e.noLeak("error", err.Error())
}

func TestLogout(t *testing.T) {
	e := newEnv(t)
	ent := e.mustLogin()
	res, err := Logout(context.Background(), e.store, "hosted", e.mcp.url(), LogoutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Removed || !res.Revoked || res.RevokeErr != nil {
		t.Errorf("result = %+v", res)
	}
	e.as.mu.Lock()
	revoked := slices.Clone(e.as.revoked)
	e.as.mu.Unlock()
	if !slices.Contains(revoked, ent.RefreshToken) || !slices.Contains(revoked, ent.AccessToken) {
		t.Errorf("revoked %d tokens, want the refresh and the access token", len(revoked))
	}
	if _, err := e.store.Get("hosted", e.mcp.url()); !errors.Is(err, ErrNotFound) {
		t.Errorf("entry still stored: %v", err)
	}
	// A revoked token no longer works; the transport asks for sign-in.
	_, err = post(e.transport(nil, nil), e.mcp.url())
	wantErr(t, err, ErrNeedsAuth)

	res, err = Logout(context.Background(), e.store, "hosted", e.mcp.url(), LogoutOptions{})
	if err != nil || res.Removed {
		t.Errorf("second logout = %+v, %v; want nothing removed", res, err)
	}
}

func TestLogoutRevokeFailureStillDeletes(t *testing.T) {
	e := newEnv(t)
	e.mustLogin()
	e.as.srv.Close()
	res, err := Logout(context.Background(), e.store, "hosted", e.mcp.url(), LogoutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Removed || res.Revoked || res.RevokeErr == nil {
		t.Fatalf("result = %+v, want removed, not revoked, with the error", res)
	}
	wantErr(t, res.RevokeErr, nil, "hosted", "revoke")
	e.noLeak("revoke error", res.RevokeErr.Error())
	if _, err := e.store.Get("hosted", e.mcp.url()); !errors.Is(err, ErrNotFound) {
		t.Errorf("a failed revocation kept the entry: %v", err)
	}
}

// TestTransportPicksUpStepUp: a 403 insufficient_scope is a *ScopeError
// naming the scopes asked for, held and missing; once a sign-in with more
// scope is stored (a step-up by `mcpledger login` or a one-shot call), the
// same Transport's next 403 re-reads the store and retries once with the
// new token, which passes.
func TestTransportPicksUpStepUp(t *testing.T) {
	e := newEnv(t)
	e.mustLogin()
	e.mcp.mu.Lock()
	e.mcp.stepUp = "write"
	e.mcp.mu.Unlock()
	tr := e.transport(nil, nil)
	err := callEcho(t, tr, e.mcp.url())
	var se *ScopeError
	if !errors.As(err, &se) || !errors.Is(err, ErrInsufficientScope) {
		t.Fatalf("err = %v, want a *ScopeError", err)
	}
	if se.Server != "hosted" || !slices.Equal(se.Missing, []string{"write"}) || !slices.Contains(se.Want, "write") || !slices.Contains(se.Want, "read") {
		t.Errorf("ScopeError = %+v", se)
	}
	if _, err := e.login(ClientConfig{Scopes: append(slices.Clone(se.Held), "read", "write")}); err != nil {
		t.Fatal(err)
	}
	if err := callEcho(t, tr, e.mcp.url()); err != nil {
		t.Errorf("after the step-up was stored: %v", err)
	}
}
