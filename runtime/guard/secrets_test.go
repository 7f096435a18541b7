package guard

import (
	"slices"
	"testing"
)

// TestRedactorSecretLength: a resolved value of minSecretLen bytes is a
// secret; a shorter one (a port, "true") is not, since it would blank
// unrelated text.
func TestRedactorSecretLength(t *testing.T) {
	r := NewRedactor([]string{"abcd1", "abcde1"})
	in := `{"text":"x abcd1 y abcde1 z"}`
	if got, want := string(r.Redact([]byte(in))), `{"text":"x abcd1 y `+string(redactMarker([]byte("abcde1")))+` z"}`; got != want {
		t.Errorf("Redact(%q) = %q, want %q", in, got, want)
	}
}

// TestRedactorSecretInSecret: a secret that holds another is replaced
// whole, whatever order the secrets came in.
func TestRedactorSecretInSecret(t *testing.T) {
	secrets := Secrets([]string{"A_TOKEN=s3cret-1", "B_TOKEN=s3cret-1-longer", "C_TOKEN=s3cret-1-longer-still"}, nil)
	r := NewRedactor(secrets)
	for _, s := range secrets {
		in := "x " + s + " y"
		if got, want := string(r.Redact([]byte(in))), "x "+string(redactMarker([]byte(s)))+" y"; got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSecrets: the env values whose key names a secret, or which look
// like a token (16 bytes or more, one word, letters and digits), and
// every header value with, for "Scheme credential", the credential.
func TestSecrets(t *testing.T) {
	env := []string{
		"GITHUB_TOKEN=t", "db_password=p", "MY_PASS=p2", "API_KEY=k", "X_AUTH=a", "SESSION=s", "PRIVATE_PEM=pem",
		"OPAQUE=a1b2c3d4e5f6g7h8", "SHORT=a1b2c3d4e5f6g7h", "DIGITS=1234567890123456", "LETTERS=abcdefghijklmnop",
		"SPACED=a1b2c3d4 e5f6g7h8", "PATHISH=/a1b2c3d4e5f6g7h8", "WIN=a1b2c3d4\\e5f6g7h8", "LOG_LEVEL=debug", "NOEQUALS",
	}
	want := []string{"t", "p", "p2", "k", "a", "s", "pem", "a1b2c3d4e5f6g7h8"}
	if got := Secrets(env, nil); !slices.Equal(got, want) {
		t.Errorf("Secrets(env) = %q, want %q", got, want)
	}
	for h, want := range map[string][]string{"Bearer tok-1": {"Bearer tok-1", "tok-1"}, "k3y": {"k3y"}} {
		if got := Secrets(nil, map[string]string{"H": h}); !slices.Equal(got, want) {
			t.Errorf("Secrets(header %q) = %q, want %q", h, got, want)
		}
	}
}
