package control_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/runtime/control"
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
