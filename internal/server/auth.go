package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
)

// bearerToken is the token of an `Authorization: Bearer <token>` header.
// The scheme is case-insensitive (RFC 7235), so "bearer" works too.
func bearerToken(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// bearerAuth guards a surface that is not SigV4-signed: the OpenAI door
// with apiKeys, the manifests API, dev clock and /metrics with adminTokens.
// With no key configured for it (while other auth is) it refuses every
// request, naming the field to set, rather than opening silently. Its
// refusals are in the shape of the request's door.
func bearerAuth(next http.Handler, field string, keys []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(keys) == 0 {
			refuse(w, r, refusal{kind: refuseUnauthorized,
				msg: fmt.Sprintf("This API is closed: authentication is configured but %s is empty; set %s in capstan.yaml.", field, field)})
			return
		}
		tok, ok := bearerToken(r)
		match := 0
		if ok {
			for _, k := range keys {
				match |= subtle.ConstantTimeCompare([]byte(tok), []byte(k))
			}
		}
		if match == 1 {
			next.ServeHTTP(w, r)
			return
		}
		refuse(w, r, refusal{kind: refuseUnauthorized,
			msg: fmt.Sprintf("Incorrect or missing key: send one of the configured %s as 'Authorization: Bearer <key>'.", field)})
	})
}

// sigv4Closed refuses the AWS APIs when other authentication is configured
// but no SigV4 credentials are, each in its own shape.
func sigv4Closed() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse(w, r, refusal{kind: refuseUnauthorized,
			msg: "This API is closed: authentication is configured but credentials is empty; set credentials in capstan.yaml."})
	})
}

// keyDigest is what the rate limiter keys a bearer credential by: a
// digest, so the limiter's map holds no key and looking one up does not
// compare secret bytes.
func keyDigest(k string) [sha256.Size]byte { return sha256.Sum256([]byte(k)) }
