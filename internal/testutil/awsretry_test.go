package testutil

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
)

// TestAWSRetryer: a request whose connection is reset under the response is
// sent again; an error the server answered is not.
func TestAWSRetryer(t *testing.T) {
	cases := []struct {
		name      string
		first     func(w http.ResponseWriter) // the first request's answer
		wantCalls int64
		wantErr   bool
	}{
		{"reset mid-body", func(w http.ResponseWriter) {
			c, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\nContent-Length: 64\r\n\r\n{\"TrainingPl")
			_ = buf.Flush()
			_ = c.(*net.TCPConn).SetLinger(0) // close with a reset
			_ = c.Close()
		}, 2, false},
		{"throttled", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"ThrottlingException","message":"slow down"}`))
		}, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					tc.first(w)
					return
				}
				w.Header().Set("Content-Type", "application/x-amz-json-1.1")
				_, _ = w.Write([]byte(`{"TrainingPlanSummaries":[]}`))
			}))
			defer srv.Close()
			c := sm.NewFromConfig(aws.Config{Region: "us-east-1", Retryer: AWSRetryer,
				Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")},
				func(o *sm.Options) { o.BaseEndpoint = aws.String(srv.URL) })
			_, err := c.ListTrainingPlans(context.Background(), &sm.ListTrainingPlansInput{})
			if (err != nil) != tc.wantErr || calls.Load() != tc.wantCalls {
				t.Fatalf("err %v after %d calls; want error %v after %d", err, calls.Load(), tc.wantErr, tc.wantCalls)
			}
		})
	}
}
