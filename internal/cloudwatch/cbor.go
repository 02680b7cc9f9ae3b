package cloudwatch

import (
	"net/http"
	"strings"

	"github.com/fxamacker/cbor/v2"
)

var (
	cborEnc cbor.EncMode
	cborDec cbor.DecMode
)

func init() {
	var err error
	cborEnc, err = cbor.EncOptions{Time: cbor.TimeUnixDynamic, TimeTag: cbor.EncTagRequired, Sort: cbor.SortBytewiseLexical}.EncMode()
	if err != nil {
		panic(err)
	}
	// Bounded: a request is at most MaxBodyBytes, and no list or map of it
	// needs more than a thousand members.
	cborDec, err = cbor.DecOptions{MaxNestedLevels: 16, MaxArrayElements: 1024, MaxMapPairs: 1024,
		DupMapKey: cbor.DupMapKeyEnforcedAPF, IndefLength: cbor.IndefLengthAllowed}.DecMode()
	if err != nil {
		panic(err)
	}
}

const cborContentType = "application/cbor"

// serveCBOR serves smithy-rpc-v2-cbor: POST
// /service/GraniteServiceVersion20100801/operation/<Op>.
func (h *Handler) serveCBOR(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.URL.Path, CBORPathPrefix)
	if r.Method != http.MethodPost {
		h.cborError(w, op, errorf(http.StatusMethodNotAllowed, CodeInvalidAction, "UnknownOperationException", "smithy-rpc-v2-cbor accepts only POST."))
		return
	}
	if r.Header.Get("smithy-protocol") != "rpc-v2-cbor" {
		h.cborError(w, op, serialization("The smithy-protocol header must be rpc-v2-cbor."))
		return
	}
	body, err := h.body(w, r)
	if err != nil {
		h.cborError(w, op, err)
		return
	}
	out, err := h.call(r.Context(), op, func(v any) error {
		if len(body) == 0 {
			return nil
		}
		if err := cborDec.Unmarshal(body, v); err != nil {
			return serialization("Could not parse the CBOR request body: %v", err)
		}
		return nil
	})
	if err == errUnknownOp {
		err = unknownOperation(http.StatusNotFound, op)
	}
	if err != nil {
		h.cborError(w, op, err)
		return
	}
	b, err := cborEnc.Marshal(out)
	if err != nil {
		h.cborError(w, op, err)
		return
	}
	w.Header().Set("Content-Type", cborContentType)
	w.Header().Set("smithy-protocol", "rpc-v2-cbor")
	_, _ = w.Write(b)
}

func (h *Handler) cborError(w http.ResponseWriter, op string, err error) {
	writeCBORError(w, h.wire(op, err))
}

// writeCBORError is the one place errors become smithy-rpc-v2-cbor errors.
func writeCBORError(w http.ResponseWriter, we *Error) {
	b, _ := cborEnc.Marshal(map[string]string{"__type": "com.amazonaws.cloudwatch#" + we.Shape, we.messageMember(): we.Message})
	w.Header().Set("Content-Type", cborContentType)
	w.Header().Set("smithy-protocol", "rpc-v2-cbor")
	queryErrorHeader(w, we)
	w.WriteHeader(we.Status)
	_, _ = w.Write(b)
}
