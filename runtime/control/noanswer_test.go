package control_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/control"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// TestClientToldOutcomeUnknown: a process that answers hello and then
// closes the connection without answering (as a killed one does) gives a
// call ErrOutcomeUnknown, saying what to do, and any other request
// ErrNoAnswer only.
func TestClientToldOutcomeUnknown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // ends when the listener closes
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			var req control.Request
			if json.NewDecoder(bufio.NewReader(c)).Decode(&req) == nil && req.Op == "hello" {
				json.NewEncoder(c).Encode(control.Response{OK: true, Result: json.RawMessage(`{"pid":4242,"manager":true}`)})
			}
			c.Close()
		}
	}()
	cl, err := control.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	err = cl.Do(t.Context(), control.Request{Op: "call", Name: "mcp__s__slow"}, nil)
	if !errors.Is(err, control.ErrOutcomeUnknown) || !errors.Is(err, control.ErrNoAnswer) {
		t.Fatalf("call: %v, want ErrOutcomeUnknown and ErrNoAnswer", err)
	}
	for _, want := range []string{"pid 4242", "mcp__s__slow", "may or may not have run it", "records the call as lost (see mcpledger log)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("call error %q does not say %q", err, want)
		}
	}
	err = cl.Do(t.Context(), control.Request{Op: "reload"}, nil)
	if !errors.Is(err, control.ErrNoAnswer) || errors.Is(err, control.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "reload request") {
		t.Errorf("reload: %v, want ErrNoAnswer only", err)
	}
}

// TestOutcomeUnknownCrossesTheSocket: a call whose server exits mid-call
// (runtime.ErrOutcomeUnknown in the serving process) reaches the client
// as an error that is ErrOutcomeUnknown, worded as the process said it.
func TestOutcomeUnknownCrossesTheSocket(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	_, adapter := runtimetest.OpenJournal(t)
	c, s := runtimetest.Stdio("bad", bin, nil)
	m, _ := runtime.New(adapter, &runtime.Options{Config: runtimetest.ConfigOf(c, s)})
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	path := filepath.Join(t.TempDir(), "j.db.sock")
	srv, err := control.Serve(path, control.Options{Manager: m})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cl, err := control.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	err = cl.Do(t.Context(), control.Request{Op: "call", Name: "mcp__bad__exit", Args: json.RawMessage(`{"code":7}`)}, nil)
	if !errors.Is(err, control.ErrOutcomeUnknown) || errors.Is(err, control.ErrNoAnswer) || !strings.Contains(err.Error(), "may or may not have acted on it") {
		t.Errorf("call of a server that exits mid-call: %v, want ErrOutcomeUnknown as the process worded it", err)
	}
	err = cl.Do(t.Context(), control.Request{Op: "call", Name: "mcp__bad__nope"}, nil)
	if err == nil || errors.Is(err, control.ErrOutcomeUnknown) {
		t.Errorf("call of an unknown tool: %v, want an error that is not ErrOutcomeUnknown", err)
	}
}
