package gateway

import (
	"container/list"
	"context"
	"sync"

	"github.com/capstan-dev/capstan/internal/kv"
)

const prefixName = "prefix-cache"

// defaultLRUBlocks sizes a backend's approximate index before its
// vllm:cache_config_info{num_gpu_blocks} is known (llm-d's default).
const defaultLRUBlocks = 31250

// prefix is the approximate prefix-cache scorer: an index built from the
// router's own decisions. After each pick, the chosen backend is recorded
// as holding every full block of the prompt; each backend's entries live in
// an LRU as large as its GPU KV cache, so the index forgets roughly what the
// engine evicts. Score = leading blocks the backend holds / prompt blocks.
type prefix struct {
	mu  sync.Mutex
	per map[string]*blockLRU
}

var (
	_ Scorer     = (*prefix)(nil)
	_ PostPicker = (*prefix)(nil)
)

func newPrefix(Deps) (Plugin, error) { return &prefix{per: map[string]*blockLRU{}}, nil }

func (*prefix) Name() string { return prefixName }

func (p *prefix) Score(_ context.Context, req *SchedRequest, cands []Candidate) []float64 {
	scores := make([]float64, len(cands))
	hs := req.BlockHashes(cands)
	if len(hs) == 0 {
		return scores
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range cands {
		if l := p.per[c.Backend.ID]; l != nil {
			scores[i] = float64(l.leading(hs)) / float64(len(hs))
		}
	}
	return scores
}

func (p *prefix) Picked(_ context.Context, req *SchedRequest, c Candidate) {
	hs := req.BlockHashes([]Candidate{c})
	if len(hs) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.per[c.Backend.ID]
	if l == nil {
		l = newBlockLRU(defaultLRUBlocks)
		p.per[c.Backend.ID] = l
	}
	if c.Stats.NumGPUBlocks > 0 {
		l.capacity = c.Stats.NumGPUBlocks
	}
	req.predictedBlocks = max(req.predictedBlocks, l.leading(hs))
	l.add(hs)
}

// blockLRU is one backend's set of block hashes, least recently used first out.
type blockLRU struct {
	capacity int
	order    *list.List // front: most recent
	at       map[kv.BlockHash]*list.Element
}

func newBlockLRU(capacity int) *blockLRU {
	return &blockLRU{capacity: capacity, order: list.New(), at: map[kv.BlockHash]*list.Element{}}
}

// leading counts the hashes held from the first on, stopping at a miss.
func (l *blockLRU) leading(hs []kv.BlockHash) int {
	n := 0
	for _, h := range hs {
		if _, ok := l.at[h]; !ok {
			break
		}
		n++
	}
	return n
}

// add marks hs most recently used, evicting the oldest beyond capacity.
// The prompt's later blocks go in first so its first block is the most
// recent: a prefix then outlives its tails, as in the engine.
func (l *blockLRU) add(hs []kv.BlockHash) {
	for i := len(hs) - 1; i >= 0; i-- {
		h := hs[i]
		if e, ok := l.at[h]; ok {
			l.order.MoveToFront(e)
			continue
		}
		l.at[h] = l.order.PushFront(h)
	}
	for l.order.Len() > l.capacity {
		e := l.order.Back()
		delete(l.at, e.Value.(kv.BlockHash))
		l.order.Remove(e)
	}
}

func (l *blockLRU) len() int { return l.order.Len() }
