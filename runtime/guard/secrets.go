package guard

import "strings"

// Which of a server's resolved values are secrets: the values a Redactor
// is built with (see NewRedactor).

// Secrets returns a server's resolved values that must never reach the
// journal: every header value (and, for "Bearer X"-style values, X alone),
// and the env values (KEY=VALUE) whose key names a secret or whose value
// looks like a token. Plain settings (LOG_LEVEL=debug, REGION=eu-west-1)
// are not secrets and would otherwise blank unrelated text in results.
func Secrets(env []string, headers map[string]string) []string {
	var out []string
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && (secretKey(k) || tokenLike(v)) {
			out = append(out, v)
		}
	}
	for _, v := range headers {
		out = append(out, v)
		if _, cred, ok := strings.Cut(v, " "); ok {
			out = append(out, cred)
		}
	}
	return out
}

var secretKeyParts = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "KEY", "AUTH", "CREDENTIAL", "COOKIE", "SESSION", "PRIVATE", "SIGNATURE"}

// secretKey reports whether an env key names a secret.
func secretKey(k string) bool {
	k = strings.ToUpper(k)
	for _, p := range secretKeyParts {
		if strings.Contains(k, p) {
			return true
		}
	}
	return false
}

// tokenLike reports whether v looks like a credential: long, one word, and
// mixing letters and digits.
func tokenLike(v string) bool {
	if len(v) < 16 || strings.ContainsAny(v, " /\\") {
		return false
	}
	var letters, digits bool
	for _, r := range v {
		switch {
		case r >= '0' && r <= '9':
			digits = true
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			letters = true
		}
	}
	return letters && digits
}
