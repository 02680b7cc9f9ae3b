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
		{"required", func(v *Violations) {
			if !v.Required(true, "present") || v.Required(false, "absent") {
				v.Add("Required", "result", "wrong")
			}
		}, "1 validation error detected: Value null at 'absent' failed to satisfy constraint: Member must not be null"},
		{"length", func(v *Violations) {
			v.Length("", 1, 3, "short")
			v.Length("abc", 1, 3, "fits")
			v.Length("abcd", 1, 3, "long")
		}, "2 validation errors detected: Value '' at 'short' failed to satisfy constraint: Member must have length greater than or equal to 1; " +
			"Value 'abcd' at 'long' failed to satisfy constraint: Member must have length less than or equal to 3"},
		{"list length", func(v *Violations) {
			v.ListLength(0, 1, 5, "filters")
			v.ListLength(5, 1, 5, "fits")
			v.ListLength(51, 0, 50, "resourceIds")
		}, "2 validation errors detected: Value '[0 items]' at 'filters' failed to satisfy constraint: Member must have length greater than or equal to 1; " +
			"Value '[51 items]' at 'resourceIds' failed to satisfy constraint: Member must have length less than or equal to 50"},
		{"int range", func(v *Violations) {
			lo, in, hi := -1, 5, 11
			v.IntRange(nil, 0, 10, "absent")
			v.IntRange(&lo, 0, 10, "low")
			v.IntRange(&in, 0, 10, "fits")
			v.IntRange(&hi, 0, 10, "high")
		}, "2 validation errors detected: Value '-1' at 'low' failed to satisfy constraint: Member must have value greater than or equal to 0; " +
			"Value '11' at 'high' failed to satisfy constraint: Member must have value less than or equal to 10"},
		{"enum", func(v *Violations) {
			v.Enum("Ascending", "sortOrder", "Ascending", "Descending")
			v.Enum("", "sortBy", "Name", "CreationTime")
		}, "1 validation error detected: Value '' at 'sortBy' failed to satisfy constraint: Member must satisfy enum value set: [Name, CreationTime]"},
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
