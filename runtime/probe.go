package runtime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The health check's request. go-sdk's keepalive runs only on sessions
// that began with initialize, and its Ping does not work on a 2026-07-28
// session: the version removed ping (a 2026 server answers "method not
// found" to a ping carrying the request _meta, and a stateless HTTP server
// refuses one without it). The request every 2026 server answers is
// server/discover, which go-sdk sends only while connecting; the runtime
// sends it itself: over stdio and in-process beside go-sdk's requests on
// the same connection (wireConn.call), over HTTP as a request of its own
// through the attempt's HTTP client (the configured headers and sign-in
// apply). Older sessions are pinged as before.

// methodDiscover is the 2026-07-28 request that probes a session.
const methodDiscover = "server/discover"

// maxProbeAnswer bounds the answer to a probe that is read.
const maxProbeAnswer = 1 << 20

// setWire keeps the stdio or in-process connection for probe and
// listenAgain, and has it tell when go-sdk's listen ends.
func (c *conn) setWire(w *wireConn) {
	w.listenEnded = c.listenEnded
	c.mu.Lock()
	c.wire = w
	c.mu.Unlock()
}

// probe checks once that the server of cs answers, within ctx.
func (c *conn) probe(ctx context.Context, cs *mcp.ClientSession) error {
	ir := cs.InitializeResult()
	if ir == nil || ir.ProtocolVersion < stateless {
		return cs.Ping(ctx, nil)
	}
	params := c.discoverParams(ir.ProtocolVersion)
	c.mu.Lock()
	w, hc := c.wire, c.httpClient
	c.mu.Unlock()
	switch {
	case w != nil:
		return w.call(ctx, methodDiscover, params)
	case hc != nil:
		return c.postDiscover(ctx, hc, ir.ProtocolVersion, params)
	}
	return cs.Ping(ctx, nil)
}

// discoverParams are a server/discover request's parameters: the _meta
// every 2026-07-28 request carries. A probe declares no capability.
func (c *conn) discoverParams(version string) map[string]any {
	return map[string]any{"_meta": mcp.Meta{
		mcp.MetaKeyProtocolVersion:    version,
		mcp.MetaKeyClientInfo:         &mcp.Implementation{Name: c.m.opts.ClientName, Version: c.m.opts.ClientVersion},
		mcp.MetaKeyClientCapabilities: map[string]any{},
	}}
}

// postOwn posts a request of the runtime's own (its ID ownIDPrefix+id)
// to an HTTP server with the headers the 2026-07-28 transport requires,
// and returns the response of status 200; the caller closes its body.
func (c *conn) postOwn(ctx context.Context, hc *http.Client, version, id, method string, params map[string]any) (*http.Response, error) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": ownIDPrefix + id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.spec.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", version)
	req.Header.Set("Mcp-Method", method)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("calling %q: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("calling %q: %s", method, resp.Status)
	}
	return resp, nil
}

// postDiscover sends server/discover to an HTTP server with the headers
// the 2026-07-28 transport requires, and reads its answer: a JSON-RPC
// response, as JSON or as the first message of an event stream.
func (c *conn) postDiscover(ctx context.Context, hc *http.Client, version string, params map[string]any) error {
	resp, err := c.postOwn(ctx, hc, version, "probe", methodDiscover, params)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	r := io.LimitReader(resp.Body, maxProbeAnswer)
	msg := []byte(nil)
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct == "text/event-stream" {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), maxProbeAnswer)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok && strings.TrimSpace(d) != "" {
				msg = []byte(d)
				break
			}
		}
	} else if msg, err = io.ReadAll(r); err != nil {
		return fmt.Errorf("calling %q: reading the answer: %w", methodDiscover, err)
	}
	dec, err := jsonrpc.DecodeMessage(bytes.TrimSpace(msg))
	if err != nil {
		return fmt.Errorf("calling %q: the answer is not JSON-RPC: %w", methodDiscover, err)
	}
	res, ok := dec.(*jsonrpc.Response)
	if !ok {
		return fmt.Errorf("calling %q: the answer is not a response", methodDiscover)
	}
	if res.Error != nil {
		return fmt.Errorf("calling %q: %w", methodDiscover, res.Error)
	}
	return nil
}
