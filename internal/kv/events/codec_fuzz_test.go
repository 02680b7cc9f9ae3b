package events

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// decodeAllocSlack is what one Decode may allocate beyond decodeAllocPerByte
// per input byte: the msgpack reader grows a claimed string or bytes value
// in 1 MiB steps, and the decoder preallocates at most 4096 elements per
// list. A decoder that trusted a length prefix (a 5-byte header claiming
// 2^32 elements) would blow far past it.
const (
	decodeAllocSlack   = 4 << 20
	decodeAllocPerByte = 64
)

// FuzzDecode feeds arbitrary payloads to Decode, as a hostile or broken
// engine on the KV events socket could: it must not panic, must fail only
// with ErrMalformed, must not allocate for claimed lengths it has not read,
// and whatever it accepts must survive Encode and Decode unchanged (the
// encoder's output is a fixed point of decode∘encode).
func FuzzDecode(f *testing.F) {
	if golden, err := os.ReadFile(filepath.Join("testdata", "batch.msgpack")); err == nil {
		f.Add(golden)
	}
	for _, b := range []Batch{
		goldenBatch(),
		{TS: 1, Events: []Event{AllBlocksCleared{}}, DataParallelRank: intp(3)},
		{TS: 2, Events: []Event{}},
		{TS: 5, Events: []Event{BlockStored{BlockHashes: []uint64{^uint64(0)}, ParentBlockHash: u64(1), TokenIDs: []uint32{^uint32(0)}, BlockSize: 1, Medium: MediumCPU}}},
	} {
		raw, err := Encode(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	for _, v := range []any{
		map[string]any{"ts": 10.0, "data_parallel_rank": 1, "events": []any{
			map[string]any{"type": "BlockStored", "block_hashes": []any{uint64(1)}, "parent_block_hash": nil, "token_ids": []any{1, 2}, "block_size": 2, "medium": "CPU"},
			map[string]any{"type": "BlockRemoved", "block_hashes": []any{uint64(2)}, "medium": nil},
			map[string]any{"type": "SomethingNew", "x": 1},
		}},
		[]any{12.0, []any{[]any{"BlockStored", []any{[]byte{0xaa, 1, 2, 3, 4, 5, 6, 7, 8}}, []byte{9}, []any{1}, 1, nil, "GPU", nil, []any{"x"}, 2}}},
		[]any{15.0, []any{[]any{"BlockRemoved", []any{int64(-2)}, "GPU", 2}, []any{"BlockPinned", map[string]any{"deep": []any{1}}}}},
		[]any{16, []any{[]any{"BlockStored", []any{uint64(5)}, nil, nil, 1}}, nil},
	} {
		f.Add(mustMarshalNoT(v))
	}
	// Hostile length prefixes: 2^32-1 events; 2^24 hashes; a 4 GiB tag;
	// a map batch claiming 2^32-1 keys.
	f.Add([]byte{0x92, 0x01, 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x92, 0x01, 0x91, 0x95, 0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd', 0xdd, 0x01, 0x00, 0x00, 0x00})
	f.Add([]byte{0x92, 0x01, 0x91, 0x91, 0xdb, 0xff, 0xff, 0xff, 0xff, 'B'})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b, err := Decode(data)
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > decodeAllocSlack+decodeAllocPerByte*uint64(len(data)) {
			t.Fatalf("Decode of %d bytes allocated %d bytes", len(data), n)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode error %v does not wrap ErrMalformed", err)
			}
			return
		}
		raw, err := Encode(b)
		if err != nil {
			t.Fatalf("Encode of a decoded batch: %v (%#v)", err, b)
		}
		b2, err := Decode(raw)
		if err != nil {
			t.Fatalf("Decode of Encode output: %v (% x)", err, raw)
		}
		raw2, err := Encode(b2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw, raw2) {
			t.Fatalf("round trip changed the batch:\n first %#v\nsecond %#v", b, b2)
		}
		if len(b2.Events) != len(b.Events) || (b.DataParallelRank == nil) != (b2.DataParallelRank == nil) {
			t.Fatalf("round trip lost events or the rank:\n first %#v\nsecond %#v", b, b2)
		}
	})
}
