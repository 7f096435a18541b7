package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
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
func (g *Gateway) HTTPHandler(o *HTTPOptions) http.Handler {
	var opts HTTPOptions
	if o != nil {
		opts = *o
	}
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = 30 * time.Minute
	} else if opts.SessionTimeout < 0 {
		opts.SessionTimeout = 0
	}
	var tokenSum [32]byte
	if opts.Token != "" {
		tokenSum = sha256.Sum256([]byte(opts.Token))
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server },
		&mcp.StreamableHTTPOptions{Logger: g.log, SessionTimeout: opts.SessionTimeout})
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
		mcpHandler.ServeHTTP(w, r)
	})
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
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
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
