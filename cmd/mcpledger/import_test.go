package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
)

// goldenJournal is the path of a recorded session in testdata/journals.
func goldenJournal(name string) string {
	return filepath.Join("..", "..", "testdata", "journals", name)
}

// exportOf imports the golden approvals session (a call finished at seq
// 25, definition hashes pinned at 23) into a fresh journal and exports it
// with the real commands: the sealed file's lines (36: the trailer last).
func exportOf(t *testing.T, dir string) []string {
	t.Helper()
	src := filepath.Join(dir, "src.db")
	r := runCLI(t, "import", goldenJournal("approvals.jsonl"), "--unsealed", "--journal", src)
	if r.err != nil || !strings.Contains(r.stdout, "(35 events, verified; UNSEALED: edits to the file before this import cannot be detected)") {
		t.Fatalf("import --unsealed: %v %s%s", r.err, r.stdout, r.stderr)
	}
	r = runCLI(t, "export", "last", "--journal", src)
	if r.err != nil {
		t.Fatalf("export: %v %s", r.err, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 36 || !strings.HasPrefix(lines[35], `{"export":"mcpledger-export/1",`) {
		t.Fatalf("export wrote %d lines, the last %.80s", len(lines), lines[len(lines)-1])
	}
	return lines
}

func writeLines(t *testing.T, path string, lines []string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The probe's edits of an exported session (a result's text, a tool's
// definition hash, an event's time set to 1999, a line deleted, two lines
// swapped, the trailer dropped) are each refused by import, naming the
// first changed line, its seq and kind, and saying what to do; nothing is
// written.
func TestImportRefusesAnEditedExport(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	orig := exportOf(t, dir)
	for _, c := range []struct {
		name   string
		change func([]string) []string
		want   string
	}{
		{"result text", func(l []string) []string {
			l[24] = strings.Replace(l[24], `\"text\":\"approved\"`, `\"text\":\"denied\"`, 1)
			return l
		}, "the export was changed after it was written: line 25 (seq 25 call.finished) differs from what was exported (its digest does not match)"},
		{"definition hash", func(l []string) []string {
			l[22] = strings.Replace(l[22], `"sha256:b60f047f`, `"sha256:000f047f`, 1)
			return l
		}, "the export was changed after it was written: line 23 (seq 23 tools.pinned) differs from what was exported"},
		{"time 1999", func(l []string) []string {
			l[9] = regexp.MustCompile(`"time":"2026-[^"]*"`).ReplaceAllString(l[9], `"time":"1999-01-01T00:00:00Z"`)
			return l
		}, "the export was changed after it was written: line 10 (seq 10 approval.decided) differs from what was exported"},
		{"line deleted", func(l []string) []string { return append(l[:4:4], l[5:]...) },
			"line 5 (seq 6 approval.requested) is where seq 5 belongs: an event was removed, added or moved"},
		{"lines swapped", func(l []string) []string { l[4], l[5] = l[5], l[4]; return l },
			"line 5 (seq 6 approval.requested) is where seq 5 belongs"},
		{"trailer dropped", func(l []string) []string { return l[:35] },
			"the export is incomplete: line 35 is the last, and no trailer follows: the end of the export was cut off (35 events read)"},
		{"last event and trailer dropped", func(l []string) []string { return l[:34] },
			"the export is incomplete: line 34 is the last, and no trailer follows"},
		{"last event dropped", func(l []string) []string { return append(l[:34:34], l[35]) },
			"line 35 is the trailer of 35 events, and 34 precede it: events were removed from the end"},
	} {
		t.Run(c.name, func(t *testing.T) {
			edited := c.change(append([]string(nil), orig...))
			file := writeLines(t, filepath.Join(dir, "edited.jsonl"), edited)
			dst := filepath.Join(dir, "dst-"+strings.ReplaceAll(c.name, " ", "-")+".db")
			r := runCLI(t, "import", file, "--journal", dst)
			if r.err == nil || !strings.Contains(r.err.Error(), c.want) ||
				!strings.HasSuffix(r.err.Error(), "; nothing was imported: export the session again from the journal it came from (an edited or cut export cannot be imported)") {
				t.Fatalf("import = %v %s, want an error with %q", r.err, r.stdout, c.want)
			}
			// --unsealed does not let a sealed file through.
			if r := runCLI(t, "import", file, "--unsealed", "--journal", dst); r.err == nil || !strings.Contains(r.err.Error(), c.want) {
				t.Fatalf("import --unsealed = %v %s", r.err, r.stdout)
			}
			if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the refused import created the journal: %v", err)
			}
		})
	}
}

// An export from before exports were sealed (like the golden journals) is
// refused unless --unsealed is given, and then imported with a warning.
func TestImportUnsealedNeedsTheFlag(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	dst := filepath.Join(dir, "dst.db")
	r := runCLI(t, "import", goldenJournal("crash-loop.jsonl"), "--journal", dst)
	want := "replay: the export carries no digests, so an edit to it cannot be detected (it was written before exports were sealed, or by log --json); export the session again with this build, or pass --unsealed if you trust where the file came from"
	if r.err == nil || !strings.HasSuffix(r.err.Error(), want) {
		t.Fatalf("import of an unsealed file = %v %s", r.err, r.stdout)
	}
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused import created the journal: %v", err)
	}
	r = runCLI(t, "import", goldenJournal("crash-loop.jsonl"), "--unsealed", "--journal", dst)
	if r.err != nil || !strings.Contains(r.stdout, "UNSEALED: edits to the file before this import cannot be detected") {
		t.Fatalf("import --unsealed = %v %s", r.err, r.stdout)
	}
}

// Re-importing a session the journal holds: the same content is "already
// imported" (exit 0), other content is a conflict naming the first event
// that differs, whether the file is resealed by someone who recomputed
// the chain or imported --unsealed; the journal keeps what it had. A
// session exported from a second journal carries the same seal.
func TestImportConflict(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	orig := exportOf(t, dir)
	file := writeLines(t, filepath.Join(dir, "s.jsonl"), orig)
	dst := filepath.Join(dir, "dst.db")
	// Another session first, so that the events land at other positions.
	if r := runCLI(t, "import", goldenJournal("crash-loop.jsonl"), "--unsealed", "--journal", dst); r.err != nil {
		t.Fatal(r.err)
	}
	head := regexp.MustCompile(`"head":"sha256:([0-9a-f]{12})`).FindStringSubmatch(orig[35])[1]
	r := runCLI(t, "import", file, "--journal", dst)
	if r.err != nil || !strings.Contains(r.stdout, "(35 events, seal "+head+" intact, verified)") {
		t.Fatalf("import = %v %s", r.err, r.stdout)
	}
	sid := regexp.MustCompile(`"session":"([^"]+)"`).FindStringSubmatch(orig[0])[1]
	if r := runCLI(t, "import", file, "--journal", dst); r.err != nil || r.stdout != "session "+sid+" was already imported (the same 35 events)\n" {
		t.Fatalf("re-import = %v %q", r.err, r.stdout)
	}
	again := runCLI(t, "export", sid, "--journal", dst)
	gpos := regexp.MustCompile(`"gpos":\d+`)
	if again.err != nil || again.stdout == strings.Join(orig, "\n")+"\n" ||
		gpos.ReplaceAllString(again.stdout, "") != gpos.ReplaceAllString(strings.Join(orig, "\n")+"\n", "") {
		t.Fatalf("the export from the second journal differs in more than gpos (or not at all): %v", again.err)
	}

	// Resealed edits: someone recomputed the chain.
	x, err := replay.ReadExport(strings.NewReader(strings.Join(orig, "\n")), replay.ReadExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reseal := func(name string, change func(evs []events.Event)) string {
		evs := append([]events.Event(nil), x.Events...)
		change(evs)
		var buf bytes.Buffer
		if _, err := replay.WriteExport(&buf, evs, replay.WriteExportOptions{}); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		os.WriteFile(path, buf.Bytes(), 0o600)
		return path
	}
	for _, c := range []struct {
		file, want string
	}{
		{reseal("text.jsonl", func(evs []events.Event) {
			p := *evs[24].Payload.(*events.CallFinished)
			p.Result.Text = `{"content":[{"type":"text","text":"denied"}]}`
			evs[24].Payload = &p
		}), "they first differ at seq 25 (line 25 of the export), in its payload: the export has call.finished gh {"},
		{reseal("time.jsonl", func(evs []events.Event) { evs[24].Time = 915148800e9 }), // 1999
			"they first differ at seq 25 (line 25 of the export), in its time: the export has call.finished gh {"},
	} {
		r := runCLI(t, "import", c.file, "--journal", dst)
		if r.err == nil || !strings.Contains(r.err.Error(), "import "+c.file+": session "+sid+": replay: the journal holds this session with different content: "+c.want) ||
			!strings.HasSuffix(r.err.Error(), "(nothing was imported: one of the two was changed; see what the journal holds with mcpledger export "+sid+", or import the file into another journal with --journal)") {
			t.Fatalf("import of an edited, resealed session = %v %s", r.err, r.stdout)
		}
	}
	// An unsealed edit, let in by --unsealed: still a conflict.
	plain := make([]string, 35)
	digest := regexp.MustCompile(`,"digest":"[^"]*"`)
	for i := range plain {
		plain[i] = digest.ReplaceAllString(orig[i], "")
	}
	plain[24] = strings.Replace(plain[24], `\"text\":\"approved\"`, `\"text\":\"denied\"`, 1)
	r = runCLI(t, "import", writeLines(t, filepath.Join(dir, "plain.jsonl"), plain), "--unsealed", "--journal", dst)
	if r.err == nil || !strings.Contains(r.err.Error(), "they first differ at seq 25 (line 25 of the export), in its payload: the export has call.finished gh") {
		t.Fatalf("import --unsealed of an edited session = %v %s", r.err, r.stdout)
	}
	// A shorter session: the journal holds more.
	plain[24] = digest.ReplaceAllString(orig[24], "")
	r = runCLI(t, "import", writeLines(t, filepath.Join(dir, "short.jsonl"), plain[:25]), "--unsealed", "--journal", dst)
	if r.err == nil || !strings.Contains(r.err.Error(), "they first differ at seq 26: the export has nothing, the journal has config.observed") {
		t.Fatalf("import of a shorter session = %v %s", r.err, r.stdout)
	}
	// The journal kept what it had.
	if after := runCLI(t, "export", sid, "--journal", dst); after.stdout != again.stdout {
		t.Error("a refused import changed the journal's session")
	}
	if r := runCLI(t, "verify", "--journal", dst); r.err != nil {
		t.Errorf("verify: %v %s", r.err, r.stdout)
	}
}

// export --sign makes the user's key on first use (0600, in the user
// config directory) and signs with it; import --signer requires that key
// and prints it; a key file others can read is refused.
func TestExportSigned(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	exportOf(t, dir)
	src := filepath.Join(dir, "src.db")
	keyPath := filepath.Join(dir, "xdg", "mcpledger", "export-key.pem")
	signedBy := regexp.MustCompile(`^signed by (SHA256:[A-Za-z0-9+/]{43}) \(key ` + regexp.QuoteMeta(keyPath) + `\)\n$`)
	first := runCLI(t, "export", "last", "--sign", "--journal", src)
	m := signedBy.FindStringSubmatch(first.stderr)
	if first.err != nil || m == nil {
		t.Fatalf("export --sign = %v, stderr %q", first.err, first.stderr)
	}
	fp := m[1]
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	second := runCLI(t, "export", "last", "--sign", "--journal", src)
	if second.err != nil || second.stderr != first.stderr || second.stdout != first.stdout {
		t.Fatalf("a second export --sign = %v, %q: not the same key, or not the same export", second.err, second.stderr)
	}
	file := filepath.Join(dir, "signed.jsonl")
	os.WriteFile(file, []byte(first.stdout), 0o600)
	other := "SHA256:" + strings.Repeat("A", 43)
	dst := filepath.Join(dir, "dst.db")
	r := runCLI(t, "import", file, "--signer", other, "--journal", dst)
	if r.err == nil || r.err.Error() != "import "+file+": replay: the export is not signed by the key asked for ("+other+"): it is signed by "+fp+"; nothing was imported: ask its sender for an export made with export --sign by that key" {
		t.Fatalf("import --signer another = %v", r.err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused import created the journal: %v", err)
	}
	r = runCLI(t, "import", file, "--signer", fp, "--journal", dst)
	if r.err != nil || !strings.Contains(r.stdout, " intact, signed by "+fp+", verified)") {
		t.Fatalf("import --signer = %v %s", r.err, r.stdout)
	}
	// An unsigned export, a signer asked for.
	unsigned := runCLI(t, "export", "last", "--journal", src)
	os.WriteFile(file, []byte(unsigned.stdout), 0o600)
	if r := runCLI(t, "import", file, "--signer", fp, "--journal", dst); r.err == nil || !strings.Contains(r.err.Error(), "it is not signed") {
		t.Fatalf("import --signer of an unsigned export = %v", r.err)
	}
	os.Chmod(keyPath, 0o644)
	r = runCLI(t, "export", "last", "--sign", "--journal", src)
	if r.err == nil || !strings.Contains(r.err.Error(), "the signing key "+keyPath+" can be read by others (mode 0644): chmod 600 "+keyPath) || r.stdout != "" {
		t.Fatalf("export --sign with a key others can read = %v, %d bytes out", r.err, len(r.stdout))
	}
	os.Chmod(keyPath, 0o600)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(ec)
	for content, want := range map[string]string{
		"not a key": "holds no PEM private key: move it aside to make a new key",
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("garbage")})): keyPath + " holds no PKCS #8 private key (asn1: ",
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})):               "holds a *ecdsa.PrivateKey, not an ed25519 key: move it aside to make a new key",
	} {
		os.WriteFile(keyPath, []byte(content), 0o600)
		if r := runCLI(t, "export", "last", "--sign", "--journal", src); r.err == nil || !strings.Contains(r.err.Error(), want) {
			t.Errorf("export --sign with a key file holding %.20q = %v", content, r.err)
		}
	}
	// Without a user config directory, there is nowhere to keep a key.
	r = runEnv(t, map[string]string{}, "export", "last", "--sign", "--journal", src)
	if r.err == nil || r.err.Error() != "export --sign: no user config directory for the signing key: set XDG_CONFIG_HOME or HOME" {
		t.Errorf("export --sign without HOME = %v", r.err)
	}
}
