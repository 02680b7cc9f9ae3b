//go:build linux

package chaos

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// outcome classifies a control-plane write by its answer.
type outcome int

const (
	acked     outcome = iota // 2xx: it happened and must survive
	refused                  // a 4xx answer: it did not happen
	uncertain                // no answer or 5xx: it may or may not have happened
)

// classify reads an SDK or HTTP error as an outcome.
func classify(err error) outcome {
	if err == nil {
		return acked
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() >= 400 && re.HTTPStatusCode() < 500 {
		return refused
	}
	var he *httpStatusError
	if errors.As(err, &he) && he.code >= 400 && he.code < 500 {
		return refused
	}
	return uncertain
}

type httpStatusError struct {
	code int
	body string
}

func (e *httpStatusError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.code, http.StatusText(e.code), e.body)
}

// window is a span during which failures are expected: a kill and its recovery.
type window struct {
	what       string
	start, end time.Time
}

// failure is a request that did not succeed.
type failure struct {
	what       string
	start, end time.Time
	err        error
}

// journal is what the chaos phase observed.
type journal struct {
	mu       sync.Mutex
	kills    int
	windows  []window
	failures []failure
	ok       int
	acked    int
	ops      map[string]int // "op outcome" → count, for the log
}

func newJournal() *journal { return &journal{ops: map[string]int{}} }

func (j *journal) kill(what string, start, end time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.kills++
	j.windows = append(j.windows, window{what: what, start: start, end: end})
}

// request records one data- or control-plane request; nil err is a success.
func (j *journal) request(what string, start time.Time, err error) {
	end := time.Now()
	j.mu.Lock()
	defer j.mu.Unlock()
	if err == nil {
		j.ok++
		return
	}
	j.failures = append(j.failures, failure{what: what, start: start, end: end, err: err})
}

// op counts a control-plane call by outcome; write says whether an
// acknowledged one counts as an acknowledged write.
func (j *journal) op(name string, o outcome, write bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.ops[fmt.Sprintf("%s/%s", name, [...]string{"ok", "refused", "uncertain"}[o])]++
	if o == acked && write {
		j.acked++
	}
}

// outsideWindows returns the failures that overlap no kill window.
func (j *journal) outsideWindows() []failure {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []failure
	for _, f := range j.failures {
		in := false
		for _, w := range j.windows {
			if !f.end.Before(w.start) && !f.start.After(w.end) {
				in = true
				break
			}
		}
		if !in {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].start.Before(out[b].start) })
	return out
}
