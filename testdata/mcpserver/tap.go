package main

import (
	"context"
	"encoding/json"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tapTransport wraps the stdio transport so the server can see which
// responses answer tools/call (for MCPTEST_CRASH_AFTER) and write raw
// notifications (for MCPTEST_LIST_CHANGED_STORM). Wrapping hides go-sdk's
// unexported sessionUpdated hook from the ioConn, which only costs the
// server its refusal of JSON-RPC batches on 2025-06-18 and later; it is used
// only in those two modes.
type tapTransport struct {
	inner mcp.Transport
	st    *state
}

// Connect implements mcp.Transport.
func (t *tapTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	tc := &tapConn{Connection: c, crashAfter: t.st.cfg.crashAfter, calls: map[jsonrpc.ID]bool{}}
	t.st.tap.Store(tc)
	return tc, nil
}

type tapConn struct {
	mcp.Connection
	crashAfter int

	mu       sync.Mutex
	calls    map[jsonrpc.ID]bool // ids of tools/call requests not yet answered
	answered int
}

// Read implements mcp.Connection, noting the ids of tools/call requests.
func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if req, ok := m.(*jsonrpc.Request); ok && req.Method == "tools/call" && req.ID.IsValid() {
		c.mu.Lock()
		c.calls[req.ID] = true
		c.mu.Unlock()
	}
	return m, err
}

// Write implements mcp.Connection. Once the crashAfter-th tools/call
// result is on stdout, the process exits with status 4.
func (c *tapConn) Write(ctx context.Context, m jsonrpc.Message) error {
	err := c.Connection.Write(ctx, m)
	resp, ok := m.(*jsonrpc.Response)
	if !ok || c.crashAfter == 0 {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.calls[resp.ID] {
		return err
	}
	delete(c.calls, resp.ID)
	c.answered++
	if c.answered >= c.crashAfter {
		logf("exiting after result %d as asked (MCPTEST_CRASH_AFTER=%d)", c.answered, c.crashAfter)
		os.Exit(4)
	}
	return err
}

// notifyToolsChanged writes a notifications/tools/list_changed straight to
// the connection, bypassing go-sdk's debounce.
func (c *tapConn) notifyToolsChanged() error {
	return c.Connection.Write(context.Background(), &jsonrpc.Request{
		Method: "notifications/tools/list_changed",
		Params: json.RawMessage(`{}`),
	})
}
