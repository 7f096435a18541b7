package oauth

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestNoSecretInErrorsOrLogs drives every path that produces an error
// or a log line with secrets in play (sign-in with a step-up, refresh,
// refresh refused, insufficient scope, a pre-registered client's secret,
// logout with a failing revocation) and searches every error string and
// the captured log for each token, code, verifier and client secret the
// authorization server issued or received.
func TestNoSecretInErrorsOrLogs(t *testing.T) {
	e := newEnv(t)
	const preSecret = "pre-secret-must-not-leak"
	e.as.set(func(a *testAS) { a.preClients["pre"] = preSecret })
	e.mcp.mu.Lock()
	e.mcp.stepUp = "write"
	e.mcp.mu.Unlock()
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}

	g, err := e.login(ClientConfig{ClientID: "pre", ClientSecret: preSecret})
	if err != nil || g.StepUps != 1 {
		t.Fatalf("login: %+v, %v", g, err)
	}
	ent, err := e.store.Get("hosted", e.mcp.url())
	if err != nil {
		t.Fatal(err)
	}
	var cb callbacks
	o := TransportOptions{Server: "hosted", URL: e.mcp.url(), Store: e.store, ClientSecret: preSecret, Logger: e.log,
		Now: func() time.Time { return ent.Expiry.Add(time.Second) }}
	cb.set(&o)
	if st, err := post(NewTransport(o), e.mcp.url()); err != nil || st == http.StatusUnauthorized {
		t.Fatalf("refresh: %d, %v", st, err)
	}
	e.as.set(func(a *testAS) { a.failRefresh = true })
	_, err = post(NewTransport(o), e.mcp.url())
	note(err)
	e.mcp.mu.Lock()
	e.mcp.stepUp = "admin"
	e.mcp.mu.Unlock()
	note(callEcho(t, NewTransport(TransportOptions{Server: "hosted", URL: e.mcp.url(), Store: e.store, Logger: e.log}), e.mcp.url()))
	e.as.set(func(a *testAS) { a.deny = true })
	_, err = e.login(ClientConfig{ClientID: "pre", ClientSecret: preSecret})
	note(err)
	e.as.srv.Close()
	res, err := Logout(context.Background(), e.store, "hosted", e.mcp.url(), LogoutOptions{ClientSecret: preSecret})
	note(err)
	note(res.RevokeErr)
	for _, f := range cb.failed {
		note(f)
	}
	errs = append(errs, cb.needs...)

	if len(errs) < 5 {
		t.Fatalf("only %d errors collected; the scenario did not run", len(errs))
	}
	all := strings.Join(errs, "\n")
	e.noLeak("errors", all)
	e.noLeak("log", e.logs.String())
	for _, s := range append(ent.Secrets(), preSecret) {
		if strings.Contains(all, s) || strings.Contains(e.logs.String(), s) {
			t.Errorf("secret %.6s… leaked", s)
		}
	}
	if !strings.Contains(e.logs.String(), "oauth: login done") {
		t.Error("the log captured nothing; the search proves nothing")
	}
}
