package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	rt "github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/gateway"
	"github.com/mcpledger/mcpledger/runtime/guard"
)

// ServeCommand runs the configured servers and exposes their live catalog
// as one MCP server, over stdio or Streamable HTTP (the gateway).
type ServeCommand struct{ env *env }

// Run parses args and serves until interrupted, or (stdio) until the
// client disconnects.
func (c *ServeCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("serve", "--stdio | --http 127.0.0.1:PORT [--plain-names] [--max-result-chars N] [--wrap] [--token-file F] [--max-sessions N] [--session-idle D] [--max-inflight N] [--max-inflight-mb MB] [--body-timeout D] [--mcp-config FILE]... [--workspace DIR] [--allowed-servers a,b]")
	var cf configFlags
	cf.register(f)
	stdio := f.Bool("stdio", false, "serve one MCP client on stdin/stdout (what Claude Desktop, VS Code and Cursor launch)")
	addr := f.String("http", "", "serve Streamable HTTP on `HOST:PORT` at /mcp (loopback only unless --allow-remote)")
	plain := f.Bool("plain-names", false, "keep every tool, prompt and resource name as its server gave it (refused when two servers share one)")
	maxChars := f.Int("max-result-chars", guard.DefaultMaxResultChars, "bound every result at `N` characters, cut with a marker saying how many of how many were cut (0: no bound; a server's \"maxResultChars\" overrides it)")
	wrap := f.Bool("wrap", false, `answer every call with its output as text between <mcp_tool_output server=… tool=… trust="untrusted"> markers, as call --wrap prints it`)
	tokenFile := f.String("token-file", "", "HTTP: require `F`'s content as bearer token (Authorization: Bearer TOKEN); a missing or wrong one gets 401 and is journaled")
	allowRemote := f.Bool("allow-remote", false, "HTTP: allow a non-loopback address (requires --token-file)")
	var hosts, origins []string
	f.Var(multiFlag{&hosts}, "allow-host", "HTTP: also accept this Host `NAME` (repeatable; loopback names are always accepted)")
	f.Var(multiFlag{&origins}, "allow-origin", "HTTP: also accept this `ORIGIN` (scheme://host[:port], repeatable)")
	relaxed := f.Bool("relaxed", false, "journal call records after the fact, gathered for up to 50 ms, instead of before sending and answering (faster; a crash may lose the records of the last 50 ms of calls)")
	watch := f.Bool("watch", true, "reload when a config file changes")
	otlpEndpoint := f.String("otlp-endpoint", "", otlpEndpointUsage)
	otlpProtocol := f.String("otlp-protocol", "", otlpProtocolUsage)
	var lim gateway.HTTPOptions
	f.IntVar(&lim.MaxSessions, "max-sessions", gateway.DefaultMaxSessions, "HTTP: hold at most `N` client sessions; a new one evicts the least recently used idle one (503 if none is idle)")
	idle := f.Duration("session-idle", gateway.DefaultSessionIdle, "HTTP: close a client session idle this `long` (0: never)")
	f.IntVar(&lim.MaxInflight, "max-inflight", gateway.DefaultMaxInflight, "HTTP: answer at most `N` requests at once; more get 503 with Retry-After")
	inflightMB := f.Int("max-inflight-mb", gateway.DefaultMaxInflightBytes>>20, "HTTP: at most `MB` MiB of request bodies in flight; more get 503 with Retry-After")
	f.DurationVar(&lim.BodyTimeout, "body-timeout", gateway.DefaultBodyTimeout, "HTTP: cut a request whose body takes longer than `D` to arrive (408)")
	if err := f.parse(args); err != nil {
		return err
	}
	if *stdio == (*addr != "") {
		f.Usage()
		return usageErrorf("serve: give exactly one of --stdio and --http HOST:PORT")
	}
	if *stdio && (*tokenFile != "" || *allowRemote || len(hosts)+len(origins) > 0) {
		return usageErrorf("serve: --token-file, --allow-remote, --allow-host and --allow-origin are for --http")
	}
	if *maxChars < 0 {
		return usageErrorf("serve: --max-result-chars must be 0 (no bound) or more")
	}
	if lim.MaxSessions < 1 || lim.MaxInflight < 1 || *inflightMB < 8 || lim.BodyTimeout <= 0 || *idle < 0 {
		return usageErrorf("serve: --max-sessions and --max-inflight must be at least 1, --max-inflight-mb at least 8 (twice one request's body limit), --body-timeout positive, --session-idle not negative")
	}
	lim.MaxInflightBytes = int64(*inflightMB) << 20
	lim.SessionTimeout = *idle
	if *idle == 0 {
		lim.SessionTimeout = -1 // never
	}
	var token string
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("serve: --token-file: %w", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" || strings.ContainsAny(token, " \t\r\n") {
			return fmt.Errorf("serve: --token-file %s: want one token (no spaces) in the file", *tokenFile)
		}
	}
	lim.Token, lim.AllowedHosts, lim.AllowedOrigins = token, hosts, origins
	var ln net.Listener
	if *addr != "" {
		var err error
		if ln, err = listenGateway(*addr, *allowRemote, token != ""); err != nil {
			return err
		}
		defer ln.Close()
	}

	// go-sdk decodes every message with a fresh decoder and buffer (tens of
	// KB), while a gateway's live heap stays small: collect less often
	// unless GOGC says otherwise (BENCHMARKS.md, "gateway":
	// 30–40 % off the p50 of a relaxed call).
	if c.env.getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	// Over HTTP the budget bounds the request bodies in flight, but go-sdk
	// decodes each body several times over (message, params, arguments,
	// result: each a copy, most of them garbage at once), and at GOGC=400
	// that garbage would pile up to five times the live heap: cap the heap
	// at what the budget needs instead (a soft limit: past it the
	// collector runs more often), unless GOMEMLIMIT says otherwise.
	if *addr != "" && c.env.getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit(lim.MaxInflightBytes))
	}
	lim.OnIdle = (&memoryReleaser{}).release
	if p := c.env.getenv("MCPLEDGER_CPUPROFILE"); p != "" {
		stop, err := startCPUProfile(p)
		if err != nil {
			return err
		}
		defer stop()
	}
	if p := c.env.getenv("MCPLEDGER_TRACE"); p != "" {
		stop, err := startTrace(p)
		if err != nil {
			return err
		}
		defer stop()
	}
	j, path, err := f.openWritable()
	if err != nil {
		return err
	}
	defer j.Close()
	export := startLiveExport(ctx, c.env, j.Journal, *otlpEndpoint, *otlpProtocol)
	defer export.Close() // after Shutdown: ships the session's last events
	opts, err := cf.options(c.env, "serve")
	if err != nil {
		return err
	}
	opts.Watch = *watch
	opts.MaxResultChars = *maxChars
	if *maxChars == 0 {
		opts.MaxResultChars = -1 // no bound
	}
	if *relaxed {
		opts.Durability = rt.Relaxed
	}
	gw := gateway.New(&gateway.Options{PlainNames: *plain, Wrap: *wrap, Logger: opts.Logger, Version: version()})
	m, err := rt.New(gw.Bind(opts, storeJournal{j.Journal}), opts)
	if err != nil {
		return err
	}
	// status, tools, call and the rest reach it over the control socket,
	// from the moment its session is open (not after the startup gate).
	j.SetManager(m)
	flushConfig, stopFollow := followConfig(m, c.env.stderr)
	defer stopFollow()
	report := func(rep rt.StartReport) {
		// Nothing to serve yet is no reason to stop: a reload, an approval
		// (asked by elicitation) or trust may admit a server later.
		flushConfig()
		v := m.Snapshot()
		reportIdle(c.env.stderr, v.Status, cf.files, "serving an empty catalog until a reload or a decision admits one", v.Config.Workspace)
		reportNoTools(c.env.stderr, v.Status, cf.files, v.Config.Workspace)
		fmt.Fprintf(c.env.stderr, "session %s: %d ready, %d connecting, %d failed, %d stopped (%s); journal %s\n",
			m.Session(), len(rep.Ready), len(rep.Connecting), len(rep.Failed), len(rep.Stopped), rep.Elapsed.Round(time.Millisecond), path)
	}

	var serveErr error
	by := "signal"
	var hs *http.Server
	served := make(chan error, 1)
	if *stdio {
		// A stdio client connects once and lists tools at once: serve it
		// the catalog as the startup gate leaves it.
		rep, err := m.Start(ctx)
		if err != nil {
			m.Close()
			return err
		}
		report(rep)
		if err := gw.Attach(ctx, m); err != nil {
			m.Shutdown("serve: " + err.Error())
			gw.Close()
			return err
		}
		fmt.Fprintln(c.env.stderr, "serving MCP on stdio")
		in, restore := pollable(c.env.stdin) // never blocked in read(2): see pollable
		serveErr = gw.ServeStdio(ctx, in, c.env.stdout)
		restore()
		if ctx.Err() == nil {
			by = "serve: the stdio client disconnected"
		}
	} else {
		// Over HTTP clients come and go: serve them from the moment the
		// session is open, while servers still start (their tools appear
		// with list_changed; a call to one still starting waits for it).
		started := make(chan startResult, 1)
		go func() { // owned: its result is received below before anything else
			rep, err := m.Start(ctx)
			started <- startResult{rep, err}
		}()
		select {
		case <-m.Opened():
		case st := <-started:
			if st.err != nil {
				m.Close()
				return st.err
			}
			started <- st
		}
		if err := gw.Attach(ctx, m); err != nil {
			m.Shutdown("serve: " + err.Error()) // ends Start's wait
			<-started
			gw.Close()
			return err
		}
		hs = &http.Server{Handler: gw.HTTPHandler(&lim), ReadHeaderTimeout: 10 * time.Second}
		go func() { served <- hs.Serve(ln) }() // ends at hs.Close below
		fmt.Fprintf(c.env.stderr, "listening on http://%s%s while servers start\n", ln.Addr(), gateway.Path)
		st := <-started
		if st.err == nil {
			report(st.rep)
			st.err = gw.Collisions() // --plain-names: servers ready since Attach too
		}
		if st.err == nil {
			// As before the listener came up early: a script that waits for
			// this line finds the catalog as the startup gate left it.
			fmt.Fprintf(c.env.stderr, "serving MCP on http://%s%s\n", ln.Addr(), gateway.Path)
		}
		if st.err != nil {
			serveErr, by = st.err, "serve: "+st.err.Error()
		} else {
			select {
			case <-ctx.Done():
			case serveErr = <-served:
				served <- serveErr
			}
		}
	}
	fmt.Fprintln(c.env.stderr, "stopping: every server is being shut down")
	// Calls in flight fail with "shutting down" (journaled), then client
	// sessions close (ending their open streams), then the listener.
	err = m.Shutdown(by)
	gw.Close()
	if hs != nil {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = hs.Shutdown(sctx)
		cancel()
		hs.Close()
		if e := <-served; serveErr == nil && !errors.Is(e, http.ErrServerClosed) {
			serveErr = e
		}
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return errors.Join(serveErr, err)
}

// memoryLimit is serve's soft memory limit for a budget of inflight
// request bytes: a base for the runtime, sessions and the journal, and
// eight times the budget for the copies of the bodies in flight (a 4 MB
// call holds about 40 MB live: RELIABILITY.md, "gateway bounds"). Past
// it the collector runs more often; it is not a cap on what serve may use.
func memoryLimit(inflight int64) int64 { return 64<<20 + 8*inflight }

// memoryReleaser returns the heap's memory to the OS once it holds 16 MiB
// more than it did after the last return: after a burst of requests, the
// garbage of their copies (an idle gateway would otherwise keep it until
// the runtime's forced collection, every two minutes; with the soft memory
// limit set, the scavenger alone keeps up to 95 % of the limit).
//
// What the heap holds counts its garbage whether or not a collection has
// found it: until one has (and the sweeper has freed it), garbage counts
// as objects, not as free memory. Judged by its free memory alone, a
// gateway that went idle late in a collection cycle (the heap mostly
// garbage not yet collected, little of it free) was left holding all of
// it, up to 95 % of the memory limit, until the next forced collection.
type memoryReleaser struct {
	mu    sync.Mutex
	floor uint64 // what the heap held after the last return
}

// releaseSlack is how much more than after the last return the heap may
// hold before an idle gateway returns it.
const releaseSlack = 16 << 20

// release is HTTPOptions.OnIdle: it returns the heap's memory to the OS if
// it holds more than releaseSlack above the floor. Between returns it costs
// a read of runtime metrics; a return costs a collection, so at most one
// per releaseSlack allocated.
func (r *memoryReleaser) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if heapHeld() <= r.floor+releaseSlack {
		return
	}
	debug.FreeOSMemory()
	r.floor = heapHeld()
}

// heapHeld is the heap memory held from the OS: objects (live, and garbage
// not yet freed), unused space in spans, and free pages not yet returned.
func heapHeld() uint64 {
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64() + s[2].Value.Uint64()
}

// startResult is what Manager.Start returned.
type startResult struct {
	rep rt.StartReport
	err error
}

// listenGateway listens on addr: a loopback address unless allowRemote
// (which needs a token).
func listenGateway(addr string, allowRemote, hasToken bool) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usageErrorf("serve: --http %q: want HOST:PORT, like 127.0.0.1:8931", addr)
	}
	if !loopbackHost(host) {
		if !allowRemote {
			return nil, usageErrorf("serve: --http %s is not a loopback address: any machine that can reach it could call your tools; use 127.0.0.1:PORT, or pass --allow-remote with --token-file", addr)
		}
		if !hasToken {
			return nil, usageErrorf("serve: --allow-remote needs --token-file: a non-loopback gateway must require a bearer token")
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return ln, nil
}

// loopbackHost reports whether host is localhost or a loopback IP. An
// empty host (all interfaces) is not.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
