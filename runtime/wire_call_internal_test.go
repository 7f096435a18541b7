package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// TestPlainWire: the plain call (wire_call.go) is taken only where
// nothing of go-sdk's client could differ: with a front end's client only
// when its PlainCall says the call needs nothing of its middleware, and on
// a 2026-07-28 session with the _meta go-sdk's client puts on a call (the
// version, client info and capabilities it declares, a front end's
// included), and knowing who answers a server's input requests.
func TestPlainWire(t *testing.T) {
	type plainKey struct{}
	for _, tc := range []struct {
		name      string
		version   string
		newClient bool
		noMRTR    bool // the front end's client leaves input requests to its caller
		plainCall bool // Options.PlainCall set; it answers ctx's plainKey
		ctxPlain  bool
		want      bool
	}{
		{name: "2025-11-25", version: "2025-11-25", want: true},
		{name: "2025-06-18", version: "2025-06-18", want: true},
		{name: "2026-07-28", version: "2026-07-28", want: true},
		{name: "front-end-without-PlainCall", version: "2025-11-25", newClient: true, want: false},
		{name: "front-end-plain", version: "2025-11-25", newClient: true, plainCall: true, ctxPlain: true, want: true},
		{name: "front-end-middleware", version: "2025-11-25", newClient: true, plainCall: true, ctxPlain: false, want: false},
		{name: "front-end-2026", version: "2026-07-28", newClient: true, noMRTR: true, plainCall: true, ctxPlain: true, want: true},
		{name: "front-end-2026-middleware", version: "2026-07-28", newClient: true, plainCall: true, ctxPlain: false, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Options{InProcess: map[string]*mcp.Server{"mem": mcp.NewServer(&mcp.Implementation{Name: "mem", Version: "1"}, nil)},
				Seed: 1, PingInterval: -1, ProtocolVersion: tc.version, ClientName: "probe-client", ClientVersion: "7"}
			if tc.newClient {
				o.NewClient = func(_ string, impl *mcp.Implementation, co *mcp.ClientOptions) *mcp.Client {
					co.ElicitationHandler = func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return nil, nil }
					if tc.noMRTR {
						co.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
					}
					return mcp.NewClient(impl, co)
				}
			}
			if tc.plainCall {
				o.PlainCall = func(ctx context.Context) bool { return ctx.Value(plainKey{}) == true }
			}
			_, adapter := runtimetest.OpenJournal(t)
			m, err := New(adapter, o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			c := m.view.Load().live["mem"]
			if c == nil {
				t.Fatal("mem is not live")
			}
			cs := c.session()
			if got := cs.InitializeResult().ProtocolVersion; got != tc.version {
				t.Fatalf("negotiated %s", got)
			}
			ctx := context.WithValue(t.Context(), plainKey{}, tc.ctxPlain)
			p := m.plainWire(ctx, c, cs)
			if got := p.w != nil; got != tc.want {
				t.Fatalf("plain call taken: %v, want %v", got, tc.want)
			}
			if p.w != nil {
				if p.answersInput != !tc.noMRTR {
					t.Errorf("answersInput = %v with MultiRoundTrip disabled %v", p.answersInput, tc.noMRTR)
				}
				// The _meta go-sdk's client puts on a 2026-07-28 call, as
				// JSON: its version, the client's info and what it declares
				// (elicitation, with the front end's handler).
				b, _ := json.Marshal(p.base)
				want := "null"
				switch {
				case tc.version < "2026":
				case tc.newClient:
					want = `{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},"io.modelcontextprotocol/clientInfo":{"name":"probe-client","version":"7"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
				default:
					want = `{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"probe-client","version":"7"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
				}
				if string(b) != want {
					t.Errorf("the _meta of a plain call: %s\nwant %s", b, want)
				}
			}
			m.sdkCalls = true
			if m.plainWire(ctx, c, cs).w != nil {
				t.Error("plain call taken with sdkCalls set")
			}
		})
	}
}

// pipeConn is an mcp.Connection whose Read returns what is sent on in
// (an error ends it), and whose Write hands what is written to out.
type pipeConn struct {
	in  chan any
	out chan jsonrpc.Message
}

func (p *pipeConn) Read(context.Context) (jsonrpc.Message, error) {
	switch v := (<-p.in).(type) {
	case error:
		return nil, v
	default:
		return v.(jsonrpc.Message), nil
	}
}
func (p *pipeConn) Write(_ context.Context, m jsonrpc.Message) error { p.out <- m; return nil }
func (p *pipeConn) Close() error                                     { return nil }
func (p *pipeConn) SessionID() string                                { return "" }

// TestWireConnCallTool: the plain call writes one tools/call of the
// runtime's own (a string ID go-sdk never uses; arguments kept on one
// line), takes its answer from Read before go-sdk sees it, with a copy of
// the result; a call in flight when reading ends gets the read error
// (connectionLost), and a later one is refused as never sent
// (mcp.ErrConnectionClosed).
func TestWireConnCallTool(t *testing.T) {
	p := &pipeConn{in: make(chan any, 4), out: make(chan jsonrpc.Message, 4)}
	c := &wireConn{Connection: p, wireCalls: newWireCalls()}
	reader := make(chan error, 1)
	go func() { // go-sdk's reading goroutine
		for {
			m, err := c.Read(context.Background())
			if err != nil {
				reader <- err
				return
			}
			t.Errorf("go-sdk was given %v", m)
		}
	}()

	type answer struct {
		res *mcp.CallToolResult
		raw []byte
		err error
	}
	calls := make(chan answer, 1)
	call := func() {
		res, raw, _, err := c.callTool(context.Background(), "echo", []byte("{\n \"message\": \"hi\"\n}"), mcp.Meta{"traceparent": "tp"})
		calls <- answer{res, raw, err}
	}
	go call()
	req := (<-p.out).(*jsonrpc.Request)
	if key, _ := req.ID.Raw().(string); !strings.HasPrefix(key, ownIDPrefix) || req.Method != "tools/call" {
		t.Fatalf("wrote %+v", req)
	}
	if want := `{"_meta":{"traceparent":"tp"},"name":"echo","arguments":{"message":"hi"}}`; string(req.Params) != want {
		t.Errorf("params %s, want %s", req.Params, want)
	}
	result := []byte(`{"content":[{"type":"text","text":"hi"}]}`)
	p.in <- &jsonrpc.Response{ID: req.ID, Result: result}
	a := <-calls
	if a.err != nil || firstText(a.res) != "hi" || string(a.raw) != string(result) {
		t.Fatalf("answer %+v %s %v", a.res, a.raw, a.err)
	}
	result[0] = 'X' // the decoder may reuse its buffer
	if a.raw[0] != '{' {
		t.Error("the answer shares the decoder's bytes")
	}

	go call()
	<-p.out
	p.in <- io.EOF // the server is gone with the call in flight
	if a := <-calls; !errors.Is(a.err, io.EOF) || !connectionLost(a.err) || errors.Is(a.err, mcp.ErrConnectionClosed) {
		t.Errorf("in flight at EOF: %v", a.err)
	}
	if err := <-reader; !errors.Is(err, io.EOF) {
		t.Errorf("go-sdk read %v", err)
	}
	call()
	if a := <-calls; !errors.Is(a.err, mcp.ErrConnectionClosed) {
		t.Errorf("after EOF: %v", a.err)
	}
	if len(c.own) != 0 || len(c.pending) != 0 {
		t.Errorf("left %d own, %d pending", len(c.own), len(c.pending))
	}
}

// lockedBuffer is an io.WriteCloser keeping what is written, safe to
// read while written.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}
func (b *lockedBuffer) Close() error { return nil }
func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// TestWireCallLine: over stdio the plain call writes its request as one
// line it puts together itself, which decodes (as a server decodes it)
// to the request go-sdk's encoding would give, whatever the tool's name
// and the arguments' spacing.
func TestWireCallLine(t *testing.T) {
	for _, tc := range []struct {
		tool string
		args string
		meta mcp.Meta
	}{
		{"echo", `{"message":"hi"}`, nil},
		{`we"ird\name` + "\t\u00e9<&>", `{"a":[1,2,{"b":null}],"s":"x\ny"}`, mcp.Meta{"traceparent": "00-abc-def-01", "tracestate": "k=v"}},
		{"spaced", "{\n  \"a\": 1\n}", nil},
		{"meta", `{}`, mcp.Meta{ // as probeCallMeta keeps go-sdk's, beside a front end's values
			"io.modelcontextprotocol/clientInfo": rawMeta(`{"name":"c\u003c","version":"1"}`), "n": 1.5,
			"caps": map[string]any{"elicitation": map[string]any{}}, "k\"<é": "v\n", "nil": nil}},
	} {
		out := &lockedBuffer{}
		lc := &lineConn{w: out}
		c := &wireConn{Connection: lc, wireCalls: newWireCalls()}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // no answer will come: the call gives up once written
		done := make(chan error, 1)
		go func() { _, _, _, err := c.callTool(ctx, tc.tool, []byte(tc.args), tc.meta); done <- err }()
		<-done
		if len(out.Bytes()) != 0 {
			t.Fatalf("a call with its context ended wrote %q", out.Bytes())
		}

		written := make(chan struct{})
		ctx, cancel = context.WithCancel(context.Background())
		go func() {
			_, _, _, err := c.callTool(ctx, tc.tool, []byte(tc.args), tc.meta)
			done <- err
			close(written)
		}()
		for deadline := time.Now().Add(5 * time.Second); len(out.Bytes()) == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		cancel()
		<-written
		c.bg.Wait()
		line, _, _ := bytes.Cut(out.Bytes(), []byte("\n"))
		msg, err := decodeLine(line)
		if err != nil {
			t.Fatalf("%s: the line %s does not decode: %v", tc.tool, line, err)
		}
		req := msg.(*jsonrpc.Request)
		want, _ := json.Marshal(&mcp.CallToolParams{Name: tc.tool, Arguments: json.RawMessage(tc.args), Meta: tc.meta})
		var got, wantV any
		json.Unmarshal(req.Params, &got)
		json.Unmarshal(want, &wantV)
		if !reflect.DeepEqual(got, wantV) || req.Method != "tools/call" || !strings.HasPrefix(req.ID.Raw().(string), ownIDPrefix) {
			t.Errorf("%s: wrote %s %v %s, want the params %s", tc.tool, req.Method, req.ID, req.Params, want)
		}
	}
}
