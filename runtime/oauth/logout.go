package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// LogoutResult says what Logout did.
type LogoutResult struct {
	Removed bool // an entry was stored and is now deleted
	Revoked bool // every token of it was revoked at the revocation endpoint
	// RevokeErr is why revocation failed (the entry is deleted anyway),
	// nil when it succeeded or the authorization server has no
	// revocation endpoint. It holds no token.
	RevokeErr error
}

// LogoutOptions are Logout's optional settings.
type LogoutOptions struct {
	// ClientSecret is the configured secret of a pre-registered client,
	// to authenticate the revocation request.
	ClientSecret string
	// HTTPClient sends the revocation requests (nil: a client over
	// http.DefaultTransport with a 30 s timeout).
	HTTPClient *http.Client
}

// Logout deletes the sign-in of server name at url from the store, then
// revokes its refresh and access tokens (RFC 7009) when the
// authorization server named a revocation endpoint. The entry is deleted
// first, so a failed revocation never keeps it; the failure is in
// LogoutResult.RevokeErr. The error is for the store only.
func Logout(ctx context.Context, store *Store, name, rawURL string, o LogoutOptions) (LogoutResult, error) {
	e, found, err := store.Delete(name, rawURL)
	if err != nil {
		return LogoutResult{}, fmt.Errorf("oauth: server %s: cannot sign out: %w", name, err)
	}
	res := LogoutResult{Removed: found}
	if !found || e.RevocationEndpoint == "" {
		return res, nil
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	secret := e.ClientSecret
	if e.ClientKind == ClientPreRegistered {
		secret = o.ClientSecret
	}
	var errs []error
	for _, t := range []struct{ tok, hint string }{{e.RefreshToken, "refresh_token"}, {e.AccessToken, "access_token"}} {
		if t.tok == "" {
			continue
		}
		if err := revoke(ctx, hc, e, secret, t.tok, t.hint); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.hint, err))
		}
	}
	if len(errs) > 0 {
		res.RevokeErr = fmt.Errorf("oauth: server %s: signed out here, but the authorization server did not confirm revocation (%w); revoke the grant in its web console if it matters",
			name, errors.Join(errs...))
		return res, nil
	}
	res.Revoked = true
	return res, nil
}

// revoke posts one RFC 7009 revocation request with the client's
// authentication (HTTP Basic for a confidential client whose token
// endpoint style is the header, else client_id/client_secret in the form).
func revoke(ctx context.Context, hc *http.Client, e Entry, secret, token, hint string) error {
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	basic := secret != "" && e.AuthStyle == oauth2.AuthStyleInHeader
	if !basic {
		form.Set("client_id", e.ClientID)
		if secret != "" {
			form.Set("client_secret", secret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.RevocationEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("revocation endpoint %q: %w", e.RevocationEndpoint, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic {
		req.SetBasicAuth(url.QueryEscape(e.ClientID), url.QueryEscape(secret))
	}
	resp, err := hc.Do(req)
	if err != nil {
		// *url.Error names the endpoint, not the form.
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("revocation endpoint answered HTTP %d", resp.StatusCode)
	}
	return nil
}
