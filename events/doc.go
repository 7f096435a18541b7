// Package events is mcpledger's vocabulary: the envelope every journal record
// carries, the closed set of event kinds with one typed payload struct each,
// the byte-stable msgpack codec, the upcaster chain for old schema versions,
// and the canonical config hash that approvals are bound to.
//
// # Inputs and decisions
//
// Every kind is either an input (a command from a user or an observation of
// the world: a config was read, a process exited, a tool list arrived) or a
// decision (what the pure decider in package fsm concluded from an input: a
// lifecycle transition, an admission verdict, a backoff timer). [Kind.IsInput]
// tells them apart. A decision's Cause is the seq of the input that caused it,
// so replay can re-run the decider on recorded inputs and compare.
//
// # Encoding
//
// A record is CRC32C(4 bytes, big endian) ‖ msgpack(header) ‖ msgpack(payload).
// Payloads are structs encoded as maps (never arrays) with sorted map keys and
// compact ints, so encoding the same event twice gives the same bytes. Payload
// structs hold no Go maps: key/value data is a sorted []KV. Adding a field to a
// payload is compatible both ways; renaming or retyping one needs a new schema
// version and an upcaster (see [Upcast]).
//
// # Secrets
//
// Nothing in this package resolves secrets. [RedactKVs] turns env and
// header values into [HashValue] digests before a config enters an event.
//
// # Invariants
//
//   - Kinds are stable strings, never renamed or reused.
//   - Decode never panics, whatever the bytes (FuzzDecode).
//   - Encode(Decode(b)) == b for records of the current version.
package events
