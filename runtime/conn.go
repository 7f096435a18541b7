package runtime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/guard"
)

// conn is one connection attempt to one server: the process (stdio), the
// MCP client session, and the goroutines watching them. The loop creates
// it and tears it down; its own goroutines only report observations.
type conn struct {
	m       *Manager
	server  string
	attempt int
	spec    config.Spec
	// red redacts the spec's secrets (and a sign-in's tokens, see
	// oauth_conn.go) from every call's journal records: read it with
	// redactor().
	red atomic.Pointer[guard.Redactor]
	// needsAuth is why the server refused us for want of a sign-in
	// (oauth.Transport's OnNeedsAuth), nil while it has not.
	needsAuth atomic.Pointer[string]
	// known is the protocol version the journal's tool cache holds for
	// this server's config (see ProtocolAuto), "" if none or not asked.
	known  string
	ctx    context.Context // ends when the conn is torn down
	cancel context.CancelFunc
	relist chan string // coalesced re-list requests (the trigger)
	ready  chan struct{}
	reaped chan struct{} // closed once a stdio process's exit is reported
	// handshook is closed once Connect has returned and a failure of it,
	// if any, has been reported. A stdio exit is reported only after
	// that: when the handshake times out, go-sdk closes the server's
	// stdin and the server exits 0, and the journal must name the
	// timeout as the cause, not the exit.
	handshook chan struct{}

	// excl collects the tools go-sdk leaves out of a listing.
	excl exclusions
	// ownListen is set once the runtime listens for list changes in
	// place of go-sdk (listen.go).
	ownListen atomic.Bool

	mu       sync.Mutex
	proc     *process
	cs       *mcp.ClientSession
	stopping bool
	inproc   *mcp.ServerSession
	// httpTransport is the HTTP/SSE attempt's own transport (nil for stdio),
	// and httpConns the connections it dialed.
	httpTransport *http.Transport
	httpConns     *connSet
	// httpClient is the HTTP attempt's client (the runtime's own
	// requests use it: probe.go); wire its stdio or in-process
	// connection, once connected.
	httpClient *http.Client
	wire       *wireConn
	// callMeta is the _meta go-sdk's client puts on a tools/call of a
	// 2026-07-28 session (nil below it; call_meta.go), and answersInput
	// whether the client answers a server's input requests itself
	// (go-sdk's multi-round trip) rather than leave them to its caller.
	callMeta     mcp.Meta
	answersInput bool
	readyOne     sync.Once
}

func newConn(m *Manager, server string, attempt int, spec config.Spec) *conn {
	ctx, cancel := context.WithCancel(m.ctx)
	c := &conn{m: m, server: server, attempt: attempt, spec: spec, ctx: ctx, cancel: cancel,
		relist: make(chan string, 1), ready: make(chan struct{}), reaped: make(chan struct{}), handshook: make(chan struct{})}
	red := guard.NewRedactor(spec.Secrets())
	c.red.Store(&red)
	return c
}

// redactor returns the redactor of the connection's secrets.
func (c *conn) redactor() guard.Redactor { return *c.red.Load() }

// session returns the live client session, or nil.
func (c *conn) session() *mcp.ClientSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cs
}

func (c *conn) isStopping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopping
}

// becameReady is called by the loop once the transition to ready is
// journaled: health checks and re-listing start now.
func (c *conn) becameReady() { c.readyOne.Do(func() { close(c.ready) }) }

func (c *conn) startupTimeout() time.Duration {
	if c.spec.Timeout > 0 {
		return c.spec.Timeout
	}
	return c.m.opts.StartupTimeout
}

// protocolVersion is the server's protocol version setting: its own, or
// the Manager's.
func (c *conn) protocolVersion() string {
	if v := c.spec.Config.ProtocolVersion; v != "" {
		return v
	}
	return c.m.opts.ProtocolVersion
}

// connectVersion is the version to ask go-sdk for ("" for its latest,
// which discovers and falls back to initialize), and whether it is the
// one the journal knows rather than the setting.
func (c *conn) connectVersion() (string, bool) {
	switch v := c.protocolVersion(); {
	case v != ProtocolAuto:
		return v, false
	case c.known != "":
		return c.known, true
	}
	return "", false
}

// run connects, handshakes and lists, reporting each step; then it watches
// the session until it ends.
func (c *conn) run() {
	m := c.m
	transport, err := c.open()
	if err != nil {
		c.fail("spawn", err)
		close(c.handshook)
		return
	}
	// A front end (Options.NewClient, nil without one) adds sampling and
	// elicitation, which it forwards to its clients.
	newClient := m.opts.NewClient
	if newClient == nil {
		newClient = func(_ string, impl *mcp.Implementation, o *mcp.ClientOptions) *mcp.Client {
			return mcp.NewClient(impl, o)
		}
	}
	co := &mcp.ClientOptions{
		Logger: exclusionLogger(m.log, &c.excl),
		// Advertise nothing we do not implement (no roots, sampling or
		// elicitation): go-sdk's default advertises roots.
		Capabilities:               &mcp.ClientCapabilities{},
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { c.requestRelist("list_changed") },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { c.requestRelist("resources_changed") },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { c.requestRelist("prompts_changed") },
	}
	client := newClient(c.server, &mcp.Implementation{Name: m.opts.ClientName, Version: m.opts.ClientVersion}, co)
	client.AddSendingMiddleware(probeMetaMiddleware) // outermost: call_meta.go
	answersInput := co.MultiRoundTrip == nil || !co.MultiRoundTrip.Disabled
	// SSE binds the session to the Connect context (go-sdk-notes.md §6.6),
	// so the handshake deadline is enforced by a watchdog instead.
	cctx := c.ctx
	var cancel context.CancelFunc = func() {}
	if c.spec.Config.Transport != events.TransportSSE {
		cctx, cancel = context.WithTimeout(c.ctx, c.startupTimeout())
	} else {
		wd := time.AfterFunc(c.startupTimeout(), c.cancel)
		cancel = func() { wd.Stop() }
	}
	version, fromJournal := c.connectVersion()
	cs, err := client.Connect(cctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	cancel()
	if m.afterConnect != nil {
		m.afterConnect(err)
	}
	if err != nil {
		if c.spec.Config.Transport == events.TransportSSE && errors.Is(c.ctx.Err(), context.Canceled) && !c.isStopping() {
			err = fmt.Errorf("initialize: %w", context.DeadlineExceeded)
		}
		if fromJournal && !c.isStopping() {
			// The server may have changed the versions it speaks: the
			// next attempt negotiates afresh.
			m.versionMiss.Store(c.server, events.Fingerprint(&c.spec.Config))
			err = fmt.Errorf("%w (connected in %s, the version it spoke before; the next attempt negotiates the version afresh)", err, version)
		}
		c.fail("handshake", err)
		close(c.handshook)
		return
	}
	var callMeta mcp.Meta
	if ir := cs.InitializeResult(); ir != nil && ir.ProtocolVersion >= stateless {
		callMeta = probeCallMeta(c.ctx, cs)
	}
	c.mu.Lock()
	c.cs = cs
	c.callMeta, c.answersInput = callMeta, answersInput
	stopping := c.stopping
	c.mu.Unlock()
	close(c.handshook) // after c.cs is set: listenAgain waits for it
	if stopping {
		_ = cs.Close()
		return
	}
	ir := cs.InitializeResult()
	hs := &events.HandshakeCompleted{Attempt: c.attempt, SessionID: cs.ID()}
	if ir != nil {
		hs.ProtocolVersion, hs.Instructions = ir.ProtocolVersion, ir.Instructions
		if ir.ServerInfo != nil {
			hs.ServerName, hs.ServerVersion = ir.ServerInfo.Name, ir.ServerInfo.Version
		}
		hs.Capabilities = capabilities(ir.Capabilities)
	}
	m.observe(c, hs)
	m.goFunc(c.watch)
	// Resources and prompts are listed beside the tools and observed
	// before them, so that a server is ready (and the startup gate
	// passes) with its whole catalog; extras slower than extrasWait do
	// not hold the server up, they arrive after.
	extras := make(chan struct{})
	m.goFunc(func() {
		defer close(extras)
		c.listExtras(hs.Capabilities)
	})
	tools, excluded, err := c.listTools()
	if err != nil {
		c.fail("list", err)
		return
	}
	wait := time.NewTimer(extrasWait)
	select {
	case <-extras:
	case <-wait.C:
	case <-c.ctx.Done():
	}
	wait.Stop()
	m.observe(c, &events.ToolsListed{Attempt: c.attempt, Trigger: "initial", Tools: tools, ProtocolVersion: hs.ProtocolVersion, Excluded: excluded})
	select {
	case <-c.ready:
	case <-c.ctx.Done():
		return
	}
	m.goFunc(c.health)
	c.relistLoop()
}

// open starts the transport: spawns a stdio process (reporting
// process.spawned), probes an HTTP endpoint (transport.opened), or
// attaches an in-process server.
func (c *conn) open() (mcp.Transport, error) {
	m := c.m
	switch c.spec.Config.Transport {
	case events.TransportStdio:
		p, err := spawn(&c.spec, m.reaper)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.proc = p
		c.mu.Unlock()
		m.observe(c, &events.ProcessSpawned{Attempt: c.attempt, PID: p.pid, PGID: p.pid, Command: c.spec.Config.Command})
		m.goFunc(c.reap)
		skipped := 0
		out := newJSONLines(p.out, func(line string) {
			// Called from go-sdk's one reader goroutine for this connection.
			skipped++
			m.log.Warn("server wrote a non-JSON line (or JSON that is not JSON-RPC) on stdout; skipped and journaled", "server", c.server, "line", line)
			if skipped <= 10 || skipped%1000 == 0 {
				m.observe(c, &events.OutputSkipped{Attempt: c.attempt, Line: line, Skipped: skipped})
			}
		})
		// frameCap bounds one message and fails only the call of an
		// oversized response (go-sdk's own cap would end the session).
		capped := newFrameCap(out, m.opts.MaxMessageBytes, func(size int64, answered bool) {
			m.log.Warn("server sent a message over MaxMessageBytes; discarded", "server", c.server, "bytes", size, "answered", answered)
		})
		// An oversized result of a call is cut in transit instead, for
		// the server's result bound.
		calls := newWireCalls()
		capped.calls, capped.limits, capped.cut = calls, c.shrinkLimits, c.cutInTransit
		return wireTransport{lineTransport{r: capped, w: p.stdin}, calls, c.setWire}, nil
	case events.TransportHTTP, events.TransportSSE:
		u, err := url.Parse(c.spec.URL)
		if err != nil {
			return nil, err
		}
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), map[string]string{"https": "443"}[u.Scheme])
			if u.Scheme != "https" {
				host = net.JoinHostPort(u.Hostname(), "80")
			}
		}
		d := net.Dialer{Timeout: min(c.startupTimeout(), 10*time.Second)}
		nc, err := d.DialContext(c.ctx, "tcp", host)
		if err != nil {
			return nil, fmt.Errorf("endpoint %s unreachable: %w", host, err)
		}
		_ = nc.Close()
		m.observe(c, &events.TransportOpened{Attempt: c.attempt, Transport: c.spec.Config.Transport, Endpoint: c.spec.URL})
		conns := newConnSet()
		tr := newHTTPTransport(conns)
		// A call's oversized answer is cut in transit, as over stdio.
		hc := &http.Client{Transport: &capTransport{base: &headerTransport{base: c.authTransport(tr), headers: c.spec.Headers},
			max: m.opts.MaxMessageBytes, limits: c.shrinkLimits, cut: c.cutInTransit, calls: newWireCalls(), listenEnded: c.listenEnded}}
		c.mu.Lock()
		c.httpTransport, c.httpConns = tr, conns // closed at teardown
		c.httpClient = hc
		c.mu.Unlock()
		if c.spec.Config.Transport == events.TransportSSE {
			return &mcp.SSEClientTransport{Endpoint: c.spec.URL, HTTPClient: hc}, nil
		}
		return &mcp.StreamableClientTransport{Endpoint: c.spec.URL, HTTPClient: hc, MaxRetries: 2}, nil
	case events.TransportInProcess:
		srv := m.opts.InProcess[c.server]
		if srv == nil {
			return nil, fmt.Errorf("in-process server %q is not registered", c.server)
		}
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(c.ctx, st, nil)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.inproc = ss
		c.mu.Unlock()
		m.observe(c, &events.TransportOpened{Attempt: c.attempt, Transport: events.TransportInProcess, Endpoint: "in-process"})
		return wireTransport{Transport: ct, connected: c.setWire}, nil
	}
	return nil, fmt.Errorf("unknown transport %q", c.spec.Config.Transport)
}

// shrinkLimits are the limits a result of the server is cut in transit
// to: for its result bound.
func (c *conn) shrinkLimits() shrinkLimits {
	return shrinkLimitsFor(resultLimit(c.m.opts.MaxResultChars, c.m.callSettingsFor(c.server, c)))
}

// cutInTransit logs a result cut in transit.
func (c *conn) cutInTransit(size int64, kept int) {
	c.m.log.Warn("server sent a result over MaxMessageBytes; cut in transit", "server", c.server, "bytes", size, "kept", kept)
}

// newHTTPTransport returns an http.Transport with its timeouts on the
// transport (dial, TLS, response headers), never on http.Client.Timeout,
// which would cut the long-lived SSE stream (go-sdk-notes.md §6.11).
func newHTTPTransport(conns *connSet) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           conns.dial(&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}),
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   16,
	}
}

// headerTransport adds a server's configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(r)
}

// fail reports a failed attempt and tears the attempt's resources down.
func (c *conn) fail(phase string, err error) {
	if c.isStopping() {
		return
	}
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	if p != nil && connectionLost(err) && !errors.Is(err, context.DeadlineExceeded) {
		// A stdio server that died makes the handshake fail with EOF; its
		// exit (code and stderr) says more, and the reaper reports it.
		select {
		case <-p.done:
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
	c.m.observe(c, &events.ConnectFailed{Attempt: c.attempt, Phase: phase, Error: c.authClass(classifyConnect(phase, err))})
	if p != nil {
		// The attempt's failure is reported: the process's exit, which
		// our closing its stdin may cause, is a consequence.
		p.markExpected()
	}
}

// reap waits for the stdio process and reports its exit.
func (c *conn) reap() {
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	p.wait()
	select { // a failed handshake is reported first (see handshook)
	case <-c.handshook:
	case <-c.ctx.Done():
	}
	code, sig := p.exitStatus()
	c.m.observe(c, &events.ProcessExited{Attempt: c.attempt, PID: p.pid, ExitCode: code, Signal: sig,
		StderrTail: p.tail.Lines(), Expected: p.isExpected() || c.isStopping()})
	close(c.reaped)
	// The leader is gone: kill what is left of its group, and close the
	// session so calls in flight fail now rather than at their deadline.
	p.markExpected()
	_ = killGroup(p.pid)
	if cs := c.session(); cs != nil {
		c.m.goFunc(func() { _ = c.m.closeBounded(cs, time.Second) })
	}
}

// watch waits for the session to end and reports it unless mcpledger
// ended it.
func (c *conn) watch() {
	cs := c.session()
	if cs == nil {
		return
	}
	err := cs.Wait()
	if c.isStopping() || c.ctx.Err() != nil {
		return
	}
	if c.spec.Config.Transport == events.TransportStdio {
		// The process watcher reports the exit with its code and stderr;
		// a closed pipe without an exit is reported here.
		c.mu.Lock()
		p := c.proc
		c.mu.Unlock()
		select {
		case <-p.done:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	c.m.observe(c, &events.TransportClosed{Attempt: c.attempt, Error: c.authClass(classifyClosed(err))})
}

// health checks the server every PingInterval (probe: a ping, or on a
// 2026-07-28 session a server/discover); consecutive failures are
// reported, and the decider declares the session broken after K of them.
func (c *conn) health() {
	iv := c.m.opts.PingInterval
	if iv < 0 {
		return
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	fails := 0
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		cs := c.session()
		if cs == nil {
			return
		}
		err := retry(c.ctx, c.m.opts.Retry, func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, c.m.opts.PingTimeout)
			defer cancel()
			return c.probe(ctx, cs)
		})
		if c.ctx.Err() != nil {
			return
		}
		if err == nil {
			fails = 0
			continue
		}
		fails++
		pf := &events.PingFailed{Attempt: c.attempt, Consecutive: fails, Error: err.Error()}
		if c.authClass(events.ClassifiedError{}).Class == events.ErrAuth {
			pf.Class = events.ErrAuth // refused for want of a sign-in: no use pinging again
		}
		c.m.observe(c, pf)
	}
}

// shutdown ends the connection: gracefully (close the session, then
// close-stdin → SIGTERM → SIGKILL the process group) or at once.
func (c *conn) shutdown(graceful bool) {
	c.mu.Lock()
	c.stopping = true
	p, cs, ss := c.proc, c.cs, c.inproc
	c.mu.Unlock()
	grace := c.m.opts.TerminateGrace
	if p != nil {
		if graceful {
			p.terminate(grace)
		} else {
			p.kill()
		}
		select { // the exit has been reported (or the loop is gone)
		case <-c.reaped:
		case <-c.m.loopDone:
		}
	}
	c.cancel()
	c.mu.Lock()
	tr, conns := c.httpTransport, c.httpConns
	c.mu.Unlock()
	if cs != nil && !c.m.closeBounded(cs, 2*grace) {
		// go-sdk's Close is still waiting, e.g. for an SSE stream that
		// only ends with the server's next event (seconds away): end the
		// connections under it, so Close (and the Manager's Close, which
		// waits for it) returns now.
		conns.closeAll()
	}
	if ss != nil {
		_ = ss.Close()
	}
	if tr != nil {
		// Keep-alive connections would otherwise outlive the session by
		// the transport's idle timeout (2 goroutines and a socket each).
		tr.CloseIdleConnections()
	}
}

// closeBounded closes a client session without letting go-sdk's graceful
// Close hang (it waits for calls in flight, go-sdk-notes.md §6.2).
// The goroutine that runs Close is owned by the Manager; Close returns once
// the transport is closed, which shutdown guarantees by ending the process
// or the connection first.
// It reports whether Close returned within d.
func (m *Manager) closeBounded(cs *mcp.ClientSession, d time.Duration) bool {
	done := make(chan struct{})
	m.goFunc(func() {
		_ = cs.Close()
		close(done)
	})
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
