package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/capstan-dev/capstan/internal/kv"
)

// Limits on --workload file inputs: enough for ShareGPT (~90k conversations,
// ~650 MB), small enough that a wrong path cannot exhaust memory.
const (
	maxFileBytes   = 1 << 30
	maxFileItems   = 1_000_000
	maxPromptBytes = 4 << 20
)

type fileWorkload struct {
	items  []Item
	params map[string]string
}

// fileLine is one JSONL record: a prompt or a chat, with an optional output length.
type fileLine struct {
	Prompt       string    `json:"prompt"`
	Messages     []fileMsg `json:"messages"`
	OutputTokens int       `json:"output_tokens"`
	MaxTokens    int       `json:"max_tokens"`
	SessionID    string    `json:"session_id"`
}

type fileMsg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// shareGPTConv is one ShareGPT record.
type shareGPTConv struct {
	Conversations []struct {
		From  string `json:"from"`
		Value string `json:"value"`
	} `json:"conversations"`
}

func newFileWorkload(spec WorkloadSpec) (*fileWorkload, error) {
	p := newParams(spec)
	path := p.str("path", "")
	format := p.str("format", "auto")
	defOut := p.int("output", 128, 1, maxTokensParam)
	limit := p.int("limit", maxFileItems, 1, maxFileItems)
	if err := p.done(); err != nil {
		return nil, err
	}
	if path == "" {
		return nil, errors.New("workload file: path is required (file:path=prompts.jsonl)")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("workload file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("workload file: read %s: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("workload file: %s is larger than %d bytes", path, maxFileBytes)
	}
	if format == "auto" {
		format = "jsonl"
		if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
			format = "sharegpt"
		}
	}
	var items []Item
	switch format {
	case "jsonl":
		items, err = parseJSONL(data, defOut, limit)
	case "sharegpt":
		items, err = parseShareGPT(data, limit)
	default:
		return nil, fmt.Errorf("workload file: format: want auto, jsonl or sharegpt, got %q", format)
	}
	if err != nil {
		return nil, fmt.Errorf("workload file %s: %w", path, err)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("workload file %s: no usable prompts", path)
	}
	return &fileWorkload{items: items, params: map[string]string{"path": path, "format": format,
		"output": strconv.Itoa(defOut), "prompts": strconv.Itoa(len(items))}}, nil
}

// parseJSONL reads prompts, one JSON object per line:
// {"prompt": "...", "output_tokens": 128} or {"messages": [{"role","content"}...]}.
func parseJSONL(data []byte, defOut, limit int) ([]Item, error) {
	var items []Item
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxPromptBytes)
	line := 0
	for sc.Scan() && len(items) < limit {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var l fileLine
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out := defOut
		if l.OutputTokens > 0 {
			out = l.OutputTokens
		} else if l.MaxTokens > 0 {
			out = l.MaxTokens
		}
		it := Item{OutputTokens: out, SessionID: l.SessionID}
		switch {
		case len(l.Messages) > 0:
			for _, m := range l.Messages {
				it.Messages = append(it.Messages, kv.Message{Role: m.Role, Content: m.Content})
			}
			it.Prompt = kv.ChatPrompt(it.Messages)
		case l.Prompt != "":
			it.Prompt = l.Prompt
			it.Messages = []kv.Message{{Role: "user", Content: l.Prompt}}
		default:
			return nil, fmt.Errorf("line %d: neither prompt nor messages", line)
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	return items, nil
}

// parseShareGPT takes, as vllm bench does, the first human turn of each
// conversation as the prompt and the length of the reply after it as the
// output length; conversations without a reply are skipped.
func parseShareGPT(data []byte, limit int) ([]Item, error) {
	var convs []shareGPTConv
	if err := json.Unmarshal(data, &convs); err != nil {
		return nil, fmt.Errorf("sharegpt: %w", err)
	}
	var items []Item
	for _, c := range convs {
		if len(items) >= limit {
			break
		}
		if len(c.Conversations) < 2 || c.Conversations[0].Value == "" {
			continue
		}
		prompt, reply := c.Conversations[0].Value, c.Conversations[1].Value
		out := kv.CountTokens(reply)
		if out < 1 {
			continue
		}
		items = append(items, Item{Prompt: prompt, Messages: []kv.Message{{Role: "user", Content: prompt}}, OutputTokens: out})
	}
	return items, nil
}

func (w *fileWorkload) Name() string              { return "file" }
func (w *fileWorkload) Params() map[string]string { return w.params }
func (w *fileWorkload) Job(ticket int) Job        { return Job{Items: []Item{w.items[ticket%len(w.items)]}} }
