package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mcpledger/mcpledger/runtime/config"
)

// exportKeyFile is the user's export signing key, in the user config
// directory: an ed25519 private key, PKCS #8 in PEM, mode 0600.
const exportKeyFile = "export-key.pem"

// exportKey returns the user's export signing key and its path, creating
// it on first use. A key file that others can read is refused.
func (e *env) exportKey() (ed25519.PrivateKey, string, error) {
	lookup := func(k string) (string, bool) { v := e.getenv(k); return v, v != "" }
	dir := config.UserDir(lookup, e.getenv("HOME"))
	if dir == "" {
		return nil, "", errors.New("export --sign: no user config directory for the signing key: set XDG_CONFIG_HOME or HOME")
	}
	path := filepath.Join(dir, exportKeyFile)
	key, err := readExportKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = createExportKey(path)
	}
	return key, path, err
}

func readExportKey(path string) (ed25519.PrivateKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("export --sign: the signing key %s can be read by others (mode %04o): chmod 600 %s, and make a new key (move it aside) if others may have read it", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("export --sign: %s holds no PEM private key: move it aside to make a new key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("export --sign: %s holds no PKCS #8 private key (%w): move it aside to make a new key", path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("export --sign: %s holds a %T, not an ed25519 key: move it aside to make a new key", path, k)
	}
	return key, nil
}

// createExportKey makes a new key at path; if another process made one
// meanwhile, that one is read.
func createExportKey(path string) (ed25519.PrivateKey, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return readExportKey(path)
	}
	if err != nil {
		return nil, err
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return nil, err
	}
	return key, nil
}
