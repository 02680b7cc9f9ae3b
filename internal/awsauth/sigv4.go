package awsauth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

// MaxSkew is the largest accepted difference between X-Amz-Date and now,
// either way, as AWS allows.
const MaxSkew = 15 * time.Minute

const (
	algorithm  = "AWS4-HMAC-SHA256"
	amzDateFmt = "20060102T150405Z"
)

// Verifier checks SigV4 signatures against a fixed set of credentials.
type Verifier struct {
	// Secrets maps access key id → secret access key.
	Secrets map[string]string
	// Region is the only region a credential scope may name (the server's
	// configured region; clients sign with theirs even with --endpoint-url).
	Region string
	// Clock is the time skew is measured against; nil is the real clock.
	Clock clock.Clock
	// Refuse answers a request the verifier refuses: the HTTP status, the
	// AWS error code and its message. A server that mounts APIs of several
	// protocols passes its own, to answer in the addressed API's shape; nil
	// answers in AWS JSON 1.1 (writeError).
	Refuse func(w http.ResponseWriter, r *http.Request, status int, code, message string)
}

// Scope is what one API expects of the requests addressed to it.
type Scope struct {
	// Service is the signing name the credential scope must carry: the AWS
	// SDKs sign SageMaker and SageMaker Runtime as "sagemaker", Application
	// Auto Scaling as "application-autoscaling".
	Service string
	// MaxBodyBytes bounds the body; a longer one is refused with 413 before
	// (Content-Length) or while (chunked) it is read.
	MaxBodyBytes int64
	// TooLargeCode is the API's own error code for an oversized body, so the
	// refusal reads the same with and without credentials configured.
	TooLargeCode string
}

// authError is a refusal in AWS's terms.
type authError struct {
	Status  int
	Code    string
	Message string
}

func (e *authError) Error() string { return e.Code + ": " + e.Message }

func denied(code, format string, args ...any) *authError {
	return &authError{http.StatusForbidden, code, fmt.Sprintf(format, args...)}
}

const (
	codeMissing    = "MissingAuthenticationTokenException"
	codeIncomplete = "IncompleteSignatureException"
	codeInvalid    = "InvalidSignatureException"
	codeUnknownKey = "UnrecognizedClientException"
)

// Middleware verifies each request before passing it to next. next gets the
// verified bytes as r.Body, and without a copy through ReadBody.
func (v *Verifier) Middleware(s Scope, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Work on a shallow copy: net/http looks at its own r.Body after the
		// handler, and closes the connection instead of draining a large
		// body left unread by a refusal. MaxBytesReader does the same for a
		// chunked body that goes past the limit.
		r = r.WithContext(r.Context())
		r.Body = http.MaxBytesReader(w, r.Body, s.MaxBodyBytes)
		body, err := v.verify(r, s)
		if err != nil {
			if v.Refuse != nil {
				v.Refuse(w, r, err.Status, err.Code, err.Message)
				return
			}
			writeError(w, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, body))
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

type bodyKey struct{}

// ReadBody returns r's body, at most max bytes (else an *http.MaxBytesError,
// as http.MaxBytesReader reports it). Behind Middleware that is the slice it
// verified, handed over without a second copy; otherwise it reads r.Body.
func ReadBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if body, ok := r.Context().Value(bodyKey{}).([]byte); ok {
		if int64(len(body)) > max {
			return nil, &http.MaxBytesError{Limit: max}
		}
		return body, nil
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, max))
}

// writeError is the one place refusals become AWS JSON errors, unless the
// Verifier has its own Refuse: the body's __type for botocore, the
// X-Amzn-ErrorType header for the Go SDK.
func writeError(w http.ResponseWriter, ae *authError) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", ae.Code)
	w.WriteHeader(ae.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": ae.Code, "message": ae.Message, "Message": ae.Message})
}

// auth is what the headers say about a request, checked before its body is
// read.
type auth struct {
	secret, amzDate, scope, region, service, signedHeaders, signature string
	claimedHash                                                       string // X-Amz-Content-Sha256, "" if absent
}

// verify checks r's signature for an API with scope s and returns the body it
// verified (at most s.MaxBodyBytes bytes, read once and hashed as it is
// read). r.Body is consumed.
func (v *Verifier) verify(r *http.Request, s Scope) ([]byte, *authError) {
	a, aerr := v.checkHeaders(r, s)
	if aerr != nil {
		return nil, aerr
	}
	tooLarge := &authError{http.StatusRequestEntityTooLarge, s.TooLargeCode,
		fmt.Sprintf("Request body is larger than the limit of %d bytes.", s.MaxBodyBytes)}
	if r.ContentLength > s.MaxBodyBytes {
		return nil, tooLarge
	}
	body, sum, err := readHashed(r, s.MaxBodyBytes)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge
	case err != nil:
		return nil, &authError{http.StatusBadRequest, codeIncomplete, fmt.Sprintf("Could not read the request body: %v", err)}
	case int64(len(body)) > s.MaxBodyBytes:
		return nil, tooLarge
	}
	payloadHash := hex.EncodeToString(sum)
	if a.claimedHash != "" && a.claimedHash != payloadHash {
		// S3's wording; SageMaker clients never send the header, so a
		// mismatch is a forgery and gets the signature failure code.
		return nil, denied(codeInvalid, "The provided 'x-amz-content-sha256' header does not match what was computed.")
	}
	creq, aerr := canonicalRequest(r, a.signedHeaders, payloadHash)
	if aerr != nil {
		return nil, aerr
	}
	crh := sha256.Sum256([]byte(creq))
	sts := algorithm + "\n" + a.amzDate + "\n" + a.scope + "\n" + hex.EncodeToString(crh[:])
	key := hmacSHA(hmacSHA(hmacSHA(hmacSHA([]byte("AWS4"+a.secret), a.amzDate[:8]), a.region), a.service), "aws4_request")
	want := hex.EncodeToString(hmacSHA(key, sts))
	if subtle.ConstantTimeCompare([]byte(want), []byte(a.signature)) != 1 {
		return nil, denied(codeInvalid, "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
	}
	return body, nil
}

// checkHeaders does every check that needs no body: the Authorization
// header's form, the key, the credential scope, the signed-header rules, the
// clock skew and the form of X-Amz-Content-Sha256.
func (v *Verifier) checkHeaders(r *http.Request, s Scope) (*auth, *authError) {
	authz := r.Header.Values("Authorization")
	if len(authz) == 0 {
		return nil, denied(codeMissing, "Missing Authentication Token")
	}
	if len(authz) > 1 {
		return nil, denied(codeIncomplete, "Only one Authorization header is allowed.")
	}
	rest, ok := strings.CutPrefix(authz[0], algorithm+" ")
	if !ok {
		return nil, denied(codeIncomplete, "Authorization header must start with '%s '.", algorithm)
	}
	fields := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		part = strings.TrimSpace(part)
		k, val, ok := strings.Cut(part, "=")
		if !ok {
			return nil, denied(codeIncomplete, "'%s' not a valid key=value pair (missing equal-sign) in Authorization header.", part)
		}
		if _, dup := fields[k]; dup {
			return nil, denied(codeIncomplete, "Authorization header has '%s' more than once.", k)
		}
		fields[k] = val
	}
	var missing []string
	for _, k := range []string{"Credential", "Signature", "SignedHeaders"} {
		if fields[k] == "" {
			missing = append(missing, fmt.Sprintf("Authorization header requires '%s' parameter.", k))
		}
	}
	if len(missing) > 0 || len(fields) != 3 {
		if len(missing) == 0 {
			missing = []string{"Authorization header allows only 'Credential', 'SignedHeaders' and 'Signature'."}
		}
		return nil, denied(codeIncomplete, "%s", strings.Join(missing, " "))
	}
	a := &auth{signedHeaders: fields["SignedHeaders"], signature: fields["Signature"]}
	if !isLowerHex(a.signature, 64) {
		return nil, denied(codeIncomplete, "Signature must be 64 lower-case hex digits.")
	}
	cred := strings.Split(fields["Credential"], "/")
	if len(cred) != 5 || cred[0] == "" || !isDigits(cred[1], 8) || cred[2] == "" || cred[3] == "" || cred[4] != "aws4_request" {
		return nil, denied(codeIncomplete, "Credential must have the form <access key id>/<YYYYMMDD>/<region>/<service>/aws4_request.")
	}
	akid, date := cred[0], cred[1]
	a.region, a.service, a.scope = cred[2], cred[3], strings.Join(cred[1:], "/")
	secret, ok := v.Secrets[akid]
	if !ok {
		return nil, denied(codeUnknownKey, "The security token included in the request is invalid.")
	}
	a.secret = secret
	if r.Header.Get("X-Amz-Security-Token") != "" {
		// capstan issues no session credentials, so a token (typically a
		// leftover AWS_SESSION_TOKEN) cannot be valid for a capstan key.
		return nil, denied(codeUnknownKey, "The security token included in the request is invalid. capstan's credentials are static keys: sign without a session token (unset AWS_SESSION_TOKEN).")
	}
	if aerr := checkSignedHeaders(r, a.signedHeaders); aerr != nil {
		return nil, aerr
	}
	dates := r.Header.Values("X-Amz-Date")
	if len(dates) != 1 {
		return nil, denied(codeIncomplete, "Authorization header requires existence of exactly one 'X-Amz-Date' header.")
	}
	a.amzDate = dates[0]
	t, err := time.Parse(amzDateFmt, a.amzDate)
	if err != nil || t.Format(amzDateFmt) != a.amzDate {
		return nil, denied(codeIncomplete, "X-Amz-Date must have the form YYYYMMDD'T'HHMMSS'Z', not '%s'.", a.amzDate)
	}
	if a.amzDate[:8] != date {
		return nil, denied(codeInvalid, "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%s', from '%s'.", date, a.amzDate[:8], a.amzDate)
	}
	if a.region != v.Region {
		return nil, denied(codeInvalid, "Credential should be scoped to a valid region, not '%s'. ", a.region)
	}
	if a.service != s.Service {
		return nil, denied(codeInvalid, "Credential should be scoped to correct service: '%s'. ", s.Service)
	}
	var c clock.Clock = clock.Real{}
	if v.Clock != nil {
		c = v.Clock
	}
	now := c.Now().UTC()
	if t.Before(now.Add(-MaxSkew)) {
		return nil, denied(codeInvalid, "Signature expired: %s is now earlier than %s (%s - 15 min.)",
			a.amzDate, now.Add(-MaxSkew).Format(amzDateFmt), now.Format(amzDateFmt))
	}
	if t.After(now.Add(MaxSkew)) {
		return nil, denied(codeInvalid, "Signature not yet current: %s is still later than %s (%s + 15 min.)",
			a.amzDate, now.Add(MaxSkew).Format(amzDateFmt), now.Format(amzDateFmt))
	}
	if claimed := r.Header.Values("X-Amz-Content-Sha256"); len(claimed) > 0 {
		// UNSIGNED-PAYLOAD and STREAMING-* exist for S3 uploads; the AWS
		// CLI, boto3 and the AWS SDKs sign SageMaker and Application Auto
		// Scaling requests with the payload's hash, so anything else is
		// refused rather than left unverified.
		if len(claimed) > 1 || !isLowerHex(claimed[0], 64) {
			return nil, denied(codeInvalid, "X-Amz-Content-Sha256 must be the lower-case hex SHA-256 of the body; UNSIGNED-PAYLOAD and STREAMING-* payloads are not accepted.")
		}
		a.claimedHash = claimed[0]
	}
	return a, nil
}

// checkSignedHeaders enforces what the AWS SDKs and CLI always do: host is
// signed, and so is every X-Amz-* and X-Amzn-SageMaker-* header the request
// carries (they select the operation, the payload hash or the target
// variant), so none can be added to a captured request.
func checkSignedHeaders(r *http.Request, signed string) *authError {
	names := strings.Split(signed, ";")
	set := make(map[string]bool, len(names))
	for i, n := range names {
		if n == "" || n != strings.ToLower(n) || (i > 0 && names[i-1] >= n) {
			return denied(codeIncomplete, "SignedHeaders must be distinct lower-case header names in sorted order, separated by ';'.")
		}
		set[n] = true
	}
	if !set["host"] {
		return denied(codeInvalid, "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.")
	}
	for k := range r.Header {
		lk := strings.ToLower(k)
		if (strings.HasPrefix(lk, "x-amz-") || strings.HasPrefix(lk, "x-amzn-sagemaker-")) && !set[lk] {
			return denied(codeInvalid, "'%s' must be a 'SignedHeader' in the AWS Authorization.", k)
		}
	}
	return nil
}

// readHashed reads the body, at most max bytes, hashing it as it goes. A
// known Content-Length (already checked against max) is read into one
// buffer of that size; a chunked body stops one byte past max.
func readHashed(r *http.Request, max int64) ([]byte, []byte, error) {
	h := sha256.New()
	if r.Body == nil {
		return nil, h.Sum(nil), nil
	}
	src := io.TeeReader(io.LimitReader(r.Body, max+1), h)
	var body []byte
	var err error
	if r.ContentLength >= 0 {
		body = make([]byte, r.ContentLength)
		_, err = io.ReadFull(src, body)
	} else {
		body, err = io.ReadAll(src)
	}
	return body, h.Sum(nil), err
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func isDigits(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func hmacSHA(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func canonicalRequest(r *http.Request, signed, payloadHash string) (string, *authError) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "", denied(codeIncomplete, "The query string is malformed: %v", err)
	}
	var b strings.Builder
	b.WriteString(r.Method + "\n")
	b.WriteString(canonicalURI(r.URL.EscapedPath()) + "\n")
	b.WriteString(canonicalQuery(q) + "\n")
	for _, h := range strings.Split(signed, ";") {
		var vals []string
		switch h {
		case "host":
			vals = []string{r.Host}
		case "content-length":
			vals = []string{fmt.Sprint(r.ContentLength)}
		default:
			vals = append(vals, r.Header.Values(h)...)
		}
		for i, v := range vals {
			vals[i] = strings.Join(strings.Fields(v), " ")
		}
		b.WriteString(h + ":" + strings.Join(vals, ",") + "\n")
	}
	b.WriteString("\n" + signed + "\n" + payloadHash)
	return b.String(), nil
}

// canonicalURI double-encodes the already-escaped path (the non-S3 rule).
func canonicalURI(p string) string {
	if p == "" {
		return "/"
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = uriEncode(s)
	}
	return strings.Join(segs, "/")
}

func uriEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func canonicalQuery(q url.Values) string {
	var parts []string
	for k, vs := range q {
		for _, v := range vs {
			parts = append(parts, uriEncode(k)+"="+uriEncode(v))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "&")
}
