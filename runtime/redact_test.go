package runtime

import (
	"strings"
	"testing"
)

func TestRedactorSecrets(t *testing.T) {
	spec := ServerSpec{
		Env:     []string{"GITHUB_TOKEN=ghp_abcdef123456", "LOG_LEVEL=production", "OPAQUE=a1b2c3d4e5f6g7h8i9", "N=1"},
		Headers: map[string]string{"Authorization": "Bearer tok-live-99887766"},
	}
	r := newRedactor(spec.secrets())
	in := `{"a":"ghp_abcdef123456","b":"production","c":"a1b2c3d4e5f6g7h8i9","d":"Bearer tok-live-99887766","e":"tok-live-99887766","n":1}`
	out := string(r.redact([]byte(in)))
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
