// Package oauth signs mcpledger in to remote MCP servers that require
// OAuth 2.1 under the MCP authorization spec, keeps the tokens, and puts
// them on the runtime's requests. The protocol machinery is go-sdk's
// (auth.AuthorizationCodeHandler: PKCE, protected-resource and
// authorization-server discovery, client ID metadata documents,
// pre-registration, dynamic client registration, scope step-up) and
// golang.org/x/oauth2's (code exchange, refresh); this package only
// wires them to mcpledger:
//
//   - [ClientConfig]: a server's `oauth` settings mapped onto go-sdk's
//     handler configuration (client.go);
//   - [Login]: the interactive sign-in: a loopback redirect listener,
//     the browser opener, initialize + tools/list through go-sdk's client
//     so step-ups happen during login, bounded by [MaxStepUps]
//     (login.go, callback.go);
//   - [Store]: the per-user token file, keyed by server name and
//     canonical resource URL, mode 0600, atomic, flock-serialized
//     (store.go);
//   - [Transport]: the non-interactive side for the runtime: the stored
//     token on every request, refresh and persist, one retry after a
//     401, [ErrNeedsAuth] and [ErrInsufficientScope] when only the
//     browser can help (transport.go);
//   - [Logout]: delete and revoke (RFC 7009) (logout.go).
//
// It must not journal (the runtime journals through the callbacks of
// [TransportOptions] and the [Grant] of a login, none of which carries a
// token), import the rest of runtime, or write OAuth by hand where
// go-sdk or x/oauth2 has it. No token, code, verifier or client secret
// appears in an error or log line it produces; [Entry.Secrets] lists the
// values for the caller's redactor.
package oauth
