package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
)

// Path is the path the gateway serves MCP on over HTTP.
const Path = "/mcp"

// HTTPOptions configure Gateway.HTTPHandler. The zero value serves
// loopback clients without a token.
type HTTPOptions struct {
	// Token, when set, is the bearer token every request must carry
	// (Authorization: Bearer TOKEN). A missing or wrong one gets 401 and is
	// journaled (gateway.rejected).
	Token string
	// AllowedHosts are Host header names accepted besides loopback ones
	// (localhost, 127.0.0.0/8, ::1), for a gateway reachable under another
	// name. Ports are not compared.
	AllowedHosts []string
	// AllowedOrigins are Origin values (scheme://host[:port]) accepted
	// besides the gateway's own loopback origin (same port). A request
	// without Origin (not from a browser) is accepted.
	AllowedOrigins []string
	// SessionTimeout closes client sessions idle that long (default 30
	// min; <0: never).
	SessionTimeout time.Duration
	// MaxSessions caps the client sessions held (default 1000); at the cap
	// a new one evicts the least recently used idle one, or is refused
	// with 503 if none is idle (see sessionTable).
	MaxSessions int
	// MaxInflightBytes bounds the body bytes of the requests in flight
	// (default 8 MiB, at least twice MaxBodyBytes; a sixteenth is kept
	// for bodies up to 64 KiB) and MaxInflight their number (default 32);
	// a request over either is answered 503 with Retry-After (see budget).
	MaxInflightBytes int64
	MaxInflight      int
	// MaxBodyBytes bounds one request's body (default 4 MiB; 413 above).
	MaxBodyBytes int64
	// BodyTimeout bounds reading one request's body (default 30 s); a
	// slower body is cut with 408.
	BodyTimeout time.Duration
	// OnIdle, if set, is called once no request has been in flight for a
	// second after some were (until the gateway is closed). The copies of
	// their bodies are garbage by then; serve returns that memory to the
	// OS, which the Go runtime would do only after its next collection,
	// up to two minutes later on an idle gateway.
	OnIdle func()
}

func (o HTTPOptions) withDefaults() HTTPOptions {
	if o.SessionTimeout == 0 {
		o.SessionTimeout = DefaultSessionIdle
	} else if o.SessionTimeout < 0 {
		o.SessionTimeout = 0
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxInflightBytes <= 0 {
		o.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if o.MaxInflight <= 0 {
		o.MaxInflight = DefaultMaxInflight
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxInflightBytes < 2*o.MaxBodyBytes {
		o.MaxInflightBytes = 2 * o.MaxBodyBytes // a body the limit allows must fit beside the reserve
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	return o
}

// HTTPHandler returns the gateway's Streamable HTTP handler, at
// Path (other paths get 404). Before any MCP message is read, each
// request's Host must be a loopback name or an allowed host and its
// Origin, if any, the gateway's own loopback origin or an allowed one
// (DNS-rebinding protection: 403 otherwise), and with a token its bearer
// token must match (401 otherwise). Refusals are journaled as
// gateway.rejected, at most 10 a second (the rest are counted on the next
// record).
//
// go-sdk's own protection (StreamableHTTPOptions.DisableLocalhostProtection
// left false) checks only that a request arriving on a loopback address
// has a loopback Host; it checks no Origin and nothing on other addresses.
//
// Past the guards, requests are bounded: by the budget of body bytes and
// requests in flight (503 with Retry-After, journaled as busy), the body
// limit (413), the body timeout (408, journaled as slow_body) and the
// session cap (see HTTPOptions). Then a request of a session, or one that
// opens one, goes to go-sdk's stateful handler, and a sessionless
// (2026-07-28) one to its stateless handler (stateless.go).
func (g *Gateway) HTTPHandler(o *HTTPOptions) http.Handler {
	var opts HTTPOptions
	if o != nil {
		opts = *o
	}
	opts = opts.withDefaults()
	var tokenSum [32]byte
	if opts.Token != "" {
		tokenSum = sha256.Sum256([]byte(opts.Token))
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server },
		// Idle sessions are closed by the session table, which sees every
		// request (go-sdk's timer misses those of the fast call path).
		&mcp.StreamableHTTPOptions{Logger: g.log, MaxRequestBodyBytes: opts.MaxBodyBytes})
	h := handlers{stateful: mcpHandler, stateless: g.newStatelessHandler(opts.MaxBodyBytes), listens: &listenCap{max: opts.MaxSessions}}
	b := &budget{maxBytes: opts.MaxInflightBytes, maxReqs: opts.MaxInflight, idle: opts.OnIdle}
	context.AfterFunc(g.ctx, b.stop)
	sessions := newSessionTable(opts.MaxSessions, g.server, opts.SessionTimeout)
	context.AfterFunc(g.ctx, sessions.stop)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r.Host, opts.AllowedHosts) {
			g.rejectHTTP(w, r, events.RejectHost, http.StatusForbidden, "mcpledger: Host "+quoteHeader(r.Host)+" is not served here (DNS-rebinding protection)")
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !originAllowed(origin, localPort(r), opts.AllowedHosts, opts.AllowedOrigins) {
			g.rejectHTTP(w, r, events.RejectOrigin, http.StatusForbidden, "mcpledger: Origin "+quoteHeader(origin)+" is not allowed (DNS-rebinding protection)")
			return
		}
		if opts.Token != "" {
			tok, ok := bearer(r.Header.Get("Authorization"))
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcpledger"`)
				g.rejectHTTP(w, r, events.RejectMissingToken, http.StatusUnauthorized, "mcpledger: missing bearer token")
				return
			}
			sum := sha256.Sum256([]byte(tok))
			if subtle.ConstantTimeCompare(sum[:], tokenSum[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcpledger", error="invalid_token"`)
				g.rejectHTTP(w, r, events.RejectWrongToken, http.StatusUnauthorized, "mcpledger: wrong bearer token")
				return
			}
		}
		if r.URL.Path != Path {
			http.NotFound(w, r)
			return
		}
		g.serveBounded(w, r, h, b, sessions, opts)
	})
}

// handlers are go-sdk's two Streamable HTTP handlers of the gateway's
// server: sessions (2025-11-25 and older) and sessionless requests
// (2026-07-28), see stateless.go.
type handlers struct {
	stateful, stateless http.Handler
	listens             *listenCap
}

// serveBounded hands r to go-sdk within the budget, the body limit and
// timeout, and the session cap.
func (g *Gateway) serveBounded(w http.ResponseWriter, r *http.Request, hs handlers, b *budget, sessions *sessionTable, opts HTTPOptions) {
	h := hs.stateful
	var ss *mcp.ServerSession
	id := r.Header.Get(sessionHeader)
	if id != "" {
		var ok bool
		post := r.Method == http.MethodPost
		if ss, ok = sessions.begin(id, post); ok {
			defer sessions.end(id, post)
		}
	}
	if r.Method != http.MethodPost {
		if id == "" && statelessHeader(r) {
			h = hs.stateless // 405: a sessionless client has no stream to GET nor session to DELETE
		}
		h.ServeHTTP(w, r) // GET streams and DELETE: no body
		return
	}
	if r.ContentLength > opts.MaxBodyBytes {
		http.Error(w, fmt.Sprintf("mcpledger: request body of %d bytes exceeds the limit of %d", r.ContentLength, opts.MaxBodyBytes), http.StatusRequestEntityTooLarge)
		return
	}
	share := opts.MaxBodyBytes
	if r.ContentLength >= 0 {
		share = r.ContentLength
	}
	body := newMeteredBody(w, r, b, share, opts.BodyTimeout)
	defer body.release()
	r.Body = body
	rw := &refusingWriter{ResponseWriter: w, body: body}
	rw.refuse = func(err error) {
		if errors.Is(err, errBusy) {
			body.drain(opts.MaxBodyBytes)
		}
		g.refuseBody(w, r, err, opts.BodyTimeout)
	}
	if id != "" {
		if r.ContentLength >= 0 && fastEligible(r, ss) {
			buf, err := readBody(body, r.ContentLength)
			if err == nil && g.serveFast(w, r, ss, buf) {
				return
			}
			// go-sdk's to answer: it reads the same bytes, and the same
			// error after them (a refusal answered as ever).
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(buf), errReader{err}))
		}
		h.ServeHTTP(rw, r)
		if (r.ContentLength > smallBody || r.ContentLength < 0) && !rw.refused {
			flushSession(h, r, id)
		}
		return
	}
	if routeSessionless(r, body, opts.MaxBodyBytes) {
		if r.ContentLength >= 0 && !g.noFast2026 && fast2026Eligible(r) {
			buf, err := readBody(body, r.ContentLength)
			if err == nil && g.serveFast2026(w, r, buf) {
				return
			}
			// go-sdk's to answer: it reads the same bytes, and the same
			// error after them.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(buf), errReader{err}))
		}
		if isListen(r) {
			if !hs.listens.take() {
				setRetryAfter(w.Header())
				g.rejectHTTP(w, r, events.RejectBusy, http.StatusServiceUnavailable,
					fmt.Sprintf("mcpledger: the gateway holds %d subscriptions/listen streams; retry later", opts.MaxSessions))
				return
			}
			defer hs.listens.give()
			body.stream = true
			if body.finished {
				body.release() // read already (routeSessionless)
			}
		}
		hs.stateless.ServeHTTP(rw, r)
		return
	}
	// Any other POST without a session ID opens a session (go-sdk creates
	// one for whatever it carries; an initialize, from a well-behaved
	// client).
	if !sessions.admit() {
		setRetryAfter(w.Header())
		g.rejectHTTP(w, r, events.RejectBusy, http.StatusServiceUnavailable,
			fmt.Sprintf("mcpledger: the gateway holds %d client sessions, every one busy; retry later", opts.MaxSessions))
		return
	}
	// The session goes in the table before its initialize is answered:
	// the client's next requests, which may come before this handler
	// returns, find it (and take the fast path).
	done := false
	added := func(id string) {
		if !done {
			done = true
			sessions.added(id)
		}
	}
	rw.onHeader = func() { added(w.Header().Get(sessionHeader)) }
	defer added("") // refused, or nothing written
	h.ServeHTTP(rw, r)
}

// flushSession sends the session a ping of its own after a large request,
// answered into nothing. go-sdk v1.8.0 keeps a session's last request
// reachable until its next one arrives (jsonrpc2's handler queue is
// resliced, not cleared), so each idle session that last received a 4 MB
// body would hold those 4 MB for as long as it lives: up to MaxSessions
// times the body limit. The ping takes its place.
func flushSession(h http.Handler, r *http.Request, id string) {
	req, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), http.MethodPost, r.URL.String(), strings.NewReader(flushPing))
	if err != nil {
		return
	}
	req.Host, req.RemoteAddr = r.Host, r.RemoteAddr
	for _, k := range []string{"Authorization", "Mcp-Protocol-Version"} {
		if v := r.Header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	req.Header.Set(sessionHeader, id)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	h.ServeHTTP(discardWriter{h: http.Header{}}, req)
}

// readBody reads a body of n bytes (its Content-Length, within the body
// limit) into one buffer of that size, then reads its end, which lifts
// the body's read deadline (meteredBody). On an error it returns what it
// read.
func readBody(body io.Reader, n int64) ([]byte, error) {
	buf := make([]byte, n)
	k, err := io.ReadFull(body, buf)
	if err != nil {
		return buf[:k], err
	}
	var one [1]byte
	if _, err := body.Read(one[:]); err != io.EOF {
		if err == nil {
			err = errors.New("gateway: body longer than its Content-Length")
		}
		return buf, err
	}
	return buf, nil
}

// errReader reads as err, or as the end of the body if err is nil.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}

// flushPing is flushSession's request.
const flushPing = `{"jsonrpc":"2.0","id":"mcpledger-flush","method":"ping"}`

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d discardWriter) WriteHeader(int)             {}
func (d discardWriter) Flush()                      {}

// sessionHeader carries a Streamable HTTP session's ID.
const sessionHeader = "Mcp-Session-Id"

// refuseBody answers a request whose body was not read: 503 for lack of
// budget, 408 for a body slower than timeout.
func (g *Gateway) refuseBody(w http.ResponseWriter, r *http.Request, err error, timeout time.Duration) {
	if errors.Is(err, errSlowBody) {
		w.Header().Set("Connection", "close")
		g.rejectHTTP(w, r, events.RejectSlowBody, http.StatusRequestTimeout,
			fmt.Sprintf("mcpledger: the request body did not arrive within %s", timeout))
		return
	}
	setRetryAfter(w.Header())
	g.rejectHTTP(w, r, events.RejectBusy, http.StatusServiceUnavailable,
		"mcpledger: the gateway has too many requests or request bytes in flight; retry later")
}

// bearer returns the token of an "Authorization: Bearer TOKEN" header.
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// isLoopbackName reports whether host (no port) names the loopback
// interface.
func isLoopbackName(host string) bool {
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// splitHost returns the host of "host[:port]".
func splitHost(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

func hostAllowed(hostport string, allowed []string) bool {
	h := splitHost(hostport)
	if h == "" {
		return false
	}
	return isLoopbackName(h) || slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(splitHost(a), h) })
}

// originAllowed accepts the gateway's own loopback origin (http or https,
// any loopback name, the port the request came in on), allowed hosts (any
// port) and allowed origins (exactly).
func originAllowed(origin, port string, hosts, origins []string) bool {
	if slices.ContainsFunc(origins, func(o string) bool { return strings.EqualFold(strings.TrimSuffix(o, "/"), origin) }) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return false
	}
	if isLoopbackName(u.Hostname()) {
		p := u.Port()
		if p == "" {
			p = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		return port == "" || p == port
	}
	return slices.ContainsFunc(hosts, func(a string) bool { return strings.EqualFold(splitHost(a), u.Hostname()) })
}

// localPort returns the port the request arrived on ("" if unknown).
func localPort(r *http.Request) string {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && a != nil {
		if _, p, err := net.SplitHostPort(a.String()); err == nil {
			return p
		}
	}
	return ""
}

// quoteHeader quotes a header value for an error message, bounded.
func quoteHeader(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	return `"` + strings.Map(func(r rune) rune {
		if r < ' ' || r == '"' || r == 0x7f {
			return '?'
		}
		return r
	}, s) + `"`
}

// rejectLimiter bounds how many refusals a second are journaled.
type rejectLimiter struct {
	second     int64 // unix second of the current window
	n          int   // journaled in it
	suppressed int   // not journaled since the last record
}

// maxRejectsPerSecond bounds the gateway.rejected records per second.
const maxRejectsPerSecond = 10

// rejectHTTP answers a refused request and journals the refusal.
func (g *Gateway) rejectHTTP(w http.ResponseWriter, r *http.Request, reason string, status int, msg string) {
	g.log.Warn("gateway: request refused", "remote", r.RemoteAddr, "reason", reason, "status", status)
	g.mu.Lock()
	now := time.Now().Unix()
	if g.rej.second != now {
		g.rej.second, g.rej.n = now, 0
	}
	record := g.rej.n < maxRejectsPerSecond
	var suppressed int
	if record {
		g.rej.n++
		suppressed, g.rej.suppressed = g.rej.suppressed, 0
	} else {
		g.rej.suppressed++
	}
	g.mu.Unlock()
	if m := g.m.Load(); record && m != nil {
		ev := &events.GatewayRejected{Remote: r.RemoteAddr, Reason: reason, Status: status, Method: r.Method,
			Host: truncate(r.Host, 200), Origin: truncate(r.Header.Get("Origin"), 200), Suppressed: suppressed}
		// Not the request's context: a body cut at its deadline has
		// cancelled it already.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
		if err := m.RecordRejected(ctx, ev); err != nil {
			g.log.Warn("gateway: journaling a refused request failed", "err", err)
		}
		cancel()
	}
	http.Error(w, msg, status)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
