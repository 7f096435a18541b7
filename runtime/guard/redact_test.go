package guard

import (
	"bytes"
	"strings"
	"testing"
)

// marked expands «v» in want to the marker that replaces v.
func marked(want string) string {
	var sb strings.Builder
	for {
		before, rest, ok := strings.Cut(want, "«")
		sb.WriteString(before)
		if !ok {
			return sb.String()
		}
		v, after, _ := strings.Cut(rest, "»")
		sb.Write(redactMarker([]byte(v)))
		want = after
	}
}

// checkRedacted checks Redact, and the reference scan, on in against
// want (with «v» for a redacted v).
func checkRedacted(t *testing.T, in, want string) {
	t.Helper()
	want = marked(want)
	if got := string(NewRedactor(nil).Redact([]byte(in))); got != want {
		t.Errorf("Redact(%.200q)\n got %.200q\nwant %.200q", in, got, want)
	}
	if got := string(refRedact(Redactor{}, []byte(in))); got != want {
		t.Errorf("reference redact(%.200q)\n got %.200q\nwant %.200q", in, got, want)
	}
}

func TestRedactorSecrets(t *testing.T) {
	env := []string{"GITHUB_TOKEN=ghp_abcdef123456", "LOG_LEVEL=production", "OPAQUE=a1b2c3d4e5f6g7h8i9", "N=1"}
	headers := map[string]string{"Authorization": "Bearer tok-live-99887766"}
	r := NewRedactor(Secrets(env, headers))
	in := `{"a":"ghp_abcdef123456","b":"production","c":"a1b2c3d4e5f6g7h8i9","d":"Bearer tok-live-99887766","e":"tok-live-99887766","n":1}`
	out := string(r.Redact([]byte(in)))
	for _, secret := range []string{"ghp_abcdef123456", "a1b2c3d4e5f6g7h8i9", "tok-live-99887766"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q survived: %s", secret, out)
		}
	}
	if !strings.Contains(out, "production") || !strings.Contains(out, `"n":1`) {
		t.Errorf("plain settings redacted: %s", out)
	}
	if !strings.Contains(out, "[REDACTED sha256:") {
		t.Errorf("no marker: %s", out)
	}
}

// TestRedactJSONEscapedSecret: a resolved secret holding characters JSON
// escapes (<, &, ") is found in its escaped form too.
func TestRedactJSONEscapedSecret(t *testing.T) {
	r := NewRedactor([]string{`p<w&"rd-123`})
	out := string(r.Redact([]byte(`{"text":"p\u003cw\u0026\"rd-123"}`)))
	if strings.Contains(out, `rd-123`) {
		t.Errorf("escaped secret survived: %s", out)
	}
}

// TestRedactASCIIEscapedSecret: a resolved secret with non-ASCII
// characters is found as a server that escapes them all writes it
// (Python's json.dumps: "p\u00e4ss\ud83d\udd11"), since the journal keeps
// the server's own bytes.
func TestRedactASCIIEscapedSecret(t *testing.T) {
	r := NewRedactor([]string{"pässwörd-🔑-42"})
	for _, in := range []string{
		`{"text":"pässwörd-🔑-42"}`,
		`{"text":"p\u00e4ssw\u00f6rd-\ud83d\udd11-42"}`,
	} {
		if out := string(r.Redact([]byte(in))); strings.Contains(out, "42") {
			t.Errorf("%s: the secret survived: %s", in, out)
		}
	}
}

func TestRedactPatterns(t *testing.T) {
	const m = "[REDACTED sha256:"
	for _, tc := range []struct {
		name, in string
		gone     []string // must not survive
		kept     []string // must survive
	}{
		{"json password", `{"user":"ann","password":"hunter2!"}`, []string{"hunter2!"}, []string{`"user":"ann"`, `"password":"` + m}},
		{"json keys any case", `{"API_KEY": "abc", "apiKey":"def", "x-api-key" : "ghi", "Authorization":"Basic Zm9vOmJhcg=="}`, []string{`"abc"`, `"def"`, `"ghi"`, "Zm9vOmJhcg=="}, nil},
		{"client secret, access token, cookie", `{"client_secret":"s1-xyz","access_token":"at-xyz","Cookie":"sid=1"}`, []string{"s1-xyz", "at-xyz", "sid=1"}, nil},
		{"escaped JSON inside text", `{"content":[{"type":"text","text":"{\"token\":\"t0k3n-value\",\"n\":1}"}]}`, []string{"t0k3n-value"}, []string{`\"n\":1`}},
		{"counts and metadata kept", `{"max_tokens":100,"token_count":"12","token_type":"bearer","tokens":"5","password_url":"https://x"}`, nil, []string{`"token_count":"12"`, `"token_type":"bearer"`, `"tokens":"5"`, `"password_url":"https://x"`}},
		{"non-string value kept", `{"token":null,"secret":true}`, nil, []string{`"token":null`, `"secret":true`}},
		{"escaped quote in value", `{"password":"a\"b\"c","z":"keep"}`, []string{`a\"b\"c`}, []string{`"z":"keep"`}},
		{"bearer", `curl -H "Authorization: Bearer abc.DEF-123_xyz" https://x`, []string{"abc.DEF-123_xyz"}, []string{"Bearer " + m}},
		{"bearer prose kept", `Bearer authentication uses a token.`, nil, []string{"Bearer authentication"}},
		{"github tokens", `ghp_0123456789abcdefghijABCDEFGHIJ012345 and github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz`, []string{"ghp_0123456789", "github_pat_11ABC"}, []string{" and "}},
		{"openai and anthropic keys", `key sk-proj-abcdefghijklmnopqrstuvwxyz0123 or sk-ant-api03-abcdefghijklmnopqrstuv`, []string{"sk-proj-abc", "sk-ant-api03"}, nil},
		{"task- is not sk-", `task-abcdefghijklmnopqrstuvwxyz0123`, nil, []string{"task-abcdefghijklmnopqrstuvwxyz0123"}},
		{"slack", `xoxb-123456789012-abcdefghij`, []string{"xoxb-1234"}, nil},
		{"aws key id", `AKIAIOSFODNN7EXAMPLE and AKIAshort`, []string{"AKIAIOSFODNN7EXAMPLE"}, []string{"AKIAshort"}},
		{"jwt", `eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U`, []string{"eyJzdWIiOiIx", "dozjgNryP4J3"}, nil},
		{"eyJ prose kept", `eyJust text. eyJ.x.y`, nil, []string{"eyJust text. eyJ.x.y"}},
		// In JSON text a line break, tab or control character before a
		// credential is an escape ending in a letter or hex digit.
		{"token after an escaped line break", `{"text":"token:\nghp_0123456789abcdefghijABCDEFGHIJ012345"}`, []string{"ghp_0123456789"}, []string{`token:\n` + m}},
		{"keys after escaped tabs and CRs", `"a\tsk-proj-abcdefghijklmnopqrstuvwxyz0123\r\nAKIAIOSFODNN7EXAMPLE\u001bxoxb-123456789012-abcdefghij"`, []string{"sk-proj-abc", "AKIAIOSFODNN7EXAMPLE", "xoxb-1234"}, []string{`a\t` + m}},
		{"jwt and bearer on their own lines", `"x\neyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N\nBearer abc.DEF-123_xyz"`, []string{"eyJzdWIiOiIx", "abc.DEF-123_xyz"}, nil},
		{"an escaped backslash then a letter is a word", `"C:\\nghp_0123456789abcdefghijABCDEFGHIJ012345 \u0061sk-proj-abcdefghijklmnopqrstuvwxyz0123"`, nil, []string{`\\nghp_0123456789`, `\u0061sk-proj-abc`}},
		// JSON in a string in a string: kubectl's last-applied-configuration
		// annotation in a tool's JSON text, journaled as JSON.
		{"two strings deep", `{"text":"{\"last-applied\":\"{\\\"data\\\":{\\\"password\\\":\\\"aHVudGVyMg==\\\"}}\"}"}`, []string{"aHVudGVyMg=="}, []string{`\\\"data\\\"`, `\\\"password\\\":\\\"` + m}},
		{"three strings deep", `"a\\\\\\\"secret\\\\\\\": \\\\\\\"s3cr3t-v\\\\\\\", x"`, []string{"s3cr3t-v"}, []string{", x"}},
		{"escaped quote inside a nested value", `{"text":"{\"password\":\"ab\\\"cd\",\"n\":1}"}`, []string{"cd"}, []string{`\"n\":1`}},
		{"URL credentials", `{"dsn":"postgres://admin:S3cret:Pass@db:5432/app","remote":"https://oauth2:glpat-AbC123@gitlab.com/x.git"}`, []string{"S3cret:Pass", "glpat-AbC123"}, []string{`postgres://admin:` + m, `@db:5432/app`, `https://oauth2:` + m}},
		{"URLs without a password kept", `ssh://git@github.com:22/x http://localhost:8080/path https://example.com/a:b@c mailto:a@b`, nil, []string{"ssh://git@github.com:22/x", "http://localhost:8080/path", "https://example.com/a:b@c", "mailto:a@b"}},
		{".env file in JSON text", `{"text":"# db\nDB_PASSWORD=hunter2!x\nexport GITHUB_TOKEN='abc def'\nLOG_LEVEL=debug\nDB_HOST=localhost"}`, []string{"hunter2!x", "abc def"}, []string{`DB_PASSWORD=` + m, `LOG_LEVEL=debug`, `DB_HOST=localhost`}},
		{"query string and header", `GET https://api.example.com/v1?api_key=k3y-123&limit=5 Authorization: Basic Zm9vOmJhcg==`, []string{"k3y-123", "Zm9vOmJhcg=="}, []string{"&limit=5", "Authorization: Basic " + m}},
		{"YAML", "password: s3cret-yaml\nuser: bob\nclient_secret:  \"q uoted\"\nDB_PASSWORD=$ecret1", []string{"s3cret-yaml", "q uoted", "$ecret1"}, []string{"user: bob"}},
		{"assignments that hold no secret kept", `Note: max_tokens=100, token_type=bearer; tokens: 5; time 12:30; a==b; x=1 TOKEN=${GITHUB_TOKEN} https://h/?api_key=$KEY`, nil, []string{"max_tokens=100", "token_type=bearer", "tokens: 5", "12:30", "a==b", "x=1", "TOKEN=${GITHUB_TOKEN}", "?api_key=$KEY"}},
		{"PEM private key", `{"text":"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----\n"}`, []string{"b3BlbnNzaC1rZXkt", "AAAAAAABAAAAMwAAAAtzc2gtZW"}, []string{"-----BEGIN OPENSSH PRIVATE KEY-----" + m, "-----END OPENSSH PRIVATE KEY-----"}},
		{"PEM certificate kept", "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUY2VydA\n-----END CERTIFICATE-----", nil, []string{"MIIBszCCAVmgAwIBAgIUY2VydA"}},
		{"AWS credentials file", "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nregion = eu-west-1", []string{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI"}, []string{"aws_secret_access_key = " + m, "region = eu-west-1"}},
		{"code assignments kept", "token = fetch(ctx)\npassword := os.Getenv(\"PW\")\nsecret = cfg.Secret,\n  progressToken: ProgressToken;\npassword:\npassword= ", nil, []string{"token = fetch(ctx)", `password := os.Getenv("PW")`, "secret = cfg.Secret,", "progressToken: ProgressToken;", "password:\npassword= "}},
		{"cookie headers", `{"text":"> Cookie: theme=dark; sid=c00kie-v4lue\n< Set-Cookie: sid=n3w-c00kie; Path=/; HttpOnly\n< X-Cookie-Count: 2\n"}`, []string{"c00kie-v4lue", "n3w-c00kie", "theme=dark"}, []string{`> Cookie: ` + m, `\n< Set-Cookie: ` + m, `\n< X-Cookie-Count: 2`}},
		{"header in a curl command", `{"text":"curl -H \"X-Api-Key: k3y-v4lue\" -H 'Private-Token: t0k3n-v4lue' https://x"}`, []string{"k3y-v4lue", "t0k3n-v4lue"}, []string{`curl -H \"X-Api-Key: ` + m, `https://x`}},
		{"plain text untouched", `The quick brown fox; secret sauce; passwords are hard.`, nil, []string{"The quick brown fox; secret sauce; passwords are hard."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := string(NewRedactor(nil).Redact([]byte(tc.in)))
			for _, g := range tc.gone {
				if strings.Contains(out, g) {
					t.Errorf("%q survived: %s", g, out)
				}
			}
			for _, k := range tc.kept {
				if !strings.Contains(out, k) {
					t.Errorf("%q not kept: %s", k, out)
				}
			}
		})
	}
}

func TestRedactMarkerStable(t *testing.T) {
	a := string(redactMarker([]byte("s3cret-value")))
	if a != string(redactMarker([]byte("s3cret-value"))) || len(a) != len("[REDACTED sha256:12345678]") {
		t.Fatalf("marker %q", a)
	}
}

func TestRedactNoAllocWhenClean(t *testing.T) {
	in := []byte(strings.Repeat(`{"path":"/a/b","lines":[1,2,3],"text":"nothing to see"}`, 50))
	r := NewRedactor([]string{"not-in-there-123"})
	out := r.Redact(in)
	if &out[0] != &in[0] {
		t.Error("clean input was copied")
	}
	if n := testing.AllocsPerRun(20, func() { r.Redact(in) }); n > 0 {
		t.Errorf("%v allocations on clean input", n)
	}
}

// BenchmarkRedact measures the Redactor over 1 MiB of realistic tool
// output (JSON with escaped text, prose, paths, a few secrets), reporting
// MB/s. Target: ≥ 100 MB/s.
func BenchmarkRedact(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"content":[{"type":"text","text":"`)
	prose := `The server returned 42 results for task-1234 in /srv/app/src; see https://example.com/docs?id=17. ` +
		`Some \"quoted\" words, a sample:{\"name\":\"x\",\"size\":3}, emails, base64 aGVsbG8gd29ybGQ= and numbers 3.14159. `
	for buf.Len() < 1<<20 {
		buf.WriteString(prose)
		if buf.Len()%(64<<10) < len(prose) {
			buf.WriteString(`{\"api_key\":\"k-123456\"} Authorization: Bearer abc.123-xyz ghp_0123456789abcdefghij0123 `)
		}
	}
	buf.WriteString(`"}],"isError":false}`)
	in := buf.Bytes()
	r := NewRedactor([]string{"resolved-secret-value-1", "Bearer zzz-999"})
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r.Redact(in)
	}
}
