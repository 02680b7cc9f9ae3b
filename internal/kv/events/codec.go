package events

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Decoder limits: a payload claiming more than this is malformed or hostile,
// and we must not preallocate for it.
const (
	maxEvents      = 1 << 20
	maxListLen     = 1 << 24
	maxFieldsCount = 64
)

// ErrMalformed wraps every Decode failure.
var ErrMalformed = errors.New("events: malformed KV event batch")

// Encode writes b as vLLM's msgspec encoder would (see the package doc).
func Encode(b Batch) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(64 + 32*len(b.Events))
	enc := msgpack.NewEncoder(&buf)
	if err := encodeBatch(enc, b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func encodeBatch(enc *msgpack.Encoder, b Batch) error {
	n := 2
	if b.DataParallelRank != nil {
		n = 3
	}
	if err := enc.EncodeArrayLen(n); err != nil {
		return err
	}
	if err := enc.EncodeFloat64(b.TS); err != nil {
		return err
	}
	if err := enc.EncodeArrayLen(len(b.Events)); err != nil {
		return err
	}
	for i, ev := range b.Events {
		if err := encodeEvent(enc, ev); err != nil {
			return fmt.Errorf("events: encode event %d: %w", i, err)
		}
	}
	if b.DataParallelRank != nil {
		return enc.EncodeInt(int64(*b.DataParallelRank))
	}
	return nil
}

func encodeEvent(enc *msgpack.Encoder, ev Event) error {
	switch e := ev.(type) {
	case *BlockStored:
		if e == nil {
			return errors.New("nil *BlockStored")
		}
		return encodeStored(enc, e)
	case BlockStored:
		return encodeStored(enc, &e)
	case *BlockRemoved:
		if e == nil {
			return errors.New("nil *BlockRemoved")
		}
		return encodeRemoved(enc, e)
	case BlockRemoved:
		return encodeRemoved(enc, &e)
	case *AllBlocksCleared, AllBlocksCleared:
		if err := enc.EncodeArrayLen(1); err != nil {
			return err
		}
		return enc.EncodeString(tagAllBlocksCleared)
	default:
		return fmt.Errorf("unknown event type %T", ev)
	}
}

func encodeStored(enc *msgpack.Encoder, e *BlockStored) error {
	if err := enc.EncodeArrayLen(8); err != nil {
		return err
	}
	if err := enc.EncodeString(tagBlockStored); err != nil {
		return err
	}
	if err := encodeHashes(enc, e.BlockHashes); err != nil {
		return err
	}
	if e.ParentBlockHash == nil {
		if err := enc.EncodeNil(); err != nil {
			return err
		}
	} else if err := enc.EncodeUint(*e.ParentBlockHash); err != nil {
		return err
	}
	if err := enc.EncodeArrayLen(len(e.TokenIDs)); err != nil {
		return err
	}
	for _, t := range e.TokenIDs {
		if err := enc.EncodeUint(uint64(t)); err != nil {
			return err
		}
	}
	if err := enc.EncodeInt(int64(e.BlockSize)); err != nil {
		return err
	}
	if err := enc.EncodeNil(); err != nil { // lora_id
		return err
	}
	if err := enc.EncodeString(medium(e.Medium)); err != nil {
		return err
	}
	return enc.EncodeNil() // lora_name
}

func encodeRemoved(enc *msgpack.Encoder, e *BlockRemoved) error {
	if err := enc.EncodeArrayLen(3); err != nil {
		return err
	}
	if err := enc.EncodeString(tagBlockRemoved); err != nil {
		return err
	}
	if err := encodeHashes(enc, e.BlockHashes); err != nil {
		return err
	}
	return enc.EncodeString(medium(e.Medium))
}

func encodeHashes(enc *msgpack.Encoder, hs []uint64) error {
	if err := enc.EncodeArrayLen(len(hs)); err != nil {
		return err
	}
	for _, h := range hs {
		if err := enc.EncodeUint(h); err != nil {
			return err
		}
	}
	return nil
}

// medium defaults an unset medium to GPU, as vLLM does.
func medium(m string) string {
	if m == "" {
		return MediumGPU
	}
	return m
}

// Decode parses a KV event batch payload as any vLLM version sends it (see
// the package doc). Errors wrap ErrMalformed.
func Decode(payload []byte) (Batch, error) {
	dec := msgpack.NewDecoder(bytes.NewReader(payload))
	b, err := decodeBatch(dec)
	if err != nil {
		return Batch{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return b, nil
}

// isMap reports whether the next value is a msgpack map.
func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

func isNil(dec *msgpack.Decoder) (bool, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return false, err
	}
	return c == msgpcode.Nil, nil
}

func decodeBatch(dec *msgpack.Decoder) (Batch, error) {
	var b Batch
	c, err := dec.PeekCode()
	if err != nil {
		return b, err
	}
	if isMap(c) {
		n, err := dec.DecodeMapLen()
		if err != nil {
			return b, err
		}
		if n > maxFieldsCount {
			return b, fmt.Errorf("batch map has %d keys", n)
		}
		for range n {
			key, err := dec.DecodeString()
			if err != nil {
				return b, fmt.Errorf("batch key: %w", err)
			}
			switch key {
			case "ts":
				if b.TS, err = decodeNumber(dec); err != nil {
					return b, fmt.Errorf("ts: %w", err)
				}
			case "events":
				if b.Events, err = decodeEvents(dec); err != nil {
					return b, err
				}
			case "data_parallel_rank":
				if b.DataParallelRank, err = decodeOptInt(dec); err != nil {
					return b, fmt.Errorf("data_parallel_rank: %w", err)
				}
			default:
				if err := dec.Skip(); err != nil {
					return b, err
				}
			}
		}
		return b, nil
	}
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return b, fmt.Errorf("batch: %w", err)
	}
	if n < 2 || n > maxFieldsCount {
		return b, fmt.Errorf("batch array has %d elements, want 2 or 3", n)
	}
	if b.TS, err = decodeNumber(dec); err != nil {
		return b, fmt.Errorf("ts: %w", err)
	}
	if b.Events, err = decodeEvents(dec); err != nil {
		return b, err
	}
	if n >= 3 {
		if b.DataParallelRank, err = decodeOptInt(dec); err != nil {
			return b, fmt.Errorf("data_parallel_rank: %w", err)
		}
	}
	return b, skipN(dec, n-3)
}

func skipN(dec *msgpack.Decoder, n int) error {
	for range n {
		if err := dec.Skip(); err != nil {
			return err
		}
	}
	return nil
}

// decodeNumber reads a float or an integer as float64.
func decodeNumber(dec *msgpack.Decoder) (float64, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return 0, err
	}
	if c == msgpcode.Float || c == msgpcode.Double {
		return dec.DecodeFloat64()
	}
	v, err := dec.DecodeInt64()
	return float64(v), err
}

func decodeOptInt(dec *msgpack.Decoder) (*int, error) {
	if null, err := isNil(dec); err != nil || null {
		if null {
			err = dec.DecodeNil()
		}
		return nil, err
	}
	v, err := dec.DecodeInt64()
	if err != nil {
		return nil, err
	}
	i := int(v)
	return &i, nil
}

func decodeEvents(dec *msgpack.Decoder) ([]Event, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	if n < 0 {
		return nil, nil
	}
	if n > maxEvents {
		return nil, fmt.Errorf("%d events in one batch", n)
	}
	out := make([]Event, 0, min(n, 1024))
	for i := range n {
		ev, err := decodeEvent(dec)
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		if ev != nil {
			out = append(out, ev)
		}
	}
	return out, nil
}

// decodeEvent returns nil, nil for an event with an unknown tag.
func decodeEvent(dec *msgpack.Decoder) (Event, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return nil, err
	}
	if isMap(c) {
		return decodeEventMap(dec)
	}
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	if n < 1 || n > maxFieldsCount {
		return nil, fmt.Errorf("event array has %d elements", n)
	}
	tag, err := dec.DecodeString()
	if err != nil {
		return nil, fmt.Errorf("event tag: %w", err)
	}
	fields := n - 1
	switch tag {
	case tagBlockStored:
		// block_hashes, parent_block_hash, token_ids, block_size are required.
		if fields < 4 {
			return nil, fmt.Errorf("BlockStored has %d fields, want at least 4", fields)
		}
		e := BlockStored{Medium: MediumGPU}
		if e.BlockHashes, err = decodeHashes(dec); err != nil {
			return nil, fmt.Errorf("block_hashes: %w", err)
		}
		if e.ParentBlockHash, err = decodeOptHash(dec); err != nil {
			return nil, fmt.Errorf("parent_block_hash: %w", err)
		}
		if e.TokenIDs, err = decodeTokens(dec); err != nil {
			return nil, fmt.Errorf("token_ids: %w", err)
		}
		bs, err := dec.DecodeInt64()
		if err != nil {
			return nil, fmt.Errorf("block_size: %w", err)
		}
		e.BlockSize = int(bs)
		rest := fields - 4
		if rest > 0 { // lora_id
			if err := dec.Skip(); err != nil {
				return nil, err
			}
			rest--
		}
		if rest > 0 {
			if e.Medium, err = decodeMedium(dec); err != nil {
				return nil, fmt.Errorf("medium: %w", err)
			}
			rest--
		}
		return e, skipN(dec, rest)
	case tagBlockRemoved:
		if fields < 1 {
			return nil, errors.New("BlockRemoved without block_hashes")
		}
		e := BlockRemoved{Medium: MediumGPU}
		if e.BlockHashes, err = decodeHashes(dec); err != nil {
			return nil, fmt.Errorf("block_hashes: %w", err)
		}
		rest := fields - 1
		if rest > 0 {
			if e.Medium, err = decodeMedium(dec); err != nil {
				return nil, fmt.Errorf("medium: %w", err)
			}
			rest--
		}
		return e, skipN(dec, rest)
	case tagAllBlocksCleared:
		return AllBlocksCleared{}, skipN(dec, fields)
	default:
		return nil, skipN(dec, fields)
	}
}

// decodeEventMap decodes the named-field encoding: a map whose "type" key is
// the tag (msgspec's default tag field).
func decodeEventMap(dec *msgpack.Decoder) (Event, error) {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return nil, err
	}
	if n > maxFieldsCount {
		return nil, fmt.Errorf("event map has %d keys", n)
	}
	var (
		tag      string
		hashes   []uint64
		parent   *uint64
		tokens   []uint32
		size     int
		med      = MediumGPU
		haveHash bool
	)
	for range n {
		key, err := dec.DecodeString()
		if err != nil {
			return nil, fmt.Errorf("event key: %w", err)
		}
		switch key {
		case "type":
			tag, err = dec.DecodeString()
		case "block_hashes":
			hashes, err = decodeHashes(dec)
			haveHash = true
		case "parent_block_hash":
			parent, err = decodeOptHash(dec)
		case "token_ids":
			tokens, err = decodeTokens(dec)
		case "block_size":
			var v int64
			v, err = dec.DecodeInt64()
			size = int(v)
		case "medium":
			med, err = decodeMedium(dec)
		default:
			err = dec.Skip()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	switch tag {
	case tagBlockStored:
		if !haveHash {
			return nil, errors.New("BlockStored without block_hashes")
		}
		return BlockStored{BlockHashes: hashes, ParentBlockHash: parent, TokenIDs: tokens, BlockSize: size, Medium: med}, nil
	case tagBlockRemoved:
		if !haveHash {
			return nil, errors.New("BlockRemoved without block_hashes")
		}
		return BlockRemoved{BlockHashes: hashes, Medium: med}, nil
	case tagAllBlocksCleared:
		return AllBlocksCleared{}, nil
	case "":
		return nil, errors.New("event map without a type")
	default:
		return nil, nil
	}
}

func decodeMedium(dec *msgpack.Decoder) (string, error) {
	if null, err := isNil(dec); err != nil || null {
		if null {
			err = dec.DecodeNil()
		}
		return MediumGPU, err
	}
	return dec.DecodeString()
}

func decodeListLen(dec *msgpack.Decoder) (int, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return 0, err
	}
	if n > maxListLen {
		return 0, fmt.Errorf("list of %d elements", n)
	}
	return max(n, 0), nil
}

func decodeHashes(dec *msgpack.Decoder) ([]uint64, error) {
	n, err := decodeListLen(dec)
	if err != nil {
		return nil, err
	}
	// Grow as elements arrive rather than trusting a claimed length.
	out := make([]uint64, 0, min(n, 4096))
	for range n {
		h, err := decodeHash(dec)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

func decodeOptHash(dec *msgpack.Decoder) (*uint64, error) {
	if null, err := isNil(dec); err != nil || null {
		if null {
			err = dec.DecodeNil()
		}
		return nil, err
	}
	h, err := decodeHash(dec)
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// decodeHash reads an ExternalBlockHash: an integer (negative ones as their
// two's complement), or bytes whose last 8 bytes are read big-endian.
func decodeHash(dec *msgpack.Decoder) (uint64, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return 0, err
	}
	if c == msgpcode.Bin8 || c == msgpcode.Bin16 || c == msgpcode.Bin32 {
		// Not DecodeBytes: it allocates whatever length the header claims
		// (a 22-byte payload claiming 800 MB allocated 800 MB). A block hash
		// is a digest, so the length is checked before anything is read.
		n, err := dec.DecodeBytesLen()
		if err != nil {
			return 0, err
		}
		var buf [maxHashBytes]byte
		if n < 0 || n > maxHashBytes {
			return 0, fmt.Errorf("block hash of %d bytes; at most %d", n, maxHashBytes)
		}
		if err := dec.ReadFull(buf[:n]); err != nil {
			return 0, err
		}
		return hashFromBytes(buf[:n]), nil
	}
	if c == msgpcode.Nil {
		return 0, errors.New("nil block hash")
	}
	return dec.DecodeUint64()
}

// maxHashBytes bounds a bytes block hash: vLLM sends SHA-256 digests (32
// bytes); 64 leaves room for a wider digest.
const maxHashBytes = 64

// hashFromBytes is the documented bytes → uint64 rule: the big-endian value
// of the last 8 bytes, shorter inputs zero-extended on the left.
func hashFromBytes(raw []byte) uint64 {
	var buf [8]byte
	if len(raw) >= 8 {
		raw = raw[len(raw)-8:]
	}
	copy(buf[8-len(raw):], raw)
	return binary.BigEndian.Uint64(buf[:])
}

func decodeTokens(dec *msgpack.Decoder) ([]uint32, error) {
	if null, err := isNil(dec); err != nil || null {
		if null {
			err = dec.DecodeNil()
		}
		return nil, err
	}
	n, err := decodeListLen(dec)
	if err != nil {
		return nil, err
	}
	out := make([]uint32, 0, min(n, 4096))
	for range n {
		v, err := dec.DecodeUint64()
		if err != nil {
			return nil, err
		}
		out = append(out, uint32(v))
	}
	return out, nil
}
