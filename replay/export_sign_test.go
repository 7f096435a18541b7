package replay_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/replay"
)

// newKey returns a fixed ed25519 key for seed b.
func newKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

func signedExport(t *testing.T, key ed25519.PrivateKey) []string {
	t.Helper()
	var buf bytes.Buffer
	if _, err := replay.WriteExport(&buf, golden(t, "approvals.jsonl"), replay.WriteExportOptions{Sign: key}); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
}

func TestFingerprint(t *testing.T) {
	pub := newKey(1).Public().(ed25519.PublicKey)
	s := sha256.Sum256(pub)
	if got, want := replay.Fingerprint(pub), "SHA256:"+strings.TrimRight(base64.StdEncoding.EncodeToString(s[:]), "="); got != want || len(got) != 7+43 {
		t.Errorf("Fingerprint = %s, want %s", got, want)
	}
}

// A signed export names its signer; import can require it. The trailer
// holds the public key and a signature over format, session, count and
// head.
func TestSignedExport(t *testing.T) {
	key := newKey(1)
	fp := replay.Fingerprint(key.Public().(ed25519.PublicKey))
	lines := signedExport(t, key)
	var tr replay.Trailer
	if err := json.Unmarshal([]byte(lines[35]), &tr); err != nil {
		t.Fatal(err)
	}
	msg := "mcpledger-export/1 signature\n" + tr.Session.String() + "\n35\n" + tr.Head + "\n"
	sig, _ := base64.StdEncoding.DecodeString(tr.Sig)
	if tr.Signer != base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey)) || !ed25519.Verify(key.Public().(ed25519.PublicKey), []byte(msg), sig) {
		t.Fatalf("trailer %s: not the key, or not its signature over %q", lines[35], msg)
	}
	for _, want := range []string{"", fp} {
		x, err := readExport(lines, replay.ReadExportOptions{Signer: want})
		if err != nil || x.Signer() != fp {
			t.Fatalf("ReadExport(Signer %q) = %v, signer %q", want, err, x.Signer())
		}
	}
	other := replay.Fingerprint(newKey(2).Public().(ed25519.PublicKey))
	_, err := readExport(lines, replay.ReadExportOptions{Signer: other})
	if !errors.Is(err, replay.ErrSigner) || err.Error() != "replay: the export is not signed by the key asked for ("+other+"): it is signed by "+fp {
		t.Errorf("another signer asked for: %v", err)
	}
	unsigned, _ := sealed(t)
	x, err := readExport(unsigned, replay.ReadExportOptions{})
	if err != nil || x.Signer() != "" {
		t.Fatalf("unsigned: %v %q", err, x.Signer())
	}
	_, err = readExport(unsigned, replay.ReadExportOptions{Signer: fp})
	if !errors.Is(err, replay.ErrSigner) || err.Error() != "replay: the export is not signed by the key asked for ("+fp+"): it is not signed" {
		t.Errorf("an unsigned export, a signer asked for: %v", err)
	}
	var plain bytes.Buffer
	replay.WriteJSONL(&plain, golden(t, "approvals.jsonl"))
	x, err = replay.ReadExport(&plain, replay.ReadExportOptions{Unsealed: true, Signer: fp})
	if !errors.Is(err, replay.ErrSigner) || x != nil {
		t.Errorf("an unsealed export, a signer asked for: %v", err)
	}
	if x := (&replay.Export{}); x.Signer() != "" {
		t.Errorf("an export without a trailer has signer %q", x.Signer())
	}
}

// Someone who edits an event and recomputes the chain cannot keep the
// signature: it no longer verifies; dropping it or signing with another
// key is caught by asking for the signer.
func TestSignedExportEdits(t *testing.T) {
	key := newKey(1)
	fp := replay.Fingerprint(key.Public().(ed25519.PublicKey))
	orig := signedExport(t, key)
	var tr replay.Trailer
	json.Unmarshal([]byte(orig[35]), &tr)
	// The events edited and resealed, the old signature kept.
	evs := golden(t, "approvals.jsonl")
	evs[9].Time -= 1e9
	var buf bytes.Buffer
	resealed, _ := replay.WriteExport(&buf, evs, replay.WriteExportOptions{})
	resealed.Signer, resealed.Sig = tr.Signer, tr.Sig
	forged := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	b, _ := json.Marshal(resealed)
	forged[35] = string(b)
	notVerify := "holds a signature that does not verify: the trailer was edited, or signed with another key than the one it names"
	for name, lines := range map[string][]string{
		"resealed, signature kept": forged,
		"signer replaced":          {strings.Replace(orig[35], tr.Signer, base64.StdEncoding.EncodeToString(newKey(2).Public().(ed25519.PublicKey)), 1)},
		"signature cut":            {strings.Replace(orig[35], tr.Sig, tr.Sig[4:], 1)},
		"signature not base64":     {strings.Replace(orig[35], tr.Sig, "!"+tr.Sig[1:], 1)},
		"signer not base64":        {strings.Replace(orig[35], tr.Signer, "!"+tr.Signer[1:], 1)},
		"signer too short":         {strings.Replace(orig[35], tr.Signer, tr.Signer[4:], 1)},
		"signer dropped":           {strings.Replace(orig[35], `"signer":"`+tr.Signer+`",`, "", 1)},
		"signature dropped":        {strings.Replace(orig[35], `,"sig":"`+tr.Sig+`"`, "", 1)},
	} {
		if len(lines) == 1 {
			lines = append(append([]string(nil), orig[:35]...), lines[0])
		}
		_, err := readExport(lines, replay.ReadExportOptions{})
		var xe *replay.ExportError
		if !errors.As(err, &xe) || *xe != (replay.ExportError{Line: 36, Reason: notVerify, Err: replay.ErrTampered}) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Both dropped: a valid unsigned export, refused when a signer is asked for.
	stripped := append(append([]string(nil), orig[:35]...), strings.Replace(orig[35], `,"signer":"`+tr.Signer+`","sig":"`+tr.Sig+`"`, "", 1))
	if _, err := readExport(stripped, replay.ReadExportOptions{}); err != nil {
		t.Errorf("signature and signer dropped: %v", err)
	}
	if _, err := readExport(stripped, replay.ReadExportOptions{Signer: fp}); !errors.Is(err, replay.ErrSigner) {
		t.Errorf("signature and signer dropped, the signer asked for: %v", err)
	}
	// Resealed and signed by someone else.
	buf.Reset()
	replay.WriteExport(&buf, evs, replay.WriteExportOptions{Sign: newKey(2)})
	if _, err := replay.ReadExport(&buf, replay.ReadExportOptions{Signer: fp}); !errors.Is(err, replay.ErrSigner) {
		t.Errorf("resealed and signed by another key: %v", err)
	}
}
