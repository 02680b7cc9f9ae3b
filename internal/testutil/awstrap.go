package testutil

import (
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// AWSCredentialTrap clears the environment's AWS credentials and profiles
// and points the credential sources that live off this machine — EC2
// instance metadata, and with container true the container credentials
// endpoint — at a loopback listener. It returns the number of connections
// the listener got: anything above zero means something walked the AWS
// default credential chain. It sets the environment with t.Setenv, so the
// test cannot be parallel; a server started in-process, or a child process
// started afterwards, sees the trap.
func AWSCredentialTrap(t *testing.T, container bool) *atomic.Int64 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_EC2_METADATA_DISABLED",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	url := "http://" + ln.Addr().String()
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", url)
	if container {
		t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url+"/credentials")
	}
	return &n
}
