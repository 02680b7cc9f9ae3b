package modelsource

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/capstan-dev/capstan/internal/catalog"
)

// ErrInvalidConfig is wrapped by the SourceError of a model folder or
// archive whose config.json the engine could not read: not one JSON object,
// empty, larger than catalog.MaxHFConfigBytes, or (in an archive) present
// more than once or in more than one folder (errors.Is(err,
// ErrInvalidConfig)). Its Reason is InvalidSource.
var ErrInvalidConfig = errors.New("unusable Hugging Face config.json")

// checkConfig refuses dir/config.json unless it is one JSON object of at
// most catalog.MaxHFConfigBytes, what the engine reads at start. where
// names the source and shown the file as the client knows it
// ("config.json", "my-model/config.json"): the error names both and no
// path on this machine.
func checkConfig(dir, where, shown string) error {
	fh, err := os.Open(filepath.Join(dir, "config.json"))
	if err != nil {
		return srcErr(ReasonFetchFailed, err, "%s: reading %s", where, shown)
	}
	defer fh.Close()
	if fi, err := fh.Stat(); err == nil && fi.Size() > catalog.MaxHFConfigBytes {
		return srcErr(ReasonInvalidSource, ErrInvalidConfig, "%s: %s is %d bytes, over the %d byte limit of a config.json (a model's config.json is a few KiB)",
			where, shown, fi.Size(), catalog.MaxHFConfigBytes)
	}
	b, err := io.ReadAll(io.LimitReader(fh, catalog.MaxHFConfigBytes+1))
	if err != nil {
		return srcErr(ReasonFetchFailed, err, "%s: reading %s", where, shown)
	}
	if problem := configProblem(b); problem != "" {
		return srcErr(ReasonInvalidSource, ErrInvalidConfig, "%s: %s %s", where, shown, problem)
	}
	return nil
}

// configProblem says what is wrong with a config.json's bytes ("" when it
// is one JSON object within the size limit), e.g. "is not valid JSON:
// invalid character '}' looking for beginning of object key string (line 3,
// column 1)".
func configProblem(b []byte) string {
	if len(b) > catalog.MaxHFConfigBytes {
		return fmt.Sprintf("is over %d bytes, the limit of a config.json (a model's config.json is a few KiB)", catalog.MaxHFConfigBytes)
	}
	t := bytes.TrimLeft(b, " \t\r\n")
	if len(t) == 0 {
		return "is empty; a Hugging Face config.json is one JSON object"
	}
	var raw json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(b, se.Offset)
			return fmt.Sprintf("is not valid JSON: %s (line %d, column %d)", se.Error(), line, col)
		}
		return "is not valid JSON: " + err.Error()
	}
	if t[0] != '{' {
		what := map[byte]string{'[': "an array", '"': "a string", 'n': "null", 't': "true", 'f': "false"}[t[0]]
		if what == "" {
			what = "a number"
		}
		return "is not a JSON object but " + what + "; a Hugging Face config.json is one object ({\"model_type\": …})"
	}
	return ""
}

// lineCol is the 1-based line and column of the byte a *json.SyntaxError
// stopped at (its Offset counts the bytes read, that one included).
func lineCol(b []byte, off int64) (line, col int) {
	at := int(min(max(off-1, 0), int64(len(b))))
	before := b[:at]
	return 1 + bytes.Count(before, []byte("\n")), at - bytes.LastIndexByte(before, '\n')
}
