// Command mcpserver is mcpledger's misbehaving MCP test server.
//
// Tests build it (see runtime/runtimetest.BuildServer) and run it as a real
// subprocess. By default it serves one MCP session over stdio
// (newline-delimited JSON-RPC on stdin/stdout, go-sdk's StdioTransport) and
// exits when stdin closes. It speaks every protocol version go-sdk v1.8.0's
// server supports, 2025-11-25 included.
//
// # Flags
//
//	-http ADDR   serve HTTP on ADDR instead of stdio (ADDR may use port 0).
//	             Once listening it writes "mcptest: listening on HOST:PORT" to
//	             stderr. The handler is mounted at "/", so any path works;
//	             runtimetest uses /mcp (Streamable HTTP) and /sse (SSE).
//	-stateless   with -http: Streamable HTTP in stateless mode.
//	-sse         with -http: serve the legacy HTTP+SSE handler
//	             (mcp.NewSSEHandler) instead of Streamable HTTP.
//
// Stdout carries nothing but protocol messages, except in
// MCPTEST_GARBAGE_STDOUT mode. Diagnostics go to stderr, each line prefixed
// "mcptest: ".
//
// # Tools
//
// Always registered:
//
//	echo{message string}  text content = message
//	add{a, b number}      structured content {"sum": a+b} plus its JSON as text
//	slow{ms int}          sleeps ms milliseconds; if the call is cancelled
//	                      first it returns early with an error (an isError
//	                      result, "slow: cancelled after ...")
//	big{bytes int}        one text block of exactly bytes 'x' bytes. Over
//	                      stdio go-sdk's client refuses frames above 16 MiB
//	                      (DefaultMaxLineLength; CommandTransport has no knob
//	                      for it): such a call fails with "inbound JSON-RPC
//	                      frame exceeded the configured maximum line length"
//	                      and the session ends (Wait returns that error).
//	                      The server itself writes 100 MB in about 2.5 s.
//	fail{}                an isError result with text "failed as asked"
//	env{name string}      the value of environment variable name as text; an
//	                      isError result if it is unset
//	exit{code int}        os.Exit(code) at once, without answering
//	counter{}             how many tools/call requests this process has
//	                      received, this one included (any tool, known or not)
//
// # Environment
//
// Behaviour is chosen by environment variables, so that a server config's
// env block can pick it. Integer values must parse (the server exits 2 with
// a message otherwise); boolean switches are on when set to "1".
//
//	MCPTEST_NAME=S             server name in serverInfo (default "mcptest").
//	MCPTEST_CRASH_ON_START=1   write "mcptest: crashing on start as asked" to
//	                           stderr and exit 3 before serving.
//	MCPTEST_CRASH_AFTER=N      exit 4 after N tools/call requests. Over stdio
//	                           the process exits right after the Nth result
//	                           has been written to stdout, so the client gets
//	                           N results and then EOF (go-sdk: Wait returns
//	                           "exit status 4"). Over HTTP (where the
//	                           connection cannot be tapped) and for calls
//	                           that overlap the Nth, it exits when the
//	                           N+1th call arrives, without answering it.
//	                           Either way it first writes "mcptest: exiting
//	                           ..." to stderr.
//	MCPTEST_HANG_INITIALIZE=1  never answer initialize. Over stdio the server
//	                           is not started: stdin is read and discarded,
//	                           and the process exits 0 at EOF (unless
//	                           MCPTEST_IGNORE_EOF=1). Over HTTP every request
//	                           blocks until the client gives up.
//	MCPTEST_IGNORE_EOF=1       do not exit when stdin closes: once the stdio
//	                           session ends the process idles until killed.
//	MCPTEST_IGNORE_SIGTERM=1   signal.Ignore(SIGTERM) (after spawning any
//	                           child, which keeps the default disposition).
//	MCPTEST_GARBAGE_STDOUT=1   write three lines that are not JSON-RPC to
//	                           stdout before serving: two plain-text lines and
//	                           one JSON object without "jsonrpc". The value
//	                           "json" writes only the JSON object. go-sdk's
//	                           client does not skip such lines: the first one
//	                           ends its read loop and Connect fails with
//	                           `calling "initialize": invalid character 'm'
//	                           looking for beginning of value` (a
//	                           *json.SyntaxError) or, for "json", `calling
//	                           "initialize": invalid message version tag "";
//	                           expected "2.0"`; neither is EOF or
//	                           ErrConnectionClosed (runtimetest's
//	                           TestGarbageStdout pins both).
//	MCPTEST_TOOLS_CHANGE_MS=N  every N ms add tool dyn_<k> and remove
//	                           dyn_<k-1>; go-sdk sends one
//	                           notifications/tools/list_changed per change
//	                           (debounced by 10 ms, so keep N above ~20).
//	MCPTEST_LIST_CHANGED_STORM=N
//	                           when the client sends notifications/initialized
//	                           (the 2025-11-25 and older handshake) or, on a
//	                           2026-07-28 session, 50 ms after its first
//	                           subscriptions/listen, toggle a
//	                           tool named "storm" N times (added on odd steps,
//	                           removed on even ones). Over stdio each toggle
//	                           is followed by a raw list_changed notification
//	                           written straight to the connection, so the
//	                           client receives at least N of them back to
//	                           back (go-sdk's own debounced one may add a
//	                           few). Over HTTP there is no tap: toggles are
//	                           12 ms apart so that go-sdk's 10 ms debounce
//	                           sends about one notification per toggle.
//	MCPTEST_TOOL_COUNT=N       register N extra tools t0000, t0001, ... (wider
//	                           numbers past 9999), each returning its name.
//	MCPTEST_DUP_TOOLS=1        tools/list (first page) also lists a second
//	                           "echo" with a different description.
//	MCPTEST_BAD_SCHEMA=1       tools/list (first page) also lists tools with
//	                           broken definitions: bad_type_string (input
//	                           schema {"type":"string"}), bad_not_object
//	                           (input schema 42), bad_null (input schema
//	                           null), bad_ref (a dangling $ref), bad_header
//	                           (two properties with the same x-mcp-header)
//	                           and "bad name!" (invalid characters). go-sdk's
//	                           client passes all of them through except
//	                           bad_header, which ListTools drops; it keeps
//	                           both echo entries. None of the extra tools can
//	                           be called: tools/call answers "unknown tool"
//	                           (a JSON-RPC error).
//	MCPTEST_SPAWN_CHILD=1      start a grandchild (this binary again, with
//	                           MCPTEST_CHILD_SLEEP=1: it only sleeps, with
//	                           default signal handling) in the same process
//	                           group, stdio on /dev/null, and write
//	                           "mcptest: child pid N" to stderr. The value
//	                           "inherit" gives the grandchild this process's
//	                           stdout and stderr instead, the way a wrapper's
//	                           child holds the pipes (killing only the leader
//	                           then does not close them).
//	MCPTEST_SLOW_START_MS=N    sleep N ms before serving.
//	MCPTEST_STDERR_LINES=N     write N lines "mcptest: stderr line i of N" to
//	                           stderr at start.
//	MCPTEST_PAGE_SIZE=N        ServerOptions.PageSize (tools/list page size).
//	MCPTEST_PROTOCOLS=V,...    serve only these protocol versions
//	                           (ServerOptions.SupportedProtocolVersions):
//	                           "2025-11-25" makes a server that refuses
//	                           2026-07-28 (its server/discover offers no
//	                           2026 version, so clients fall back to
//	                           initialize).
//	MCPTEST_DEBUG=1            go-sdk server logs (slog text) to stderr.
//	MCPTEST_CHILD_SLEEP=1      internal: be the sleeping grandchild.
//
// Duplicate names and broken schemas cannot be registered in go-sdk's server
// (tools are keyed by name; Server.AddTool panics unless the input schema is
// an object schema), so those two modes rewrite the tools/list result in a
// receiving mcp.Middleware instead.
//
// The order at start is: spawn child, ignore SIGTERM, stderr lines, crash on
// start, slow start, hang, garbage, serve.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// config is the behaviour chosen by the MCPTEST_* environment.
type config struct {
	name          string
	crashOnStart  bool
	crashAfter    int
	hangInit      bool
	ignoreEOF     bool
	ignoreSIGTERM bool
	garbage       string
	toolsChangeMS int
	storm         int
	toolCount     int
	dupTools      bool
	badSchema     bool
	spawnChild    string
	slowStartMS   int
	stderrLines   int
	pageSize      int
	versions      []string // MCPTEST_PROTOCOLS: the protocol versions served
	debug         bool
}

func loadConfig() (config, error) {
	c := config{
		name:          os.Getenv("MCPTEST_NAME"),
		crashOnStart:  os.Getenv("MCPTEST_CRASH_ON_START") == "1",
		hangInit:      os.Getenv("MCPTEST_HANG_INITIALIZE") == "1",
		ignoreEOF:     os.Getenv("MCPTEST_IGNORE_EOF") == "1",
		ignoreSIGTERM: os.Getenv("MCPTEST_IGNORE_SIGTERM") == "1",
		garbage:       os.Getenv("MCPTEST_GARBAGE_STDOUT"),
		dupTools:      os.Getenv("MCPTEST_DUP_TOOLS") == "1",
		versions:      strings.FieldsFunc(os.Getenv("MCPTEST_PROTOCOLS"), func(r rune) bool { return r == ',' }),
		badSchema:     os.Getenv("MCPTEST_BAD_SCHEMA") == "1",
		spawnChild:    os.Getenv("MCPTEST_SPAWN_CHILD"),
		debug:         os.Getenv("MCPTEST_DEBUG") == "1",
	}
	if c.name == "" {
		c.name = "mcptest"
	}
	switch c.spawnChild {
	case "", "0", "1", "inherit":
	default:
		return c, fmt.Errorf("MCPTEST_SPAWN_CHILD=%q: want 1 or inherit", c.spawnChild)
	}
	switch c.garbage {
	case "", "0", "1", "json":
	default:
		return c, fmt.Errorf("MCPTEST_GARBAGE_STDOUT=%q: want 1 or json", c.garbage)
	}
	for _, v := range []struct {
		name string
		dst  *int
	}{
		{"MCPTEST_CRASH_AFTER", &c.crashAfter},
		{"MCPTEST_TOOLS_CHANGE_MS", &c.toolsChangeMS},
		{"MCPTEST_LIST_CHANGED_STORM", &c.storm},
		{"MCPTEST_TOOL_COUNT", &c.toolCount},
		{"MCPTEST_SLOW_START_MS", &c.slowStartMS},
		{"MCPTEST_STDERR_LINES", &c.stderrLines},
		{"MCPTEST_PAGE_SIZE", &c.pageSize},
	} {
		s := os.Getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return c, fmt.Errorf("%s=%q: want a non-negative integer", v.name, s)
		}
		*v.dst = n
	}
	return c, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mcptest: "+format+"\n", args...)
}

// idle blocks until the process is killed.
func idle() {
	for {
		time.Sleep(time.Hour)
	}
}

func main() {
	if os.Getenv("MCPTEST_CHILD_SLEEP") == "1" {
		idle()
	}
	httpAddr := flag.String("http", "", "serve HTTP on this address instead of stdio")
	stateless := flag.Bool("stateless", false, "with -http: stateless Streamable HTTP")
	sse := flag.Bool("sse", false, "with -http: serve the legacy SSE handler")
	flag.Parse()

	cfg, err := loadConfig()
	if err != nil {
		logf("%v", err)
		os.Exit(2)
	}
	if cfg.spawnChild == "1" || cfg.spawnChild == "inherit" {
		spawnChild(cfg.spawnChild == "inherit")
	}
	if cfg.ignoreSIGTERM {
		signal.Ignore(syscall.SIGTERM)
	}
	for i := range cfg.stderrLines {
		logf("stderr line %d of %d", i+1, cfg.stderrLines)
	}
	if cfg.crashOnStart {
		logf("crashing on start as asked")
		os.Exit(3)
	}
	if cfg.slowStartMS > 0 {
		time.Sleep(time.Duration(cfg.slowStartMS) * time.Millisecond)
	}
	if cfg.hangInit && *httpAddr == "" {
		// Never answer: swallow stdin until EOF.
		_, _ = io.Copy(io.Discard, os.Stdin)
		if cfg.ignoreEOF {
			idle()
		}
		os.Exit(0)
	}
	switch cfg.garbage {
	case "1":
		os.Stdout.WriteString("mcptest: this line is not JSON\n" +
			"Starting server... done\n" +
			`{"hello":"a JSON object that is not JSON-RPC"}` + "\n")
	case "json":
		os.Stdout.WriteString(`{"hello":"a JSON object that is not JSON-RPC"}` + "\n")
	}

	st := &state{cfg: cfg}
	srv := newServer(st)
	if *httpAddr != "" {
		serveHTTP(st, srv, *httpAddr, *stateless, *sse)
		return
	}
	serveStdio(st, srv)
}

// spawnChild starts this binary again as a sleeping grandchild in the same
// process group and reports its pid on stderr.
func spawnChild(inherit bool) {
	exe, err := os.Executable()
	if err != nil {
		logf("spawn child: %v", err)
		os.Exit(2)
	}
	c := exec.Command(exe)
	c.Env = append(os.Environ(), "MCPTEST_CHILD_SLEEP=1")
	if inherit {
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
	}
	if err := c.Start(); err != nil {
		logf("spawn child: %v", err)
		os.Exit(2)
	}
	logf("child pid %d", c.Process.Pid)
	go func() { _ = c.Wait() }() // reap it if it dies before we do
}

func serveStdio(st *state, srv *mcp.Server) {
	var t mcp.Transport = &mcp.StdioTransport{}
	if st.cfg.crashAfter > 0 || st.cfg.storm > 0 {
		t = &tapTransport{inner: t, st: st}
	}
	err := srv.Run(context.Background(), t)
	if st.cfg.ignoreEOF {
		idle()
	}
	if err != nil {
		logf("session ended: %v", err)
		os.Exit(1)
	}
}

func serveHTTP(st *state, srv *mcp.Server, addr string, stateless, sse bool) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		logf("listen: %v", err)
		os.Exit(2)
	}
	getServer := func(*http.Request) *mcp.Server { return srv }
	var h http.Handler
	switch {
	case st.cfg.hangInit:
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	case sse:
		h = mcp.NewSSEHandler(getServer, nil)
	default:
		h = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Stateless: stateless})
	}
	logf("listening on %s", ln.Addr())
	err = (&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
	logf("serve: %v", err)
	os.Exit(1)
}

// state is what the tools and middleware share within one process.
type state struct {
	cfg   config
	calls atomic.Int64            // tools/call requests received
	tap   atomic.Pointer[tapConn] // the stdio connection, when tapped
}

func newServer(st *state) *mcp.Server {
	opts := &mcp.ServerOptions{PageSize: st.cfg.pageSize, SupportedProtocolVersions: st.cfg.versions}
	if st.cfg.debug {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	var srv *mcp.Server
	var stormOnce sync.Once
	startStorm := func() { stormOnce.Do(func() { go storm(st, srv) }) }
	if st.cfg.storm > 0 {
		opts.InitializedHandler = func(context.Context, *mcp.InitializedRequest) { startStorm() }
	}
	srv = mcp.NewServer(&mcp.Implementation{Name: st.cfg.name, Version: "0.0.1"}, opts)
	addTools(st, srv)
	srv.AddReceivingMiddleware(middleware(st))
	if st.cfg.storm > 0 {
		// A 2026-07-28 client sends no initialized notification: the
		// storm starts once it listens for list changes (a moment later,
		// so that its subscription is in place).
		srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "subscriptions/listen" {
					time.AfterFunc(50*time.Millisecond, startStorm)
				}
				return next(ctx, method, req)
			}
		})
	}
	if st.cfg.toolsChangeMS > 0 {
		go changeTools(srv, time.Duration(st.cfg.toolsChangeMS)*time.Millisecond)
	}
	return srv
}
