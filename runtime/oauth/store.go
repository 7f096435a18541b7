package oauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/oauth2"
)

// ClientKind says how the OAuth client identity of an entry was obtained.
type ClientKind string

// The client kinds, as journaled by the runtime.
const (
	ClientPreRegistered    ClientKind = "pre_registered"
	ClientMetadataDocument ClientKind = "metadata_document"
	ClientRegistered       ClientKind = "registered"
)

// Entry is one server's sign-in: the tokens and what is needed to refresh
// and revoke them. It is keyed by Server and Resource.
type Entry struct {
	Server   string `json:"server"`
	Resource string `json:"resource"` // canonical resource URL (CanonicalResource)

	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	TokenType    string    `json:"token_type,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	Scopes       []string  `json:"scopes,omitempty"`

	Issuer             string           `json:"issuer,omitempty"`
	TokenEndpoint      string           `json:"token_endpoint"`
	AuthStyle          oauth2.AuthStyle `json:"auth_style"`
	RevocationEndpoint string           `json:"revocation_endpoint,omitempty"`

	ClientKind ClientKind `json:"client_kind"`
	ClientID   string     `json:"client_id"`
	// ClientSecret is set only for a client registered dynamically (DCR)
	// with a secret; a pre-registered client's secret stays in the config.
	ClientSecret string `json:"client_secret,omitempty"`
}

// Secrets returns the entry's secret values (access token, refresh token,
// client secret; the empty ones left out) for the redactor.
func (e Entry) Secrets() []string {
	var out []string
	for _, s := range []string{e.AccessToken, e.RefreshToken, e.ClientSecret} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// CanonicalResource returns the canonical form of an MCP server URL used
// as the resource key: scheme and host lower-cased, the default port
// dropped, no fragment, no trailing slash. Two spellings of one URL share
// an entry; any other change of URL (host, port, path, query) does not.
func CanonicalResource(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("oauth: server URL %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("oauth: server URL %q is not an absolute http(s) URL", raw)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	u.Host = host
	u.Fragment, u.RawFragment = "", ""
	u.User = nil
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u.String(), nil
}

// DefaultStorePath returns the per-user token store path:
// $XDG_STATE_HOME/mcpledger/oauth-tokens.json, else
// $HOME/.local/state/mcpledger/oauth-tokens.json. getenv is os.Getenv in
// production and a map lookup in tests.
func DefaultStorePath(getenv func(string) string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "mcpledger", "oauth-tokens.json"), nil
	}
	home := getenv("HOME")
	if home == "" || !filepath.IsAbs(home) {
		return "", fmt.Errorf("%w: neither XDG_STATE_HOME nor HOME is an absolute path; set one of them", ErrStore)
	}
	return filepath.Join(home, ".local", "state", "mcpledger", "oauth-tokens.json"), nil
}

// Store is the token store: one JSON file (mode 0600, directory 0700),
// replaced atomically (temporary file in the same directory, fsync,
// rename, fsync of the directory) on every change. Writers in any process
// are serialized by an flock on a sibling file PATH.lock; readers take it
// shared. A Store holds no state besides its path and is safe for
// concurrent use.
//
// A file readable or writable by group or others is refused, never
// rewritten silently: the tokens may have leaked, so the error says to
// `chmod 600` it (or delete it and sign in again). A file that cannot be
// read or parsed is an error naming the file; nothing is dropped.
type Store struct {
	path string
}

// NewStore returns the store kept at path. Nothing is read or created
// until the first call.
func NewStore(path string) *Store { return &Store{path: path} }

// Path is the file the store is kept in.
func (s *Store) Path() string { return s.path }

type storeFile struct {
	Version int     `json:"version"`
	Entries []Entry `json:"entries"`
}

const storeVersion = 1

// Get returns the entry for server name at url (canonicalized), or an
// error wrapping ErrNotFound. An entry stored for the same name at
// another URL is not returned.
func (s *Store) Get(name, rawURL string) (Entry, error) {
	res, err := CanonicalResource(rawURL)
	if err != nil {
		return Entry{}, err
	}
	var out Entry
	found := false
	err = s.locked(syscall.LOCK_SH, func() error {
		f, err := s.read()
		if err != nil {
			return err
		}
		for _, e := range f.Entries {
			if e.Server == name && e.Resource == res {
				out, found = e, true
			}
		}
		return nil
	})
	if err != nil {
		return Entry{}, err
	}
	if !found {
		return Entry{}, fmt.Errorf("%w for server %s at %s", ErrNotFound, name, res)
	}
	return out, nil
}

// Put stores e, replacing the entry with the same server name and
// resource. e.Resource is canonicalized first.
func (s *Store) Put(e Entry) error {
	res, err := CanonicalResource(e.Resource)
	if err != nil {
		return err
	}
	if e.Server == "" {
		return errors.New("oauth: store entry without a server name")
	}
	e.Resource = res
	return s.update(func(f *storeFile) {
		for i := range f.Entries {
			if f.Entries[i].Server == e.Server && f.Entries[i].Resource == res {
				f.Entries[i] = e
				return
			}
		}
		f.Entries = append(f.Entries, e)
	})
}

// Delete removes the entry for (name, url) and returns it; found is false
// when there was none.
func (s *Store) Delete(name, rawURL string) (removed Entry, found bool, err error) {
	res, err := CanonicalResource(rawURL)
	if err != nil {
		return Entry{}, false, err
	}
	err = s.update(func(f *storeFile) {
		kept := f.Entries[:0]
		for _, e := range f.Entries {
			if e.Server == name && e.Resource == res {
				removed, found = e, true
				continue
			}
			kept = append(kept, e)
		}
		f.Entries = kept
	})
	return removed, found, err
}

// update runs fn on the file's contents under the exclusive lock and
// writes the result back atomically.
func (s *Store) update(fn func(*storeFile)) error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return s.fail("cannot create its directory", err)
	}
	return s.locked(syscall.LOCK_EX, func() error {
		f, err := s.read()
		if err != nil {
			return err
		}
		fn(&f)
		return s.write(f)
	})
}

// locked runs fn holding an flock of kind how on PATH.lock. A missing
// directory with LOCK_SH means an empty store (nothing is created by a read).
func (s *Store) locked(how int, fn func() error) error {
	lf, err := os.OpenFile(s.path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		if how == syscall.LOCK_SH && errors.Is(err, fs.ErrNotExist) {
			return fn()
		}
		return s.fail("cannot open its lock file", err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), how); err != nil {
		return s.fail("cannot lock it", err)
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too
	return fn()
}

// read loads the file; a missing file is an empty store.
func (s *Store) read() (storeFile, error) {
	var f storeFile
	fi, err := os.Stat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return storeFile{Version: storeVersion}, nil
	}
	if err != nil {
		return f, s.fail("cannot be examined", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return f, fmt.Errorf("%w: %s has mode %04o, readable by other users, so it is refused; "+
			"run `chmod 600 %s` if only you could read it, or delete it and sign in again",
			ErrStore, s.path, perm, s.path)
	}
	data, err := os.ReadFile(s.path)
	if err != nil {
		return f, s.fail("cannot be read", err)
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return f, fmt.Errorf("%w: %s is not a valid token store (%v); fix it, or delete it and sign in to each server again",
			ErrStore, s.path, jsonErrNoValue(err))
	}
	if f.Version != storeVersion {
		return f, fmt.Errorf("%w: %s has version %d, this mcpledger reads %d; delete it and sign in again, or use a matching mcpledger",
			ErrStore, s.path, f.Version, storeVersion)
	}
	return f, nil
}

// jsonErrNoValue keeps a JSON error's position and kind, never a value
// from the file (which may be a token).
func jsonErrNoValue(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %q has the wrong type at byte %d", te.Field, te.Offset)
	}
	return "malformed JSON"
}

// write replaces the file atomically: temp file, fsync, rename, fsync dir.
func (s *Store) write(f storeFile) error {
	f.Version = storeVersion
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return s.fail("cannot be encoded", err)
	}
	dir := filepath.Dir(s.path)
	tmp, err := os.CreateTemp(dir, ".oauth-tokens-*.tmp")
	if err != nil {
		return s.fail("cannot be written (temporary file)", err)
	}
	tmpName := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return s.fail("cannot be written (chmod)", err)
	}
	if _, err := tmp.Write(data); err != nil {
		return s.fail("cannot be written", err)
	}
	if err := tmp.Sync(); err != nil {
		return s.fail("cannot be written (fsync)", err)
	}
	if err := tmp.Close(); err != nil {
		return s.fail("cannot be written (close)", err)
	}
	if err := os.Rename(tmpName, s.path); err != nil {
		return s.fail("cannot be replaced", err)
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

func (s *Store) fail(what string, err error) error {
	return fmt.Errorf("%w: %s %s: %w; fix its permissions, or delete it and sign in again", ErrStore, s.path, what, err)
}
