package runtime

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// lineConn decodes what go-sdk's IOTransport decodes, the same way.
func TestLineConnReads(t *testing.T) {
	long := strings.Repeat("x", 200<<10) // longer than the reader's buffer
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`,
		``,
		`  {"jsonrpc":"2.0","id":"s-2","error":{"code":-32602,"message":"bad"}}  `,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + long + `"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"roots/list"}`,
		`{"jsonrpc":"2.0","id":4,"result":{}}`, // the last line, without newline
	}, "\n")
	c, _ := lineTransport{r: io.NopCloser(strings.NewReader(in)), w: nopWC{}}.Connect(t.Context())
	read := func() jsonrpc.Message {
		t.Helper()
		m, err := c.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if r, ok := read().(*jsonrpc.Response); !ok || r.ID.Raw() != int64(1) || string(r.Result) != `{"content":[]}` || r.Error != nil {
		t.Errorf("response 1: %+v", r)
	}
	r, ok := read().(*jsonrpc.Response)
	var we *jsonrpc.Error
	if !ok || r.ID.Raw() != "s-2" || !errors.As(r.Error, &we) || we.Code != -32602 || we.Message != "bad" {
		t.Errorf("error response: %+v", r)
	}
	if n, ok := read().(*jsonrpc.Request); !ok || n.IsCall() || n.Method != "notifications/message" || !strings.Contains(string(n.Params), long) {
		t.Errorf("notification: %T", n)
	}
	if q, ok := read().(*jsonrpc.Request); !ok || !q.IsCall() || q.Method != "roots/list" || q.ID.Raw() != int64(3) {
		t.Errorf("request: %+v", q)
	}
	if r, ok := read().(*jsonrpc.Response); !ok || r.ID.Raw() != int64(4) {
		t.Errorf("last response: %+v", r)
	}
	if _, err := c.Read(t.Context()); !errors.Is(err, io.EOF) {
		t.Errorf("at the end: %v (want EOF)", err)
	}
}

func TestLineConnRefuses(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`[{"jsonrpc":"2.0","id":1,"result":{}}]`, "batch"},
		{`{"jsonrpc":"1.0","id":1,"result":{}}`, "version tag"},
		{`{"jsonrpc":"2.0","result":{}}`, "neither method nor id"},
		{`{"jsonrpc":"2.0","id":{},"result":{}}`, "invalid ID"},
		{`{"jsonrpc":"2.0","id":1,"result":`, "unmarshaling"},
	} {
		c, _ := lineTransport{r: io.NopCloser(strings.NewReader(tc.line + "\n")), w: nopWC{}}.Connect(t.Context())
		if _, err := c.Read(t.Context()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (want %q)", tc.line, err, tc.want)
		}
	}
}

// Write sends one line per message; Close ends a Read blocked on the
// server's output.
func TestLineConnWriteAndClose(t *testing.T) {
	pr, pw := io.Pipe()
	var out strings.Builder
	c, _ := lineTransport{r: pr, w: &wc{w: &out}}.Connect(t.Context())
	req, _ := jsonrpc.MakeID(float64(7))
	if err := c.Write(t.Context(), &jsonrpc.Request{ID: req, Method: "ping"}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != `{"jsonrpc":"2.0","id":7,"method":"ping"}`+"\n" {
		t.Errorf("written %q", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Write(ctx, &jsonrpc.Request{ID: req, Method: "ping"}); !errors.Is(err, context.Canceled) {
		t.Errorf("write on a cancelled context: %v", err)
	}
	done := make(chan error, 1)
	go func() { // ends when Close closes the reader
		_, err := c.Read(t.Context())
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("Read after Close: no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a blocked Read")
	}
	if !c.(*lineConn).w.(*wc).closed {
		t.Error("Close did not close the server's stdin")
	}
	_ = pw.Close()
}

type nopWC struct{}

func (nopWC) Write(p []byte) (int, error) { return len(p), nil }
func (nopWC) Close() error                { return nil }

type wc struct {
	w      io.Writer
	closed bool
}

func (w *wc) Write(p []byte) (int, error) { return w.w.Write(p) }
func (w *wc) Close() error                { w.closed = true; return nil }
