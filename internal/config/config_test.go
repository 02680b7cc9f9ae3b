package config

import (
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
)

func TestParseDefaultValidate(t *testing.T) {
	cat := catalog.Default()
	tests := []struct {
		name    string
		yaml    string
		wantErr string // substring; "" = valid
	}{
		{"empty is valid", "", ""},
		{"full", "listen: 127.0.0.1:9000\ndataDir: /tmp/x\nregion: eu-west-1\nengine: {timeScale: 0.01}\nendpoints: {startTimeout: 30s}\nfleet: {ml.g5.xlarge: {z1: 2}}\n", ""},
		{"unknown field rejected", "listne: 127.0.0.1:1\n", "listne"},
		{"unknown nested field rejected", "engine: {speed: 2}\n", "speed"},
		{"bad duration", "endpoints: {startTimeout: soon}\n", "soon"},
		{"non-loopback without credentials", "listen: 0.0.0.0:8080\n", "listen:"},
		{"non-loopback with credentials", "listen: 0.0.0.0:8080\ncredentials: [{accessKeyId: A, secretAccessKey: S}]\n", ""},
		{"non-loopback insecure", "listen: 0.0.0.0:8080\ninsecureListenAny: true\n", ""},
		{"incomplete credential", "credentials: [{accessKeyId: A}]\n", "credentials[0]"},
		{"bad account", "accountId: '12'\n", "accountId"},
		{"unknown fleet type", "fleet: {ml.nope: {z: 1}}\n", "fleet.ml.nope"},
		{"negative fleet count", "fleet: {ml.g5.xlarge: {z: -1}}\n", "fleet.ml.g5.xlarge.z"},
		{"bad time scale", "engine: {timeScale: -1}\n", "engine.timeScale"},
		{"cluster and model sources", "cluster: {instanceGroups: [{name: p5, instanceType: ml.p5.48xlarge, count: 2}]}\nmodelSources: {s3: {endpoint: 'http://127.0.0.1:5000', accessKeyId: a, secretAccessKey: b}}\n", ""},
		{"unknown group type", "cluster: {instanceGroups: [{name: x, instanceType: ml.nope, count: 1}]}\n", "cluster.instanceGroups[0].instanceType"},
		{"repeated group name", "cluster: {instanceGroups: [{name: x, instanceType: ml.p5.48xlarge, count: 1}, {name: x, instanceType: ml.p5.48xlarge, count: 1}]}\n", "cluster.instanceGroups[1].name"},
		{"MIG layout", "cluster: {instanceGroups: [{name: x, instanceType: ml.p5.48xlarge, count: 1, migLayout: all-1g.10gb}]}\n", ""},
		{"MIG layout disabled on A10G", "cluster: {instanceGroups: [{name: x, instanceType: ml.g5.xlarge, count: 1, migLayout: all-disabled}]}\n", ""},
		{"MIG layout on A10G", "cluster: {instanceGroups: [{name: x, instanceType: ml.g5.xlarge, count: 1, migLayout: all-1g.10gb}]}\n", "cluster.instanceGroups[0].migLayout: all-1g.10gb on ml.g5.xlarge: GPU a10g does not support MIG"},
		{"MIG profile of another GPU", "cluster: {instanceGroups: [{name: x, instanceType: ml.p4d.24xlarge, count: 1}, {name: y, instanceType: ml.p5.48xlarge, count: 1, migLayout: all-1g.5gb}]}\n", "cluster.instanceGroups[1].migLayout: all-1g.5gb on ml.p5.48xlarge"},
		{"MIG layout over budget", "cluster: {instanceGroups: [{name: x, instanceType: ml.p5en.48xlarge, count: 1, migLayout: mixed-3-3g.71gb}]}\n", "h200 holds at most 2 3g.71gb"},
		{"negative group count", "cluster: {instanceGroups: [{name: x, instanceType: ml.p5.48xlarge, count: -1}]}\n", "cluster.instanceGroups[0].count"},
		{"bad s3 endpoint", "modelSources: {s3: {endpoint: 'localhost:5000'}}\n", "modelSources.s3.endpoint"},
		{"half an s3 key", "modelSources: {s3: {accessKeyId: a}}\n", "modelSources.s3"},
		{"model cache limits", "modelSources: {maxArchiveBytes: 1048576, maxCacheBytes: 1572864}\n", ""},
		{"negative archive limit", "modelSources: {maxArchiveBytes: -1}\n", "modelSources.maxArchiveBytes: -1 must be a byte count"},
		{"negative cache limit", "modelSources: {maxCacheBytes: -5}\n", "modelSources.maxCacheBytes: -5 must be a byte count"},
		{"non-loopback with api keys only", "listen: 0.0.0.0:8080\napiKeys: [inference-key-0123456789]\n", ""},
		{"non-loopback with admin tokens only", "listen: 0.0.0.0:8080\nadminTokens: [admin-token-0123456789]\n", ""},
		{"keys", "credentials: [{accessKeyId: A, secretAccessKey: secret-access-key-0123}]\napiKeys: [inference-key-0123456789]\nadminTokens: [admin-token-0123456789]\n", ""},
		{"short api key", "apiKeys: [short]\n", "apiKeys[0]: must be at least 16"},
		{"short admin token", "adminTokens: [short]\n", "adminTokens[0]: must be at least 16"},
		{"api key with space", "apiKeys: ['inference key 0123456789']\n", "apiKeys[0]: must not contain whitespace"},
		{"repeated api key", "apiKeys: [inference-key-0123456789, inference-key-0123456789]\n", "apiKeys[1]: repeats apiKeys[0]"},
		{"admin token equal to an api key", "apiKeys: [same-key-0123456789]\nadminTokens: [same-key-0123456789]\n", "adminTokens[0]: repeats apiKeys[0]"},
		{"api key equal to a secret", "credentials: [{accessKeyId: A, secretAccessKey: secret-access-key-0123}]\napiKeys: [secret-access-key-0123]\n", "apiKeys[0]: repeats a credentials secretAccessKey"},
		{"admin token equal to a secret", "credentials: [{accessKeyId: A, secretAccessKey: secret-access-key-0123}]\nadminTokens: [secret-access-key-0123]\n", "adminTokens[0]: repeats a credentials secretAccessKey"},
		{"limits", "limits: {readHeaderTimeout: 5s, bodyReadTimeout: 10s, writeTimeout: 20s, idleTimeout: 30s, maxConnections: 100, maxInflightBodyBytes: 67108864, rateLimit: {requestsPerSecond: 5.5, burst: 10}}\n", ""},
		{"unknown limit", "limits: {maxConns: 1}\n", "maxConns"},
		{"negative body timeout", "limits: {bodyReadTimeout: -1s}\n", "limits.bodyReadTimeout"},
		{"negative write timeout", "limits: {writeTimeout: -1s}\n", "limits.writeTimeout"},
		{"negative idle timeout", "limits: {idleTimeout: -1s}\n", "limits.idleTimeout"},
		{"negative header timeout", "limits: {readHeaderTimeout: -1s}\n", "limits.readHeaderTimeout"},
		{"negative connections", "limits: {maxConnections: -1}\n", "limits.maxConnections"},
		{"tiny body budget", "limits: {maxInflightBodyBytes: 1000}\n", "limits.maxInflightBodyBytes"},
		{"fair shares", "limits: {maxConnections: 10, maxConnectionsPerPeer: 10, maxInflightBodyBytes: 2097152, maxInflightBodyBytesPerCredential: 1048576, maxInflightBodyBytesPerPeer: 2097152, limitLoopback: true}\n", ""},
		{"peer connections over the cap", "limits: {maxConnections: 10, maxConnectionsPerPeer: 11}\n", "limits.maxConnectionsPerPeer"},
		{"negative peer connections", "limits: {maxConnectionsPerPeer: -1}\n", "limits.maxConnectionsPerPeer"},
		{"credential share over the budget", "limits: {maxInflightBodyBytes: 1048576, maxInflightBodyBytesPerCredential: 1048577}\n", "limits.maxInflightBodyBytesPerCredential"},
		{"negative peer share", "limits: {maxInflightBodyBytesPerPeer: -1}\n", "limits.maxInflightBodyBytesPerPeer"},
		{"negative rate", "limits: {rateLimit: {requestsPerSecond: -1}}\n", "limits.rateLimit.requestsPerSecond"},
		{"negative burst", "limits: {rateLimit: {burst: -1}}\n", "limits.rateLimit.burst"},
		{"alarms", "alarms:\n- {name: high-errors, metric: capstan_gateway_requests_total, labels: {status: 5xx}, comparison: GreaterThanThreshold, threshold: 5}\n- {name: slow, metric: capstan_gateway_request_duration_seconds, statistic: p99, comparison: GreaterThanThreshold, threshold: 2.5}\n", ""},
		{"unknown alarm field", "alarms: [{name: a, metric: m, comparison: GreaterThanThreshold, treshold: 1}]\n", "treshold"},
		{"alarm without comparison", "alarms: [{name: a, metric: m}]\n", "alarms[0].comparison: is required"},
		{"repeated alarm name", "alarms: [{name: a, metric: m, comparison: LessThanThreshold}, {name: a, metric: m, comparison: LessThanThreshold}]\n", "alarms[1].name"},
		{"bad alarm statistic", "alarms: [{name: a, metric: m, statistic: p95, comparison: LessThanThreshold}]\n", "alarms[0].statistic"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml))
			if err == nil {
				c.Default()
				err = c.Validate(cat)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	var c Config
	c.Default()
	if c.Listen != "127.0.0.1:8080" || c.DataDir != "./capstan-data" || c.AccountID != "000000000000" ||
		c.Region != "us-east-1" || c.Engine.TimeScale != 1 || c.Endpoints.StartTimeout.Duration != 10*time.Minute {
		t.Fatalf("defaults: %+v", c)
	}
	l := c.Limits
	if l.ReadHeaderTimeout.Duration != 10*time.Second || l.BodyReadTimeout.Duration != 30*time.Second ||
		l.WriteTimeout.Duration != 60*time.Second || l.IdleTimeout.Duration != 120*time.Second || l.MaxConnections != 512 ||
		l.MaxInflightBodyBytes != 256<<20 || l.RateLimit.RequestsPerSecond != 1000 || l.RateLimit.Burst != 2000 {
		t.Fatalf("limit defaults: %+v", l)
	}
	if l.MaxConnectionsPerPeer != 128 || l.MaxInflightBodyBytesPerCredential != 64<<20 || l.MaxInflightBodyBytesPerPeer != 64<<20 || l.LimitLoopback {
		t.Fatalf("fair-share defaults: %+v", l)
	}
	if got := c.FleetCapacity(catalog.Default())["ml.p5.48xlarge"]["us-east-1a"]; got != 4 {
		t.Fatalf("default fleet p5 in us-east-1a = %d", got)
	}
}
