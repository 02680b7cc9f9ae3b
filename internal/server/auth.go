package server

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/capstan-dev/capstan/internal/config"
)

// bearerAuth guards the HTTP APIs that are not SigV4-signed (the OpenAI front
// door and the manifests API) when credentials are configured. OpenAI clients
// send their API key as `Authorization: Bearer <key>` and `capstan apply
// --token` does the same, so the key is a configured SecretAccessKey. deny
// writes the refusal in the API's own error shape.
func bearerAuth(next http.Handler, creds []config.Credential, deny http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if ok {
			for _, c := range creds {
				if subtle.ConstantTimeCompare([]byte(key), []byte(c.SecretAccessKey)) == 1 {
					next.ServeHTTP(w, r)
					return
				}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("WWW-Authenticate", `Bearer realm="capstan"`)
		w.WriteHeader(http.StatusUnauthorized)
		deny(w, r)
	})
}

// denyOpenAI is OpenAI's error shape for a bad API key.
func denyOpenAI(w http.ResponseWriter, _ *http.Request) {
	_, _ = w.Write([]byte(`{"error":{"message":"Incorrect or missing API key: send one of the configured secret access keys as 'Authorization: Bearer <key>'.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}` + "\n"))
}

// denyManifests is a Kubernetes Status, as the manifests API answers errors.
func denyManifests(w http.ResponseWriter, _ *http.Request) {
	_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized: send one of the configured secret access keys as 'Authorization: Bearer <key>' (capstan --token or $CAPSTAN_TOKEN).","reason":"Unauthorized","code":401}` + "\n"))
}
