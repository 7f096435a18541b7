package runtime

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// List changes on a 2026-07-28 session arrive on its subscriptions/listen
// stream, which go-sdk opens once, while connecting, and never again: if
// the stream ends (an HTTP server or a proxy between closes it, a server
// ends the subscription), go-sdk does not notice, and no change would
// reach the catalog for the rest of the session. The runtime notices
// (over HTTP in capTransport, which sees the stream end; over stdio and
// in-process in wireConn, which sees the subscription's answer), re-lists
// at once for what it may have missed, and listens in its place with a
// subscriptions/listen of its own, opened again whenever it ends, until
// the connection ends. Over stdio and in-process that request shares the
// connection, and the notifications reach go-sdk's handlers as before;
// over HTTP it is a stream of the runtime's, whose notifications it hands
// to the same re-listing.
//
// A tools/list answer that go-sdk's client caches (a server's ttlMs) is
// invalidated by a notification go-sdk reads, not by one of the runtime's
// own stream: after a break, a server that sets ttlMs may be re-listed
// from that cache until the ttl runs out.

// methodListen is the 2026-07-28 request that opens a notification stream.
const methodListen = "subscriptions/listen"

// listenReopenEvery is the least time between two listens the runtime
// opens after one ends; a listen that ends sooner than that (refused, or
// cut at once) doubles the wait, up to listenReopenMax.
const (
	listenReopenEvery = time.Second
	listenReopenMax   = 5 * time.Minute
)

// listenEnded is called when go-sdk's listen stream ends without the
// client ending it: the runtime listens in its place, once.
func (c *conn) listenEnded() {
	if c.ctx.Err() != nil || !c.ownListen.CompareAndSwap(false, true) {
		return
	}
	c.m.log.Warn("the server's subscriptions/listen stream ended; listening again", "server", c.server)
	c.m.goFunc(c.listenAgain)
}

// listenAgain re-lists and keeps a listen of the runtime's open until the
// connection ends. It re-lists before the first listen and before each
// one that follows a listen that was open a while (changes may have been
// missed while none was), not after a refusal: a server that refuses
// every listen costs a request per backoff, not a listing.
func (c *conn) listenAgain() {
	// go-sdk opens its listen inside Connect, so a server that ends it at
	// once has it end before the session is the conn's: wait for that.
	select {
	case <-c.handshook:
	case <-c.ctx.Done():
		return
	}
	relist, wait := true, listenReopenEvery
	for {
		cs := c.session()
		if cs == nil {
			return
		}
		ir := cs.InitializeResult()
		if ir == nil {
			return
		}
		caps := capabilities(ir.Capabilities)
		params := c.discoverParams(ir.ProtocolVersion)
		params["notifications"] = map[string]bool{"toolsListChanged": caps.ToolsListChanged,
			"promptsListChanged": caps.PromptsListChanged, "resourcesListChanged": caps.ResourcesListChange}
		if relist {
			c.requestRelist("listen_reopened")
		}
		c.mu.Lock()
		w, hc := c.wire, c.httpClient
		c.mu.Unlock()
		opened := time.Now()
		var err error
		switch {
		case w != nil:
			err = w.call(c.ctx, methodListen, params)
		case hc != nil:
			err = c.listenHTTP(c.ctx, hc, ir.ProtocolVersion, params)
		default:
			return
		}
		if c.ctx.Err() != nil {
			return
		}
		relist = time.Since(opened) >= listenReopenEvery
		if relist {
			wait = listenReopenEvery
		} else {
			wait = min(2*wait, listenReopenMax)
		}
		c.m.log.Warn("subscriptions/listen ended; listening again", "server", c.server, "err", err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// listNotifications maps the list-change notifications to the re-list
// trigger each causes.
var listNotifications = map[string]string{
	"notifications/tools/list_changed":     "list_changed",
	"notifications/prompts/list_changed":   "prompts_changed",
	"notifications/resources/list_changed": "resources_changed",
}

// listenHTTP posts a subscriptions/listen of the runtime's own and reads
// its stream until it ends, re-listing on each list change it carries.
func (c *conn) listenHTTP(ctx context.Context, hc *http.Client, version string, params map[string]any) error {
	resp, err := c.postOwn(ctx, hc, version, "listen", methodListen, params)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxProbeAnswer)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		msg, err := jsonrpc.DecodeMessage([]byte(strings.TrimSpace(d)))
		if err != nil {
			continue
		}
		switch m := msg.(type) {
		case *jsonrpc.Request:
			if trigger, ok := listNotifications[m.Method]; ok {
				c.requestRelist(trigger)
			}
		case *jsonrpc.Response:
			return nil // the server ended the subscription
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

// listenBody is the body of go-sdk's subscriptions/listen stream over
// HTTP: it tells ended when the stream ends while its request still runs.
type listenBody struct {
	io.ReadCloser
	ctx   context.Context
	ended func()
	done  bool
}

func (b *listenBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.done && b.ctx.Err() == nil {
		b.done = true
		b.ended()
	}
	return n, err
}
