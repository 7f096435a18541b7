package runtime

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
)

// The control socket lets other mcpledger commands talk to the process
// that holds the journal (`run`, `serve`): one JSON request per connection,
// one JSON response back. The socket sits next to the journal, mode 0600.

// ControlRequest is one request on the control socket.
type ControlRequest struct {
	// Op is status, tools, call, reconnect, reconnect-failed, stop, refresh,
	// reload, approve, reject or approvals.
	Op   string          `json:"op"`
	Name string          `json:"name,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
	// By says who asks (recorded where the op journals something).
	By string `json:"by,omitempty"`
}

// ControlResponse is the answer to a ControlRequest.
type ControlResponse struct {
	OK     bool            `json:"ok"`
	Error  string          `json:"error,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

// StatusResult is the result of the status op (the `status --json` shape).
type StatusResult struct {
	Session string                     `json:"session"`
	Servers []projections.ServerStatus `json:"servers"`
}

// ControlServer serves a Manager on a unix socket.
type ControlServer struct {
	m    *Manager
	ln   net.Listener
	path string
	wg   sync.WaitGroup
	ctx  context.Context
	stop context.CancelFunc
}

// ControlPath returns the control socket path for a journal file.
func ControlPath(journal string) string { return journal + ".sock" }

// ServeControl listens on path and serves m until Close. A stale socket
// file (nobody listening) is replaced; a live one is an error.
func ServeControl(m *Manager, path string) (*ControlServer, error) {
	if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("runtime: control socket %s is in use by another mcpledger process", path)
	}
	_ = os.Remove(path)
	old := syscall.Umask(0o177) // the socket is created 0600
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("runtime: control socket: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &ControlServer{m: m, ln: ln, path: path, ctx: ctx, stop: stop}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Close stops serving, waits for requests in progress and removes the
// socket file.
func (s *ControlServer) Close() error {
	s.stop()
	err := s.ln.Close()
	s.wg.Wait()
	_ = os.Remove(s.path)
	return err
}

func (s *ControlServer) accept() {
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

func (s *ControlServer) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var req ControlRequest
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
	resp := ControlResponse{OK: err == nil}
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

func (s *ControlServer) do(ctx context.Context, req ControlRequest) (any, error) {
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
		o := &CallOptions{Caller: req.By}
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

// ErrNoControl is returned by DialControl when no process serves the
// socket.
var ErrNoControl = errors.New("runtime: no running mcpledger serves this journal")

// ControlClient talks to a running mcpledger over its control socket.
type ControlClient struct{ path string }

// DialControl returns a client if a process is listening on path, or
// ErrNoControl.
func DialControl(path string) (*ControlClient, error) {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return nil, ErrNoControl
	}
	c.Close()
	return &ControlClient{path: path}, nil
}

// Do sends req and decodes the result into out (if non-nil). Errors from
// the server come back as errors with its message.
func (c *ControlClient) Do(ctx context.Context, req ControlRequest, out any) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.path)
	if err != nil {
		return fmt.Errorf("runtime: control socket: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return fmt.Errorf("runtime: control socket: %w", err)
	}
	var resp ControlResponse
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("runtime: control socket: %w", err)
	}
	if !resp.OK {
		return errors.New(resp.Error)
	}
	if out != nil && len(resp.Result) > 0 {
		return json.Unmarshal(resp.Result, out)
	}
	return nil
}
