package oauth

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func testStore(t *testing.T) *Store {
	return NewStore(filepath.Join(t.TempDir(), "s", "oauth-tokens.json"))
}

func entry(server, url, tok string) Entry {
	return Entry{Server: server, Resource: url, AccessToken: tok, RefreshToken: "r-" + tok, ClientID: "c",
		TokenEndpoint: "https://as.example/token", ClientKind: ClientRegistered, Expiry: time.Unix(2000000000, 0).UTC()}
}

func TestCanonicalResource(t *testing.T) {
	for in, want := range map[string]string{
		"https://MCP.Example.com/mcp":      "https://mcp.example.com/mcp",
		"HTTPS://mcp.example.com:443/mcp/": "https://mcp.example.com/mcp",
		"http://localhost:80/mcp#frag":     "http://localhost/mcp",
		"http://127.0.0.1:8080/":           "http://127.0.0.1:8080",
		"https://[::1]:8443/a?x=1":         "https://[::1]:8443/a?x=1",
		"https://user@host.example/a":      "https://host.example/a",
	} {
		got, err := CanonicalResource(in)
		if err != nil || got != want {
			t.Errorf("CanonicalResource(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "mcp.example.com/mcp", "ftp://x/y", "http://%zz"} {
		if _, err := CanonicalResource(bad); err == nil {
			t.Errorf("CanonicalResource(%q) accepted", bad)
		}
	}
}

func TestStoreKeyedByNameAndURL(t *testing.T) {
	s := testStore(t)
	if err := s.Put(entry("hosted", "https://MCP.example.com:443/mcp/", "tok-a")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get("hosted", "https://mcp.example.com/mcp")
	if err != nil || got.AccessToken != "tok-a" {
		t.Fatalf("Get by another spelling of the URL = %+v, %v", redacted(got), err)
	}
	for _, k := range [][2]string{
		{"hosted", "https://mcp.example.com/other"},
		{"hosted", "https://evil.example.com/mcp"},
		{"hosted", "https://mcp.example.com:8443/mcp"},
		{"other", "https://mcp.example.com/mcp"},
	} {
		if e, err := s.Get(k[0], k[1]); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%s, %s) = %q, %v; want ErrNotFound", k[0], k[1], e.AccessToken, err)
		}
	}
	// Put replaces the entry of the same key, keeps the others.
	if err := s.Put(entry("hosted", "https://mcp.example.com/v2", "tok-b")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(entry("hosted", "https://mcp.example.com/mcp", "tok-c")); err != nil {
		t.Fatal(err)
	}
	a, _ := s.Get("hosted", "https://mcp.example.com/mcp")
	b, _ := s.Get("hosted", "https://mcp.example.com/v2")
	if a.AccessToken != "tok-c" || b.AccessToken != "tok-b" {
		t.Errorf("after replace: %q and %q", a.AccessToken, b.AccessToken)
	}
	removed, found, err := s.Delete("hosted", "https://mcp.example.com/mcp/")
	if err != nil || !found || removed.AccessToken != "tok-c" {
		t.Fatalf("Delete = %q, %v, %v", removed.AccessToken, found, err)
	}
	if _, err := s.Get("hosted", "https://mcp.example.com/v2"); err != nil {
		t.Errorf("Delete removed another entry: %v", err)
	}
	if _, found, _ := s.Delete("hosted", "https://mcp.example.com/mcp"); found {
		t.Error("a second Delete found the entry")
	}
	if err := s.Put(Entry{Resource: "https://x.example/"}); err == nil {
		t.Error("an entry without a server name was stored")
	}
}

func TestStoreRoundTripsEveryField(t *testing.T) {
	s := testStore(t)
	in := Entry{Server: "s", Resource: "https://h.example/mcp", AccessToken: "a", RefreshToken: "r", TokenType: "Bearer",
		Expiry: time.Unix(1900000000, 5).UTC(), Scopes: []string{"read", "write"}, Issuer: "https://as.example",
		TokenEndpoint: "https://as.example/token", AuthStyle: 2, RevocationEndpoint: "https://as.example/revoke",
		ClientKind: ClientMetadataDocument, ClientID: "https://c.example/doc.json", ClientSecret: "cs"}
	if err := s.Put(in); err != nil {
		t.Fatal(err)
	}
	out, err := NewStore(s.Path()).Get("s", "https://h.example/mcp")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", in) != fmt.Sprintf("%+v", out) {
		t.Errorf("round trip:\n in %+v\nout %+v", in, out)
	}
}

func TestStoreFileModeAndAtomicWrite(t *testing.T) {
	s := testStore(t)
	for i := range 3 {
		if err := s.Put(entry(fmt.Sprint("s", i), "https://h.example/mcp", "t")); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	di, _ := os.Stat(filepath.Dir(s.Path()))
	if di.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", di.Mode().Perm())
	}
	names, _ := os.ReadDir(filepath.Dir(s.Path()))
	var got []string
	for _, n := range names {
		got = append(got, n.Name())
	}
	if !slices.Equal(got, []string{"oauth-tokens.json", "oauth-tokens.json.lock"}) {
		t.Errorf("directory holds %v; a temporary file was left behind", got)
	}
}

func TestStoreRefusesReadableByOthers(t *testing.T) {
	s := testStore(t)
	if err := s.Put(entry("hosted", "https://h.example/mcp", "tok-secret")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.Path(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get("hosted", "https://h.example/mcp")
	wantErr(t, err, ErrStore, s.Path(), "0644", "chmod 600")
	err = s.Put(entry("other", "https://h.example/mcp", "t2"))
	wantErr(t, err, ErrStore, s.Path())
	if fi, _ := os.Stat(s.Path()); fi.Mode().Perm() != 0o644 {
		t.Error("the store's mode was changed silently")
	}
}

func TestStoreUnusableFile(t *testing.T) {
	t.Run("corrupt", func(t *testing.T) {
		s := testStore(t)
		_ = os.MkdirAll(filepath.Dir(s.Path()), 0o700)
		garbage := `{"version":1,"entries":[{"server":"x","access_token":"tok-in-broken-file"`
		if err := os.WriteFile(s.Path(), []byte(garbage), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := s.Get("x", "https://h.example/mcp")
		wantErr(t, err, ErrStore, s.Path(), "delete it")
		if strings.Contains(err.Error(), "tok-in-broken-file") {
			t.Error("the error quotes the file's contents")
		}
		wantErr(t, s.Put(entry("y", "https://h.example/mcp", "t")), ErrStore, s.Path())
		if data, _ := os.ReadFile(s.Path()); string(data) != garbage {
			t.Error("a corrupt store was overwritten (its entries dropped)")
		}
	})
	t.Run("wrong type", func(t *testing.T) {
		s := testStore(t)
		_ = os.MkdirAll(filepath.Dir(s.Path()), 0o700)
		_ = os.WriteFile(s.Path(), []byte(`{"version":1,"entries":[{"server":"x","access_token":7}]}`), 0o600)
		_, err := s.Get("x", "https://h.example/mcp")
		wantErr(t, err, ErrStore, s.Path(), "access_token")
	})
	t.Run("other version", func(t *testing.T) {
		s := testStore(t)
		_ = os.MkdirAll(filepath.Dir(s.Path()), 0o700)
		_ = os.WriteFile(s.Path(), []byte(`{"version":9,"entries":[]}`), 0o600)
		_, err := s.Get("x", "https://h.example/mcp")
		wantErr(t, err, ErrStore, s.Path(), "version 9")
	})
	t.Run("not readable", func(t *testing.T) {
		s := testStore(t)
		// A directory where the file should be: unreadable as a file
		// even for root (chmod 000 is not).
		if err := os.MkdirAll(s.Path(), 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := s.Get("x", "https://h.example/mcp")
		wantErr(t, err, ErrStore, s.Path(), "cannot be read", "fix its permissions")
	})
	t.Run("missing is empty, and a read creates nothing", func(t *testing.T) {
		s := testStore(t)
		if _, err := s.Get("x", "https://h.example/mcp"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get on a missing store = %v", err)
		}
		if _, err := os.Stat(filepath.Dir(s.Path())); !errors.Is(err, os.ErrNotExist) {
			t.Error("a read created the store's directory")
		}
	})
}

func TestStoreConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "oauth-tokens.json")
	// Two Store values on one file stand for two processes: each
	// operation opens and flocks the lock file on its own.
	stores := []*Store{NewStore(path), NewStore(path)}
	var wg sync.WaitGroup
	const n = 20
	for i := range n {
		wg.Go(func() {
			if err := stores[i%2].Put(entry(fmt.Sprint("srv", i), "https://h.example/mcp", fmt.Sprint("t", i))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range n {
		if _, err := stores[0].Get(fmt.Sprint("srv", i), "https://h.example/mcp"); err != nil {
			t.Errorf("entry %d lost: %v", i, err)
		}
	}
}

func TestDefaultStorePath(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/home/u"}, "/x/state/mcpledger/oauth-tokens.json"},
		{map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/home/u"}, "/home/u/.local/state/mcpledger/oauth-tokens.json"},
		{map[string]string{"HOME": "/home/u"}, "/home/u/.local/state/mcpledger/oauth-tokens.json"},
	} {
		got, err := DefaultStorePath(env(tc.env))
		if err != nil || got != tc.want {
			t.Errorf("DefaultStorePath(%v) = %q, %v; want %q", tc.env, got, err, tc.want)
		}
	}
	if _, err := DefaultStorePath(env(nil)); !errors.Is(err, ErrStore) {
		t.Errorf("no HOME: err = %v", err)
	}
}

func TestEntrySecrets(t *testing.T) {
	e := Entry{AccessToken: "a", RefreshToken: "r", ClientSecret: "s", ClientID: "id"}
	if got := e.Secrets(); !slices.Equal(got, []string{"a", "r", "s"}) {
		t.Errorf("Secrets = %v", got)
	}
	if got := (Entry{AccessToken: "a"}).Secrets(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("Secrets without refresh/secret = %v", got)
	}
}
