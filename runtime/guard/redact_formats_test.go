package guard

import (
	"strings"
	"testing"
)

// TestRedactPEMBounds: a private key's body is replaced up to its END
// line, or maxPEM bytes when the END line does not start within them; the
// header and footer stay, and a key with no body is left alone.
func TestRedactPEMBounds(t *testing.T) {
	const begin, end = "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----"
	a := func(n int) string { return strings.Repeat("a", n) }
	label := func(n int) string { return strings.Repeat("X", n-len(" PRIVATE KEY")) + " PRIVATE KEY" }
	for _, tc := range []struct{ in, want string }{
		{begin + "\nMIIE\n" + end, begin + "«\nMIIE\n»" + end},
		{"-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQ\n-----END PGP PRIVATE KEY BLOCK-----", "-----BEGIN PGP PRIVATE KEY BLOCK-----«\nlQ\n»-----END PGP PRIVATE KEY BLOCK-----"},
		{"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"},
		{begin + end, begin + end},
		{begin + "\nMIIE", begin + "«\nMIIE»"},
		{begin + a(maxPEM-8) + end, begin + "«" + a(maxPEM-8) + "»" + end},
		{begin + a(maxPEM-7) + end, begin + "«" + a(maxPEM-7) + end[:7] + "»" + end[7:]},
		{begin + a(maxPEM+5), begin + "«" + a(maxPEM) + "»" + a(5)},
		// The label and its dashes within 64 bytes of BEGIN.
		{"-----BEGIN " + label(59) + "-----\nMIIE", "-----BEGIN " + label(59) + "-----«\nMIIE»"},
		{"-----BEGIN " + label(60) + "-----\nMIIE", "-----BEGIN " + label(60) + "-----\nMIIE"},
	} {
		checkRedacted(t, tc.in, tc.want)
	}
}

// TestRedactURLBounds: the password of scheme://user:password@host, with
// the user and the password read up to maxURLPart+1 bytes each.
func TestRedactURLBounds(t *testing.T) {
	u := func(n int) string { return strings.Repeat("u", n) }
	for _, tc := range []struct{ in, want string }{
		{"postgres://admin:pw@db/app", "postgres://admin:«pw»@db/app"},
		{"https://-my.user:p-w@h https://u:p w@h", "https://-my.user:«p-w»@h https://u:p w@h"},
		{"https://" + u(maxURLPart+1) + ":pw@h", "https://" + u(maxURLPart+1) + ":«pw»@h"},
		{"https://" + u(maxURLPart+2) + ":pw@h", "https://" + u(maxURLPart+2) + ":pw@h"},
		{"https://user:" + u(maxURLPart+1) + "@h", "https://user:«" + u(maxURLPart+1) + "»@h"},
		{"https://user:" + u(maxURLPart+2) + "@h", "https://user:" + u(maxURLPart+2) + "@h"},
		{"https://:pw@h https://user:@h https://user:pw", "https://:pw@h https://user:@h https://user:pw"},
	} {
		checkRedacted(t, tc.in, tc.want)
	}
}

// TestRedactTokenBounds: each credential format at its shortest, and one
// byte shorter.
func TestRedactTokenBounds(t *testing.T) {
	al := func(n int) string { return strings.Repeat("a1", n)[:n] }
	up := func(n int) string { return strings.Repeat("A1", n)[:n] }
	for _, tc := range []struct {
		prefix string
		min    int
		run    func(int) string
	}{
		{"ghp_", 20, al}, {"gho_", 20, al}, {"ghu_", 20, al}, {"ghs_", 20, al}, {"ghr_", 20, al},
		{"github_pat_", 20, al}, {"sk-", 20, al},
		{"xoxa-", 10, al}, {"xoxb-", 10, al}, {"xoxp-", 10, al}, {"xoxr-", 10, al}, {"xoxs-", 10, al},
		{"AKIA", 16, up}, {"ASIA", 16, up},
	} {
		for _, n := range []int{tc.min, tc.min - 1} {
			tok := tc.prefix + tc.run(n)
			want := "x " + tok + " y"
			if n == tc.min {
				want = "x «" + tok + "» y"
			}
			checkRedacted(t, "x "+tok+" y", want)
		}
	}
	// An AWS key ID is exactly 20 bytes of A-Z and 0-9.
	checkRedacted(t, "AKIA"+up(16)+"a", "AKIA"+up(16)+"a")
	checkRedacted(t, "AKIA"+up(17), "AKIA"+up(17))
	checkRedacted(t, "AKIAZ09AZ09AZ09AZ09A", "«AKIAZ09AZ09AZ09AZ09A»")
	// A bearer credential of 8 bytes or more, with a digit or a symbol.
	checkRedacted(t, "Bearer a1a1a1a1 x", "Bearer «a1a1a1a1» x")
	checkRedacted(t, "Bearer a1a1a1a x", "Bearer a1a1a1a x")
	for _, word := range []string{"Authorization", "ZzzzzzzZ", "abcdefgh"} {
		checkRedacted(t, "Bearer "+word, "Bearer "+word)
	}
	for _, cred := range []string{"abcdefg1", "abcdefg_", "abcdefg~", "abcdefg/", "Abcdefg="} {
		checkRedacted(t, "Bearer "+cred, "Bearer «"+cred+"»")
	}
	// Prefixes cut by the end of the text.
	for _, cut := range []string{"x gh", "x ghp", "x ghp_", "x xo", "x xox", "x xoxb", "x xoxb-", "x sk", "x AKI", "x ey", "x eyJ", "x Bearer"} {
		checkRedacted(t, cut, cut)
	}
	// A JWT: three base64url parts of 8 bytes or more.
	checkRedacted(t, "eyJhbGci.eyJzdWIi.abcdefgh x", "«eyJhbGci.eyJzdWIi.abcdefgh» x")
	for _, cut := range []string{"eyJhbGc.eyJzdWIi.abcdefgh", "eyJhbGci.eyJzdWI.abcdefgh", "eyJhbGci.eyJzdWIi.abcdefg", "eyJhbGci.eyJzdWIi", "eyJhbGci.eyJzdWIi."} {
		checkRedacted(t, cut+" x", cut+" x")
	}
}
