package awsjson

import "testing"

func TestViolations(t *testing.T) {
	tests := []struct {
		name string
		add  func(*Violations)
		want string
	}{
		{"none", func(*Violations) {}, ""},
		{"one", func(v *Violations) {
			v.Add("bad name", "endpointName", "Member must satisfy regular expression pattern: ^[a-zA-Z0-9]$")
		},
			"1 validation error detected: Value 'bad name' at 'endpointName' failed to satisfy constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9]$"},
		{"null and a number", func(v *Violations) {
			v.Add(nil, "minCapacity", NotNull)
			v.Add(-1, "maxCapacity", "Member must have value greater than or equal to 0")
		}, "2 validation errors detected: Value null at 'minCapacity' failed to satisfy constraint: Member must not be null; " +
			"Value '-1' at 'maxCapacity' failed to satisfy constraint: Member must have value greater than or equal to 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v Violations
			tt.add(&v)
			err := v.Err()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Err() = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Err() = %v\nwant %s", err, tt.want)
			}
		})
	}
}
