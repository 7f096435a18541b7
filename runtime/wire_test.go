package runtime

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// fakeConn is an mcp.Connection whose Read returns the queued messages.
type fakeConn struct {
	in      []jsonrpc.Message
	written []jsonrpc.Message
}

func (f *fakeConn) Read(context.Context) (jsonrpc.Message, error) {
	m := f.in[0]
	f.in = f.in[1:]
	return m, nil
}
func (f *fakeConn) Write(_ context.Context, m jsonrpc.Message) error {
	f.written = append(f.written, m)
	return nil
}
func (f *fakeConn) Close() error      { return nil }
func (f *fakeConn) SessionID() string { return "" }

// TestWireConn checks the sink bookkeeping: a call written with a sink
// gets a copy of its response's result; a call without one, an error
// response and a notification leave nothing; a sink whose call was
// never answered is forgotten when taken.
func TestWireConn(t *testing.T) {
	id := func(n int64) jsonrpc.ID { i, _ := jsonrpc.MakeID(float64(n)); return i }
	call := func(n int64) *jsonrpc.Request {
		return &jsonrpc.Request{ID: id(n), Method: "tools/call", Params: json.RawMessage(`{}`)}
	}
	result := json.RawMessage(`{"content":[{"type":"text","text":"a\u003cb"}]}`)
	inner := &fakeConn{in: []jsonrpc.Message{
		&jsonrpc.Response{ID: id(2), Result: json.RawMessage(`{"content":[]}`)},
		&jsonrpc.Response{ID: id(1), Result: result},
		&jsonrpc.Response{ID: id(3), Error: &jsonrpc.Error{Code: 1, Message: "no"}},
	}}
	c := &wireConn{Connection: inner, pending: map[jsonrpc.ID]*wireSink{}}
	ctx := context.Background()

	ctx1, s1 := withWireSink(ctx)
	ctx3, s3 := withWireSink(ctx)
	ctx4, s4 := withWireSink(ctx)
	for _, w := range []struct {
		ctx context.Context
		msg jsonrpc.Message
	}{
		{ctx1, call(1)}, {ctx, call(2)}, {ctx3, call(3)}, {ctx4, call(4)},
		{ctx1, &jsonrpc.Request{Method: "notifications/cancelled"}},
	} {
		if err := c.Write(w.ctx, w.msg); err != nil {
			t.Fatal(err)
		}
	}
	if len(inner.written) != 5 || len(c.pending) != 3 {
		t.Fatalf("%d written, %d pending", len(inner.written), len(c.pending))
	}
	for range 3 {
		if _, err := c.Read(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := s1.take()
	if string(got) != string(result) {
		t.Errorf("call 1's result %s", got)
	}
	result[0] = 'X' // the decoder may reuse its buffer: the sink holds a copy
	if got[0] != '{' {
		t.Error("the sink shares the response's bytes")
	}
	if raw := s3.take(); raw != nil {
		t.Errorf("an error response left %s", raw)
	}
	if raw := s4.take(); raw != nil {
		t.Errorf("an unanswered call left %s", raw)
	}
	if len(c.pending) != 0 {
		t.Errorf("%d requests still pending: %v", len(c.pending), slices.Collect(func(yield func(jsonrpc.ID) bool) {
			for k := range c.pending {
				if !yield(k) {
					return
				}
			}
		}))
	}
	var unwrapped wireSink // a call on a connection that is not wrapped
	if unwrapped.take() != nil {
		t.Error("an unused sink returned bytes")
	}
}
