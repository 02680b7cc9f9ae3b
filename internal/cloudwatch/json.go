package cloudwatch

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

const jsonContentType = "application/x-amz-json-1.0"

// serveJSON serves awsJson1_0: POST / with X-Amz-Target
// GraniteServiceVersion20100801.<Op>.
func (h *Handler) serveJSON(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, TargetPrefix)
	if !ok {
		h.jsonError(w, op, unknownOperation(http.StatusBadRequest, target))
		return
	}
	if r.Method != http.MethodPost {
		h.jsonError(w, op, errorf(http.StatusMethodNotAllowed, CodeInvalidAction, "UnknownOperationException", "awsJson1_0 accepts only POST /."))
		return
	}
	body, err := h.body(w, r)
	if err != nil {
		h.jsonError(w, op, err)
		return
	}
	out, err := h.call(r.Context(), op, func(v any) error {
		if len(bytes.TrimSpace(body)) == 0 {
			return nil
		}
		if err := json.Unmarshal(body, v); err != nil {
			return serialization("Could not parse the JSON request body: %v", err)
		}
		return nil
	})
	if err == errUnknownOp {
		err = unknownOperation(http.StatusBadRequest, op)
	}
	if err != nil {
		h.jsonError(w, op, err)
		return
	}
	b, err := json.Marshal(out)
	if err != nil {
		h.jsonError(w, op, err)
		return
	}
	w.Header().Set("Content-Type", jsonContentType)
	_, _ = w.Write(b)
}

func (h *Handler) jsonError(w http.ResponseWriter, op string, err error) {
	writeJSONError(w, h.wire(op, err))
}

// writeJSONError is the one place errors become awsJson1_0 errors.
func writeJSONError(w http.ResponseWriter, we *Error) {
	b, _ := json.Marshal(map[string]string{"__type": "com.amazonaws.cloudwatch#" + we.Shape, we.messageMember(): we.Message})
	w.Header().Set("Content-Type", jsonContentType)
	w.Header().Set("X-Amzn-ErrorType", we.Shape)
	queryErrorHeader(w, we)
	w.WriteHeader(we.Status)
	_, _ = w.Write(b)
}
