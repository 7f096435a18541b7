package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/runtime/guard"
)

// wireTransport wraps a client transport (stdio, in-process) so that the
// result of a tools/call response is kept as the server sent it, for the
// requests whose context carries a *wireSink (withWireSink). The journal
// then records the server's own JSON (redacted and capped) instead of
// re-encoding the decoded result, which cost a quarter of the call path
// for a 10 KB text (BenchmarkCallPathSteps).
//
// Streamable HTTP and SSE connections are not wrapped: go-sdk's
// streamable client connection learns the session's state through an
// unexported interface a wrapper would hide. Their results are
// re-encoded (resultJSON), as every result was before.
type wireTransport struct {
	mcp.Transport
	calls *wireCalls // nil: its own
	// connected, if set, is handed the connection (for requests of the
	// runtime's own: see wireConn.call).
	connected func(*wireConn)
}

// Connect connects the wrapped transport and wraps its connection.
func (t wireTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	calls := t.calls
	if calls == nil {
		calls = newWireCalls()
	}
	wc := &wireConn{Connection: c, wireCalls: calls}
	if t.connected != nil {
		t.connected(wc)
	}
	return wc, nil
}

// wireConn is a client connection that hands the raw result of each
// response to the sink its request was written with, and carries the
// runtime's own requests beside go-sdk's (call).
type wireConn struct {
	mcp.Connection
	*wireCalls

	ownMu    sync.Mutex
	ownNext  int64
	own      map[string]chan *jsonrpc.Response // by ID: the runtime's requests awaiting an answer
	ownEnded error                             // why reading ended: no answer can come (endOwn)

	bg sync.WaitGroup // notifications sent off a caller's path (cancelled)

	// listen is the ID of go-sdk's subscriptions/listen request (set
	// under ownMu); listenEnded, if set (before the connection is used),
	// is called when an answer to it ends that subscription.
	listen      jsonrpc.ID
	listenEnded func()
}

// ownIDPrefix starts the IDs of the runtime's own requests: strings,
// where go-sdk numbers its requests, so the two never meet.
const ownIDPrefix = "mcpledger-"

// call sends a request of the runtime's own on the connection, beside
// go-sdk's session, and waits for its answer: an error response is
// returned as its *jsonrpc.Error. go-sdk never sees the answer.
func (c *wireConn) call(ctx context.Context, method string, params any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	key, ch, err := c.addOwn()
	if err != nil {
		return fmt.Errorf("%w: calling %q: %v", mcp.ErrConnectionClosed, method, err)
	}
	defer c.dropOwn(key)
	id, _ := jsonrpc.MakeID(key) // a string: cannot fail
	if err := c.Connection.Write(ctx, &jsonrpc.Request{ID: id, Method: method, Params: raw}); err != nil {
		return fmt.Errorf("sending %q: %w", method, err)
	}
	select {
	case resp := <-ch:
		if resp.Error != nil {
			return fmt.Errorf("calling %q: %w", method, resp.Error)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("calling %q: %w", method, ctx.Err())
	}
}

// answersOwn hands resp to the runtime's request it answers, and reports
// whether there was one.
func (c *wireConn) answersOwn(resp *jsonrpc.Response) bool {
	key, ok := resp.ID.Raw().(string)
	if !ok || !strings.HasPrefix(key, ownIDPrefix) {
		return false
	}
	c.ownMu.Lock()
	ch := c.own[key]
	delete(c.own, key)
	c.ownMu.Unlock()
	if ch != nil {
		// The decoder may reuse the bytes it read.
		resp.Result = bytes.Clone(resp.Result)
		ch <- resp // buffered, one answer per request
	}
	return true // a late answer to one given up on is dropped too
}

// wireCalls are the requests of a connection written with a sink, until
// answered or taken: shared by its wireConn and, over stdio, its frameCap,
// which cuts an oversized response to one of them in transit; over HTTP,
// the calls capTransport registers.
type wireCalls struct {
	mu      sync.Mutex
	pending map[jsonrpc.ID]*wireSink
}

func newWireCalls() *wireCalls { return &wireCalls{pending: map[jsonrpc.ID]*wireSink{}} }

// add registers the sink of request id (over HTTP, where no wireConn
// sees the request); take forgets it.
func (c *wireCalls) add(id jsonrpc.ID, s *wireSink) {
	c.mu.Lock()
	c.pending[id] = s
	c.mu.Unlock()
	s.mu.Lock()
	s.conn, s.id = c, id
	s.mu.Unlock()
}

// cutInTransit notes on the sink of request id that its response was cut
// as t says, and reports whether there is such a request.
func (c *wireCalls) cutInTransit(id jsonrpc.ID, t guard.Transit) bool {
	c.mu.Lock()
	s := c.pending[id]
	c.mu.Unlock()
	if s == nil {
		return false
	}
	s.mu.Lock()
	s.transit = &t
	s.mu.Unlock()
	return true
}

// Write notes the sink of a request whose context carries one, then
// writes it.
func (c *wireConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && req.Method == methodListen {
		c.ownMu.Lock()
		c.listen = req.ID
		c.ownMu.Unlock()
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		if s, ok := ctx.Value(wireSinkKey{}).(*wireSink); ok {
			c.mu.Lock()
			c.pending[req.ID] = s
			c.mu.Unlock()
			s.mu.Lock()
			s.conn, s.id = c.wireCalls, req.ID
			s.mu.Unlock()
		}
	}
	return c.Connection.Write(ctx, msg)
}

// Read reads the next message and, for the response to a request written
// with a sink, gives the sink a copy of its result (the decoder may reuse
// the bytes it read).
func (c *wireConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	for err == nil {
		resp, ok := msg.(*jsonrpc.Response)
		if !ok || !c.answersOwn(resp) {
			break
		}
		msg, err = c.Connection.Read(ctx)
	}
	if err != nil {
		c.endOwn(err)
	}
	if resp, ok := msg.(*jsonrpc.Response); ok && c.listenEnded != nil {
		c.ownMu.Lock()
		ended := c.listen.IsValid() && resp.ID == c.listen
		c.ownMu.Unlock()
		if ended {
			c.listenEnded() // it only starts a goroutine the Manager owns
		}
	}
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error == nil && len(resp.Result) > 0 {
		c.mu.Lock()
		s := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if s != nil {
			raw := bytes.Clone(resp.Result)
			res := decodeTextResult(raw)
			if res != nil {
				// The call takes res; go-sdk would decode the result again
				// into one nobody reads. An error response it returns
				// without decoding anything (send replaces it with res).
				resp.Result, resp.Error = nil, errDecodedHere
			}
			s.mu.Lock()
			s.raw, s.res = raw, res
			s.mu.Unlock()
		}
	}
	return msg, err
}

// wireSink receives the raw result of one request.
type wireSink struct {
	mu      sync.Mutex
	conn    *wireCalls
	id      jsonrpc.ID
	raw     []byte
	res     *mcp.CallToolResult // raw decoded here (decodeTextResult), if it was
	transit *guard.Transit      // the response was cut in transit
}

type wireSinkKey struct{}

// withWireSink returns ctx carrying a new sink for the request made with
// it.
func withWireSink(ctx context.Context) (context.Context, *wireSink) {
	s := &wireSink{}
	return context.WithValue(ctx, wireSinkKey{}, s), s
}

// take returns the raw result the sink received (nil if none: the
// connection is not wrapped, or no response came), the result decoded
// from it if decodeTextResult did (go-sdk's result is then a stand-in),
// and what was cut of it in transit (nil: nothing), and forgets the
// request on its connection, answered or not.
func (s *wireSink) take() ([]byte, *mcp.CallToolResult, *guard.Transit) {
	s.mu.Lock()
	conn, id, raw, res, t := s.conn, s.id, s.raw, s.res, s.transit
	s.mu.Unlock()
	if conn != nil {
		conn.mu.Lock()
		if conn.pending[id] == s {
			delete(conn.pending, id)
		}
		conn.mu.Unlock()
	}
	return raw, res, t
}
