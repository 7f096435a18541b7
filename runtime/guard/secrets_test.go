package guard

import (
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
