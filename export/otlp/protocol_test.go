package otlp

import (
	"errors"
	"strings"
	"testing"
)

// TestResolveProtocols: the flag wins for all three signals (and the
// variables under it are not looked at), a signal's own variable wins
// over OTEL_EXPORTER_OTLP_PROTOCOL, which wins over the default,
// http/protobuf; http/json and unknown values are refused, naming the
// setting and what to give.
func TestResolveProtocols(t *testing.T) {
	const (
		all     = "OTEL_EXPORTER_OTLP_PROTOCOL"
		traces  = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
		logs    = "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"
		metrics = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"
	)
	h, g := HTTPProtobuf, GRPC
	for _, tc := range []struct {
		name string
		flag Protocol
		env  map[string]string
		want protocols
	}{
		{"default", "", nil, protocols{h, h, h}},
		{"all grpc", "", map[string]string{all: "grpc"}, protocols{g, g, g}},
		{"all http", "", map[string]string{all: "http/protobuf"}, protocols{h, h, h}},
		{"traces over all", "", map[string]string{all: "http/protobuf", traces: "grpc"}, protocols{g, h, h}},
		{"logs over all", "", map[string]string{all: "grpc", logs: "http/protobuf"}, protocols{g, h, g}},
		{"metrics alone", "", map[string]string{metrics: "grpc"}, protocols{h, h, g}},
		{"flag over all", g, map[string]string{all: "http/protobuf", traces: "http/protobuf"}, protocols{g, g, g}},
		{"flag http over signals", h, map[string]string{logs: "grpc", metrics: "grpc"}, protocols{h, h, h}},
		{"flag over bad variables", g, map[string]string{all: "http/json", metrics: "thrift"}, protocols{g, g, g}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveProtocols(tc.flag, func(k string) string { return tc.env[k] })
			if err != nil || got != tc.want {
				t.Errorf("resolveProtocols(%q, %v) = %+v, %v; want %+v", tc.flag, tc.env, got, err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name, key string
		flag      Protocol
		env       map[string]string
		want      string
	}{
		{"json", all, "", map[string]string{all: "http/json"}, "no OTLP/JSON exporter"},
		{"json for traces", traces, "", map[string]string{all: "grpc", traces: "http/json"}, "no OTLP/JSON exporter"},
		{"unknown for logs", logs, "", map[string]string{logs: "grpcs"}, "is not an OTLP protocol"},
		{"unknown for metrics", metrics, "", map[string]string{metrics: "http"}, "is not an OTLP protocol"},
		{"unknown overall", all, "", map[string]string{all: "GRPC", traces: "grpc"}, "is not an OTLP protocol"},
		{"flag json", "--otlp-protocol", "http/json", nil, "no OTLP/JSON exporter"},
		{"flag unknown", "--otlp-protocol", "udp", map[string]string{all: "grpc"}, "is not an OTLP protocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveProtocols(tc.flag, func(k string) string { return tc.env[k] })
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(msg, tc.key+"=") || !strings.Contains(msg, tc.want) ||
				!strings.Contains(msg, "give ") || got != (protocols{}) {
				t.Errorf("resolveProtocols(%q, %v) = %+v, %v; want %s naming %s", tc.flag, tc.env, got, err, tc.want, tc.key)
			}
		})
	}
}

// TestHints: each failure the SDK reports in text gets the hint of its
// protocol, and only of its protocol: a 404 over gRPC or a SETTINGS frame
// to a gRPC exporter is not taken for something it is not.
func TestHints(t *testing.T) {
	const (
		http1     = `rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: http2: failed reading the frame payload: http2: frame too large, note that the frame header looked like an HTTP/1.1 header"`
		h2        = `rpc error: code = Unimplemented desc = unexpected HTTP status code received from server: 404 (Not Found); transport: received unexpected content-type "text/plain; charset=utf-8"`
		grpcSrv   = `Post "http://127.0.0.1:4317/v1/traces": net/http: HTTP/1.x transport connection broken: malformed HTTP response "\x00\x00\x06\x04"`
		grpcFirst = `Post "http://127.0.0.1:4317/v1/logs": readLoopPeekFailLocked: %!w(<nil>)`
		plain     = `rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: tls: first record does not look like a TLS handshake"`
		plainH    = `Post "https://127.0.0.1:4318/v1/logs": http: server gave HTTP response to HTTPS client`
		noLogs    = `rpc error: code = Unimplemented desc = unknown service opentelemetry.proto.collector.logs.v1.LogsService`
		notFnd    = `failed to send logs to http://127.0.0.1:4318/v1/logs: 404 Not Found`
		large     = `rpc error: code = ResourceExhausted desc = grpc: received message larger than max (5243162 vs. 4194304)`
		refused   = `rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:4317: connect: connection refused"`
	)
	for _, tc := range []struct {
		err  string
		p    Protocol
		want string // "" for none
	}{
		{http1, GRPC, "OTLP/gRPC port, 4317"},
		{http1, HTTPProtobuf, ""},
		{h2, GRPC, "OTLP/gRPC port, 4317"},
		{h2, HTTPProtobuf, ""},
		{grpcSrv, HTTPProtobuf, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
		{grpcSrv, GRPC, ""},
		{grpcFirst, HTTPProtobuf, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
		{grpcFirst, GRPC, ""},
		{plain, GRPC, "with http://"},
		{plainH, HTTPProtobuf, "with http://"},
		{noLogs, GRPC, "set OTEL_LOGS_EXPORTER=none"},
		{noLogs, HTTPProtobuf, ""},
		{notFnd, HTTPProtobuf, "set OTEL_LOGS_EXPORTER=none"},
		{notFnd, GRPC, ""},
		{large, GRPC, "max_recv_msg_size_mib"},
		{large, HTTPProtobuf, ""},
		{refused, GRPC, ""},
		{refused, HTTPProtobuf, ""},
	} {
		got := hint(errors.New(tc.err), tc.p, "logs", "OTEL_LOGS_EXPORTER")
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) || tc.want != "" && !strings.HasSuffix(got, "the journal keeps every event)") {
			t.Errorf("hint(%s, %s) = %q; want %q", tc.err, tc.p, got, tc.want)
		}
	}
}
