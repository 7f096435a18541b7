// Package guard holds the checks and rewrites on the values of a tool call,
// shared by the Manager's call path (runtime) and the gateway
// (runtime/gateway), so that a call through either is guarded alike:
//
//   - [ValidateArgs]: arguments against the tool's input schema, before
//     anything is sent (a quick check for common schemas, jsonschema-go
//     for the rest);
//   - [Redactor]: credentials out of every text bound for the journal
//     (resolved secrets of the server from [Secrets], secret-looking keys
//     and assignments, credential formats), and [RedactArgs] for a stdio
//     server's command line;
//   - [DetectInjection]: advisory prompt-injection signals in a result;
//   - [RenderResult]: a result as bounded text for an agent's context,
//     and [WrapOutput]: that text between untrusted-content markers.
//
// Everything here is a pure function of its arguments (or an immutable
// value, safe for concurrent use): guard must not hold a Manager, a
// journal, a connection or a file, log, or read the clock; deps_test.go
// keeps it from importing the rest of runtime. The hot functions are
// measured by the call-path benchmarks (BENCHMARKS.md), and each fast scan
// is held to the simpler implementation it replaced by differential tests
// (*_ref_test.go) and fuzzing.
package guard
