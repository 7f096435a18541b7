package runtime_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/oauth"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
)

// protectedServer is an MCP server (the echo server) behind go-sdk's
// bearer-token middleware, with its protected-resource metadata and a
// token endpoint that answers the refresh-token grant: what a hosted
// server looks like to a connection that already holds a sign-in.
type protectedServer struct {
	srv *httptest.Server
	mu  sync.Mutex
	// valid are the access tokens it accepts; refresh the refresh tokens.
	valid, refresh map[string]bool
	issued         []string // every token it issued, to search for
	refreshes      int
	sawBearer      []string
}

func newProtectedServer(t *testing.T) *protectedServer {
	p := &protectedServer{valid: map[string]bool{}, refresh: map[string]bool{}}
	mux := http.NewServeMux()
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	prm := p.srv.URL + "/.well-known/oauth-protected-resource/mcp"
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.sawBearer = append(p.sawBearer, tok)
		if !p.valid[tok] {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Scopes: []string{"mcp"}, Expiration: time.Now().Add(time.Hour)}, nil
	}
	srv := runtimetest.EchoServer("hosted")
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prm})(
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)))
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"resource": p.srv.URL + "/mcp", "authorization_servers": []string{p.srv.URL}})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if r.FormValue("grant_type") != "refresh_token" || !p.refresh[r.FormValue("refresh_token")] {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		p.refreshes++
		acc := p.issue("acc")
		p.valid[acc] = true
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": acc, "token_type": "Bearer", "expires_in": 3600,
			"refresh_token": r.FormValue("refresh_token"), "scope": "mcp"})
	})
	return p
}

func (p *protectedServer) url() string { return p.srv.URL + "/mcp" }

// issue returns a new token (under p.mu).
func (p *protectedServer) issue(prefix string) string {
	tok := prefix + "-" + rand.Text()
	p.issued = append(p.issued, tok)
	return tok
}

// signIn stores a sign-in for server name as `mcpledger login` would:
// an access token the server accepts (or an expired one that it does
// not), and a refresh token.
func (p *protectedServer) signIn(t *testing.T, st *oauth.Store, name string, expired bool) {
	t.Helper()
	p.mu.Lock()
	acc, ref := p.issue("acc"), p.issue("ref")
	p.valid[acc] = !expired
	p.refresh[ref] = true
	p.mu.Unlock()
	exp := time.Now().Add(time.Hour)
	if expired {
		exp = time.Now().Add(-time.Minute)
	}
	if err := st.Put(oauth.Entry{Server: name, Resource: p.url(), AccessToken: acc, RefreshToken: ref, TokenType: "Bearer",
		Expiry: exp, Scopes: []string{"mcp"}, Issuer: p.srv.URL, TokenEndpoint: p.srv.URL + "/token",
		ClientKind: oauth.ClientRegistered, ClientID: "client-1"}); err != nil {
		t.Fatal(err)
	}
}

// hostedManager is a Manager of one server, "hosted" (p over Streamable
// HTTP), with st as its token store, on a journal file at path.
func hostedManager(t *testing.T, p *protectedServer, st *oauth.Store) (j *store.Journal, path string, m *runtime.Manager) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "journal.db")
	j, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, s := remote("hosted", events.TransportHTTP, p.url(), nil)
	o := fastOpts(configOf(c, s))
	o.OAuthStore = st
	if m, err = runtime.New(runtimetest.StoreJournal{J: j}, o); err != nil {
		t.Fatal(err)
	}
	return j, path, m
}

func oauthStore(t *testing.T) *oauth.Store {
	return oauth.NewStore(filepath.Join(t.TempDir(), "state", "oauth-tokens.json"))
}

// TestNeedsAuthThenSignIn: a server that answers 401 and has no stored
// sign-in is failed/needs_auth after one attempt (no backoff: retrying
// cannot sign in); the journaled sign-in (auth.signed_in, what `mcpledger
// login` records) relaunches it, its requests carry the stored token, and
// no token reaches the journal's bytes, even one a tool echoes back.
func TestNeedsAuthThenSignIn(t *testing.T) {
	p := newProtectedServer(t)
	st := oauthStore(t)
	j, path, m := hostedManager(t, p, st)
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	v := waitFor(t, m, "needs_auth", func(v *runtime.View) bool {
		s := state(v, "hosted")
		return s.State == events.StateFailed && s.Reason == events.ReasonNeedsAuth
	})
	if s := state(v, "hosted"); s.Attempt != 1 || s.Auth == nil || !s.Auth.NeedsAuth {
		t.Errorf("status %+v: want attempt 1 (no retry) and an auth view that waits for a sign-in", s)
	}
	if _, err := m.CallTool(t.Context(), "mcp__hosted__echo", map[string]any{"message": "x"}); err == nil {
		t.Error("a call to a server that waits for a sign-in succeeded")
	}

	p.signIn(t, st, "hosted", false)
	if err := m.RecordAuth(t.Context(), "hosted", &events.AuthSignedIn{Issuer: p.srv.URL, Resource: p.url(),
		Scopes: []string{"mcp"}, ClientKind: events.ClientRegistered}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "ready after the sign-in", func(v *runtime.View) bool { return state(v, "hosted").State == events.StateReady })
	p.mu.Lock()
	token := p.issued[0]
	p.mu.Unlock()
	res, err := m.CallTool(t.Context(), "mcp__hosted__echo", map[string]any{"message": "the token is " + token})
	if err != nil || res.IsError {
		t.Fatalf("call after the sign-in: %v %+v", err, res)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	evs := sessionEvents(t, j, m.Session())
	if got := kinds(evs, "hosted"); !inOrder(got, "connect.failed", "server.transitioned:failed", "auth.signed_in", "server.transitioned:launching", "tools.listed", "server.transitioned:ready", "call.finished") {
		t.Errorf("events %v", got)
	}
	for _, e := range evs {
		if f, ok := e.Payload.(*events.ConnectFailed); ok && f.Error.Class != events.ErrAuth {
			t.Errorf("connect.failed of class %q, want auth: %+v", f.Error.Class, f.Error)
		}
	}
	noTokenIn(t, j, path, p)
}

// TestExpiredTokenRefreshed: a stored sign-in whose access token has
// expired is refreshed before the first request, without the user; the
// refresh is journaled (auth.refreshed, no token), the new token is
// written back to the store, and the server is ready.
func TestExpiredTokenRefreshed(t *testing.T) {
	p := newProtectedServer(t)
	st := oauthStore(t)
	p.signIn(t, st, "hosted", true)
	j, path, m := hostedManager(t, p, st)
	rep, err := m.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Ready) != 1 {
		t.Fatalf("ready %v, status %+v", rep.Ready, m.Status())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	refreshes, fresh := p.refreshes, p.issued[len(p.issued)-1]
	p.mu.Unlock()
	if refreshes != 1 {
		t.Errorf("%d refreshes, want 1", refreshes)
	}
	if e, err := st.Get("hosted", p.url()); err != nil || e.AccessToken != fresh {
		t.Errorf("the store holds %v (err %v), not the refreshed token", e.AccessToken != fresh, err)
	}
	var refreshed int
	for _, e := range sessionEvents(t, j, m.Session()) {
		if r, ok := e.Payload.(*events.AuthRefreshed); ok {
			refreshed++
			if r.Issuer != p.srv.URL || r.ExpiresAt == 0 {
				t.Errorf("auth.refreshed %+v: want the issuer and the new expiry", r)
			}
		}
	}
	if refreshed != 1 {
		t.Errorf("%d auth.refreshed events, want 1", refreshed)
	}
	noTokenIn(t, j, path, p)
}

// noTokenIn closes j and checks that its file holds none of the tokens p
// issued.
func noTokenIn(t *testing.T, j *store.Journal, path string, p *protectedServer) {
	t.Helper()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, tok := range p.issued {
		if bytes.Contains(raw, []byte(tok)) {
			t.Errorf("the journal file holds the token %q", tok)
		}
	}
}
