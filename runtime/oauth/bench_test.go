package oauth

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkTransport measures what the Transport adds to a request with
// a stored, valid token (a lock, a header, a request clone), beside the
// same request through the bare base transport (its baseline).
func BenchmarkTransport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	store := NewStore(filepath.Join(b.TempDir(), "oauth-tokens.json"))
	if err := store.Put(Entry{Server: "s", Resource: srv.URL, AccessToken: "tok", TokenEndpoint: srv.URL + "/token",
		Expiry: time.Now().Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	base := &http.Transport{MaxIdleConnsPerHost: 4}
	defer base.CloseIdleConnections()
	body := strings.Repeat("x", 512)
	for _, tc := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"base", base},
		{"oauth", NewTransport(TransportOptions{Server: "s", URL: srv.URL, Store: store, Base: base})},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := &http.Client{Transport: tc.rt}
			for b.Loop() {
				resp, err := c.Post(srv.URL, "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
