package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/config"
)

// What a connection needs to know about the protocol version it speaks:
// the version to connect with (ProtocolAuto and the journal's knowledge),
// the per-request _meta a 2026-07-28 session's own requests must carry,
// and the tools go-sdk's client leaves out of a listing.

// stateless is the first protocol version without an initialize
// handshake (SEP-2575): every request carries the version and the client's
// identity and capabilities in _meta.
const stateless = "2026-07-28"

// knownVersion returns the protocol version to connect to server with
// under spec when its setting is auto: the one the tool cache recorded for
// the same config fingerprint, unless an attempt connected in that version
// failed its handshake since (then "" once: negotiate afresh). Called on
// the loop, which owns the cache.
func (m *Manager) knownVersion(server string, spec *config.Spec) string {
	v := spec.Config.ProtocolVersion
	if v == "" {
		v = m.opts.ProtocolVersion
	}
	if v != ProtocolAuto {
		return ""
	}
	fp := events.Fingerprint(&spec.Config)
	if miss, ok := m.versionMiss.LoadAndDelete(server); ok && miss == fp {
		return ""
	}
	return m.set.Cache.ProtocolVersion(server, fp)
}

// exclusions collects the tools go-sdk's client leaves out of a tools/list
// result (a tool whose x-mcp-header annotations are invalid, SEP-2243): it
// drops them silently but for an error log line, which the connection's
// logger (exclusionLogger) hands here while a listing is under way.
type exclusions struct {
	mu   sync.Mutex
	on   bool
	list []events.ExcludedTool
}

// start begins collecting for one listing; take ends it and returns what
// was collected.
func (x *exclusions) start() {
	x.mu.Lock()
	x.on, x.list = true, nil
	x.mu.Unlock()
}

func (x *exclusions) take() []events.ExcludedTool {
	x.mu.Lock()
	defer x.mu.Unlock()
	l := x.list
	x.on, x.list = false, nil
	return l
}

func (x *exclusions) add(name, reason string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.on {
		x.list = append(x.list, events.ExcludedTool{Name: name, Reason: reason})
	}
}

// excludedToolMsg is the message go-sdk v1.8.0 logs for each tool it
// drops from a listing (mcp/streamable_headers.go, filterValidTools),
// with attributes "tool" and "error".
const excludedToolMsg = "excluding tool from tools/list"

// exclusionHandler passes go-sdk's log records to the Manager's handler,
// and the ones that report an excluded tool to an exclusions as well.
type exclusionHandler struct {
	slog.Handler
	x *exclusions
}

// exclusionLogger returns the logger for a connection's go-sdk client.
func exclusionLogger(base *slog.Logger, x *exclusions) *slog.Logger {
	return slog.New(exclusionHandler{Handler: base.Handler(), x: x})
}

func (h exclusionHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l == slog.LevelError || h.Handler.Enabled(ctx, l)
}

func (h exclusionHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == excludedToolMsg {
		var name, reason string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "tool":
				name = a.Value.String()
			case "error":
				reason = fmt.Sprint(a.Value.Any())
			}
			return true
		})
		h.x.add(name, reason)
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h exclusionHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return exclusionHandler{Handler: h.Handler.WithAttrs(as), x: h.x}
}

func (h exclusionHandler) WithGroup(name string) slog.Handler {
	return exclusionHandler{Handler: h.Handler.WithGroup(name), x: h.x}
}
