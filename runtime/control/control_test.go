package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/control"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

func TestControlSocket(t *testing.T) {
	_, adapter := runtimetest.OpenJournal(t)
	m, _ := runtime.New(adapter, &runtime.Options{InProcess: map[string]*mcp.Server{"mem": runtimetest.EchoServer("mem")}})
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	path := filepath.Join(t.TempDir(), "j.db.sock")
	if _, err := control.Dial(path); err == nil {
		t.Fatal("dial succeeded with nobody listening")
	}
	srv, err := control.Serve(path, control.Options{Manager: m})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v %v", fi.Mode(), err)
	}
	if _, err := control.Serve(path, control.Options{Manager: m}); err == nil {
		t.Error("a second server on a live socket was allowed")
	}
	c, err := control.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	var st control.StatusResult
	if err := c.Do(t.Context(), control.Request{Op: "status"}, &st); err != nil {
		t.Fatal(err)
	}
	if st.Session != m.Session().String() || len(st.Servers) != 1 || st.Servers[0].State != "ready" {
		t.Errorf("status %+v", st)
	}
	var tools []projections.Entry
	if err := c.Do(t.Context(), control.Request{Op: "tools"}, &tools); err != nil || len(tools) != 1 {
		t.Fatalf("tools %v %v", tools, err)
	}
	var res json.RawMessage
	if err := c.Do(t.Context(), control.Request{Op: "call", Name: "mcp__mem__echo", Args: json.RawMessage(`{"message":"via socket"}`)}, &res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res), "via socket") {
		t.Errorf("call result %s", res)
	}
	// auth: `mcpledger login` beside the session journals its sign-in
	// through the socket (the event's JSON form); only auth.* kinds.
	signed, _ := json.Marshal(events.Event{ID: events.NewID(), Kind: events.KindAuthSignedIn, Server: "mem",
		Payload: &events.AuthSignedIn{Issuer: "https://as.example", ClientKind: events.ClientRegistered}})
	if err := c.Do(t.Context(), control.Request{Op: "auth", Name: "mem", Args: signed}, nil); err != nil {
		t.Errorf("auth: %v", err)
	}
	stop, _ := json.Marshal(events.Event{ID: events.NewID(), Kind: events.KindStopRequested, Payload: &events.StopRequested{By: "x"}})
	if err := c.Do(t.Context(), control.Request{Op: "auth", Name: "mem", Args: stop}, nil); err == nil || !strings.Contains(err.Error(), "only auth.* events") {
		t.Errorf("auth op with a stop.requested: %v", err)
	}
	if err := c.Do(t.Context(), control.Request{Op: "auth", Name: "mem", Args: json.RawMessage(`{"kind":`)}, nil); err == nil {
		t.Error("auth op with broken JSON succeeded")
	}
	err = c.Do(t.Context(), control.Request{Op: "reconnect", Name: "ghost"}, nil)
	if err == nil || !strings.Contains(err.Error(), "unknown server") {
		t.Errorf("reconnect ghost: %v", err)
	}
	srv.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("socket file left behind: %v", err)
	}
}

// A Manager handed to the socket before Start: status says it is
// starting, other ops wait for its session to open, then are answered
// (a call to a server still launching says so: TestServeControlBeforeGate).
func TestControlBeforeStart(t *testing.T) {
	_, adapter := runtimetest.OpenJournal(t)
	m, _ := runtime.New(adapter, &runtime.Options{InProcess: map[string]*mcp.Server{"mem": runtimetest.EchoServer("mem")}})
	defer m.Close()
	path := filepath.Join(t.TempDir(), "j.db.sock")
	srv, err := control.Serve(path, control.Options{Manager: m})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := control.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	var st control.StatusResult
	if err := c.Do(t.Context(), control.Request{Op: "status"}, &st); err != nil || !st.Starting || st.Servers == nil {
		t.Fatalf("status before Start: %+v %v", st, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	var tools []projections.Entry
	if err := c.Do(ctx, control.Request{Op: "tools"}, &tools); err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("tools before Start: %v %v (want it to wait)", tools, err)
	}
	done := make(chan error, 1)
	go func() { // answered once Start opens the session
		var tools []projections.Entry
		done <- c.Do(t.Context(), control.Request{Op: "tools"}, &tools)
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("tools sent before Start: %v", err)
	}
	var after control.StatusResult
	if err := c.Do(t.Context(), control.Request{Op: "status"}, &after); err != nil || after.Starting || len(after.Servers) != 1 {
		t.Errorf("status after Start: %+v %v", after, err)
	}
}
