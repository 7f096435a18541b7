package projections

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

func remote(name string) events.ServerConfig {
	c := events.ServerConfig{Name: name, Scope: events.ScopeUser, Transport: events.TransportHTTP, URL: "https://" + name + ".example.com/mcp"}
	c.Hash = events.ConfigHash(&c)
	return c
}

// TestStatusAuth follows one server through the auth view status shows:
// blocked on a sign-in, a failed sign-in, signed in (which unblocks it),
// refreshed, a failed refresh cured by the next one, a 401 that blocks it
// again, signed out. Each step checks the whole view, so every field is
// pinned; a server without auth has none, and auth events of a server
// the session does not run, or of another session, change nothing.
func TestStatusAuth(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	other := j.session(2)
	s.start()
	s.config(remote("gh"), stdio("files"))
	st := NewStatus()
	apply := func() {
		for _, e := range j.evs {
			st.Apply(e)
		}
		j.evs = nil
	}
	auth := func(step string, want *AuthStatus) {
		t.Helper()
		apply()
		row, ok := st.Server("gh")
		if !ok {
			t.Fatalf("%s: no gh", step)
		}
		if !reflect.DeepEqual(row.Auth, want) {
			t.Errorf("%s: gh auth\n got %+v\nwant %+v", step, row.Auth, want)
			if row.Auth != nil && want != nil {
				t.Errorf("%s: failure got %+v want %+v", step, row.Auth.Failure, want.Failure)
			}
		}
	}
	authErr := &events.ClassifiedError{Class: events.ErrAuth, Message: "401 Unauthorized"}

	s.tr("gh", events.StateConfiguring, events.StateLaunching, "", 1, nil)
	s.tr("files", events.StateConfiguring, events.StateLaunching, "", 1, nil)
	auth("launching", nil)

	s.in("gh", &events.ConnectFailed{Attempt: 1, Phase: "connect", Error: *authErr})
	blocked := s.tr("gh", events.StateLaunching, events.StateFailed, events.ReasonNeedsAuth, 1, authErr)
	auth("blocked", &AuthStatus{NeedsAuth: true})
	if row, _ := st.Server("gh"); row.Reason != events.ReasonNeedsAuth || row.Since != blocked.Time || row.Error != "auth: 401 Unauthorized" {
		t.Errorf("blocked row %+v", row)
	}

	failed := s.in("gh", &events.AuthFailed{Phase: events.AuthPhaseConsent, Issuer: "https://auth.example.com", Error: "access_denied"})
	consent := &AuthFailure{Phase: events.AuthPhaseConsent, Issuer: "https://auth.example.com", Error: "access_denied", At: failed.Time}
	auth("consent denied", &AuthStatus{NeedsAuth: true, Failure: consent})

	in := s.in("gh", &events.AuthSignedIn{Issuer: "https://auth.example.com", Resource: "https://gh.example.com/mcp", Scopes: []string{"repo"},
		ClientKind: events.ClientRegistered, ExpiresAt: t0 + 3600e9})
	s.tr("gh", events.StateFailed, events.StateLaunching, "", 2, nil)
	signedIn := AuthStatus{SignedIn: true, Issuer: "https://auth.example.com", Scopes: []string{"repo"}, ClientKind: events.ClientRegistered,
		ExpiresAt: t0 + 3600e9, SignedInAt: in.Time}
	want := signedIn
	auth("signed in", &want)

	// A refresh that names no issuer keeps the one known.
	ref := s.in("gh", &events.AuthRefreshed{Scopes: []string{"repo", "read:org"}, ExpiresAt: t0 + 7200e9})
	want.Scopes, want.ExpiresAt, want.RefreshedAt = []string{"repo", "read:org"}, t0+7200e9, ref.Time
	auth("refreshed", &want)

	bad := s.in("gh", &events.AuthFailed{Phase: events.AuthPhaseRefresh, Error: "invalid_grant"})
	want.Failure = &AuthFailure{Phase: events.AuthPhaseRefresh, Error: "invalid_grant", At: bad.Time}
	auth("refresh failed", &want)

	ref = s.in("gh", &events.AuthRefreshed{Issuer: "https://auth2.example.com", Scopes: []string{"repo"}})
	want.Issuer, want.Scopes, want.ExpiresAt, want.RefreshedAt, want.Failure = "https://auth2.example.com", []string{"repo"}, 0, ref.Time, nil
	auth("refreshed again", &want)

	// A 401 the refresh could not cure blocks it again; the sign-in it
	// had stays on record.
	s.in("gh", &events.TransportClosed{Attempt: 2, Error: *authErr})
	s.tr("gh", events.StateLaunching, events.StateFailed, events.ReasonNeedsAuth, 2, authErr)
	blockedAgain := want
	blockedAgain.NeedsAuth = true
	auth("blocked again", &blockedAgain)

	step := s.in("gh", &events.AuthSignedIn{Issuer: "https://auth.example.com", Scopes: []string{"repo", "admin"}, ClientKind: events.ClientPreRegistered, StepUp: true})
	s.tr("gh", events.StateFailed, events.StateLaunching, "", 3, nil)
	want = AuthStatus{SignedIn: true, Issuer: "https://auth.example.com", Scopes: []string{"repo", "admin"}, ClientKind: events.ClientPreRegistered,
		SignedInAt: step.Time, StepUp: true, RefreshedAt: ref.Time}
	auth("stepped up", &want)

	// Another session's events and a sign-in for a server this session
	// does not run change nothing.
	other.in("gh", &events.AuthSignedOut{Issuer: "x"})
	s.in("nosuch", &events.AuthSignedIn{Issuer: "https://x.example.com", ClientKind: events.ClientRegistered})
	auth("foreign events", &want)
	if _, ok := st.Server("nosuch"); ok {
		t.Error("a sign-in created a server the session does not run")
	}

	out := s.in("gh", &events.AuthSignedOut{Revoked: false, RevokeError: "revocation endpoint answered 503"})
	want = AuthStatus{Issuer: "https://auth.example.com", SignedInAt: step.Time, RefreshedAt: ref.Time, SignedOutAt: out.Time,
		RevokeError: "revocation endpoint answered 503"}
	auth("signed out", &want)
	out = s.in("gh", &events.AuthSignedOut{Issuer: "https://auth3.example.com", Revoked: true})
	want.Issuer, want.SignedOutAt, want.Revoked, want.RevokeError = "https://auth3.example.com", out.Time, true, ""
	auth("signed out again", &want)

	// A stdio server has no auth view; the JSON shape omits it.
	files, _ := st.Server("files")
	if files.Auth != nil {
		t.Errorf("files: auth %+v", files.Auth)
	}
	b, err := json.Marshal(files)
	if err != nil || strings.Contains(string(b), `"auth"`) {
		t.Errorf("files JSON %s (%v) has an auth key", b, err)
	}

	// The view is a copy: changing it changes nothing in the projection.
	row, _ := st.Server("gh")
	row.Auth.Issuer = "changed"
	s.in("gh", &events.AuthFailed{Phase: events.AuthPhaseRevoke, Error: "x"})
	apply()
	row, _ = st.Server("gh")
	row.Auth.Failure.Error = "changed"
	if again, _ := st.Server("gh"); again.Auth.Issuer != "https://auth3.example.com" || again.Auth.Failure.Error != "x" {
		t.Errorf("the auth view shares memory with the projection: %+v", again.Auth)
	}

	// A new session starts with no auth view.
	s2 := j.session(3)
	s2.start()
	s2.config(remote("gh"))
	apply()
	if row, _ := st.Server("gh"); row.Auth != nil {
		t.Errorf("new session: auth %+v", row.Auth)
	}
}

// TestStatusAuthScopesCopied: the scopes of a sign-in are copied, so a
// payload changed after it was applied does not change the view.
func TestStatusAuthScopesCopied(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	s.start()
	s.config(remote("gh"))
	in := &events.AuthSignedIn{Issuer: "i", Scopes: []string{"a"}}
	ref := &events.AuthRefreshed{Issuer: "i", Scopes: []string{"b"}}
	st := NewStatus()
	for _, e := range j.evs {
		st.Apply(e)
	}
	st.Apply(s.in("gh", in))
	in.Scopes[0] = "changed"
	if row, _ := st.Server("gh"); row.Auth.Scopes[0] != "a" {
		t.Errorf("sign-in scopes shared: %q", row.Auth.Scopes)
	}
	st.Apply(s.in("gh", ref))
	ref.Scopes[0] = "changed"
	row, _ := st.Server("gh")
	if row.Auth.Scopes[0] != "b" {
		t.Errorf("refresh scopes shared: %q", row.Auth.Scopes)
	}
	row.Auth.Scopes[0] = "mine"
	if again, _ := st.Server("gh"); again.Auth.Scopes[0] != "b" {
		t.Errorf("view scopes shared: %q", again.Auth.Scopes)
	}
}

// TestHistoryNeedsAuthIsNoCrash: a server blocked on a sign-in at every
// start of short sessions (fsm's trigger needs_auth) is not crashing:
// History, which carries the storm breaker's crashes across sessions,
// does not count it; the sign-in's relaunch (trigger reconnect) forgets
// the crashes before it, as a reconnect does.
func TestHistoryNeedsAuthIsNoCrash(t *testing.T) {
	j := newJournal()
	crash := j.session(1)
	crash.start()
	crash.config(remote("gh"))
	c1 := crash.crash("gh", events.StateLaunching, 1)
	for i := byte(2); i < 6; i++ {
		s := j.session(i)
		s.start()
		s.config(remote("gh"))
		s.tr("gh", events.StateConfiguring, events.StateLaunching, "", 1, nil)
		s.in("gh", &events.ConnectFailed{Attempt: 1, Phase: "connect", Error: events.ClassifiedError{Class: events.ErrAuth}})
		s.out("gh", &events.ServerTransitioned{From: events.StateLaunching, To: events.StateFailed, Trigger: "needs_auth",
			Reason: events.ReasonNeedsAuth, Attempt: 1, Error: &events.ClassifiedError{Class: events.ErrAuth}})
	}
	if got := foldHistory(j.evs).Crashes("gh"); len(got) != 1 || got[0] != c1.Time {
		t.Fatalf("Crashes(gh) = %v, want only the crash at %d", got, c1.Time)
	}
	s := j.session(9)
	s.start()
	s.in("gh", &events.AuthSignedIn{Issuer: "i", ClientKind: events.ClientRegistered})
	s.out("gh", &events.ServerTransitioned{From: events.StateFailed, To: events.StateLaunching, Trigger: "reconnect", Attempt: 2})
	if got := foldHistory(j.evs).Crashes("gh"); got != nil {
		t.Errorf("after a sign-in's relaunch: crashes %v", got)
	}
}
