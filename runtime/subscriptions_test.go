package runtime_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
)

// TestListChangesOn2026: a 2026-07-28 server's tool list changes reach the
// catalog (through subscriptions/listen: a 2026 session has no other way
// to hear them), over stdio and stateless Streamable HTTP.
func TestListChangesOn2026(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	url, _ := runtimetest.StartHTTP(t, bin, []string{"MCPTEST_TOOLS_CHANGE_MS=150"}, "-stateless")
	for _, c := range []struct {
		name string
		cfg  func() (events.ServerConfig, config.Spec)
	}{
		{"stdio", func() (events.ServerConfig, config.Spec) {
			return stdio("dyn", bin, nil, "MCPTEST_TOOLS_CHANGE_MS=150")
		}},
		{"http", func() (events.ServerConfig, config.Spec) { return remote("dyn", events.TransportHTTP, url, nil) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, spec := c.cfg()
			j, adapter := openJournal(t)
			m := startAndWait(t, adapter, cfg, spec)
			defer m.Close()
			if pv := state(m.Snapshot(), "dyn").ProtocolVersion; pv != "2026-07-28" {
				t.Fatalf("the session speaks %q, want 2026-07-28", pv)
			}
			// dyn_<k> is added every 150 ms, dyn_<k-1> removed: three
			// different ones in the catalog prove two re-lists.
			seen := map[string]bool{}
			waitFor(t, m, "three tools dyn_<k> in turn in the catalog", func(v *runtime.View) bool {
				for _, e := range v.Catalog.Tools {
					if strings.HasPrefix(e.Tool, "dyn_") {
						seen[e.Tool] = true
					}
				}
				return len(seen) >= 3
			})
			relists := 0
			for _, l := range payloadsOf[*events.ToolsListed](sessionEvents(t, j, m.Session()), "dyn") {
				if l.Trigger == "list_changed" {
					relists++
				}
			}
			if relists < 2 {
				t.Errorf("%d re-lists on list_changed, want 2 or more", relists)
			}
		})
	}
}

// TestListenStreamReopened: when a stateless HTTP server's
// subscriptions/listen stream ends (here: the server's handler is cut
// after 300 ms, as a proxy's idle timeout would), the runtime notices,
// re-lists, listens again, and a later change still reaches the catalog.
func TestListenStreamReopened(t *testing.T) {
	srv := echoServer("web")
	srv.AddTool(&mcp.Tool{Name: "first", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	var listens, cut atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "subscriptions/listen" {
			if listens.Add(1) == 1 {
				ctx, cancel := context.WithTimeout(r.Context(), 300*time.Millisecond)
				defer cancel()
				defer cut.Add(1)
				r = r.WithContext(ctx)
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	cfg, spec := remote("web", events.TransportHTTP, ts.URL, nil)
	j, adapter := openJournal(t)
	m := startAndWait(t, adapter, cfg, spec)
	defer m.Close()
	awaitSecondListen(t, m, &listens)
	if cut.Load() != 1 {
		t.Fatalf("%d listen streams cut", cut.Load())
	}
	lateToolAfterListen(t, m, j, srv, "web")
	if st := state(m.Snapshot(), "web"); st.State != events.StateReady || st.Attempt != 1 {
		t.Errorf("web is %+v, want ready on attempt 1 (the stream is reopened, not the session)", st)
	}
}

// TestListenEndedOverTheWire: the same over a connection the runtime
// reads itself (in-process here, as stdio): the server answers the first
// subscriptions/listen at once, ending it; the runtime sees the answer,
// re-lists, listens with a request of its own on the same connection, and
// a later change reaches the catalog.
func TestListenEndedOverTheWire(t *testing.T) {
	srv := echoServer("mem")
	var listens atomic.Int32
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "subscriptions/listen" && listens.Add(1) == 1 {
				return &mcp.SubscriptionsListenResult{}, nil // ended at once
			}
			return next(ctx, method, req)
		}
	})
	j, adapter := openJournal(t)
	o := fastOpts(configOf())
	o.InProcess = map[string]*mcp.Server{"mem": srv}
	m, err := runtime.New(adapter, o)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "mem ready", func(v *runtime.View) bool { return state(v, "mem").State == events.StateReady })
	if pv := state(m.Snapshot(), "mem").ProtocolVersion; pv != "2026-07-28" {
		t.Fatalf("mem speaks %q", pv)
	}
	awaitSecondListen(t, m, &listens)
	lateToolAfterListen(t, m, j, srv, "mem")
	if res, err := m.CallTool(t.Context(), "mcp__mem__echo", map[string]any{"message": "still"}); err != nil || res.IsError {
		t.Errorf("call after the listen was replaced: %v %+v", err, res)
	}
}

// awaitSecondListen waits for the server to see a second
// subscriptions/listen. The count is not in the view (waitFor looks again
// only when the view changes, and the second listen may come after its
// last change): it is polled.
func awaitSecondListen(t *testing.T, m *runtime.Manager, listens *atomic.Int32) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); listens.Load() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no second listen within 15 s; status %+v", m.Status())
		}
	}
}

// lateToolAfterListen adds a tool to server's srv once the runtime's own
// listen is open, and checks that it reaches the catalog and that the
// server was listed initially, on the listen's reopening, then on the
// change.
func lateToolAfterListen(t *testing.T, m *runtime.Manager, j *store.Journal, srv *mcp.Server, server string) {
	t.Helper()
	time.Sleep(100 * time.Millisecond) // the second listen is acknowledged
	srv.AddTool(&mcp.Tool{Name: "late", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	waitFor(t, m, "the tool added after the listen was replaced", func(v *runtime.View) bool {
		_, ok := v.Tool("mcp__" + server + "__late")
		return ok
	})
	var triggers []string
	for _, l := range payloadsOf[*events.ToolsListed](sessionEvents(t, j, m.Session()), server) {
		triggers = append(triggers, l.Trigger)
	}
	if !inOrder(triggers, "initial", "listen_reopened", "list_changed") {
		t.Errorf("listings %v, want initial, listen_reopened, then list_changed", triggers)
	}
}
