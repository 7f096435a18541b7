package runtime_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
)

// methodCounter counts the JSON-RPC requests an HTTP MCP server receives,
// by method, and can refuse initialize as a server that only speaks
// 2026-07-28 would.
type methodCounter struct {
	mu             sync.Mutex
	n              map[string]int
	refuseInit     atomic.Bool
	stateless      atomic.Bool
	stateful, next http.Handler
}

func newMethodCounter(name string) *methodCounter {
	srv := echoServer(name)
	mc := &methodCounter{n: map[string]int{}}
	mc.stateful = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	mc.next = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	return mc
}

func (mc *methodCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(body, &msg)
	if msg.Method != "" {
		mc.mu.Lock()
		mc.n[msg.Method]++
		mc.mu.Unlock()
	}
	if msg.Method == "initialize" && mc.refuseInit.Load() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"error":{"code":-32022,"message":"this server speaks 2026-07-28 only"}}`))
		return
	}
	if mc.stateless.Load() {
		mc.next.ServeHTTP(w, r)
		return
	}
	mc.stateful.ServeHTTP(w, r)
}

func (mc *methodCounter) count(method string) int {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.n[method]
}

// startAndWait starts a Manager on j with the given servers and waits for
// all of them to be ready.
func startAndWait(t *testing.T, j runtime.Journal, entries ...any) *runtime.Manager {
	t.Helper()
	m, err := runtime.New(j, fastOpts(configOf(entries...)))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := m.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Ready) != len(entries)/2 {
		m.Close()
		t.Fatalf("ready %v, status %+v", rep.Ready, m.Status())
	}
	return m
}

// TestAutoConnectsInTheKnownVersion: protocolVersion auto (the default)
// negotiates 2025-11-25 with a server that does not offer 2026-07-28 at
// the cost of a server/discover, journals it on the handshake and the
// listing, and the next session on the journal connects to that server
// with initialize alone. A 2026-07-28 server is discovered each time (its
// handshake), never initialized. An explicit version pins.
func TestAutoConnectsInTheKnownVersion(t *testing.T) {
	old, neu, pinned := newMethodCounter("old"), newMethodCounter("new"), newMethodCounter("pinned")
	neu.stateless.Store(true)
	pinned.stateless.Store(true)
	url := func(h http.Handler) string {
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		return ts.URL
	}
	co, so := remote("old", events.TransportHTTP, url(old), nil)
	cn, sn := remote("new", events.TransportHTTP, url(neu), nil)
	cp, sp := remote("pinned", events.TransportHTTP, url(pinned), nil)
	cp.ProtocolVersion = "2025-11-25"
	cp.Hash = events.ConfigHash(&cp)
	sp.Config = cp
	j, adapter := openJournal(t)
	want := map[string]string{"old": "2025-11-25", "new": "2026-07-28", "pinned": "2025-11-25"}
	for session := 1; session <= 2; session++ {
		m := startAndWait(t, adapter, co, so, cn, sn, cp, sp)
		for name, pv := range want {
			if got := state(m.Snapshot(), name).ProtocolVersion; got != pv {
				t.Errorf("session %d: %s speaks %q, want %s", session, name, got, pv)
			}
			res, err := m.CallTool(t.Context(), "mcp__"+name+"__echo", map[string]any{"message": name})
			if err != nil || res.IsError {
				t.Errorf("session %d: call %s: %v %+v", session, name, err, res)
			}
		}
		evs := sessionEvents(t, j, m.Session())
		for name, pv := range want {
			ls := payloadsOf[*events.ToolsListed](evs, name)
			if len(ls) == 0 || ls[0].ProtocolVersion != pv {
				t.Errorf("session %d: %s's listing records version %+v, want %s", session, name, ls, pv)
			}
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		// old: one discover ever (the first session's), one initialize
		// per session; new: a discover per session, no initialize;
		// pinned: never a discover.
		for _, c := range []struct {
			mc                 *methodCounter
			name               string
			discover, initiali int
		}{{old, "old", 1, session}, {neu, "new", session, 0}, {pinned, "pinned", 0, session}} {
			if d, i := c.mc.count("server/discover"), c.mc.count("initialize"); d != c.discover || i != c.initiali {
				t.Errorf("after session %d, %s got %d server/discover and %d initialize, want %d and %d",
					session, c.name, d, i, c.discover, c.initiali)
			}
		}
	}
}

// TestAutoNegotiatesAfreshWhenTheKnownVersionFails: a server the journal
// knows as 2025-11-25 that now refuses initialize (it speaks 2026-07-28
// only) fails the attempt made in the known version, which says so; the
// next attempt negotiates and is ready in 2026-07-28.
func TestAutoNegotiatesAfreshWhenTheKnownVersionFails(t *testing.T) {
	mc := newMethodCounter("web")
	ts := httptest.NewServer(mc)
	t.Cleanup(ts.Close)
	c, s := remote("web", events.TransportHTTP, ts.URL, nil)
	j, adapter := openJournal(t)
	m := startAndWait(t, adapter, c, s)
	if pv := state(m.Snapshot(), "web").ProtocolVersion; pv != "2025-11-25" {
		t.Fatalf("first session speaks %q", pv)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	mc.stateless.Store(true)
	mc.refuseInit.Store(true)
	discovered := mc.count("server/discover")
	m, err := runtime.New(adapter, fastOpts(configOf(c, s)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := state(waitFor(t, m, "web ready", func(v *runtime.View) bool { return state(v, "web").State == events.StateReady }), "web")
	if st.ProtocolVersion != "2026-07-28" || st.Attempt != 2 {
		t.Errorf("web is %+v, want ready in 2026-07-28 on attempt 2", st)
	}
	evs := sessionEvents(t, j, m.Session())
	failed := payloadsOf[*events.ConnectFailed](evs, "web")
	if len(failed) != 1 || failed[0].Attempt != 1 || !strings.Contains(failed[0].Error.Message, "connected in 2025-11-25, the version it spoke before; the next attempt negotiates the version afresh") {
		t.Errorf("connect.failed: %+v", failed)
	}
	if n := mc.count("server/discover") - discovered; n != 1 {
		t.Errorf("%d server/discover in the second session, want 1 (attempt 2 only)", n)
	}
	if res, err := m.CallTool(t.Context(), "mcp__web__echo", map[string]any{"message": "hi"}); err != nil || res.IsError {
		t.Errorf("call: %v %+v", err, res)
	}
}
