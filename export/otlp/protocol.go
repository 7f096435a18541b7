package otlp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Protocol is an OTLP transport, named as OTEL_EXPORTER_OTLP_PROTOCOL
// names it.
type Protocol string

const (
	// HTTPProtobuf is OTLP/HTTP with protobuf bodies (port 4318
	// usually): the specification's default.
	HTTPProtobuf Protocol = "http/protobuf"
	// GRPC is OTLP/gRPC (port 4317 usually).
	GRPC Protocol = "grpc"
)

// protocols is the protocol of each signal.
type protocols struct{ traces, logs, metrics Protocol }

// resolveProtocols returns the protocol of each signal: flag (the
// --otlp-protocol flag's value) when set, for all three, else the
// signal's OTEL_EXPORTER_OTLP_{TRACES,LOGS,METRICS}_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf. A value that is set
// and used must name a protocol the SDK has exporters for; one that is
// not used (a variable under the flag) is not looked at.
func resolveProtocols(flag Protocol, getenv func(string) string) (protocols, error) {
	if flag != "" {
		if err := checkProtocol("--otlp-protocol", string(flag)); err != nil {
			return protocols{}, err
		}
		return protocols{flag, flag, flag}, nil
	}
	general := HTTPProtobuf
	if v := getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); v != "" {
		if err := checkProtocol("OTEL_EXPORTER_OTLP_PROTOCOL", v); err != nil {
			return protocols{}, err
		}
		general = Protocol(v)
	}
	var p protocols
	for _, s := range []struct {
		key string
		to  *Protocol
	}{{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", &p.traces}, {"OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", &p.logs}, {"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", &p.metrics}} {
		*s.to = general
		if v := getenv(s.key); v != "" {
			if err := checkProtocol(s.key, v); err != nil {
				return protocols{}, err
			}
			*s.to = Protocol(v)
		}
	}
	return p, nil
}

// checkProtocol refuses a protocol the SDK has no exporter for, saying
// what to give instead.
func checkProtocol(key, v string) error {
	switch Protocol(v) {
	case HTTPProtobuf, GRPC:
		return nil
	case "http/json":
		return fmt.Errorf("%w: %s=%q: the OpenTelemetry Go SDK has no OTLP/JSON exporter; give http/protobuf (the same port, 4318 usually) or grpc (port 4317 usually)", ErrConfig, key, v)
	}
	return fmt.Errorf("%w: %s=%q is not an OTLP protocol: give grpc (port 4317 usually) or http/protobuf (port 4318 usually)", ErrConfig, key, v)
}

// grpcBackoff bounds the wait of a gRPC connection between its tries to
// reconnect. gRPC's default grows to 2 minutes, and meanwhile every
// export fails at once: a collector back after a long outage would wait
// that long for its backlog. The Shipper paces the exports; this only
// bounds how stale the connection's state can be when one comes.
var grpcBackoff = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
	MinConnectTimeout: 20 * time.Second,
})

// grpcBatchBytes is the budget of a batch's log record bodies when the
// logs go over gRPC. A gRPC receiver refuses a message over 4 MiB unless
// configured otherwise (an OpenTelemetry Collector's
// max_recv_msg_size_mib, Jaeger's), and answers ResourceExhausted to
// every try: a batch over it would stall the export for good. A batch
// ends once its bodies reach the budget, so it may carry one event more
// (a result is kept to 1 MiB at most) and each record's attributes
// (hundreds of bytes): 2 MiB leaves room for both.
const grpcBatchBytes = 2 << 20

// MaxBatchBytes is the budget of a batch's log record bodies the
// receiver takes ([Options].MaxBytes): 2 MiB when the logs go over
// gRPC, 0 otherwise (the Shipper's default).
func (x *SDKExporter) MaxBatchBytes() int {
	if x.logs != nil && x.proto.logs == GRPC {
		return grpcBatchBytes
	}
	return 0
}

// metricExporter is what Export needs of the SDK's metric exporters.
type metricExporter interface {
	Export(ctx context.Context, rm *metricdata.ResourceMetrics) error
	Shutdown(ctx context.Context) error
}

// newTraceExporter returns the traces exporter of protocol p. endpoint
// is the base URL of ExporterOptions.Endpoint or "" (OTEL_* variables):
// over HTTP, traces go to its /v1/traces; over gRPC, to its host and
// port (insecure for http://).
func newTraceExporter(ctx context.Context, p Protocol, endpoint string, timeout time.Duration) (sdktrace.SpanExporter, error) {
	if p == GRPC {
		return otlptracegrpc.New(ctx, withTarget(endpoint, timeout, otlptracegrpc.WithEndpointURL, otlptracegrpc.WithTimeout,
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}), otlptracegrpc.WithDialOption(grpcBackoff))...)
	}
	return otlptracehttp.New(ctx, withTarget(endpoint+httpPath(endpoint, "/v1/traces"), timeout, otlptracehttp.WithEndpointURL, otlptracehttp.WithTimeout,
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))...)
}

// newLogExporter is newTraceExporter for log records (/v1/logs).
func newLogExporter(ctx context.Context, p Protocol, endpoint string, timeout time.Duration) (sdklog.Exporter, error) {
	if p == GRPC {
		return otlploggrpc.New(ctx, withTarget(endpoint, timeout, otlploggrpc.WithEndpointURL, otlploggrpc.WithTimeout,
			otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: false}), otlploggrpc.WithDialOption(grpcBackoff))...)
	}
	return otlploghttp.New(ctx, withTarget(endpoint+httpPath(endpoint, "/v1/logs"), timeout, otlploghttp.WithEndpointURL, otlploghttp.WithTimeout,
		otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}))...)
}

// newMetricExporter is newTraceExporter for metric points (/v1/metrics).
// The points are built by the Metrics fold, cumulative: the exporter's
// temporality and aggregation selectors are not used.
func newMetricExporter(ctx context.Context, p Protocol, endpoint string, timeout time.Duration) (metricExporter, error) {
	if p == GRPC {
		return otlpmetricgrpc.New(ctx, withTarget(endpoint, timeout, otlpmetricgrpc.WithEndpointURL, otlpmetricgrpc.WithTimeout,
			otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig{Enabled: false}), otlpmetricgrpc.WithDialOption(grpcBackoff))...)
	}
	return otlpmetrichttp.New(ctx, withTarget(endpoint+httpPath(endpoint, "/v1/metrics"), timeout, otlpmetrichttp.WithEndpointURL, otlpmetrichttp.WithTimeout,
		otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false}))...)
}

// withTarget returns opts (each exporter package has its own option type)
// with the endpoint URL, if not "", and the timeout, if set.
func withTarget[O any](url string, timeout time.Duration, withURL func(string) O, withTimeout func(time.Duration) O, opts ...O) []O {
	if url != "" {
		opts = append(opts, withURL(url))
	}
	if timeout > 0 {
		opts = append(opts, withTimeout(timeout))
	}
	return opts
}

// httpPath is the signal's path appended to an OTLP/HTTP base endpoint,
// or "" when there is none (the OTEL_* variables say where).
func httpPath(endpoint, path string) string {
	if endpoint == "" {
		return ""
	}
	return path
}

// tooLarge says what to try when a gRPC receiver refused a request as
// larger than its limit (the batches stay under 4 MiB, grpcBatchBytes,
// but one event's payload may not): "" otherwise.
func tooLarge(err error, p Protocol) string {
	msg := err.Error()
	if p != GRPC || !strings.Contains(msg, "code = ResourceExhausted") || !strings.Contains(msg, "larger than max") {
		return ""
	}
	return " (the receiver takes smaller gRPC messages: raise its limit (a collector's max_recv_msg_size_mib), or send over http/protobuf; the journal keeps every event)"
}

// wrongProtocol says what to try when err looks like the answer of a
// receiver of the other protocol, or of one in plain text to TLS: ""
// otherwise.
func wrongProtocol(err error, p Protocol) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "first record does not look like a TLS handshake") || strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return " (the endpoint answers in plain text, not TLS: give its URL with http://, not https://; the journal keeps every event)"
	case p == HTTPProtobuf && (strings.Contains(msg, "malformed HTTP response") || strings.Contains(msg, "readLoopPeekFailLocked")):
		// gRPC's server speaks first, an HTTP/2 SETTINGS frame: read
		// as the answer, or, when it comes before the request is sent,
		// as an unsolicited one (Go's HTTP client then logs it too).
		return " (the endpoint answers gRPC, not OTLP/HTTP: set OTEL_EXPORTER_OTLP_PROTOCOL=grpc (or --otlp-protocol grpc), or give the collector's OTLP/HTTP port, 4318 usually; the journal keeps every event)"
	case p == GRPC && (strings.Contains(msg, "looked like an HTTP/1.1 header") || strings.Contains(msg, "unexpected HTTP status code received from server")):
		// An HTTP/1.1 server answers the HTTP/2 preface in HTTP/1.1; one
		// that speaks HTTP/2 answers the call with an HTTP status.
		return " (the endpoint answers OTLP/HTTP, not gRPC: give the collector's OTLP/gRPC port, 4317 usually, or set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf (or --otlp-protocol http/protobuf); the journal keeps every event)"
	}
	return ""
}
