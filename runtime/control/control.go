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

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/runtime"
)

// Request is one request on the control socket.
type Request struct {
	// Op is status, tools, call, reconnect, reconnect-failed, stop, refresh,
	// reload, approve, reject, approvals or auth.
	Op   string          `json:"op"`
	Name string          `json:"name,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
	// By says who asks (recorded where the op journals something).
	By string `json:"by,omitempty"`
	// Rendered asks the call op for a [CallReply] rather than the bare
	// CallToolResult: the result as the running process rendered it,
	// bounded by the server's maxResultChars (else the process's
	// --max-result-chars) and wrapped if Wrap is set.
	Rendered bool `json:"rendered,omitempty"`
	// Wrap, with Rendered, wraps the rendered text in the
	// untrusted-content boundary markers.
	Wrap bool `json:"wrap,omitempty"`
	// TraceParent and TraceState are the W3C trace context the call op
	// is made in (runtime.WithTraceContext); a malformed one is ignored.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// CallReply is the call op's result when the request set Rendered. A
// process that predates Rendered answers with the bare CallToolResult,
// which decodes into a CallReply with Result nil.
type CallReply struct {
	// Result is the CallToolResult as the server sent it (JSON).
	Result json.RawMessage `json:"result"`
	// Text, Chars, Cut and Bytes are the runtime's guard.Rendered.
	Text  string `json:"text"`
	Chars int    `json:"chars"`
	Cut   int    `json:"cut,omitempty"`
	Bytes int64  `json:"bytes,omitempty"`
	// Signals are the injection patterns found in Text.
	Signals []string `json:"signals,omitempty"`
}

// Response is the answer to a Request.
type Response struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Code classifies Error where a client acts on it:
	// [CodeOutcomeUnknown] or "".
	Code   string          `json:"code,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

// CodeOutcomeUnknown is the Response.Code of a call whose outcome is
// unknown (runtime.ErrOutcomeUnknown: the server's connection was lost
// with the request in flight). [Client.Do] returns it as an error that is
// [ErrOutcomeUnknown].
const CodeOutcomeUnknown = "outcome_unknown"

// StatusResult is the result of the status op: what `status --json` prints,
// its unix-ns times turned into RFC 3339 by the CLI (cmd/mcpledger/jsonout.go).
type StatusResult struct {
	Session string                     `json:"session"`
	Servers []projections.ServerStatus `json:"servers"`
	// Journal is set while the journal refuses appends: the running
	// mcpledger is degraded (it refuses calls and commands, and retries).
	Journal *runtime.JournalHealth `json:"journal,omitempty"`
	// Config is what the session's latest config reading could not use.
	Config projections.ConfigView `json:"config"`
	// Starting says the process has not opened its session yet (it is
	// reading the journal): Servers is empty for now.
	Starting bool `json:"starting,omitempty"`
}

// Options configure [Serve].
type Options struct {
	// Manager answers the ops on servers (status, tools, call, reconnect,
	// stop, refresh, reload, approvals), from the moment it is created: ops
	// sent before its Start has opened the session wait for it (status
	// answers at once, Starting). It may be set later
	// ([Server.SetManager]); until then those ops fail with [ErrNoManager].
	Manager *runtime.Manager
	// Reads answers the read op: another command's read of the journal
	// this process holds (store.ServeRead on it), written to w as it goes.
	// It must return when ctx ends. Nil: the op fails.
	Reads func(ctx context.Context, request []byte, w io.Writer) error
}

// Server serves a process's journal and Manager on a unix socket.
type Server struct {
	mu    sync.Mutex
	m     *runtime.Manager
	reads func(ctx context.Context, request []byte, w io.Writer) error
	ln    net.Listener
	path  string
	wg    sync.WaitGroup
	ctx   context.Context
	stop  context.CancelFunc
}

// Path returns the control socket path for a journal file.
func Path(journal string) string { return journal + ".sock" }

// Serve listens on path and serves until Close. A stale socket file
// (nobody listening) is replaced; a live one is an error.
func Serve(path string, o Options) (*Server, error) {
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
	s := &Server{m: o.Manager, reads: o.Reads, ln: ln, path: path, ctx: ctx, stop: stop}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// SetManager makes m answer the ops on servers from now on.
func (s *Server) SetManager(m *runtime.Manager) {
	s.mu.Lock()
	s.m = m
	s.mu.Unlock()
}

func (s *Server) manager() *runtime.Manager {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m
}

// Close stops serving, ends the requests in progress (a read in progress
// ends where it is: the reader goes on from the file) and removes the
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
	// The client sends nothing after its request: a read that returns
	// means it hung up (a Ctrl-C, a reader that stopped), and whatever it
	// asked for is cancelled.
	s.wg.Go(func() {
		var b [1]byte
		_, _ = c.Read(b[:])
		cancel()
	})
	defer c.SetReadDeadline(time.Now()) // ends that read if the client is still there
	if req.Op == "read" {
		if s.reads == nil {
			writeResponse(c, nil, errors.New("this process serves no journal reads"))
			return
		}
		_ = s.reads(ctx, req.Args, c)
		return
	}
	res, err := s.do(ctx, req)
	writeResponse(c, res, err)
}

// Hello is the answer to the hello op: who holds the journal.
type Hello struct {
	PID     int    `json:"pid"`
	Manager bool   `json:"manager"` // it supervises servers (run, serve, a one-shot call)
	Session string `json:"session,omitempty"`
}

// ErrNoManager is the error of an op on servers sent to a process that
// holds the journal but supervises no servers (yet).
var ErrNoManager = errors.New("control: the process holding the journal supervises no servers")

func writeResponse(w io.Writer, res any, err error) {
	resp := Response{OK: err == nil}
	if err != nil {
		resp.Error = err.Error()
		if errors.Is(err, runtime.ErrOutcomeUnknown) {
			resp.Code = CodeOutcomeUnknown
		}
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
	m := s.manager()
	if req.Op == "hello" {
		h := Hello{PID: os.Getpid(), Manager: m != nil}
		if m != nil {
			h.Session = m.Session().String()
		}
		return h, nil
	}
	if m == nil {
		return nil, ErrNoManager
	}
	// The Manager answers from the moment its session is open, while its
	// servers still start (Manager.Opened): until then status says so and
	// the other ops wait.
	select {
	case <-m.Opened():
	default:
		if req.Op == "status" {
			return StatusResult{Session: m.Session().String(), Servers: []projections.ServerStatus{}, Starting: true}, nil
		}
		select {
		case <-m.Opened():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	switch req.Op {
	case "status":
		v := m.Snapshot()
		res := StatusResult{Session: v.Session.String(), Servers: v.Status, Config: v.Config}
		if v.Journal.Degraded {
			res.Journal = &v.Journal
		}
		return res, nil
	case "tools":
		return m.Tools(), nil
	case "call":
		var args any
		if len(req.Args) > 0 {
			args = req.Args
		}
		o := &runtime.CallOptions{Caller: req.By, Wrap: req.Wrap}
		if req.By == "cli" { // `mcpledger call`: the user's own approval
			o.UserApproved = "mcpledger call"
		}
		ctx, _ := runtime.WithTraceContext(ctx, req.TraceParent, req.TraceState)
		r, err := m.CallToolWith(ctx, req.Name, args, o)
		if r == nil {
			return nil, err
		}
		if req.Rendered {
			res, merr := json.Marshal(r.Result)
			if merr != nil {
				return nil, fmt.Errorf("call: encode the result: %w", merr)
			}
			return CallReply{Result: res, Text: r.Text, Chars: r.Chars, Cut: r.Cut, Bytes: r.Bytes, Signals: r.Signals}, err
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
	case "auth":
		// `mcpledger login`/`logout` beside the running session: Args
		// is the auth.* event (its JSON form), Name the server.
		var ev events.Event
		if err := json.Unmarshal(req.Args, &ev); err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
		return nil, m.RecordAuth(ctx, req.Name, ev.Payload)
	}
	return nil, fmt.Errorf("unknown op %q", req.Op)
}

// ErrNotServed is returned by Dial when no process serves the
// socket.
var ErrNotServed = errors.New("control: no running mcpledger serves this journal")

// ErrNoAnswer is returned by [Client.Do] when the process serving the
// socket closed the connection without answering: it exited or was
// killed with the request in progress.
var ErrNoAnswer = errors.New("control: the mcpledger process closed the connection without answering")

// ErrOutcomeUnknown is returned by [Client.Do] for a call whose outcome
// is unknown: the process serving it closed the connection with the call
// in flight (the error is [ErrNoAnswer] too; the next session on the
// journal records the call as a call.finished of outcome lost), or it
// answered that the server's connection was lost with the call in flight
// ([CodeOutcomeUnknown]).
var ErrOutcomeUnknown = errors.New("control: the outcome of the call is unknown")

// Client talks to a running mcpledger over its control socket.
type Client struct {
	path  string
	hello Hello
}

// Dial returns a client if a process that supervises servers is
// listening on path, or ErrNotServed (nobody listens, or the process
// holding the journal supervises no servers: a one-shot command).
func Dial(path string) (*Client, error) {
	c := &Client{path: path}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Do(ctx, Request{Op: "hello"}, &c.hello); err != nil || !c.hello.Manager {
		return nil, ErrNotServed
	}
	return c, nil
}

// PID is the process that answered Dial.
func (c *Client) PID() int { return c.hello.PID }

// Read sends a read request (see Options.Reads) to the process listening
// on path, and returns the answer's stream; closing it hangs up, which
// ends the read on the other side. It fails when nobody listens.
func Read(ctx context.Context, path string, request []byte) (io.ReadCloser, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("control: socket: %w", err)
	}
	if err := json.NewEncoder(conn).Encode(Request{Op: "read", Args: request}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("control: socket: %w", err)
	}
	return conn, nil
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
		if hungUp(err) {
			return c.noAnswer(req, err)
		}
		return fmt.Errorf("control: socket: %w", err)
	}
	if !resp.OK {
		if resp.Code == CodeOutcomeUnknown {
			return &remoteError{msg: resp.Error, is: ErrOutcomeUnknown}
		}
		return errors.New(resp.Error)
	}
	if out != nil && len(resp.Result) > 0 {
		return json.Unmarshal(resp.Result, out)
	}
	return nil
}

// hungUp reports whether err, from reading the answer, means the other
// side closed the connection before a whole answer arrived.
func hungUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// noAnswer is the error for req when the process closed the connection
// without answering: for a call, that its outcome is unknown and where
// it will be recorded.
func (c *Client) noAnswer(req Request, err error) error {
	who := "the mcpledger process"
	if c.hello.PID != 0 {
		who = fmt.Sprintf("the mcpledger process (pid %d)", c.hello.PID)
	}
	if req.Op == "call" {
		return &noAnswerError{call: true, err: err, msg: fmt.Sprintf("%v: %s serving %s ended with the call of %s in flight (%v), "+
			"so the server may or may not have run it; check before repeating it. The next mcpledger session on this journal "+
			"records the call as lost (see mcpledger log)", ErrOutcomeUnknown, who, c.path, req.Name, err)}
	}
	return &noAnswerError{err: err, msg: fmt.Sprintf("%v: %s serving %s ended with the %s request in progress (%v); "+
		"see what it did with mcpledger status and mcpledger log", ErrNoAnswer, who, c.path, req.Op, err)}
}

// noAnswerError is [ErrNoAnswer], and for a call [ErrOutcomeUnknown].
type noAnswerError struct {
	msg  string
	call bool
	err  error
}

func (e *noAnswerError) Error() string { return e.msg }

func (e *noAnswerError) Unwrap() []error {
	if e.call {
		return []error{ErrOutcomeUnknown, ErrNoAnswer, e.err}
	}
	return []error{ErrNoAnswer, e.err}
}

// remoteError is an error the serving process answered, as it worded it,
// that is also the sentinel is.
type remoteError struct {
	msg string
	is  error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.is }
