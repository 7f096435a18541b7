package oauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// callback is the loopback redirect listener of one login: it serves
// GET /callback on 127.0.0.1:port and hands the first authorization
// response to the fetcher. Close stops it.
type callback struct {
	server string // MCP server name, for errors
	port   int
	ln     net.Listener
	srv    *http.Server
	done   chan struct{}

	mu      sync.Mutex
	waiting chan callbackResult // non-nil while a fetch waits
}

type callbackResult struct {
	query url.Values
}

// listenCallback listens on 127.0.0.1:port (0 = any free port).
func listenCallback(server string, port int) (*callback, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("%w: server %s: port %d on 127.0.0.1 is in use; stop what listens there, or set another `callbackPort` in the server's `oauth` settings (one your authorization server accepts as a redirect)",
				ErrCallbackPort, server, port)
		}
		return nil, fmt.Errorf("%w: server %s: cannot listen on 127.0.0.1:%d: %w; set another `callbackPort` in the server's `oauth` settings",
			ErrCallbackPort, server, port, err)
	}
	c := &callback{server: server, port: ln.Addr().(*net.TCPAddr).Port, ln: ln, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", c.serve)
	c.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(c.done)
		_ = c.srv.Serve(ln)
	}()
	return c, nil
}

func (c *callback) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c.mu.Lock()
	ch := c.waiting
	c.waiting = nil
	c.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if ch == nil {
		w.WriteHeader(http.StatusConflict)
		fmt.Fprintln(w, "mcpledger is not waiting for a sign-in on this port; start `mcpledger login` again.")
		return
	}
	if q.Get("error") != "" {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "Sign-in to %s was not completed. You can close this tab.\n", c.server)
	} else {
		fmt.Fprintf(w, "Signed in to %s. You can close this tab and return to mcpledger.\n", c.server)
	}
	ch <- callbackResult{query: q}
}

// close stops the listener and waits for its goroutine.
func (c *callback) close() {
	_ = c.srv.Close()
	<-c.done
}

// fetcher returns go-sdk's AuthorizationCodeFetcher: it opens the
// authorization URL with open and waits for the redirect. The state is
// checked here (against the URL's own state) so a mismatch is
// ErrStateMismatch, not go-sdk's bare "state mismatch"; go-sdk checks it
// again.
func (c *callback) fetcher(open func(string) error) auth.AuthorizationCodeFetcher {
	return func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		au, err := url.Parse(args.URL)
		if err != nil {
			return nil, fmt.Errorf("oauth: server %s: authorization URL from the authorization server metadata is invalid: %w", c.server, err)
		}
		want := au.Query().Get("state")
		ch := make(chan callbackResult, 1)
		c.mu.Lock()
		c.waiting = ch
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			c.waiting = nil
			c.mu.Unlock()
		}()
		if err := open(args.URL); err != nil {
			return nil, fmt.Errorf("oauth: server %s: cannot open the browser: %w", c.server, err)
		}
		var res callbackResult
		select {
		case res = <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("oauth: server %s: no redirect to http://localhost:%d/callback before the login timed out or was cancelled (%w); run `mcpledger login %s` again and finish in the browser",
				c.server, c.port, ctx.Err(), c.server)
		}
		q := res.query
		if e := q.Get("error"); e != "" {
			if e == "access_denied" {
				return nil, fmt.Errorf("%w: server %s: the authorization server reports access_denied (%s); run `mcpledger login %s` again and approve the request",
					ErrConsentDenied, c.server, oneLine(q.Get("error_description")), c.server)
			}
			return nil, fmt.Errorf("oauth: server %s: the authorization server refused the request: %s (%s); check the server's `oauth` settings (clientId, scopes, callbackPort) and run `mcpledger login %s` again",
				c.server, oneLine(e), oneLine(q.Get("error_description")), c.server)
		}
		if q.Get("state") != want {
			return nil, fmt.Errorf("%w: server %s: the redirect's state does not match this sign-in (a stale browser tab or a forged redirect); run `mcpledger login %s` again",
				ErrStateMismatch, c.server, c.server)
		}
		if q.Get("code") == "" {
			return nil, fmt.Errorf("oauth: server %s: the redirect carries no authorization code; run `mcpledger login %s` again", c.server, c.server)
		}
		return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
	}
}

// oneLine bounds a server-supplied string for an error message.
func oneLine(s string) string {
	const max = 200
	out := make([]rune, 0, min(len(s), max))
	for _, r := range s {
		if len(out) == max {
			return string(out) + "…"
		}
		if r < 0x20 || r == 0x7f {
			r = ' '
		}
		out = append(out, r)
	}
	return string(out)
}
