package server

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/capstan-dev/capstan/internal/config"
)

// bearerAuth guards the OpenAI front door when credentials are configured: the
// SageMaker APIs verify SigV4, and OpenAI clients send their API key as
// `Authorization: Bearer <key>`, so the key is a configured SecretAccessKey.
// The error body is OpenAI's shape, as clients of that API expect.
func bearerAuth(next http.Handler, creds []config.Credential) http.Handler {
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
		_, _ = w.Write([]byte(`{"error":{"message":"Incorrect or missing API key: send one of the configured secret access keys as 'Authorization: Bearer <key>'.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}` + "\n"))
	})
}
