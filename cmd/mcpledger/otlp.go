package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/mcpledger/mcpledger/export/otlp"
	"github.com/mcpledger/mcpledger/store"
)

// otlpEndpointUsage is the --otlp-endpoint flag's usage in run and serve.
const otlpEndpointUsage = "ship the journal to the OpenTelemetry collector at `URL` as it is written (http://host:4318; http://host:4317 with --otlp-protocol grpc); default $OTEL_EXPORTER_OTLP_ENDPOINT (unset: no export)"

// otlpProtocolUsage is the --otlp-protocol flag's usage in run, serve
// and ship.
const otlpProtocolUsage = "send over `PROTOCOL`: grpc (port 4317 usually) or http/protobuf (4318); default $OTEL_EXPORTER_OTLP_PROTOCOL and the per-signal ones, else http/protobuf"

// otlpTailWait bounds how long run and serve, once their servers are
// stopped, wait for the collector to take the session's last events
// (what it does not take is shipped by the next run, serve or ship).
const otlpTailWait = 5 * time.Second

// liveExport ships the journal its process holds while run or serve
// runs, from the journal's own cursor (the one `ship` without --cursor
// keeps): a Shipper following the journal, in a goroutine it owns.
type liveExport struct {
	sh     *otlp.Shipper
	exp    *otlp.SDKExporter
	cancel context.CancelFunc
	done   chan struct{}
}

// startLiveExport starts the export when an endpoint is configured
// (endpoint, else OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), over protocol (else the OTEL_*
// protocol variables), and returns nil otherwise. A setting that cannot
// work is said once on stderr, and the session runs without export: the
// OTEL_* variables may be meant for another program (an agent's own
// telemetry, over OTLP/JSON), and the journal keeps every event for a
// later ship.
func startLiveExport(ctx context.Context, e *env, j *store.Journal, endpoint, protocol string) *liveExport {
	if endpoint == "" && e.getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && e.getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil
	}
	exp, err := otlp.NewExporter(ctx, otlp.ExporterOptions{Protocol: otlp.Protocol(protocol), Endpoint: endpoint, NoLogs: logsOff(e)})
	if err != nil {
		fmt.Fprintf(e.stderr, "mcpledger: warning: no OTLP export this session: %v\n(the journal keeps every event: fix the setting and run mcpledger ship, or restart)\n", err)
		return nil
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	x := &liveExport{
		sh:   otlp.NewShipper(j, journalCursor{j}, exp, &otlp.Options{Logger: logger, NoMetrics: metricsOff(e)}),
		exp:  exp,
		done: make(chan struct{}),
	}
	// Its own context: the export outlives the signal that stops the
	// servers, to ship their last events (Close).
	var fctx context.Context
	fctx, x.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer close(x.done)
		if _, err := x.sh.Ship(fctx, true); err != nil {
			logger.Error("otlp export stopped: the journal keeps the events; mcpledger ship sends them", "error", err)
		}
	}()
	return x
}

// Close stops following, ships what the journal holds beyond the cursor
// for up to otlpTailWait, and shuts the exporter down.
func (x *liveExport) Close() {
	if x == nil {
		return
	}
	x.cancel()
	<-x.done
	ctx, cancel := context.WithTimeout(context.Background(), otlpTailWait)
	defer cancel()
	_, _ = x.sh.Ship(ctx, false)
	_ = x.exp.Shutdown(ctx)
}

// metricsOff reports whether OTEL_METRICS_EXPORTER=none asks for no
// metrics: the export then sends spans and logs only, and does not read
// the journal from its start for the metrics' fold. (Other values name
// exporters mcpledger does not have: OTLP is what it sends.)
func metricsOff(e *env) bool {
	return e.getenv("OTEL_METRICS_EXPORTER") == "none"
}

// logsOff reports whether OTEL_LOGS_EXPORTER=none asks for no log
// records (a receiver without a logs pipeline: Jaeger's default
// configuration answers 404 on /v1/logs).
func logsOff(e *env) bool {
	return e.getenv("OTEL_LOGS_EXPORTER") == "none"
}
