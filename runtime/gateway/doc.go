// Package gateway is `mcpledger serve`: it puts a runtime.Manager (the
// Manager below) behind one MCP server that any MCP client connects to,
// over stdio or Streamable HTTP, so that every call a client makes through
// it is validated, gated, journaled and redacted like `mcpledger call`, and
// answered guarded as `call` prints it (guarded.go): bounded in the
// result's own shape, its injection signals under _meta, wrapped in
// untrusted-content markers if asked.
//
// It speaks MCP 2026-07-28 (sessionless requests, answered on the same
// HTTP endpoint as 2025-11-25 sessions: stateless.go) and the versions
// before it.
//
// It owns the face toward downstream clients: the exposed catalog (tool,
// resource and prompt names, collisions, list_changed), the HTTP endpoint's
// guards (bearer token, Host and Origin checks, journaled refusals) and
// bounds (limits.go: a budget of request bytes and requests in flight, a
// body deadline; sessions.go: a cap on client sessions, least recently
// used idle ones evicted, idle ones closed; a flush of go-sdk's last
// request after a large one), the fast call paths (fastcall.go: a
// session's tools/call nothing could need a stream for, answered as one
// JSON response without go-sdk's server; fastcall2026.go: the same for a
// 2026-07-28 client's sessionless call, without go-sdk's per-request
// session),
// forwarding between clients and servers (sampling, elicitation, progress,
// cancellation, log messages, resource subscriptions, and the rounds of
// 2026-07-28 input_required results: inputrequired.go), and approvals by
// elicitation under call policy ask (a request during the call, or an
// input_required result for a 2026-07-28 client). A client's W3C trace
// context (traceparent and tracestate in a tools/call's params._meta, else
// its HTTP headers: trace.go) goes to the Manager in the call's context,
// on every way in, so that the call's span joins the client's trace.
//
// It uses only the Manager's exported API and the hooks Bind installs in
// runtime.Options (NewClient, Approver, and a journal that tees the
// session's events into the gateway's resources and prompts); runtime never
// imports it. It must not journal anything except through the Manager, nor
// keep state the journal cannot rebuild beyond what a client connection
// needs.
package gateway
