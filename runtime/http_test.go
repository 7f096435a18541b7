package runtime_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

func remote(name string, tr events.Transport, url string, headers map[string]string) (events.ServerConfig, config.Spec) {
	c := events.ServerConfig{Name: name, Scope: events.ScopeUser, Transport: tr, URL: url}
	for k, v := range headers {
		c.Headers = append(c.Headers, events.KV{Key: k, Value: v})
	}
	c.Headers = events.RedactKVs(c.Headers)
	c.Hash = events.ConfigHash(&c)
	return c, config.Spec{Config: c, URL: url, Headers: headers}
}

func TestHTTPTransports(t *testing.T) {
	var sawHeader atomic.Bool
	srv := echoServer("web")
	withHeaderCheck := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "Bearer tok-123456" {
				sawHeader.Store(true)
			}
			h.ServeHTTP(w, r)
		})
	}
	stateful := httptest.NewServer(withHeaderCheck(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)))
	defer stateful.Close()
	stateless := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	defer stateless.Close()
	sse := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer sse.Close()

	c1, s1 := remote("stateful", events.TransportHTTP, stateful.URL, map[string]string{"Authorization": "Bearer tok-123456"})
	c2, s2 := remote("stateless", events.TransportHTTP, stateless.URL, nil)
	c3, s3 := remote("sse", events.TransportSSE, sse.URL, nil)
	_, adapter := openJournal(t)
	m, _ := runtime.New(adapter, fastOpts(configOf(c1, s1, c2, s2, c3, s3)))
	rep, err := m.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(rep.Ready) != 3 {
		t.Fatalf("ready %v, status %+v", rep.Ready, m.Status())
	}
	// auto: go-sdk's stateless server offers 2026-07-28; its stateful
	// and SSE servers do not, and are spoken to in 2025-11-25.
	for name, want := range map[string]string{"stateful": "2025-11-25", "stateless": "2026-07-28", "sse": "2025-11-25"} {
		res, err := m.CallTool(t.Context(), "mcp__"+name+"__echo", map[string]any{"message": name})
		if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != name {
			t.Errorf("%s: %v %+v", name, err, res)
		}
		if pv := state(m.Snapshot(), name).ProtocolVersion; pv != want {
			t.Errorf("%s negotiated %q, want %s", name, pv, want)
		}
	}
	if !sawHeader.Load() {
		t.Error("configured header never reached the server")
	}
}

func TestHTTPServerDiesThenComesBack(t *testing.T) {
	srv := echoServer("web")
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	// The server comes back on the same address: a port below the
	// ephemeral range, which no dial can take while it is down.
	addr := runtimetest.AddrOutsideEphemeral(t)
	ts := httptest.NewUnstartedServer(h)
	ts.Listener.Close()
	ln, err := rebind(addr)
	if err != nil {
		t.Fatal(err)
	}
	ts.Listener = ln
	ts.Start()
	c, s := remote("web", events.TransportHTTP, ts.URL, nil)
	_, adapter := openJournal(t)
	o := fastOpts(configOf(c, s))
	o.PingInterval, o.PingTimeout = 50*time.Millisecond, 100*time.Millisecond
	o.Decider = events.DeciderOptions{BackoffBaseMs: 50, BackoffMaxMs: 100, MaxAttempts: 50, StormLimit: fsm.MaxStormLimit, StormWindowMs: 1, PingFailures: 2}
	m, _ := runtime.New(adapter, o)
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ts.Config.Close() // the server dies (without waiting for handlers)
	ts.CloseClientConnections()
	waitFor(t, m, "web detected down", func(v *runtime.View) bool {
		st := state(v, "web").State
		return st == events.StateReconnecting || st == events.StateLaunching
	})
	// Same address, fresh server: the old MCP session is gone there.
	ts2 := httptest.NewUnstartedServer(h)
	ts2.Listener.Close()
	if ts2.Listener, err = rebind(addr); err != nil {
		t.Fatal(err)
	}
	ts2.Start()
	defer ts2.Close()
	waitFor(t, m, "web ready again", func(v *runtime.View) bool {
		s := state(v, "web")
		return s.State == events.StateReady && s.Attempt > 1
	})
	if _, err := m.CallTool(t.Context(), "mcp__web__echo", map[string]any{"message": "back"}); err != nil {
		t.Errorf("call after recovery: %v", err)
	}
}

func TestPingDetectsHungServer(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	_, adapter := openJournal(t)
	c, s := stdio("hung", bin, nil)
	o := fastOpts(configOf(c, s))
	o.PingInterval, o.PingTimeout = 50*time.Millisecond, 100*time.Millisecond
	o.Decider.PingFailures = 2
	m, _ := runtime.New(adapter, o)
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	first := state(m.Snapshot(), "hung")
	if err := syscall.Kill(first.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	v := waitFor(t, m, "a new process after the hang", func(v *runtime.View) bool {
		s := state(v, "hung")
		return s.State == events.StateReady && s.PID != first.PID
	})
	if left := runtimetest.WaitGone(t.Context(), []int{first.PID}); len(left) > 0 {
		t.Errorf("the hung process was not killed: %v", left)
	}
	if s := state(v, "hung"); s.Attempt != 2 {
		t.Errorf("attempt %d", s.Attempt)
	}
}
