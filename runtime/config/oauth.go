package config

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/guard"
)

// A remote server's "oauth" object, read as Claude Code writes it:
//
//	"oauth": {
//	  "clientId": "…",                  // a pre-registered client
//	  "clientSecret": "${SECRET}",      // its secret, ${VAR} from the server's "env"
//	  "callbackPort": 8080,             // redirect http://localhost:8080/callback
//	  "scopes": "read write",           // one space-separated string
//	  "authServerMetadataUrl": "https://…",
//	  "clientMetadataUrl": "https://…/client.json" // a client ID metadata document
//	}
//
// Every field is optional: without any, a server that asks for
// authorization is signed in by discovery and then a client ID metadata
// document or dynamic registration.

// OAuthSpec is a remote server's "oauth" object resolved: what a sign-in
// uses. ClientSecret is expanded: a secret (see [Spec.Secrets]).
type OAuthSpec struct {
	ClientID     string
	ClientSecret string
	// CallbackPort is the loopback port of the redirect URI (0: none
	// configured; the sign-in picks a free port).
	CallbackPort int
	// Scopes are the scopes to ask for, as written (nil: let the server's
	// challenge or metadata decide).
	Scopes                []string
	AuthServerMetadataURL string
	ClientMetadataURL     string
}

// RedirectURL returns the redirect URI of o's callback port,
// http://localhost:PORT/callback, or "" when no port is configured.
func (o *OAuthSpec) RedirectURL() string {
	if o == nil || o.CallbackPort == 0 {
		return ""
	}
	return "http://localhost:" + strconv.Itoa(o.CallbackPort) + "/callback"
}

// oauthKeys are the keys of an "oauth" object, in the order they are
// documented.
var oauthKeys = []string{"clientId", "clientSecret", "callbackPort", "scopes", "authServerMetadataUrl", "clientMetadataUrl"}

// parseOAuth reads an "oauth" object as written (the secret unexpanded).
// It returns nil for an object that sets nothing. problems make the entry
// invalid and say what to do; warnings name unknown keys. Neither quotes
// a value.
func parseOAuth(m member) (o *events.OAuthConfig, warnings, problems []string) {
	ms, ok := objectMembers(m.val, m.off)
	if !ok {
		return nil, nil, []string{`"oauth" must be an object like {"clientId": "...", "callbackPort": 8080, "scopes": "read write"}`}
	}
	o = &events.OAuthConfig{}
	var unknown []string
	for _, f := range ms {
		if isNull(f.val) {
			continue
		}
		var bad string
		switch f.key {
		case "clientId":
			bad = str(f.val, &o.ClientID, `"oauth.clientId" must be a string`)
		case "clientSecret":
			bad = str(f.val, &o.ClientSecret, `"oauth.clientSecret" must be a string (write "${NAME}" and set NAME in the server's "env" to keep it out of the file)`)
			if bad == "" && strings.ContainsRune(o.ClientSecret, 0) {
				bad = `"oauth.clientSecret" has a NUL byte: remove it`
			}
		case "callbackPort":
			o.CallbackPort, bad = callbackPort(f.val)
		case "scopes":
			var s string
			bad = str(f.val, &s, `"oauth.scopes" must be one string of space-separated scopes, like "read write"`)
			if o.Scopes = strings.Fields(s); len(o.Scopes) == 0 {
				o.Scopes = nil
			}
		case "authServerMetadataUrl":
			bad = str(f.val, &o.AuthServerMetadataURL, `"oauth.authServerMetadataUrl" must be a string URL`)
			if bad == "" && o.AuthServerMetadataURL != "" {
				bad = checkMetadataURL(o.AuthServerMetadataURL)
			}
		case "clientMetadataUrl":
			bad = str(f.val, &o.ClientMetadataURL, `"oauth.clientMetadataUrl" must be a string URL`)
			if bad == "" && o.ClientMetadataURL != "" {
				bad = checkClientMetadataURL(o.ClientMetadataURL)
			}
		default:
			unknown = append(unknown, f.key)
		}
		if bad != "" {
			problems = append(problems, bad)
		}
	}
	if len(unknown) > 0 {
		warnings = append(warnings, fmt.Sprintf(`unknown fields in "oauth" ignored: %s (known: %s)`, quoteAll(unknown), strings.Join(oauthKeys, ", ")))
	}
	if o.ClientSecret != "" && o.ClientID == "" {
		problems = append(problems, `"oauth.clientSecret" is set without "oauth.clientId": add the client ID the secret belongs to, or remove the secret`)
	}
	if o.IsZero() {
		o = nil
	}
	return o, warnings, problems
}

// callbackPort reads "callbackPort": a whole number from 1 to 65535.
func callbackPort(b []byte) (int, string) {
	const msg = `"oauth.callbackPort" must be a port number from 1 to 65535, like 8080 (the redirect is http://localhost:PORT/callback)`
	var p int // a string or a fraction does not decode
	if json.Unmarshal(b, &p) != nil || p < 1 || p > 65535 {
		return 0, msg
	}
	return p, ""
}

// checkMetadataURL says what is wrong with an authorization server
// metadata URL: it must be https, or http on a loopback host.
func checkMetadataURL(s string) string {
	const msg = `"oauth.authServerMetadataUrl" must be an absolute https:// URL (http:// only on localhost), like "https://auth.example.com/.well-known/oauth-authorization-server"`
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Scheme != "https" && (u.Scheme != "http" || !loopback(u.Hostname())) {
		return msg
	}
	return ""
}

// checkClientMetadataURL says what is wrong with a client ID metadata
// document URL. The URL is the client ID: https, with a path, and no
// fragment, credentials or dot segments (draft-ietf-oauth-client-id-
// metadata-document).
func checkClientMetadataURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" || strings.HasSuffix(s, "#") {
		return `"oauth.clientMetadataUrl" must be an absolute https:// URL without credentials or #fragment, like "https://app.example.com/oauth/client.json": it is the address of the client ID metadata document`
	}
	if u.Path == "" || u.Path == "/" {
		return `"oauth.clientMetadataUrl" needs a path after the host, like "https://app.example.com/oauth/client.json": the bare origin cannot be a client ID`
	}
	if slices.ContainsFunc(strings.Split(u.Path, "/"), func(seg string) bool { return seg == "." || seg == ".." }) {
		return `"oauth.clientMetadataUrl" must not hold "." or ".." path segments: write the document's path as it is served`
	}
	return ""
}

// loopback reports whether host is localhost or a loopback IP address.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// journaledOAuth returns the form of o (as written) that may be journaled:
// the client secret replaced by its digest, the URLs redacted as a
// server's URL is.
func journaledOAuth(o *events.OAuthConfig) *events.OAuthConfig {
	if o == nil {
		return nil
	}
	j := *o
	j.Scopes = slices.Clone(o.Scopes)
	if j.ClientSecret != "" && !events.IsHashedValue(j.ClientSecret) {
		j.ClientSecret = events.HashValue(j.ClientSecret)
	}
	r := guard.Redactor{}
	j.AuthServerMetadataURL, j.ClientMetadataURL = r.RedactString(j.AuthServerMetadataURL), r.RedactString(j.ClientMetadataURL)
	return &j
}

// resolveOAuth expands the client secret of o (as written) from the
// server's own env block, like a header value.
func resolveOAuth(o *events.OAuthConfig, exp func(s, where string) string) (*OAuthSpec, []string) {
	if o == nil {
		return nil, nil
	}
	const where = `"oauth.clientSecret"`
	spec := &OAuthSpec{ClientID: o.ClientID, ClientSecret: exp(o.ClientSecret, where), CallbackPort: o.CallbackPort,
		Scopes: slices.Clone(o.Scopes), AuthServerMetadataURL: o.AuthServerMetadataURL, ClientMetadataURL: o.ClientMetadataURL}
	if strings.ContainsAny(spec.ClientSecret, "\r\n") {
		return spec, []string{where + ` has a line break in its value: remove it`}
	}
	return spec, nil
}
