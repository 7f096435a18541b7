package runtime

import (
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcpledger/mcpledger/runtime/guard"
)

// TestSSECap: an SSE stream's events within the limit pass unchanged; an
// oversized response to the call waiting on a sink is cut, its other
// fields kept and the sink told; an oversized response to another request
// is answered with the too-large error; an oversized notification is
// dropped; split across reads at every size.
func TestSSECap(t *testing.T) {
	long := strings.Repeat("y", 400)
	small := "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n"
	cut := "event: message\r\nid: 2\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\r\ndata:\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"é" + long + "\"}]}}\r\n\r\n"
	other := "id: 3\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"" + long + "\"}]}}\n\n"
	note := ": a comment\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"" + long + "\"}}\n\n"
	in := small + cut + other + note + small
	lim := shrinkLimits{keep: 10, total: 100, structured: 50, meta: 50}
	want := small +
		"event: message\r\nid: 2\r\ndata: " + `{"jsonrpc":"2.0","id":2,` + `"result":{"content":[{"type":"text","text":"é` + long[:9] + `"}]}}` + "\n\n" +
		"id: 3\ndata: " + `{"jsonrpc":"2.0","id":9,"error":{"code":-32050,"message":"mcpledger: the response was over 200 bytes, the limit (MaxMessageBytes); it was discarded"}}` + "\n\n" +
		small
	for step := 1; step <= len(in); step++ {
		calls := newWireCalls()
		sink := &wireSink{}
		id, _ := jsonrpc.MakeID(float64(2))
		calls.pending[id] = sink
		var reported []int64
		s := &sseCap{r: io.NopCloser(&chunkReader{s: in, n: step}), max: 200, calls: calls, limits: func() shrinkLimits { return lim },
			cut: func(size int64, kept int) { reported = append(reported, size) }, chunk: make([]byte, 64), spare: &spareBuf{}}
		out, err := io.ReadAll(s)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != want {
			t.Fatalf("reads of %d bytes:\n%q\nwant\n%q", step, out, want)
		}
		if sink.transit == nil || *sink.transit != (guard.Transit{Bytes: int64(len(`{"jsonrpc":"2.0","id":2,` + "\n" + `"result":{"content":[{"type":"text","text":"é` + long + `"}]}}`)), Chars: 401}) {
			t.Fatalf("reads of %d bytes: transit %+v", step, sink.transit)
		}
		if len(reported) != 1 || reported[0] != int64(len(cut)) {
			t.Fatalf("reads of %d bytes: reported %v, want %d", step, reported, len(cut))
		}
	}
}

// TestFrameCapWholeBody: over an HTTP body (one message, no newline), a
// body within the limit passes unchanged, an oversized response to the
// waiting call is cut when the body ends, and one that cannot be cut (not
// valid JSON) is answered with the too-large error.
func TestFrameCapWholeBody(t *testing.T) {
	long := strings.Repeat("z", 500)
	lim := shrinkLimits{keep: 10, total: 100, structured: 50, meta: 50}
	for _, tc := range []struct{ name, body, want string }{
		{"within the limit", `{"jsonrpc":"2.0","id":2,"result":{}}`, `{"jsonrpc":"2.0","id":2,"result":{}}`},
		{"cut", `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"` + long + `"}]}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"zzzzzzzzzz"}]}}` + "\n"},
		{"not valid JSON", `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"` + long + `"}]}`,
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32050,"message":"mcpledger: the response was 572 bytes, over the 200-byte limit (MaxMessageBytes); it was discarded"}}` + "\n"},
	} {
		calls := newWireCalls()
		id, _ := jsonrpc.MakeID(float64(2))
		calls.pending[id] = &wireSink{}
		f := newFrameCap(io.NopCloser(&chunkReader{s: tc.body, n: 7}), 200, nil)
		f.calls, f.limits, f.whole = calls, func() shrinkLimits { return lim }, true
		out, err := io.ReadAll(f)
		if err != nil || string(out) != tc.want {
			t.Errorf("%s: %v\n%s\nwant\n%s", tc.name, err, out, tc.want)
		}
		if cut := calls.pending[id].transit != nil; cut != (tc.name == "cut") {
			t.Errorf("%s: the sink says cut %v", tc.name, cut)
		}
	}
}
