package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// serveFixture is a config with the test server as "good", a journal
// path, and the environment serve runs with.
type serveFixture struct {
	dir, cfg, journal string
}

func newServeFixture(t *testing.T) serveFixture {
	t.Helper()
	bin := runtimetest.BuildServer(t)
	dir := t.TempDir()
	f := serveFixture{dir: dir, cfg: filepath.Join(dir, "mcp.json"), journal: filepath.Join(dir, "j.db")}
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"good": map[string]any{"command": bin}}})
	if err := os.WriteFile(f.cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCPLEDGER_JOURNAL", f.journal)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	return f
}

// noSurvivors fails if a process group any server was spawned in still
// has members.
func noSurvivors(t *testing.T, evs []events.Event) {
	t.Helper()
	n := 0
	for _, e := range evs {
		if p, ok := e.Payload.(*events.ProcessSpawned); ok {
			n++
			if live, err := runtimetest.ProcessesInGroup(p.PGID); err == nil && len(live) > 0 {
				t.Errorf("server %s (pgid %d) outlived serve: %v", e.Server, p.PGID, live)
			}
		}
	}
	if n == 0 {
		t.Error("no server was spawned")
	}
}

// TestServeStdio: serve --stdio speaks 2026-07-28 to a client that
// offers it (go-sdk's default) and 2025-11-25 to one that asks for it;
// each call is journaled with the client's identity (for 2026-07-28, its
// version and declared capabilities).
func TestServeStdio(t *testing.T) {
	for _, c := range []struct{ version, caller string }{
		{"2026-07-28", "stdio-client/3.1 mcp=2026-07-28 caps=roots"},
		{"2025-11-25", "stdio-client/3.1 session="},
	} {
		t.Run(c.version, func(t *testing.T) { serveStdio(t, c.version, c.caller) })
	}
}

func serveStdio(t *testing.T, version, callerPrefix string) {
	f := newServeFixture(t)
	clientR, serveW := io.Pipe()
	serveR, clientW := io.Pipe()
	done, errb := runServeStdio(f.cfg, f.dir, serveR, serveW)
	var o *mcp.ClientSessionOptions
	if version != "2026-07-28" {
		o = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-client", Version: "3.1"}, nil).Connect(t.Context(),
		&mcp.IOTransport{Reader: clientR, Writer: clientW}, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Errorf("negotiated %q, want %q", got, version)
	}
	var names []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "mcp__good__echo") {
		t.Fatalf("tools %v", names)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "mcp__good__echo", Arguments: map[string]any{"message": "via stdio"}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "via stdio" {
		t.Fatalf("call: %v %+v", err, res)
	}
	cs.Close() // the client goes away: serve stops every server and returns
	waitServeEnd(t, done, errb)
	evs := readEvents(t, f.journal)
	var caller, stopBy string
	for _, e := range evs {
		switch p := e.Payload.(type) {
		case *events.CallStarted:
			caller = p.Caller
		case *events.StopRequested:
			stopBy = p.By
		}
	}
	if !strings.HasPrefix(caller, callerPrefix) {
		t.Errorf("caller %q", caller)
	}
	if stopBy != "serve: the stdio client disconnected" {
		t.Errorf("stop.requested by %q", stopBy)
	}
	noSurvivors(t, evs)
}

func TestServeHTTPWithToken(t *testing.T) {
	f := newServeFixture(t)
	tok := filepath.Join(f.dir, "token")
	if err := os.WriteFile(tok, []byte("tok-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errb := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--http", "127.0.0.1:0", "--token-file", tok, "--plain-names", "--mcp-config", f.cfg, "--workspace", f.dir},
			strings.NewReader(""), io.Discard, errb)
	}()
	url := waitServing(t, errb, done)

	resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("no token: %d", resp.StatusCode)
	}
	hc := &http.Client{Transport: headerRT{"Authorization", "Bearer tok-0123456789"}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-client", Version: "1"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "plain over http"}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "plain over http" {
		t.Fatalf("call: %v %+v", err, res)
	}
	cs.Close()
	cancel()
	waitServeEnd(t, done, errb)
	evs := readEvents(t, f.journal)
	var rejected, started int
	for _, e := range evs {
		switch p := e.Payload.(type) {
		case *events.GatewayRejected:
			rejected++
			if p.Reason != events.RejectMissingToken || p.Status != 401 {
				t.Errorf("rejection %+v", p)
			}
		case *events.CallStarted:
			started++
			// go-sdk's client speaks 2026-07-28 by default: no session.
			if p.Name != "mcp__good__echo" || p.Caller != "http-client/1 mcp=2026-07-28 caps=roots" {
				t.Errorf("call.started %+v", p)
			}
		}
	}
	if rejected != 1 || started != 1 {
		t.Errorf("rejections %d, calls %d", rejected, started)
	}
	noSurvivors(t, evs)
}

type headerRT struct{ k, v string }

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.k, h.v)
	return http.DefaultTransport.RoundTrip(r)
}

// lockedBuffer is a bytes.Buffer safe to write and read concurrently.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var servingRE = regexp.MustCompile(`serving MCP on (http://\S+)`)

// waitServing returns the URL serve reports on stderr.
func waitServing(t *testing.T, errb *lockedBuffer, done <-chan error) string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if m := servingRE.FindStringSubmatch(errb.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended: %v\n%s", err, errb.String())
		case <-deadline:
			t.Fatalf("serve did not report its address\n%s", errb.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestServeRefusesBadCommandLines(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MCPLEDGER_JOURNAL", filepath.Join(dir, "j.db"))
	tok := filepath.Join(dir, "tok")
	os.WriteFile(tok, []byte("abc"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, "exactly one of --stdio and --http"},
		{[]string{"serve", "--stdio", "--http", "127.0.0.1:1"}, "exactly one of --stdio and --http"},
		{[]string{"serve", "--http", "0.0.0.0:0"}, "not a loopback address"},
		{[]string{"serve", "--http", ":0"}, "not a loopback address"},
		{[]string{"serve", "--http", "0.0.0.0:0", "--allow-remote"}, "--allow-remote needs --token-file"},
		{[]string{"serve", "--http", "nonsense"}, "want HOST:PORT"},
		{[]string{"serve", "--stdio", "--token-file", tok}, "are for --http"},
		{[]string{"serve", "--http", "127.0.0.1:0", "--max-inflight-mb", "4"}, "--max-inflight-mb at least 8"},
		{[]string{"serve", "--http", "127.0.0.1:0", "--max-sessions", "0"}, "--max-sessions and --max-inflight must be at least 1"},
		{[]string{"serve", "--http", "127.0.0.1:0", "--body-timeout", "0s"}, "--body-timeout positive"},
		{[]string{"serve", "--http", "127.0.0.1:0", "--session-idle", "-1m"}, "--session-idle not negative"},
		{[]string{"serve", "--stdio", "--max-result-chars", "-1"}, "--max-result-chars must be 0 (no bound) or more"},
	} {
		r := runCLI(t, c.args...)
		if r.err == nil || !strings.Contains(r.err.Error(), c.want) || exitCode(r.err) != 2 {
			t.Errorf("%q: err %v, want %q (exit 2)", c.args, r.err, c.want)
		}
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	if r := runCLI(t, "serve", "--http", "127.0.0.1:0", "--token-file", empty); r.err == nil || !strings.Contains(r.err.Error(), "want one token") {
		t.Errorf("empty token file: %v", r.err)
	}
	if r := runCLI(t, "help"); !strings.Contains(r.stdout, "serve --stdio | --http 127.0.0.1:PORT") {
		t.Errorf("help lacks serve:\n%s", r.stdout)
	}
}

// runServeStdio runs serve --stdio with the config cfg in workspace dir on
// in and out, in a goroutine of its own that ends when serve returns (and
// closes out), and returns serve's result and its stderr.
func runServeStdio(cfg, dir string, in io.Reader, out io.WriteCloser) (<-chan error, *bytes.Buffer) {
	errb := new(bytes.Buffer)
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"serve", "--stdio", "--mcp-config", cfg, "--workspace", dir}, in, out, &syncWriter{w: errb})
		out.Close()
	}()
	return done, errb
}

// waitServeEnd waits up to 15 s for a serve run in the test's process to
// return (its client gone or its context cancelled) and fails the test if
// it returned an error or did not return; errb is its stderr.
func waitServeEnd(t *testing.T, done <-chan error, errb fmt.Stringer) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v\n%s", err, errb.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("serve did not return\n%s", errb.String())
	}
}
