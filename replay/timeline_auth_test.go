package replay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
)

// tlAuthSession is a remote server that asks for a sign-in at its first
// handshake, is signed in after a denied consent, refreshes, loses its
// authorization to a 401 and is signed in again with more scopes, then
// signed out: a session the decider would have produced.
func tlAuthSession(t testing.TB) []events.Event {
	b := newTLBuilder(t, &events.SessionStarted{Seed: 7, Version: "v0.5.0", Command: "run"})
	gh := events.ServerConfig{Name: "gh", Scope: events.ScopeUser, Transport: events.TransportHTTP, URL: "https://api.example.com/mcp"}
	gh.Hash = events.ConfigHash(&gh)
	b.at(10*time.Millisecond).in("", &events.ConfigObserved{Trigger: "start", Servers: []events.ServerConfig{gh}})
	unauthorized := events.ClassifiedError{Class: events.ErrAuth, Message: "401 Unauthorized"}
	up := func() {
		a := b.attempt("gh")
		b.after(100*time.Millisecond).in("gh", &events.TransportOpened{Attempt: a, Transport: events.TransportHTTP, Endpoint: gh.URL})
		b.after(100*time.Millisecond).in("gh", &events.ToolsListed{Attempt: a, Trigger: "initial", Tools: tlTools("search")})
	}
	b.at(300*time.Millisecond).in("gh", &events.TransportOpened{Attempt: 1, Transport: events.TransportHTTP, Endpoint: gh.URL})
	b.at(400*time.Millisecond).in("gh", &events.ConnectFailed{Attempt: 1, Phase: "handshake", Error: unauthorized})
	b.at(5*time.Second).in("gh", &events.AuthFailed{Phase: events.AuthPhaseConsent, Issuer: "https://auth.example.com", Error: "access_denied"})
	b.at(20*time.Second).in("gh", &events.AuthSignedIn{Issuer: "https://auth.example.com", Scopes: []string{"repo"},
		ClientKind: events.ClientRegistered, ExpiresAt: tlT0.Add(time.Hour).UnixNano()})
	up()
	b.at(40*time.Second).in("gh", &events.AuthRefreshed{Issuer: "https://auth.example.com", Scopes: []string{"repo"}, ExpiresAt: tlT0.Add(2 * time.Hour).UnixNano()})
	b.at(60*time.Second).in("gh", &events.TransportClosed{Attempt: 2, Error: unauthorized})
	b.at(70*time.Second).in("gh", &events.AuthSignedIn{Issuer: "https://auth.example.com", Scopes: []string{"repo", "admin"},
		ClientKind: events.ClientPreRegistered, StepUp: true})
	up()
	b.at(90*time.Second).in("gh", &events.AuthSignedOut{Issuer: "https://auth.example.com", RevokeError: "revocation endpoint answered 503"})
	b.at(91*time.Second).in("gh", &events.AuthSignedOut{Issuer: "https://auth.example.com", Revoked: true})
	b.at(92*time.Second).in("gh", &events.AuthSignedOut{})
	return b.evs
}

// TestTimelineAuth: the timeline shows when a server was blocked on
// authorization (a padlock on the failed band, whose tooltip names the
// command that unblocks it) and when it was unblocked (the sign-in, and
// the launch it caused), and every auth.* event as a mark saying what it
// recorded.
func TestTimelineAuth(t *testing.T) {
	page := string(tlRender(t, tlAuthSession(t), nil))
	blocked := tlHovers(page, "gh · blocked on authorization at attempt ")
	if len(blocked) != 2 {
		t.Fatalf("%d blocked marks, want 2 (at attempts 1 and 2)", len(blocked))
	}
	for i, want := range []string{
		"gh · blocked on authorization at attempt 1: auth: 401 Unauthorized\nsign in with: mcpledger login gh\n",
		"gh · blocked on authorization at attempt 2: auth: 401 Unauthorized\nsign in with: mcpledger login gh\n",
	} {
		if !strings.HasPrefix(blocked[i].title, want) || !strings.Contains(blocked[i].title, "\ncause #") {
			t.Errorf("blocked mark %d: %q, want it to start %q and name its cause", i, blocked[i].title, want)
		}
		if fill := blocked[i].attr(t, "rect", "fill", 0); fill != "#b91c1c" {
			t.Errorf("blocked mark %d: fill %s", i, fill)
		}
	}
	bands := tlHovers(page, "gh · failed, attempt ")
	if len(bands) != 2 {
		t.Fatalf("%d failed bands, want 2", len(bands))
	}
	for _, band := range bands {
		if !strings.Contains(band.title, "\nreason needs_auth\n") || !strings.HasSuffix(band.title, "\nblocked on authorization: sign in with mcpledger login gh") {
			t.Errorf("failed band %q: want its reason and the command that unblocks it", band.title)
		}
	}
	// Unblocked: the sign-in's mark, and the attempt it launched names it
	// as its cause.
	if !strings.Contains(bands[0].title, "09:26:53.400 (+400ms) → 09:27:13.000 (+20s), 19.6s") {
		t.Errorf("first block: %q, want it to last from the 401 to the sign-in", bands[0].title)
	}
	tlHover1(t, page, "gh · signed in to https://auth.example.com · scopes repo · client registered · expires 2026-03-14T10:26:53Z\n09:27:13.000 (+20s) · #11 auth.signed_in")
	tlHover1(t, page, "gh · attempt 2 (reconnect)\n09:27:13.000 (+20s) · #12 server.transitioned")
	if !strings.Contains(bands[1].title, "09:27:53.000 (+1m) → 09:28:03.000 (+1m10s), 10s") {
		t.Errorf("second block: %q, want it to last from the 401 to the step-up sign-in", bands[1].title)
	}
	marks := map[string]string{ // title prefix → padlock colour
		"gh · authorization failed (consent) at https://auth.example.com: access_denied\n":                                         "#dc2626",
		"gh · signed in to https://auth.example.com · scopes repo · client registered · expires 2026-03-14T10:26:53Z\n":            "#16a34a",
		"gh · token refreshed by https://auth.example.com · scopes repo · expires 2026-03-14T11:26:53Z\n":                          "#0d9488",
		"gh · signed in again for more scopes (step-up) to https://auth.example.com · scopes repo admin · client pre_registered\n": "#16a34a",
		"gh · signed out of https://auth.example.com · revocation failed: revocation endpoint answered 503\n":                      "#64748b",
		"gh · signed out of https://auth.example.com · tokens revoked\n":                                                           "#64748b",
		"gh · signed out · tokens deleted (not revoked)\n":                                                                         "#64748b",
	}
	for prefix, fill := range marks {
		h := tlHover1(t, page, prefix)
		if !strings.Contains(h.title, "auth.") {
			t.Errorf("%q: no event line", h.title)
		}
		if got := h.attr(t, "rect", "fill", 0); got != fill {
			t.Errorf("%q: fill %s, want %s", tlFirstLine(h.title), got, fill)
		}
	}
	for _, legend := range []string{"needs sign-in</span>", "signed in</span>", "token refreshed</span>", "sign-in failed</span>", "signed out</span>"} {
		if !strings.Contains(page, legend) {
			t.Errorf("legend lacks %q", legend)
		}
	}
}
