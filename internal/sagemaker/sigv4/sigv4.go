package sigv4

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

// MaxSkew is the largest accepted difference between X-Amz-Date and now.
const MaxSkew = 15 * time.Minute

// Verifier checks SigV4 signatures against a fixed set of credentials.
type Verifier struct {
	// Secrets maps access key id → secret access key.
	Secrets map[string]string
	// Clock is the time skew is measured against.
	Clock clock.Clock
	// MaxBodyBytes bounds the body read for the payload hash.
	MaxBodyBytes int64
}

// authError is a rejection in AWS's terms.
type authError struct {
	Code    string
	Message string
}

func (e *authError) Error() string { return e.Code + ": " + e.Message }

// Middleware verifies each request before passing it to next; the body is
// buffered and replayed to next.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := v.Verify(r); err != nil {
			writeError(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeError(w http.ResponseWriter, err error) {
	ae, ok := err.(*authError)
	if !ok {
		ae = &authError{"IncompleteSignatureException", err.Error()}
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", ae.Code)
	w.WriteHeader(http.StatusForbidden)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": ae.Code, "message": ae.Message, "Message": ae.Message})
}

// Verify checks r's signature. It reads and restores r.Body.
func (v *Verifier) Verify(r *http.Request) error {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return &authError{"MissingAuthenticationTokenException", "Missing Authentication Token"}
	}
	const algo = "AWS4-HMAC-SHA256"
	rest, ok := strings.CutPrefix(auth, algo+" ")
	if !ok {
		return &authError{"IncompleteSignatureException", "Authorization header must use " + algo}
	}
	fields := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok {
			fields[k] = val
		}
	}
	cred, signed, sig := fields["Credential"], fields["SignedHeaders"], fields["Signature"]
	if cred == "" || signed == "" || sig == "" {
		return &authError{"IncompleteSignatureException", "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters."}
	}
	scope := strings.Split(cred, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return &authError{"IncompleteSignatureException", "Credential scope must be <key>/<date>/<region>/<service>/aws4_request."}
	}
	akid, date, region, service := scope[0], scope[1], scope[2], scope[3]
	secret, ok := v.Secrets[akid]
	if !ok {
		return &authError{"UnrecognizedClientException", "The security token included in the request is invalid."}
	}
	amzDate := r.Header.Get("X-Amz-Date")
	t, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil {
		return &authError{"IncompleteSignatureException", "X-Amz-Date is missing or malformed."}
	}
	if !strings.HasPrefix(amzDate, date) {
		return &authError{"InvalidSignatureException", "Credential should be scoped to a valid date matching X-Amz-Date."}
	}
	var c clock.Clock = clock.Real{}
	if v.Clock != nil {
		c = v.Clock
	}
	now := c.Now
	if d := now().Sub(t); d > MaxSkew || d < -MaxSkew {
		return &authError{"InvalidSignatureException", fmt.Sprintf("Signature expired: %s is now earlier than %s (%s - 15 min.)",
			amzDate, now().UTC().Add(-MaxSkew).Format("20060102T150405Z"), now().UTC().Format("20060102T150405Z"))}
	}
	limit := v.MaxBodyBytes
	if limit <= 0 {
		limit = 8 << 20
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return &authError{"IncompleteSignatureException", "could not read the request body"}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	payloadHash := r.Header.Get("X-Amz-Content-Sha256")
	if payloadHash == "" {
		h := sha256.Sum256(body)
		payloadHash = hex.EncodeToString(h[:])
	}
	creq := canonicalRequest(r, signed, payloadHash)
	crh := sha256.Sum256([]byte(creq))
	sts := strings.Join([]string{algo, amzDate, strings.Join(scope[1:], "/"), hex.EncodeToString(crh[:])}, "\n")
	key := hmacSHA(hmacSHA(hmacSHA(hmacSHA([]byte("AWS4"+secret), date), region), service), "aws4_request")
	want := hex.EncodeToString(hmacSHA(key, sts))
	if subtle.ConstantTimeCompare([]byte(want), []byte(sig)) != 1 {
		return &authError{"InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."}
	}
	return nil
}

func hmacSHA(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func canonicalRequest(r *http.Request, signed, payloadHash string) string {
	var b strings.Builder
	b.WriteString(r.Method + "\n")
	b.WriteString(canonicalURI(r.URL.EscapedPath()) + "\n")
	b.WriteString(canonicalQuery(r.URL.Query()) + "\n")
	for _, h := range strings.Split(signed, ";") {
		var vals []string
		switch h {
		case "host":
			vals = []string{r.Host}
		case "content-length":
			vals = []string{fmt.Sprint(r.ContentLength)}
		default:
			vals = r.Header.Values(h)
		}
		for i, v := range vals {
			vals[i] = strings.Join(strings.Fields(v), " ")
		}
		b.WriteString(h + ":" + strings.Join(vals, ",") + "\n")
	}
	b.WriteString("\n" + signed + "\n" + payloadHash)
	return b.String()
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
