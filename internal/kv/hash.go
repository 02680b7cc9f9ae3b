package kv

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// BlockHash names the KV of one full block of tokens together with everything
// before it: h_i = xxhash64(h_{i-1} as 8 little-endian bytes || the block's
// token ids as 4 little-endian bytes each), with h_{-1} = RootHash(model).
type BlockHash uint64

// RootHash seeds a model's hash chain, so equal prompts on different models
// never share cache entries.
func RootHash(model string) BlockHash { return BlockHash(xxhash.Sum64String("capstan-kv:" + model)) }

// BlockHashes returns the chained hashes of the full blocks of tokens (a
// trailing partial block is not hashed, as in vLLM's prefix cache).
func BlockHashes(root BlockHash, tokens []uint32, blockSize int) []BlockHash {
	if blockSize <= 0 {
		panic("kv: non-positive block size")
	}
	n := len(tokens) / blockSize
	out := make([]BlockHash, n)
	buf := make([]byte, 8+4*blockSize)
	parent := root
	for i := 0; i < n; i++ {
		parent = ChainHash(parent, tokens[i*blockSize:(i+1)*blockSize], buf)
		out[i] = parent
	}
	return out
}

// ChainHash hashes one block after its parent. buf, if at least 8+4*len(block)
// bytes, is used as scratch space to avoid an allocation.
func ChainHash(parent BlockHash, block []uint32, buf []byte) BlockHash {
	need := 8 + 4*len(block)
	if len(buf) < need {
		buf = make([]byte, need)
	}
	binary.LittleEndian.PutUint64(buf, uint64(parent))
	for j, t := range block {
		binary.LittleEndian.PutUint32(buf[8+4*j:], t)
	}
	return BlockHash(xxhash.Sum64(buf[:need]))
}
