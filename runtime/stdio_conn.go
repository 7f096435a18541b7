package runtime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/mcpledger/mcpledger/runtime/internal/sdkjson"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lineTransport is the client side of a stdio server's session:
// newline-delimited JSON-RPC messages read from r (the server's stdout,
// already filtered and capped: jsonLines, frameCap) and written to w (its
// stdin).
//
// It replaces go-sdk's IOTransport, which decodes each message three times
// (a framing pass, then an attempt as a batch and again as one message,
// each of the last two allocating and clearing a 32 KiB buffer) and hands
// it between two goroutines: on a gateway's busy path that was a tenth of
// its CPU (BENCHMARKS.md, "Gateway"). Here a message is framed by its
// newline and decoded once, on the reading goroutine. Batches, which
// 2025-06-18 and later forbid and no server sends a client, are refused.
type lineTransport struct {
	r io.ReadCloser
	w io.WriteCloser
}

func (t lineTransport) Connect(context.Context) (mcp.Connection, error) {
	return &lineConn{r: t.r, w: t.w, br: bufio.NewReaderSize(t.r, 64<<10)}, nil
}

// lineConn is a lineTransport's connection. Read is called from one
// goroutine (jsonrpc2's reader); Close unblocks it by closing r.
type lineConn struct {
	r  io.ReadCloser
	w  io.WriteCloser
	br *bufio.Reader

	line []byte // the message being read, reused

	wmu sync.Mutex // one message written at a time

	closeOnce sync.Once
	closeErr  error
}

// lineWire is a JSON-RPC message as it is decoded.
type lineWire struct {
	Version string          `json:"jsonrpc"`
	ID      any             `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

// largeLine is the size above which a message's buffer is not kept for
// the next one.
const largeLine = 256 << 10

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for {
		line, err := c.readLine()
		if len(bytes.TrimSpace(line)) > 0 {
			msg, derr := decodeLine(line)
			if cap(c.line) > largeLine {
				c.line = nil
			}
			if derr != nil {
				return nil, derr
			}
			return msg, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// readLine returns the next line, without its newline (the last one may
// lack it, then err is io.EOF or the read error).
func (c *lineConn) readLine() ([]byte, error) {
	c.line = c.line[:0]
	for {
		frag, err := c.br.ReadSlice('\n')
		c.line = append(c.line, frag...)
		switch {
		case err == nil:
			return c.line[:len(c.line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return c.line, err
		}
	}
}

// decodeLine decodes one JSON-RPC message, with the checks go-sdk's
// decoder makes.
func decodeLine(line []byte) (jsonrpc.Message, error) {
	line = bytes.TrimSpace(line)
	if line[0] == '[' {
		return nil, errors.New("runtime: the server sent a JSON-RPC batch, which MCP 2025-06-18 and later do not allow")
	}
	var w lineWire
	if err := sdkjson.Unmarshal(line, &w); err != nil { // as go-sdk decodes
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if w.Version != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", w.Version, "2.0")
	}
	id, err := jsonrpc.MakeID(w.ID)
	if err != nil {
		return nil, err
	}
	if w.Method != nil {
		return &jsonrpc.Request{ID: id, Method: *w.Method, Params: w.Params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("runtime: the server sent a JSON-RPC message with neither method nor id")
	}
	resp := &jsonrpc.Response{ID: id, Result: w.Result}
	if w.Error != nil {
		resp.Error = w.Error
	}
	return resp, nil
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("marshaling message: %w", err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.w.Write(append(data, '\n'))
	return err
}

// writeLine writes one message encoded already, line ending with its
// newline (the plain call's request: wire_call.go).
func (c *lineConn) writeLine(ctx context.Context, line []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(line)
	return err
}

func (c *lineConn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = errors.Join(c.r.Close(), c.w.Close())
	})
	return c.closeErr
}

func (c *lineConn) SessionID() string { return "" }
