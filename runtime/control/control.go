package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/runtime"
)

// Request is one request on the control socket.
type Request struct {
	// Op is status, tools, call, reconnect, reconnect-failed, stop, refresh,
	// reload, approve, reject or approvals.
	Op   string          `json:"op"`
	Name string          `json:"name,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
	// By says who asks (recorded where the op journals something).
	By string `json:"by,omitempty"`
}

// Response is the answer to a Request.
type Response struct {
	OK     bool            `json:"ok"`
	Error  string          `json:"error,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

// StatusResult is the result of the status op (the `status --json` shape).
type StatusResult struct {
	Session string                     `json:"session"`
	Servers []projections.ServerStatus `json:"servers"`
}

// Server serves a Manager on a unix socket.
type Server struct {
	m    *runtime.Manager
	ln   net.Listener
	path string
	wg   sync.WaitGroup
	ctx  context.Context
	stop context.CancelFunc
}

// Path returns the control socket path for a journal file.
func Path(journal string) string { return journal + ".sock" }

// Serve listens on path and serves m until Close. A stale socket
// file (nobody listening) is replaced; a live one is an error.
func Serve(m *runtime.Manager, path string) (*Server, error) {
	if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("control: socket %s is in use by another mcpledger process", path)
	}
	_ = os.Remove(path)
	old := syscall.Umask(0o177) // the socket is created 0600
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("control: socket: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Server{m: m, ln: ln, path: path, ctx: ctx, stop: stop}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Close stops serving, waits for requests in progress and removes the
// socket file.
func (s *Server) Close() error {
	s.stop()
	err := s.ln.Close()
	s.wg.Wait()
	_ = os.Remove(s.path)
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(c)
		}()
	}
}

func (s *Server) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var req Request
	if err := json.NewDecoder(bufio.NewReader(io.LimitReader(c, 16<<20))).Decode(&req); err != nil {
		writeResponse(c, nil, fmt.Errorf("bad request: %w", err))
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	res, err := s.do(ctx, req)
	writeResponse(c, res, err)
}

func writeResponse(w io.Writer, res any, err error) {
	resp := Response{OK: err == nil}
	if err != nil {
		resp.Error = err.Error()
	} else if res != nil {
		b, merr := json.Marshal(res)
		if merr != nil {
			resp.OK, resp.Error = false, merr.Error()
		}
		resp.Result = b
	}
	_ = json.NewEncoder(w).Encode(resp)
}

func (s *Server) do(ctx context.Context, req Request) (any, error) {
	m := s.m
	switch req.Op {
	case "status":
		return StatusResult{Session: m.Session().String(), Servers: m.Status()}, nil
	case "tools":
		return m.Tools(), nil
	case "call":
		var args any
		if len(req.Args) > 0 {
			args = req.Args
		}
		o := &runtime.CallOptions{Caller: req.By}
		if req.By == "cli" { // `mcpledger call`: the user's own approval
			o.UserApproved = "mcpledger call"
		}
		r, err := m.CallToolWith(ctx, req.Name, args, o)
		if r == nil {
			return nil, err
		}
		return r.Result, err
	case "reconnect":
		return nil, m.Reconnect(ctx, req.Name)
	case "reconnect-failed":
		return nil, m.ReconnectFailed(ctx)
	case "stop":
		return nil, m.Stop(ctx, req.Name)
	case "refresh":
		return nil, m.Refresh(ctx, req.Name)
	case "reload":
		return nil, m.Reload(ctx)
	case "approve":
		return nil, m.Approve(ctx, req.Name, req.By)
	case "reject":
		return nil, m.Reject(ctx, req.Name, req.By)
	case "approvals":
		return m.Approvals(ctx)
	}
	return nil, fmt.Errorf("unknown op %q", req.Op)
}

// ErrNotServed is returned by Dial when no process serves the
// socket.
var ErrNotServed = errors.New("control: no running mcpledger serves this journal")

// Client talks to a running mcpledger over its control socket.
type Client struct{ path string }

// Dial returns a client if a process is listening on path, or
// ErrNotServed.
func Dial(path string) (*Client, error) {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return nil, ErrNotServed
	}
	c.Close()
	return &Client{path: path}, nil
}

// Do sends req and decodes the result into out (if non-nil). Errors from
// the server come back as errors with its message.
func (c *Client) Do(ctx context.Context, req Request, out any) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.path)
	if err != nil {
		return fmt.Errorf("control: socket: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return fmt.Errorf("control: socket: %w", err)
	}
	var resp Response
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("control: socket: %w", err)
	}
	if !resp.OK {
		return errors.New(resp.Error)
	}
	if out != nil && len(resp.Result) > 0 {
		return json.Unmarshal(resp.Result, out)
	}
	return nil
}
