package runtimeapi

import "testing"

func TestValidators(t *testing.T) {
	tests := []struct {
		name  string
		check func(string) error
		in    string
		ok    bool
	}{
		{"inference id plain", checkInferenceID, "req-1 with spaces", true},
		{"inference id leading space", checkInferenceID, " x", false},
		{"inference id empty", checkInferenceID, "", false},
		{"inference id tab inside", checkInferenceID, "a\tb", false},
		{"inference id unicode printable", checkInferenceID, "caf\u00e9", true},
		{"variant ok", checkTargetVariant, "Variant-1", true},
		{"variant double dash", checkTargetVariant, "a--b", true},
		{"variant trailing dash", checkTargetVariant, "a-", false},
		{"variant 63", checkTargetVariant, string(make63('v')), true},
		{"endpoint ok", validateEndpointName, "my-endpoint-2", true},
		{"endpoint leading dash", validateEndpointName, "-x", false},
		{"endpoint dot", validateEndpointName, "a.b", false},
		{"custom ascii", maxASCII("customAttributes", 1024), "a=b; c=d", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.check(tt.in); (err == nil) != tt.ok {
				t.Fatalf("check(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			}
		})
	}
}

func make63(c byte) []byte {
	b := make([]byte, 63)
	for i := range b {
		b[i] = c
	}
	return b
}
