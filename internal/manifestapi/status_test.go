package manifestapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/deployment"
	"github.com/capstan-dev/capstan/internal/manifest"
)

// TestStatusFor covers the error kinds of the Store contract that the real
// Store does not produce through the handler on demand: a name conflict
// (deployment.Service claims names in its controller, not in Apply),
// validation by the Store (the handler validates updates first), a
// timeout. The handler tests cover the others end to end.
func TestStatusFor(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantCode   int
		wantReason string
		wantMsg    string
		wantFields []string
		wantObject string // Details.Kind/Details.Name
	}{
		{"too many objects", withObject(manifest.KindJumpStartModel, "deepseek", fmt.Errorf("apply: %w", deployment.ErrTooMany)),
			http.StatusForbidden, ReasonForbidden, "too many manifests", nil, "JumpStartModel/deepseek"},
		{"being deleted", withObject(manifest.KindJumpStartModel, "deepseek", fmt.Errorf("apply: %w", deployment.ErrBeingDeleted)),
			http.StatusConflict, ReasonConflict, "being deleted", nil, "JumpStartModel/deepseek"},
		{"validation from the store", fmt.Errorf("apply: %w", manifest.ErrorList{{Path: "spec.replicas", Message: "too many"}}),
			http.StatusUnprocessableEntity, ReasonInvalid, "spec.replicas", []string{"spec.replicas"}, ""},
		{"not found", fmt.Errorf("get: %w", manifest.ErrNotFound), http.StatusNotFound, ReasonNotFound, "not found", nil, ""},
		{"timeout", fmt.Errorf("list: %w", context.DeadlineExceeded), http.StatusGatewayTimeout, ReasonTimeout, "deadline", nil, ""},
		{"internal", withObject(manifest.KindInferenceEndpointConfig, "small", fmt.Errorf("apply: %w", errors.New("bolt: disk full"))),
			http.StatusInternalServerError, ReasonInternalError, "disk full", nil, "InferenceEndpointConfig/small"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := statusFor(tt.err)
			if st.Code != tt.wantCode || st.Reason != tt.wantReason || st.Status != StatusFailure || !strings.Contains(st.Message, tt.wantMsg) {
				t.Errorf("got %d %s %s %q", st.Code, st.Reason, st.Status, st.Message)
			}
			if got := fields(st); !slices.Equal(got, tt.wantFields) {
				t.Errorf("causes at %v, want %v", got, tt.wantFields)
			}
			if tt.wantObject != "" && (st.Details == nil || st.Details.Kind+"/"+st.Details.Name != tt.wantObject) {
				t.Errorf("details = %+v, want %s", st.Details, tt.wantObject)
			}
		})
	}
}
