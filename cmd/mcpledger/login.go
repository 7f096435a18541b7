package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/mcpledger/mcpledger/events"
	rt "github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/control"
	"github.com/mcpledger/mcpledger/runtime/guard"
	"github.com/mcpledger/mcpledger/runtime/oauth"
)

// AuthCommand signs in to a remote server that asks for OAuth
// authorization (login NAME) or signs out of it (logout NAME). The tokens
// go to the per-user token store (oauth.DefaultStorePath), never to the
// journal: the journal gets an auth.* event that says who signed in where,
// with which scopes and until when. A running mcpledger is told over its
// control socket, and relaunches a server that waited for the sign-in.
type AuthCommand struct {
	env    *env
	logout bool
}

// authResult is the --json form of login and logout.
type authResult struct {
	Server     string    `json:"server"`
	SignedIn   bool      `json:"signed_in"`
	Issuer     string    `json:"issuer,omitempty"`
	Resource   string    `json:"resource,omitempty"`
	Scopes     []string  `json:"scopes,omitempty"`
	ClientKind string    `json:"client_kind,omitempty"`
	Expires    time.Time `json:"expires,omitzero"`
	StepUps    int       `json:"step_ups,omitempty"`
	Removed    bool      `json:"removed,omitempty"`
	Revoked    bool      `json:"revoked,omitempty"`
	RevokeErr  string    `json:"revoke_error,omitempty"`
	Store      string    `json:"store"`
	Journaled  string    `json:"journaled"` // "running" (told the running mcpledger), "offline" (a session of its own) or why not
}

func (c *AuthCommand) op() string {
	if c.logout {
		return "logout"
	}
	return "login"
}

// Run parses args, signs in or out, and journals what happened.
func (c *AuthCommand) Run(ctx context.Context, args []string) error {
	op := c.op()
	f := c.env.newCommandFlags(op, "NAME")
	var cf configFlags
	cf.register(f)
	asJSON := f.Bool("json", false, "print the result as JSON")
	var noBrowser bool
	var timeout time.Duration
	if !c.logout {
		f.BoolVar(&noBrowser, "no-browser", false, "print the authorization URL instead of opening a browser ($BROWSER, else xdg-open)")
		f.DurationVar(&timeout, "timeout", oauth.DefaultLoginTimeout, "give up when the sign-in is not done after `DURATION`")
	}
	if err := f.Parse(args); err != nil {
		return err
	}
	name := f.Arg(0)
	if name == "" || f.NArg() > 1 {
		f.Usage()
		return usageErrorf("%s: name one server (mcpledger status lists them)", op)
	}
	spec, err := c.remoteSpec(&cf, name)
	if err != nil {
		return err
	}
	path, err := oauth.DefaultStorePath(c.env.getenv)
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, name, err)
	}
	st := oauth.NewStore(path)
	res := authResult{Server: name, Store: path}
	var ev events.Payload
	var opErr error
	if c.logout {
		var lo oauth.LogoutResult
		held, _ := st.Get(name, spec.URL) // for its issuer, in the journal
		lo, opErr = oauth.Logout(ctx, st, name, spec.URL, oauth.LogoutOptions{ClientSecret: clientSecret(spec)})
		if opErr == nil {
			res.Removed, res.Revoked = lo.Removed, lo.Revoked
			if lo.RevokeErr != nil {
				res.RevokeErr = lo.RevokeErr.Error()
			}
			if lo.Removed {
				ev = &events.AuthSignedOut{Issuer: held.Issuer, Revoked: lo.Revoked, RevokeError: res.RevokeErr}
			}
		}
	} else {
		var g oauth.Grant
		g, opErr = oauth.Login(ctx, oauth.LoginOptions{
			Server: name, URL: spec.URL, Transport: string(spec.Config.Transport), Headers: spec.Headers,
			Client: clientConfig(spec), Store: st, Open: c.env.opener(name, noBrowser), Timeout: timeout,
		})
		if opErr == nil {
			res.SignedIn, res.Issuer, res.Resource, res.Scopes = true, g.Issuer, spec.Config.URL, g.Scopes
			res.ClientKind, res.Expires, res.StepUps = string(g.ClientKind), g.Expiry, g.StepUps
			ev = &events.AuthSignedIn{Issuer: g.Issuer, Resource: g.Resource, Scopes: g.Scopes,
				ClientKind: string(g.ClientKind), ExpiresAt: unixNano(g.Expiry), StepUp: g.StepUps > 0}
		} else if !errors.Is(opErr, context.Canceled) {
			ev = &events.AuthFailed{Phase: authPhase(opErr), Error: opErr.Error()}
		}
	}
	if ev != nil {
		// As every event about the server: its secrets and credential
		// patterns redacted, its URL as the config journals it.
		if si, ok := ev.(*events.AuthSignedIn); ok {
			si.Resource = spec.Config.URL
		}
		guard.NewRedactor(spec.Secrets()).Scrub(ev)
		res.Journaled = c.record(ctx, f, name, ev)
	}
	if opErr != nil {
		return fmt.Errorf("%s %s: %w", op, name, opErr)
	}
	if *asJSON {
		return writeJSON(c.env.stdout, res, true)
	}
	c.print(res)
	return nil
}

// remoteSpec returns the resolved spec of name, an http or sse server of
// the config.
func (c *AuthCommand) remoteSpec(cf *configFlags, name string) (config.Spec, error) {
	op := c.op()
	lc := cf.loader(c.env)()
	spec, ok := lc.Specs[name]
	if !ok {
		for _, s := range lc.Observed.Servers {
			switch {
			case s.Name != name:
			case s.Invalid != "":
				return config.Spec{}, fmt.Errorf("%s: server %q cannot be used as configured: %s", op, name, s.Invalid)
			case s.Disabled:
				return config.Spec{}, fmt.Errorf("%s: server %q is disabled in the config; enable it first", op, name)
			}
		}
		return config.Spec{}, fmt.Errorf("%s: no server %q in the config of workspace %s (mcpledger status lists them)", op, name, lc.Observed.Workspace)
	}
	switch spec.Config.Transport {
	case events.TransportHTTP, events.TransportSSE:
	default:
		return config.Spec{}, fmt.Errorf("%s: %s is a %s server; sign-in is for remote (http and sse) servers", op, name, spec.Config.Transport)
	}
	return spec, nil
}

// record journals ev for server name: through the running mcpledger that
// holds the journal (which acts on it: a server waiting for the sign-in
// relaunches), else in a session of its own. It says which, or why
// neither worked; the sign-in itself is kept either way.
func (c *AuthCommand) record(ctx context.Context, f *commandFlags, name string, ev events.Payload) string {
	if cl := f.control(); cl != nil {
		b, err := json.Marshal(events.Event{ID: events.NewID(), Time: time.Now().UnixNano(), Kind: ev.Kind(), Server: name, Payload: ev})
		if err == nil {
			err = cl.Do(ctx, control.Request{Op: "auth", Name: name, Args: b, By: whoami()}, nil)
		}
		if err == nil {
			return "running"
		}
		fmt.Fprintf(c.env.stderr, "%s %s: the running mcpledger did not record it: %v\n", c.op(), name, err)
		return "not journaled: " + err.Error()
	}
	j, _, err := f.openWritable()
	if err != nil {
		fmt.Fprintf(c.env.stderr, "%s %s: not journaled: %v\n", c.op(), name, err)
		return "not journaled: " + err.Error()
	}
	defer j.Close()
	if _, err := rt.RecordAuth(ctx, storeJournal{j.Journal}, name, buildID(), ev, func() int64 { return time.Now().UnixNano() }); err != nil {
		fmt.Fprintf(c.env.stderr, "%s %s: not journaled: %v\n", c.op(), name, err)
		return "not journaled: " + err.Error()
	}
	return "offline"
}

func (c *AuthCommand) print(r authResult) {
	w := c.env.stdout
	if c.logout {
		switch {
		case !r.Removed:
			fmt.Fprintf(w, "logout %s: not signed in (nothing stored in %s)\n", r.Server, r.Store)
		case r.Revoked:
			fmt.Fprintf(w, "logout %s: signed out; tokens deleted from %s and revoked\n", r.Server, r.Store)
		case r.RevokeErr != "":
			fmt.Fprintf(w, "logout %s: signed out; tokens deleted from %s; revoking them failed: %s\n", r.Server, r.Store, r.RevokeErr)
		default:
			fmt.Fprintf(w, "logout %s: signed out; tokens deleted from %s (the authorization server offers no revocation)\n", r.Server, r.Store)
		}
		return
	}
	fmt.Fprintf(w, "login %s: signed in at %s\n", r.Server, r.Issuer)
	scopes := strings.Join(r.Scopes, " ")
	if scopes == "" {
		scopes = "(none named)"
	}
	fmt.Fprintf(w, "  scopes   %s\n", scopes)
	fmt.Fprintf(w, "  client   %s\n", r.ClientKind)
	if !r.Expires.IsZero() {
		fmt.Fprintf(w, "  expires  %s (refreshed without you while a refresh token is held)\n", r.Expires.Local().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "  stored   %s\n", r.Store)
	if r.Journaled == "running" {
		fmt.Fprintf(w, "  the running mcpledger reconnects %s now\n", r.Server)
	}
}

// opener returns how login shows the authorization URL: it always prints
// it (on stderr), then runs $BROWSER (a colon-separated list, the first
// that starts wins; %s in one is replaced by the URL) or xdg-open, unless
// noBrowser.
func (e *env) opener(server string, noBrowser bool) func(string) error {
	return func(u string) error {
		fmt.Fprintf(e.stderr, "login %s: sign in at this URL (opening it in your browser):\n  %s\n", server, u)
		if noBrowser {
			return nil
		}
		var cands []string
		if b := e.getenv("BROWSER"); b != "" {
			cands = strings.Split(b, ":")
		}
		cands = append(cands, "xdg-open")
		for _, c := range cands {
			fields := strings.Fields(c)
			if len(fields) == 0 {
				continue
			}
			args := fields[1:]
			if strings.Contains(c, "%s") {
				for i := range args {
					args[i] = strings.ReplaceAll(args[i], "%s", u)
				}
			} else {
				args = append(args, u)
			}
			cmd := exec.Command(fields[0], args...)
			if err := cmd.Start(); err != nil {
				continue
			}
			// A browser may outlive login: it is not waited for (init
			// reaps it once login exits).
			_ = cmd.Process.Release()
			return nil
		}
		fmt.Fprintf(e.stderr, "login %s: no browser could be opened (set $BROWSER); open the URL above yourself\n", server)
		return nil
	}
}

// authPhase is the step of a sign-in that err failed (events.AuthPhase*).
func authPhase(err error) string {
	switch {
	case errors.Is(err, oauth.ErrConsentDenied), errors.Is(err, oauth.ErrStateMismatch), errors.Is(err, oauth.ErrCallbackPort):
		return events.AuthPhaseConsent
	case errors.Is(err, oauth.ErrStepUpLimit), errors.Is(err, oauth.ErrInsufficientScope):
		return events.AuthPhaseStepUp
	case errors.Is(err, oauth.ErrStore):
		return events.AuthPhaseStore
	}
	return events.AuthPhaseDiscover // reaching the server, its metadata or its authorization server
}

func clientConfig(s config.Spec) oauth.ClientConfig {
	if s.OAuth == nil {
		return oauth.ClientConfig{}
	}
	o := s.OAuth
	return oauth.ClientConfig{ClientID: o.ClientID, ClientSecret: o.ClientSecret, CallbackPort: o.CallbackPort,
		Scopes: o.Scopes, AuthServerMetadataURL: o.AuthServerMetadataURL, ClientMetadataURL: o.ClientMetadataURL}
}

func clientSecret(s config.Spec) string {
	if s.OAuth == nil {
		return ""
	}
	return s.OAuth.ClientSecret
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// interactive reports whether a sign-in may open a browser now: $BROWSER
// is set or stdin is a terminal. A one-shot call steps up then; a
// running mcpledger never does (it reports needs_auth instead).
func (e *env) interactive() bool {
	if e.getenv("BROWSER") != "" {
		return true
	}
	f, ok := e.stdin.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// stepUp signs in to se.Server again asking for the scopes it held and
// those the server asked for, and journals the sign-in through m.
func (e *env) stepUp(ctx context.Context, m *rt.Manager, cf *configFlags, se *oauth.ScopeError) error {
	lc := cf.loader(e)()
	spec, ok := lc.Specs[se.Server]
	if !ok {
		return fmt.Errorf("no server %q in the config", se.Server)
	}
	path, err := oauth.DefaultStorePath(e.getenv)
	if err != nil {
		return err
	}
	cc := clientConfig(spec)
	cc.Scopes = unionScopes(se.Held, se.Want)
	fmt.Fprintf(e.stderr, "call: %s asks for more scope (%s); signing in again\n", se.Server, strings.Join(se.Missing, " "))
	g, err := oauth.Login(ctx, oauth.LoginOptions{Server: se.Server, URL: spec.URL, Transport: string(spec.Config.Transport),
		Headers: spec.Headers, Client: cc, Store: oauth.NewStore(path), Open: e.opener(se.Server, false)})
	if err != nil {
		f := &events.AuthFailed{Phase: events.AuthPhaseStepUp, Error: err.Error()}
		guard.NewRedactor(spec.Secrets()).Scrub(f)
		_ = m.RecordAuth(ctx, se.Server, f)
		return err
	}
	return m.RecordAuth(ctx, se.Server, &events.AuthSignedIn{Issuer: g.Issuer, Resource: spec.Config.URL, Scopes: g.Scopes,
		ClientKind: string(g.ClientKind), ExpiresAt: unixNano(g.Expiry), StepUp: true})
}

// unionScopes is a then the scopes of b not in a.
func unionScopes(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
