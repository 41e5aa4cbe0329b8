package textsafe

import (
	"regexp"
	"strings"
)

// Redacted is what replaces a secret.
const Redacted = "[redacted]"

// secretWords are name parts (split at '_', '-' and '.') that say a value is
// secret. "pwd" is not one: PWD is the working directory.
var secretWords = map[string]bool{
	"token": true, "secret": true, "secrets": true, "password": true, "passwd": true,
	"pass": true, "pw": true, "key": true, "apikey": true, "credential": true, "credentials": true,
	"auth": true, "cookie": true, "pat": true, "privatekey": true, "accesskey": true, "secretkey": true,
}

// IsSecretName reports whether a variable, flag or key name says its value
// is a secret: a part such as TOKEN, SECRET, PASSWORD, PW, KEY, API_KEY,
// CREDENTIAL or AUTH (any case, parts joined by '_', '-' or '.'), or a glued
// form such as HFTOKEN or DBPASSWORD. Leading dashes are ignored, so flags
// (--hf_token) and variables (HF_TOKEN) are judged alike.
func IsSecretName(name string) bool {
	n := strings.ToLower(strings.TrimLeft(name, "-"))
	for _, part := range strings.FieldsFunc(n, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		if secretWords[part] {
			return true
		}
		// Glued words: HFTOKEN, MYSECRET, DBPASSWORD, OPENAIAPIKEY (but
		// not TOKENIZERS_PARALLELISM or MAX_TOKENS).
		if strings.HasSuffix(part, "token") || strings.Contains(part, "secret") || strings.Contains(part, "password") ||
			strings.Contains(part, "passwd") || strings.HasSuffix(part, "apikey") || strings.Contains(part, "credential") {
			return true
		}
	}
	return false
}

// RedactEnv returns value, or Redacted when the name says it is secret;
// otherwise secrets inside the value (a password in a URL) are redacted.
func RedactEnv(name, value string) string {
	if value != "" && IsSecretName(name) {
		return Redacted
	}
	return RedactText(value)
}

// Shapes that are secrets wherever they appear.
var (
	rePrivateKey = regexp.MustCompile(`(?s)-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`)
	reTokens     = regexp.MustCompile(`\b(?:` + strings.Join([]string{
		`hf_[A-Za-z0-9]{20,}`,                                           // Hugging Face
		`gh[pousr]_[A-Za-z0-9]{20,}`,                                    // GitHub
		`github_pat_[A-Za-z0-9_]{20,}`,                                  // GitHub fine-grained
		`glpat-[A-Za-z0-9_\-]{20,}`,                                     // GitLab
		`sk-[A-Za-z0-9_\-]{20,}`,                                        // OpenAI-style
		`(?:AKIA|ASIA)[0-9A-Z]{16}`,                                     // AWS access key id
		`xox[abposr]-[A-Za-z0-9\-]{10,}`,                                // Slack
		`eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}`, // JWT
	}, "|") + `)\b`)
	// scheme://[user]:password@ — the user is kept, the password goes.
	reURLUser = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:)([^\s/]*)@`)
	// user:password@host without a scheme (proxy settings, store
	// addresses, scp-like strings): the user is kept, the password goes. A
	// name right after "/" or ":" belongs to a URL or path (handled above).
	reUserInfo = regexp.MustCompile(`(?:^|[^A-Za-z0-9._%+\-/:@])([A-Za-z][A-Za-z0-9._%+\-]*:)([^\s/@'"]+)@[A-Za-z0-9\[]`)
	// A bare 40-character AWS secret access key; looksAWSSecret decides.
	reAWSSecret = regexp.MustCompile(`(?:^|[^A-Za-z0-9/+=])([A-Za-z0-9/+]{40})(?:$|[^A-Za-z0-9/+=])`)
	// Authorization: <scheme> <credentials> (HTTP headers, curl -H).
	reAuthHeader = regexp.MustCompile(`(?i)\b((?:proxy-)?authorization"?\s*[:=]\s*"?(?:(?:bearer|basic|token|digest|negotiate|aws4-hmac-sha256)\s+)?)("[^"]*"|'[^']*'|[^\s"',;]+)`)
	reBearer     = regexp.MustCompile(`(?i)\b(bearer\s+)([A-Za-z0-9\-._~+/]{8,}=*)`)
	reBasic      = regexp.MustCompile(`\b(Basic\s+)([A-Za-z0-9+/]{8,}={0,2})`)
	// name=value, name: value, "name": "value", --name=value. A name that
	// ends a path (/run/secret.log: …) is not one.
	reAssign = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./])([A-Za-z][A-Za-z0-9_.\-]*)("?[ \t]*[=:][ \t]*)("[^"]*"|'[^']*'|[^\s'"&,;]*)`)
	// A lower-case identifier with an optional :N (c10d's store keys).
	reKeyName     = regexp.MustCompile(`^[a-z][a-z_]*[a-z](?::\d+)?$`)
	reSmallNumber = regexp.MustCompile(`^\d{1,4}$`)
	// --name value (a flag and the next word).
	reFlag = regexp.MustCompile(`(?:^|[\s'"])(--?[A-Za-z][A-Za-z0-9_\-]*)[ \t]+("[^"]*"|'[^']*'|[^\s'"]+)`)
	// NAME value: an environment dump without '=' (AWS_SECRET_ACCESS_KEY abc…).
	reEnvSpace = regexp.MustCompile(`\b([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)[ \t]+([^\s'"]+)`)
)

// RedactText removes secrets from free text: private key blocks, well-known
// token shapes (Hugging Face, GitHub, GitLab, AWS key ids and bare AWS
// secret keys, Slack, JWTs), passwords in URLs and in user:password@host, Authorization/Bearer/Basic credentials, and the value of
// anything whose name says it is secret (NAME=VALUE, name: value,
// --name=value, --name value, NAME value). Names that merely look technical
// (NCCL_SOCKET_IFNAME, --master_port, RANK) and paths and host names are
// left alone, so a log line keeps its meaning.
func RedactText(s string) string {
	if s == "" {
		return s
	}
	// Cheap tests first: most log lines hold no secret and skip the
	// regexps that need them.
	lower := strings.ToLower(s)
	if strings.Contains(s, "PRIVATE KEY-----") {
		s = rePrivateKey.ReplaceAllString(s, "-----BEGIN ${1}PRIVATE KEY-----"+Redacted+"-----END ${1}PRIVATE KEY-----")
	}
	if hasTokenPrefix(s) {
		s = reTokens.ReplaceAllString(s, Redacted)
	}
	if strings.Contains(s, "://") && strings.Contains(s, "@") {
		s = reURLUser.ReplaceAllStringFunc(s, func(m string) string {
			sm := reURLUser.FindStringSubmatch(m)
			if sm[2] == "" {
				return m
			}
			return sm[1] + Redacted + "@"
		})
	}
	if strings.Contains(s, "@") && strings.Contains(s, ":") {
		s = replaceGroup(s, reUserInfo, 2, func([]string) bool { return true })
	}
	if len(s) >= 40 {
		s = replaceGroup(s, reAWSSecret, 1, func(sm []string) bool { return looksAWSSecret(sm[1]) })
	}
	if strings.Contains(lower, "authorization") {
		s = replaceGroup(s, reAuthHeader, 2, func([]string) bool { return true })
	}
	if strings.Contains(lower, "bearer") {
		s = replaceGroup(s, reBearer, 2, func([]string) bool { return true })
	}
	if strings.Contains(s, "Basic") {
		s = replaceGroup(s, reBasic, 2, func(sm []string) bool { return looksEncoded(sm[2]) })
	}
	if !mentionsSecret(lower) {
		return s
	}
	s = replaceGroup(s, reAssign, 3, func(sm []string) bool {
		// "secret.log: permission denied" is a file name and a message.
		if strings.Contains(sm[2], ":") && strings.Contains(sm[1], ".") {
			return false
		}
		if strings.EqualFold(sm[1], "key") && reKeyName.MatchString(sm[3]) {
			// "Added key: store_based_barrier_key:1": a bare "key" naming a
			// lower-case identifier is a store or dict key, not a secret.
			return false
		}
		if strings.HasSuffix(sm[1], "_key") && strings.TrimSpace(sm[2]) == ":" && reSmallNumber.MatchString(sm[3]) {
			// ... and "store_based_barrier_key:1" is its name and number.
			return false
		}
		return sm[3] != "" && IsSecretName(sm[1])
	})
	s = replaceGroup(s, reFlag, 2, func(sm []string) bool { return IsSecretName(sm[1]) && !strings.HasPrefix(sm[2], "-") })
	s = replaceGroup(s, reEnvSpace, 2, func(sm []string) bool { return IsSecretName(sm[1]) && looksSecret(sm[2]) })
	return s
}

// hasTokenPrefix reports whether s may hold one of reTokens' shapes.
func hasTokenPrefix(s string) bool {
	for _, p := range []string{"hf_", "gh", "github_pat_", "glpat-", "sk-", "AKIA", "ASIA", "xox", "eyJ"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// mentionsSecret reports whether lower (lower-cased text) contains a word
// that IsSecretName could accept; without one no name=value can be secret.
func mentionsSecret(lower string) bool {
	for _, w := range []string{"token", "secret", "pass", "pw", "key", "auth", "credential", "cookie", "pat"} {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// replaceGroup replaces submatch g of each match of re with Redacted when
// secret says so. A match that is not a secret is skipped by its first
// byte only, so "args=--token=x" still finds the inner "--token=x".
func replaceGroup(s string, re *regexp.Regexp, g int, secret func(sm []string) bool) string {
	var b strings.Builder
	pos, last := 0, 0
	for pos <= len(s) {
		loc := re.FindStringSubmatchIndex(s[pos:])
		if loc == nil {
			break
		}
		sm := make([]string, len(loc)/2)
		for i := range sm {
			if loc[2*i] >= 0 {
				sm[i] = s[pos+loc[2*i] : pos+loc[2*i+1]]
			}
		}
		gs, ge := pos+loc[2*g], pos+loc[2*g+1]
		if loc[2*g] >= 0 && sm[g] != Redacted && secret(sm) {
			b.WriteString(s[last:gs])
			b.WriteString(Redacted)
			last, pos = ge, ge
			continue
		}
		// Not a secret: move past the name only.
		next := pos + loc[0] + 1
		if loc[2] >= 0 {
			next = max(next, pos+loc[3])
		}
		pos = next
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// looksSecret is the test for a value that follows a secret-sounding name
// with only a space between: long and not an ordinary word ("HF_TOKEN not
// set" stays as it is).
func looksSecret(v string) bool {
	if v == Redacted || len(v) < 8 {
		return false
	}
	return len(v) >= 16 || strings.ContainsAny(v, "0123456789+/=_-")
}

// looksAWSSecret tells a 40-character AWS secret access key (random
// base64: upper and lower case mixed with digits, '/' or '+') from the
// 40-character things a log holds: a git commit (hex), a path (starts
// with '/', lower-case words), a long word.
func looksAWSSecret(v string) bool {
	if v == Redacted || strings.HasPrefix(v, "/") || strings.Contains(v, "//") {
		return false
	}
	upper, lower, other, hex := 0, 0, 0, 0
	for _, c := range v {
		switch {
		case c >= 'A' && c <= 'Z':
			upper++
		case c >= 'a' && c <= 'z':
			lower++
		default:
			other++
		}
		if c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' {
			hex++
		}
	}
	return hex < len(v) && upper >= 4 && lower >= 4 && other >= 1
}

// looksEncoded tells base64 credentials ("Basic dXNlcjpwYXNz") from words
// ("Basic configuration").
func looksEncoded(v string) bool {
	if strings.ContainsAny(v, "0123456789+/=") {
		return true
	}
	upper, lower := 0, 0
	for _, c := range v[1:] {
		switch {
		case c >= 'A' && c <= 'Z':
			upper++
		case c >= 'a' && c <= 'z':
			lower++
		}
	}
	return upper >= 2 && lower > 0
}

// Clean is Sanitize(RedactText(s)): the usual treatment for a log line.
func Clean(s string) string { return Sanitize(RedactText(s)) }
