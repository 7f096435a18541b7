// Package control is the control socket: how the other mcpledger commands
// reach the process that holds the journal (`run`, `serve`). The socket
// sits next to the journal ([Path]), mode 0600; each connection carries
// one JSON [Request] and one JSON [Response] back.
//
// [Serve] answers requests with a runtime.Manager's exported API only
// (status, tools, call, reconnect, stop, refresh, reload, approvals), and
// the read op with the journal read handler it is given
// (store.ServeRead in cmd), whose answer is a stream of the handler's own
// frames; [Dial], [Client.Do] and [Read] are the other side. A client
// that hangs up cancels what it asked (a Ctrl-C on `mcpledger call`
// cancels the call). control owns the protocol and
// the socket's life (a stale socket is replaced, a live one refused). It
// must not reach into the Manager's state or journal anything itself:
// every op that records something goes through the Manager.
package control
