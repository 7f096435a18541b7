package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The _meta of a plain call (wire_call.go) on a 2026-07-28 session.
//
// Every 2026-07-28 request carries the client's protocol version, info
// and capabilities in its _meta; go-sdk's client puts them there
// (injectRequestMeta), with capabilities it derives from its options and
// handlers, unexported. The runtime does not rebuild them: once a session
// is up, it asks go-sdk's client for the _meta of a tools/call and keeps
// it (probeCallMeta). A sending middleware outside all others takes the
// request as go-sdk made it and answers it without sending anything.
// A plain call then sends that _meta, with the call's own keys, through
// the front end's Options.CallMeta: what go-sdk's client would send.

// metaProbeKey marks the context of the request probeCallMeta makes; its
// value is where probeMetaMiddleware puts the request's _meta.
type metaProbeKey struct{}

// errMetaProbed is probeMetaMiddleware's answer to the probe: the request
// was not sent.
var errMetaProbed = errors.New("runtime: the _meta of a call was read and the call not sent")

// probeMetaMiddleware is the outermost sending middleware of every
// client of the runtime: it answers probeCallMeta's request with
// errMetaProbed, keeping its _meta, and passes every other request on.
func probeMetaMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if p, ok := ctx.Value(metaProbeKey{}).(*mcp.Meta); ok {
			if params := req.GetParams(); params != nil {
				*p = maps.Clone(params.GetMeta())
			}
			return nil, errMetaProbed
		}
		return next(ctx, method, req)
	}
}

// probeCallMeta returns the _meta go-sdk's client puts on a tools/call
// of session cs when it carries none of its own, or nil if it puts none
// (a session below 2026-07-28) or could not be asked. Nothing is sent.
// Its values are kept encoded (rawMeta), as the plain call writes them.
func probeCallMeta(ctx context.Context, cs *mcp.ClientSession) mcp.Meta {
	var meta mcp.Meta
	_, err := cs.CallTool(context.WithValue(ctx, metaProbeKey{}, &meta), &mcp.CallToolParams{Name: "mcpledger/probe"})
	if !errors.Is(err, errMetaProbed) || len(meta) == 0 {
		return nil
	}
	for k, v := range meta {
		b, err := json.Marshal(v)
		if err != nil {
			return nil
		}
		meta[k] = rawMeta(b)
	}
	return meta
}

// rawMeta is a _meta value encoded once (by json.Marshal: valid, compact,
// one line), which the plain call writes as it is (appendMeta).
type rawMeta []byte

// MarshalJSON implements json.Marshaler.
func (r rawMeta) MarshalJSON() ([]byte, error) { return r, nil }

// appendMeta appends meta as a JSON object, with its keys in order as
// encoding/json writes a map: a rawMeta value as it is, any other as
// json.Marshal encodes it.
func appendMeta(b []byte, meta mcp.Meta) ([]byte, error) {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(meta)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendJSONString(b, k), ':')
		switch v := meta[k].(type) {
		case rawMeta:
			b = append(b, v...)
		case string:
			b = appendJSONString(b, v)
		default:
			vb, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			b = append(b, vb...)
		}
	}
	return append(b, '}'), nil
}

// callMeta is the _meta of a plain call on a 2026-07-28 session: the
// call's own keys (own: its trace), then those of base that it does not
// have (base: probeCallMeta's), as go-sdk's client adds them; then what
// a front end's sending middleware makes of it (Options.CallMeta, which
// only a front end's client has: Options.NewClient).
func (m *Manager) callMeta(ctx context.Context, base, own mcp.Meta) mcp.Meta {
	meta := make(mcp.Meta, len(base)+len(own))
	maps.Copy(meta, base)
	maps.Copy(meta, own)
	if m.opts.CallMeta != nil && m.opts.NewClient != nil {
		meta = m.opts.CallMeta(ctx, meta)
	}
	return meta
}

// metaSize is about the length of meta as appendMeta writes it: room to
// reserve for it.
func metaSize(meta mcp.Meta) int {
	n := 2
	for k, v := range meta {
		n += len(k) + 4
		if r, ok := v.(rawMeta); ok {
			n += len(r)
		} else {
			n += 64
		}
	}
	return n
}
