// Package fsm is mcpledger's pure decider: the server lifecycle table on
// looplab/fsm, admission and gating, backoff with seeded jitter, the storm
// breaker and reload verdicts.
//
// # Usage
//
// Fold a session's events into a [State] with [Evolve]. For each new input
// (a command or an observation, see events.Kind.IsInput) call
// [Decide](state, input) to get the decisions it causes, journal the input
// and the decisions together, then Evolve the state with each of them in
// order. The runtime derives its effects (spawn, connect, kill, timers) from
// the decisions; replay re-runs Decide on recorded inputs and compares.
//
//	out, err := fsm.Decide(st, in)  // pure
//	// append in, out... to the journal (durable), then:
//	st = fsm.Evolve(st, in)
//	for _, e := range out { st = fsm.Evolve(st, e) }
//
// # Lifecycle
//
// States: configuring, launching, handshaking, ready, failed, reconnecting,
// stopped. The legal transitions are the rows of one table ([Table],
// rendered by [Mermaid] into testdata/lifecycle.mmd). Every transition is
// checked by a looplab/fsm machine built from that table with no callbacks;
// an illegal one is [ErrInvalidTransition] and produces no event.
//
// # Determinism
//
// Nothing here reads a clock, draws a random number, does I/O, logs or
// starts a goroutine. Time comes from the input's envelope; backoff jitter
// is derived from the session seed (recorded in session.started), the
// server and the attempt ([Jitter]); timer IDs are counters in the state;
// maps are only ranged in sorted order. A go/ast test enforces this.
//
// # Backoff and the storm breaker
//
// A failure of the current attempt moves the server to reconnecting and
// schedules a timer: retry n waits a full-jitter delay in [0, min(max,
// base·2^(n-1))], default 1 s doubling to 30 s. MaxAttempts (default 5)
// counts the launches of an episode, the first included: when the fifth
// fails the server is failed until an explicit reconnect. A server that
// stayed ready StableMs (default 30 s) starts a fresh budget.
//
// The storm breaker counts crashes: failures of an attempt (an
// unexpected exit, a failed connect or handshake, a transport closed
// unexpectedly, a streak of failed pings), never an expected exit or a
// launch. A launch is held while StormLimit crashes (default 5) fall in
// StormWindowMs (default 30 s), counting those recorded by earlier
// sessions (ServerConfig.RecentCrashes), so a server that crashes at
// every start of a short-lived mcpledger (one-shot calls) is held too,
// while one started and stopped cleanly any number of times never is. A
// held server stops with reason storm_hold and a timer releases it when
// the window allows. An explicit reconnect forgets the crashes before it
// (this session's and earlier ones'): a person decided to try again. In a
// session that read no config (an offline `mcpledger reconnect NAME`) a
// reconnect decides nothing; the next session's history no longer counts
// the server's crashes before it.
//
// # Authorization
//
// A failure of class auth (events.ErrAuth: a remote server answered 401
// and no usable token could be had), whether a connect.failed, a
// transport.closed or a ping.failed, moves the server from launching,
// handshaking or ready straight to failed with reason needs_auth
// (trigger needs_auth): no backoff, since retrying cannot sign in, and it
// is not a crash, so the storm breaker never counts it. An auth.signed_in
// of a server failed with needs_auth relaunches it as an explicit
// reconnect does (trigger reconnect, its crashes before it forgotten); of
// any other server it decides nothing. auth.refreshed, auth.failed and
// auth.signed_out are facts for the projections. Journals recorded
// before these existed hold no failure of class auth, so they decide as
// they did: the decision version is unchanged.
//
// # A command that cannot run
//
// A connect.failed of class not_found or not_executable (a stdio
// server's command or working directory does not exist, or cannot be
// executed) moves the server from launching straight to failed with
// that reason (trigger bad_command): a configuration error, so no
// backoff, and not a crash the storm breaker counts. A config reading
// that changes the server's config restarts it at once (verdict
// restart), as it restarts any server whose fingerprint changed; an
// explicit reconnect relaunches it too. Journals recorded before these
// classes existed classify such a failure as spawn, a crash, and decide
// as they did.
//
// Sessions recorded with decision version 1 (before the breaker counted
// crashes) are decided as they were: the breaker counted launches,
// explicit reconnects included (ServerConfig.RecentLaunches).
package fsm
