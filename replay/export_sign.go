package replay

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// A signed export carries, in its trailer, the signer's ed25519 public
// key and a signature over the trailer's format, session, number of
// events and head. The chain alone is recomputable by anyone who edits
// the file; the signature is not, without the signer's private key. An
// edit that keeps the signature fails to verify; one that drops it leaves
// an unsigned export, which ReadExportOptions.Signer refuses.

// Fingerprint returns the fingerprint of an export signer's public key:
// "SHA256:" and the unpadded base64 of the key's SHA-256, as ssh-keygen
// -l prints a key's.
func Fingerprint(pub ed25519.PublicKey) string {
	s := sha256.Sum256(pub)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(s[:])
}

// signedBytes returns what t's signature covers.
func (t *Trailer) signedBytes() []byte {
	return fmt.Appendf(nil, "%s signature\n%s\n%d\n%s\n", t.Format, t.Session, t.Events, t.Head)
}

// sign fills t's Signer and Sig with key's.
func (t *Trailer) sign(key ed25519.PrivateKey) {
	t.Signer = base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey))
	t.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(key, t.signedBytes()))
}

// signer checks t's signature, if it has one, and returns the signer's
// fingerprint ("" for an unsigned trailer); ok is false for a signature
// that does not verify.
func (t *Trailer) signer() (fingerprint string, ok bool) {
	if t.Signer == "" && t.Sig == "" {
		return "", true
	}
	pub, err := base64.StdEncoding.DecodeString(t.Signer)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return "", false
	}
	sig, err := base64.StdEncoding.DecodeString(t.Sig)
	if err != nil || !ed25519.Verify(pub, t.signedBytes(), sig) {
		return "", false
	}
	return Fingerprint(pub), true
}

// Signer returns the fingerprint of the key that signed the export, or ""
// for an export that is not signed.
func (x *Export) Signer() string {
	if x.Trailer == nil {
		return ""
	}
	fp, _ := x.Trailer.signer() // ReadExport checked it
	return fp
}

// checkSigner checks that x is signed by the key of fingerprint want.
func (x *Export) checkSigner(want string) error {
	got := x.Signer()
	if got == want {
		return nil
	}
	if got == "" {
		return fmt.Errorf("%w (%s): it is not signed", ErrSigner, want)
	}
	return fmt.Errorf("%w (%s): it is signed by %s", ErrSigner, want, got)
}
