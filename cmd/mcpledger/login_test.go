package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

// authEnv is the environment of a login test: its own HOME and state
// directory (the token store), journal and config file with the given
// servers.
func authEnv(t *testing.T, servers map[string]any) (map[string]string, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": servers})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"HOME": dir, "XDG_STATE_HOME": filepath.Join(dir, "state"), "XDG_CONFIG_HOME": filepath.Join(dir, "config"),
		"MCPLEDGER_JOURNAL": filepath.Join(dir, "journal.db")}, cfg
}

// closedURL is an http URL nothing listens on.
func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + l.Addr().String() + "/mcp"
	l.Close()
	return u
}

// TestLoginBadInput: login and logout name what is wrong and what to do,
// and change nothing: no such server, a stdio server, no name, an
// unreachable server (its failure journaled as auth.failed, no token
// store written), a sign-out of a server that is not signed in.
func TestLoginBadInput(t *testing.T) {
	vars, cfg := authEnv(t, map[string]any{
		"local":  map[string]any{"command": "true"},
		"remote": map[string]any{"type": "http", "url": closedURL(t), "oauth": map[string]any{"clientId": "cli-1"}},
	})
	var ue *usageError
	if r := runEnv(t, vars, "login", "--mcp-config", cfg); !errors.As(r.err, &ue) {
		t.Errorf("login without a name: %v, want a usage error", r.err)
	}
	if r := runEnv(t, vars, "login", "nosuch", "--mcp-config", cfg); r.err == nil || !strings.Contains(r.err.Error(), `no server "nosuch"`) {
		t.Errorf("login nosuch: %v", r.err)
	}
	if r := runEnv(t, vars, "login", "local", "--mcp-config", cfg); r.err == nil || !strings.Contains(r.err.Error(), "sign-in is for remote") {
		t.Errorf("login of a stdio server: %v", r.err)
	}
	r := runEnv(t, vars, "login", "remote", "--no-browser", "--timeout", "5s", "--mcp-config", cfg)
	if r.err == nil || !strings.Contains(r.err.Error(), "login remote") || !strings.Contains(r.err.Error(), "mcpledger login remote") {
		t.Errorf("login of an unreachable server: %v", r.err)
	}
	if _, err := os.Stat(filepath.Join(vars["XDG_STATE_HOME"], "mcpledger", "oauth-tokens.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed login wrote the token store: %v", err)
	}
	if kinds := journalKinds(t, vars["MCPLEDGER_JOURNAL"]); !strings.Contains(kinds, "auth.failed") {
		t.Errorf("the failed login is not journaled: %s", kinds)
	}
	r = runEnv(t, vars, "logout", "remote", "--json", "--mcp-config", cfg)
	var res authResult
	if r.err != nil || json.Unmarshal([]byte(r.stdout), &res) != nil || res.Removed || res.Server != "remote" || res.Store == "" {
		t.Errorf("logout of a server not signed in: %v %q", r.err, r.stdout)
	}
	if r := runEnv(t, vars, "logout", "remote", "--mcp-config", cfg); r.err != nil || !strings.Contains(r.stdout, "not signed in") {
		t.Errorf("logout text: %v %q", r.err, r.stdout)
	}
}

// TestStatusNeedsAuth: a server that answers 401 with a challenge and has
// no sign-in is reported failed/needs_auth after one attempt, with the
// command that signs in.
func TestStatusNeedsAuth(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	reject := func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
		return nil, auth.ErrInvalidToken
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "hosted"}, nil)
	mux.Handle("/mcp", auth.RequireBearerToken(reject, &auth.RequireBearerTokenOptions{ResourceMetadataURL: srv.URL + "/.well-known/oauth-protected-resource/mcp"})(
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)))
	vars, cfg := authEnv(t, map[string]any{"hosted": map[string]any{"type": "http", "url": srv.URL + "/mcp"}})
	r := runEnv(t, vars, "run", "--once", "--mcp-config", cfg)
	if !strings.Contains(r.stdout, "needs_auth") || !strings.Contains(r.stdout, "hosted: needs a sign-in: run mcpledger login hosted") {
		t.Errorf("run --once: %v\nstdout %s\nstderr %s", r.err, r.stdout, r.stderr)
	}
	t.Logf("run --once:\n%s", r.stdout)
	if strings.Contains(r.stdout, "attempts_exhausted") {
		t.Errorf("a server that needs a sign-in was retried:\n%s", r.stdout)
	}
}

// journalKinds lists the kinds of every event of the journal at path.
func journalKinds(t *testing.T, path string) string {
	t.Helper()
	j, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var kinds []string
	if err := j.ReadAll(t.Context(), 0, func(e events.Event) error {
		kinds = append(kinds, string(e.Kind))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return strings.Join(kinds, " ")
}
