package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/runtime/guard"
)

// A tools/call sent by the runtime itself on a stdio or in-process
// connection (wireConn), around go-sdk's client: the plain call.
//
// Why: go-sdk's ClientSession.CallTool marshals the params twice, runs
// the sending middleware chain, tracks the call in jsonrpc2's in-flight
// state under its lock, and hands the raw result back through a
// stand-in error (errDecodedHere): about 35 of the gateway's 180–210 µs
// of CPU per call at c=16 in a profile (BENCHMARKS.md, "Gateway"). The
// plain call writes one line and waits on one channel.
//
// What it must keep: go-sdk's outcome shapes, which the call path's
// classification reads (call_outcome.go), and go-sdk's cancellation:
//
//   - a JSON-RPC error response (including frameCap's codeTooLarge) is
//     returned as `calling "tools/call": %w` of its *jsonrpc.Error;
//   - a call that could not be written because the connection had
//     ended wraps mcp.ErrConnectionClosed (the request never left);
//   - a call in flight when the connection ends gets the read error
//     (EOF, closed pipe: connectionLost);
//   - a call whose context ends returns ctx.Err() and sends the server
//     notifications/cancelled, off the caller's path.
//
// It is taken only where nothing of go-sdk's client could differ
// (Manager.plainWire): a connection the runtime wraps (stdio, in-process)
// and no sending middleware with a part in the call (Options.PlainCall).
// Below 2026-07-28 go-sdk adds nothing to a call's request; on a
// 2026-07-28 session the plain call sends the _meta go-sdk would add
// (call_meta.go), and a result asking for input that go-sdk's client
// would answer itself is left to it (Manager.callUpstream).

// wireCallParams are a tools/call's params as the plain call writes them.
type wireCallParams struct {
	Meta      mcp.Meta        `json:"_meta,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// errOwnClosing is what a request of the runtime's own gets once the
// connection has ended: the words of go-sdk's jsonrpc2.ErrClientClosing,
// wrapped as go-sdk wraps it (mcp.ErrConnectionClosed).
const errOwnClosing = "jsonrpc2: client is closing"

// notifyCancelledTimeout bounds the write of notifications/cancelled
// after a plain call's context ended (go-sdk's notifyCancellationTimeout).
const notifyCancelledTimeout = 5 * time.Second

// callTool sends tools/call of tool with args (valid JSON, as
// json.Marshal writes it; a newline in it is compacted away) and meta,
// and waits for its answer. It returns the result as the server sent it
// (raw, a copy), the result decoded, and what was cut of it in transit
// (nil: nothing; see frameCap).
func (c *wireConn) callTool(ctx context.Context, tool string, args []byte, meta mcp.Meta) (res *mcp.CallToolResult, raw []byte, transit *guard.Transit, err error) {
	const method = "tools/call"
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, err
	}
	if bytes.IndexByte(args, '\n') >= 0 { // a line must stay one line
		var b bytes.Buffer
		if err := json.Compact(&b, args); err != nil {
			return nil, nil, nil, fmt.Errorf("calling %q: marshaling call parameters: %w", method, err)
		}
		args = b.Bytes()
	}
	key, ch, err := c.addOwn()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: calling %q: %v", mcp.ErrConnectionClosed, method, err)
	}
	id, _ := jsonrpc.MakeID(key) // a string: cannot fail
	sink := &wireSink{}
	c.wireCalls.add(id, sink) // frameCap cuts an oversized answer for it
	defer sink.take()
	defer c.dropOwn(key)
	if err := c.writeCall(ctx, id, key, tool, args, meta); err != nil {
		if ctx.Err() != nil {
			return nil, nil, nil, ctx.Err()
		}
		// Nothing was sent whole: a line cut short is not a request.
		return nil, nil, nil, fmt.Errorf("%w: calling %q: %v", mcp.ErrConnectionClosed, method, err)
	}
	var resp *jsonrpc.Response
	select {
	case resp = <-ch:
	case <-ctx.Done():
		c.cancelled(id, ctx.Err())
		return nil, nil, nil, ctx.Err()
	}
	if resp.Error != nil {
		return nil, nil, nil, fmt.Errorf("calling %q: %w", method, resp.Error)
	}
	_, _, transit = sink.take()
	raw = resp.Result
	if res = decodeTextResult(raw); res != nil {
		return res, raw, transit, nil
	}
	res = new(mcp.CallToolResult)
	if err := json.Unmarshal(raw, res); err != nil {
		return nil, nil, nil, fmt.Errorf("calling %q: %w", method, err)
	}
	return res, raw, transit, nil
}

// lineWriter is a connection that writes a message encoded already, a
// line with its newline (lineConn).
type lineWriter interface {
	writeLine(ctx context.Context, line []byte) error
}

// writeCall writes the tools/call of request id (key, its string).
// Over stdio the line is put together here, once; on another connection
// (in-process) the request goes as a message.
func (c *wireConn) writeCall(ctx context.Context, id jsonrpc.ID, key, tool string, args []byte, meta mcp.Meta) error {
	if lw, ok := c.Connection.(lineWriter); ok {
		line := make([]byte, 0, 96+len(key)+len(tool)+len(args)+metaSize(meta))
		line = append(line, `{"jsonrpc":"2.0","id":`...)
		line = appendJSONString(line, key)
		line = append(line, `,"method":"tools/call","params":{`...)
		if len(meta) > 0 {
			var err error
			if line, err = appendMeta(append(line, `"_meta":`...), meta); err != nil {
				return fmt.Errorf("marshaling call parameters: %w", err)
			}
			line = append(line, ',')
		}
		line = append(line, `"name":`...)
		line = appendJSONString(line, tool)
		line = append(append(append(line, `,"arguments":`...), args...), "}}\n"...)
		return lw.writeLine(ctx, line)
	}
	params, err := json.Marshal(wireCallParams{Meta: meta, Name: tool, Arguments: args})
	if err != nil {
		return fmt.Errorf("marshaling call parameters: %w", err)
	}
	return c.Connection.Write(ctx, &jsonrpc.Request{ID: id, Method: "tools/call", Params: params})
}

// addOwn registers a request of the runtime's own: its ID's key, and the
// channel its answer comes on. It fails once the connection has ended.
func (c *wireConn) addOwn() (string, chan *jsonrpc.Response, error) {
	ch := make(chan *jsonrpc.Response, 1)
	c.ownMu.Lock()
	defer c.ownMu.Unlock()
	if c.ownEnded != nil {
		return "", nil, fmt.Errorf("%s (%w)", errOwnClosing, c.ownEnded)
	}
	if c.own == nil {
		c.own = map[string]chan *jsonrpc.Response{}
	}
	c.ownNext++
	key := ownIDPrefix + strconv.FormatInt(c.ownNext, 10)
	c.own[key] = ch
	return key, ch, nil
}

func (c *wireConn) dropOwn(key string) {
	c.ownMu.Lock()
	delete(c.own, key)
	c.ownMu.Unlock()
}

// endOwn answers every request of the runtime's own still waiting with
// err, the error that ended the connection's reading, and refuses any
// later one: no answer can come.
func (c *wireConn) endOwn(err error) {
	c.ownMu.Lock()
	defer c.ownMu.Unlock()
	if c.ownEnded != nil {
		return
	}
	c.ownEnded = err
	for key, ch := range c.own {
		id, _ := jsonrpc.MakeID(key)
		ch <- &jsonrpc.Response{ID: id, Error: err} // buffered; none answered yet
		delete(c.own, key)
	}
}

// cancelled tells the server that the runtime gave up on request id, as
// go-sdk does: off the caller's path, bounded, and owned by the
// connection (Close waits for it).
func (c *wireConn) cancelled(id jsonrpc.ID, why error) {
	params, err := json.Marshal(&mcp.CancelledParams{Reason: why.Error(), RequestID: id.Raw()})
	if err != nil {
		return
	}
	c.bg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), notifyCancelledTimeout)
		defer cancel()
		_ = c.Connection.Write(ctx, &jsonrpc.Request{Method: "notifications/cancelled", Params: params})
	})
}

// Close closes the connection and waits for the notifications it was
// sending.
func (c *wireConn) Close() error {
	err := c.Connection.Close()
	c.bg.Wait()
	return err
}
