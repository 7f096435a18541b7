package runtime

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	c := &wireConn{Connection: inner, wireCalls: newWireCalls()}
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
	var read []jsonrpc.Message
	for range 3 {
		m, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		read = append(read, m)
	}
	got, dec, _ := s1.take()
	if string(got) != string(result) {
		t.Errorf("call 1's result %s", got)
	}
	// Decoded here, go-sdk given a stand-in; call 2 (no sink) untouched.
	if dec == nil || len(dec.Content) != 1 || dec.Content[0].(*mcp.TextContent).Text != "a<b" {
		t.Errorf("call 1 decoded: %+v", dec)
	}
	if r := read[1].(*jsonrpc.Response); r.Result != nil || r.Error != errDecodedHere {
		t.Errorf("go-sdk given %s, %v for call 1 (want the stand-in error)", r.Result, r.Error)
	}
	if r := read[0].(*jsonrpc.Response); string(r.Result) != `{"content":[]}` {
		t.Errorf("go-sdk given %s for call 2", r.Result)
	}
	result[0] = 'X' // the decoder may reuse its buffer: the sink holds a copy
	if got[0] != '{' {
		t.Error("the sink shares the response's bytes")
	}
	if raw, _, _ := s3.take(); raw != nil {
		t.Errorf("an error response left %s", raw)
	}
	if raw, _, _ := s4.take(); raw != nil {
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
	if raw, res, tr := unwrapped.take(); raw != nil || res != nil || tr != nil {
		t.Error("an unused sink returned bytes")
	}
}

// decodeTextResult decodes what go-sdk decodes, or leaves it to go-sdk.
func TestDecodeTextResult(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		fast bool
	}{
		{`{"content":[{"type":"text","text":"hello"}]}`, true},
		{`{"content":[{"text":"a\u003cb \ud83d\ude00","type":"text"},{"type":"text","text":""}],"isError":true}`, true},
		{`{"isError":false,"content":[]}`, true},
		{`{"content":[{"type":"text","text":null}]}`, true},
		{`{"content":[{"type":"text","text":"x","annotations":{"priority":1}}]}`, false},
		{`{"content":[{"type":"image","data":"AA==","mimeType":"image/png"}]}`, false},
		{`{"content":[{"type":"text","text":"x"}],"structuredContent":{"a":1}}`, false},
		{`{"content":[{"type":"text","text":"x"}],"_meta":{"k":"v"}}`, true},
		// As a 2026-07-28 server answers.
		{`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}},"content":[{"type":"text","text":"hi"}],"resultType":"complete"}`, true},
		{`{"content":[{"type":"text","text":"x"}],"resultType":"complete","isError":true}`, true},
		{`{"content":[{"type":"text","text":"x"}],"_meta":null}`, true},
		{`{"content":[{"type":"text","text":"x"}],"_meta":{}}`, true},
		{`{"content":[],"resultType":"input_required","inputRequests":{}}`, false},
		{`{"content":[],"resultType":"input_required"}`, false},
		{`{"content":[],"resultType":5}`, false},
		{`{"content":[],"_meta":[1]}`, false},
		{`{"content":[{"type":"text","text":"x"}],"_meta":{"k":"v"},"isError":true,"extra":1}`, false},
		{`{"Content":[{"type":"text","text":"x"}]}`, false},
		{`{"content":[{"type":"text","Text":"x"}]}`, false},
		{`{"content":[{"type":"text"}]}`, false},
		{`{"content":null}`, false},
		{`{"content":[{"type":"text","text":5}]}`, false},
		{`{"isError":"yes","content":[]}`, false},
		{`{}`, false},
		{`[]`, false},
	} {
		got := decodeTextResult([]byte(tc.raw))
		if (got != nil) != tc.fast {
			t.Errorf("%s: decoded %v, want %v", tc.raw, got != nil, tc.fast)
			continue
		}
		if got == nil {
			continue
		}
		var want mcp.CallToolResult
		if err := json.Unmarshal([]byte(tc.raw), &want); err != nil { // go-sdk's own UnmarshalJSON
			t.Fatalf("%s: %v", tc.raw, err)
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(&want)
		if string(g) != string(w) || (got.Meta == nil) != (want.Meta == nil) {
			t.Errorf("%s:\n decoded %s\n go-sdk  %s", tc.raw, g, w)
		}
	}
}
