// Package otlp ships the journal to OpenTelemetry: it owns the mapping of
// journal events to spans and log records, the fold of the journal into
// metrics, and the shipper that sends them, over OTLP/HTTP or OTLP/gRPC
// with the official Go SDK's exporters, from a cursor. Export is a
// projection of the journal: it reads events that are already durable
// and never writes one.
//
// # Mapping (pure: [Mapper])
//
// Following the OpenTelemetry semantic conventions for MCP:
//
//   - each tool call is a CLIENT span `tools/call {tool}`, from its
//     call.started (or the call.decided before it) to its call.finished,
//     with mcp.method.name, gen_ai.tool.name, gen_ai.operation.name
//     (execute_tool), gen_ai.tool.call.id, mcp.protocol.version and
//     mcp.session.id (from the server's handshake), error.type (the
//     outcome, when not ok), and mcpledger.* attributes for the policy,
//     the approval decision and who made it, the attempt, retries (a retry
//     joins its first try's trace and links it) and injection signals
//     (also a span event). A denied call is a span of its decision.
//     Arguments and results are never copied into a span: only their
//     sizes. A call made in a caller's trace (the traceparent on its
//     call.started, or on its call.decided: a denied call too) is a span
//     of that trace, a child of the caller's span, with the span ID
//     derived from its call ID: the parent the upstream server was told
//     (tracectx).
//   - each server connection is a span `connection {server}` from its
//     transition to launching to the one to stopped or failed (or the
//     session's end), each transition a span event.
//   - every event is a log record: its kind as the event name, its ID,
//     session, seq, gpos, server and cause as attributes, its payload as
//     the journal holds it (redacted) as the body, and the trace and span
//     of the call or connection it belongs to.
//
// # Metrics (pure: [Metrics])
//
// A fold of the journal from its start, cumulative, following the
// conventions where they name the thing:
//
//   - mcp.client.operation.duration (histogram, s, the conventions'
//     buckets): each tool call that was sent (call.started to
//     call.finished; its duration_ns, else the events' times), with
//     mcp.method.name, gen_ai.operation.name, gen_ai.tool.name,
//     error.type (the outcome, when not ok), mcp.protocol.version and
//     network.transport when the connection said them, mcpledger.server.
//     A denied call was never sent: it counts only as a decision.
//   - mcp.client.session.duration (histogram, s): each MCP session, from
//     a server's transition to ready to its next transition (error.type:
//     the error's class, or the trigger of a move to reconnecting or
//     failed), or to its session's end (interrupted when the next
//     session's start is what ended it).
//   - mcpledger.servers (gauge): the servers of the running session in
//     each lifecycle state.
//   - mcpledger.server.reconnects, mcpledger.call.decisions (by decision
//     and policy) and mcpledger.approval.decisions (configurations
//     approved or rejected): counters.
//
// Its points are a function of the journal up to a position: each starts
// at the time of the first event folded and is stamped with the last
// one's, made strictly increasing along the journal, so one time names
// one position and one value. A batch carries the points at its last
// event; a resend after a crash sends the same points again, or points
// of other positions that agree with them, and a backend that keeps the
// latest cumulative point counts nothing twice.
//
// Trace and span IDs are derived from the journal (session and call ID,
// or the ID of the event a connection span begins with: tracectx.CallIDs
// and EventIDs, shared with the runtime), so a record sent twice carries
// the same IDs and a backend can drop the duplicate.
// JSON-RPC request IDs are not journaled, so jsonrpc.request.id is not
// set.
//
// # Shipping ([Shipper])
//
// A Shipper reads the events after its [Cursor] (ReadAll of a
// store.Journal or store.Reader; when following, again every
// Options.Linger), maps them, folds them, and hands each batch to the
// [Exporter] with the metric points at its last event; only after the
// exporter returned nil (the receiver acknowledged every span, record
// and point of the batch) does it save the cursor. A collector that is down, slow
// or rejecting is retried with backoff, one log line when the failures
// begin and one when they end; meanwhile nothing more is read than one
// batch: the backlog stays in the journal. After a kill of either side,
// the next Ship sends again what was not acknowledged, with the same IDs:
// delivery is at least once.
//
// The cursor holds two positions: the last event acknowledged, and where
// to read again to rebuild the spans open at it (a call started before
// the cursor and finished after it). The metrics' fold is not in the
// cursor: a Ship rebuilds it by reading the journal from its start (the
// events before the cursor feed the fold only; about a ReadAll of the
// journal: 2.4 s for a million events), and a Shipper keeps it between its
// Ships unless it is ahead of the cursor (a rebuild cut short goes on
// where it stopped). Options.NoMetrics leaves metrics, and that read,
// out. The writer of the journal keeps it
// in the journal's cursors bucket (store.Journal.SaveCursor); a shipper
// beside a running writer keeps it in a [FileCursor], with the ID of the
// event at its position, so that a Ship refuses another journal's file
// (Position.ID) instead of skipping this journal's events.
//
// # Protocols ([SDKExporter])
//
// Each signal goes over the protocol [ExporterOptions].Protocol names
// (the --otlp-protocol flag), else its
// OTEL_EXPORTER_OTLP_{TRACES,LOGS,METRICS}_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf, the specification's
// default: grpc (port 4317 usually) or http/protobuf (4318). http/json
// is refused before anything is read: the Go SDK has no exporter for
// it. Endpoint, headers, insecure, certificates, compression and timeout
// are read by the SDK's exporters from the standard variables; an
// endpoint is a URL for both (http://host:4317 for gRPC: plain text;
// https://: TLS). The lossless contract does not depend on the
// protocol: an export returns nil only once the receiver acknowledged
// (an OTLP/gRPC Export answered OK), the SDK's retries are off, and a
// lost gRPC connection is tried again at most 2 s (and jitter) apart:
// gRPC's own backoff grows to 2 minutes, during which every export
// fails at once, collector back or not. Over gRPC a batch's log
// bodies are kept to 2 MiB, not 4 ([SDKExporter.MaxBatchBytes]): a gRPC
// receiver refuses a message over 4 MiB by default (a collector's,
// Jaeger's), to every try. A failed export whose
// error shows the other protocol at the endpoint (gRPC to an HTTP port,
// HTTP to a gRPC port, TLS to plain text), a message over the gRPC
// receiver's limit (one event that large) or a receiver without the
// signal's pipeline (404 over HTTP, an unknown service over gRPC) says
// in its one failure line what to try.
//
// The package must not write events, and imports only events and
// tracectx from the module.
package otlp
