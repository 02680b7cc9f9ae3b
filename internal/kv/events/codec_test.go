package events

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

var update = flag.Bool("update", false, "rewrite golden files")

func u64(v uint64) *uint64 { return &v }
func intp(v int) *int      { return &v }

// goldenBatch is the known batch behind testdata/batch.msgpack.
func goldenBatch() Batch {
	return Batch{
		TS: 1767225600.5,
		Events: []Event{
			BlockStored{
				BlockHashes:     []uint64{0x0123456789abcdef, 0xfedcba9876543210},
				ParentBlockHash: nil,
				TokenIDs:        []uint32{1, 2, 300, 70000},
				BlockSize:       2,
				Medium:          MediumGPU,
			},
			BlockStored{
				BlockHashes:     []uint64{7},
				ParentBlockHash: u64(0xfedcba9876543210),
				TokenIDs:        []uint32{5, 6},
				BlockSize:       2,
				Medium:          MediumCPU,
			},
			BlockRemoved{BlockHashes: []uint64{0x0123456789abcdef}, Medium: MediumGPU},
			AllBlocksCleared{},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   Batch
		want Batch // zero: same as in
	}{
		{name: "golden batch", in: goldenBatch()},
		{name: "with data parallel rank", in: Batch{TS: 1, Events: []Event{AllBlocksCleared{}}, DataParallelRank: intp(3)}},
		{name: "empty batch", in: Batch{TS: 2, Events: []Event{}}},
		{
			name: "pointers encode like values",
			in:   Batch{TS: 3, Events: []Event{&BlockRemoved{BlockHashes: []uint64{1}, Medium: MediumCPU}, &AllBlocksCleared{}}},
			want: Batch{TS: 3, Events: []Event{BlockRemoved{BlockHashes: []uint64{1}, Medium: MediumCPU}, AllBlocksCleared{}}},
		},
		{
			name: "empty medium defaults to GPU",
			in:   Batch{TS: 4, Events: []Event{BlockRemoved{BlockHashes: []uint64{1}}}},
			want: Batch{TS: 4, Events: []Event{BlockRemoved{BlockHashes: []uint64{1}, Medium: MediumGPU}}},
		},
		{
			name: "max uint64 hash",
			in:   Batch{TS: 5, Events: []Event{BlockStored{BlockHashes: []uint64{^uint64(0)}, ParentBlockHash: u64(^uint64(0) - 1), TokenIDs: []uint32{^uint32(0)}, BlockSize: 1, Medium: MediumGPU}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := Encode(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if want.Events == nil {
				want = tt.in
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, want)
			}
		})
	}
}

func TestEncodeRejectsForeignEvent(t *testing.T) {
	if _, err := Encode(Batch{Events: []Event{(*BlockStored)(nil)}}); err == nil {
		t.Fatal("nil event encoded")
	}
}

// TestGolden pins the exact bytes and checks their layout by hand with
// msgpack's generic decoder, independently of Decode.
func TestGolden(t *testing.T) {
	raw, err := Encode(goldenBatch())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "batch.msgpack")
	if *update {
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, golden) {
		t.Fatalf("Encode output differs from %s (rerun with -update only if the change is intended):\n got %x\nwant %x", path, raw, golden)
	}

	// Loose decoding yields int64 for positive fixints (0x00-0x7f) and uint64
	// for the uint8..uint64 forms, so the expectations also pin the smallest
	// encoding msgspec uses: 1 and 2 as fixints, 300 as uint16, 70000 as
	// uint32, the hashes as uint64.
	// The payload starts with a fixarray of 2 (no data_parallel_rank) and a
	// float64 timestamp (0xcb), as msgspec writes a Python float.
	if golden[0] != 0x92 || golden[1] != 0xcb {
		t.Fatalf("header bytes % x, want 92 cb", golden[:2])
	}
	var v []any
	dec := msgpack.NewDecoder(bytes.NewReader(golden))
	dec.UseLooseInterfaceDecoding(true)
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	if len(v) != 2 || v[0] != 1767225600.5 {
		t.Fatalf("batch = %#v, want [ts, events]", v)
	}
	evs := v[1].([]any)
	if len(evs) != 4 {
		t.Fatalf("%d events, want 4", len(evs))
	}
	stored := evs[0].([]any)
	wantStored := []any{"BlockStored", []any{uint64(0x0123456789abcdef), uint64(0xfedcba9876543210)}, nil,
		[]any{int64(1), int64(2), uint64(300), uint64(70000)}, int64(2), nil, "GPU", nil}
	if !reflect.DeepEqual(stored, wantStored) {
		t.Fatalf("BlockStored positions:\n got %#v\nwant %#v", stored, wantStored)
	}
	stored2 := evs[1].([]any)
	if stored2[0] != "BlockStored" || stored2[2] != uint64(0xfedcba9876543210) || stored2[6] != "CPU" || len(stored2) != 8 {
		t.Fatalf("second BlockStored = %#v", stored2)
	}
	removed := evs[2].([]any)
	if !reflect.DeepEqual(removed, []any{"BlockRemoved", []any{uint64(0x0123456789abcdef)}, "GPU"}) {
		t.Fatalf("BlockRemoved = %#v", removed)
	}
	if !reflect.DeepEqual(evs[3], []any{"AllBlocksCleared"}) {
		t.Fatalf("AllBlocksCleared = %#v", evs[3])
	}

	got, err := Decode(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, goldenBatch()) {
		t.Fatalf("Decode(golden) = %#v", got)
	}
}

func TestSeqFraming(t *testing.T) {
	tests := []struct {
		seq  uint64
		want []byte
	}{
		{0, []byte{0, 0, 0, 0, 0, 0, 0, 0}},
		{1, []byte{0, 0, 0, 0, 0, 0, 0, 1}},
		{0x0102030405060708, []byte{1, 2, 3, 4, 5, 6, 7, 8}},
	}
	for _, tt := range tests {
		t.Run(string(rune('0'+tt.seq%10)), func(t *testing.T) {
			if got := seqBytes(tt.seq); !bytes.Equal(got, tt.want) {
				t.Fatalf("seqBytes(%d) = % x, want % x (big-endian)", tt.seq, got, tt.want)
			}
		})
	}
	if binary.BigEndian.Uint64(endSeq[:]) != ^uint64(0) || int64(binary.BigEndian.Uint64(endSeq[:])) != -1 {
		t.Fatal("end marker is not seq -1")
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestDecodeVariants(t *testing.T) {
	hashBytes := []byte{0xaa, 0xbb, 1, 2, 3, 4, 5, 6, 7, 8} // 10 bytes: last 8 count
	tests := []struct {
		name    string
		payload any
		want    Batch
	}{
		{
			name: "map encoding",
			payload: map[string]any{
				"ts": 10.0,
				"events": []any{
					map[string]any{"type": "BlockStored", "block_hashes": []any{uint64(1), uint64(2)}, "parent_block_hash": nil,
						"token_ids": []any{1, 2, 3, 4}, "block_size": 2, "lora_id": nil, "medium": "CPU", "lora_name": nil,
						"extra_keys": nil, "group_idx": 0},
					map[string]any{"type": "BlockRemoved", "block_hashes": []any{uint64(2)}, "medium": nil},
					map[string]any{"type": "SomethingNew", "x": 1},
					map[string]any{"type": "AllBlocksCleared"},
				},
				"data_parallel_rank": 1,
			},
			want: Batch{TS: 10, DataParallelRank: intp(1), Events: []Event{
				BlockStored{BlockHashes: []uint64{1, 2}, TokenIDs: []uint32{1, 2, 3, 4}, BlockSize: 2, Medium: MediumCPU},
				BlockRemoved{BlockHashes: []uint64{2}, Medium: MediumGPU},
				AllBlocksCleared{},
			}},
		},
		{
			name: "map events inside array batch",
			payload: []any{11.0, []any{
				map[string]any{"type": "BlockStored", "block_hashes": []any{uint64(9)}, "parent_block_hash": uint64(8),
					"token_ids": []any{1}, "block_size": 1},
			}},
			want: Batch{TS: 11, Events: []Event{
				BlockStored{BlockHashes: []uint64{9}, ParentBlockHash: u64(8), TokenIDs: []uint32{1}, BlockSize: 1, Medium: MediumGPU},
			}},
		},
		{
			name: "bytes hashes",
			payload: []any{12.0, []any{
				[]any{"BlockStored", []any{hashBytes, []byte{1, 2}}, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 9}, []any{1, 2}, 1, nil, "GPU", nil},
				[]any{"BlockRemoved", []any{hashBytes}, "GPU"},
			}},
			want: Batch{TS: 12, Events: []Event{
				BlockStored{BlockHashes: []uint64{0x0102030405060708, 0x0102}, ParentBlockHash: u64(9), TokenIDs: []uint32{1, 2}, BlockSize: 1, Medium: MediumGPU},
				BlockRemoved{BlockHashes: []uint64{0x0102030405060708}, Medium: MediumGPU},
			}},
		},
		{
			name: "older positional BlockStored without medium",
			payload: []any{13.0, []any{
				[]any{"BlockStored", []any{uint64(5)}, nil, []any{7}, 1, nil},
				[]any{"BlockRemoved", []any{uint64(5)}},
			}},
			want: Batch{TS: 13, Events: []Event{
				BlockStored{BlockHashes: []uint64{5}, TokenIDs: []uint32{7}, BlockSize: 1, Medium: MediumGPU},
				BlockRemoved{BlockHashes: []uint64{5}, Medium: MediumGPU},
			}},
		},
		{
			name: "newer positional BlockStored with trailing fields",
			payload: []any{14.0, []any{
				[]any{"BlockStored", []any{uint64(5)}, uint64(4), []any{7}, 1, nil, "CPU", nil, []any{"x"}, 2, "full", nil},
				[]any{"BlockRemoved", []any{uint64(5)}, "CPU", 2},
			}, nil},
			want: Batch{TS: 14, Events: []Event{
				BlockStored{BlockHashes: []uint64{5}, ParentBlockHash: u64(4), TokenIDs: []uint32{7}, BlockSize: 1, Medium: MediumCPU},
				BlockRemoved{BlockHashes: []uint64{5}, Medium: MediumCPU},
			}},
		},
		{
			name: "negative int hash from builtin hash",
			payload: []any{15.0, []any{
				[]any{"BlockRemoved", []any{int64(-2)}, "GPU"},
			}},
			want: Batch{TS: 15, Events: []Event{BlockRemoved{BlockHashes: []uint64{^uint64(0) - 1}, Medium: MediumGPU}}},
		},
		{
			name: "unknown positional tag skipped",
			payload: []any{16, []any{
				[]any{"BlockPinned", []any{uint64(1)}, map[string]any{"deep": []any{1, 2}}},
				[]any{"AllBlocksCleared"},
			}},
			want: Batch{TS: 16, Events: []Event{AllBlocksCleared{}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(mustMarshal(t, tt.payload))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
	}{
		{"empty", nil},
		{"not an array", []byte{0xc3}},
		{"batch too short", mustMarshalNoT([]any{1.0})},
		{"events not a list", mustMarshalNoT([]any{1.0, "x"})},
		{"truncated", mustMarshalNoT([]any{1.0, []any{[]any{"BlockStored", []any{uint64(1)}, nil, []any{1}, 1}}})[:10]},
		{"BlockStored too short", mustMarshalNoT([]any{1.0, []any{[]any{"BlockStored", []any{uint64(1)}}}})},
		{"nil hash", mustMarshalNoT([]any{1.0, []any{[]any{"BlockRemoved", []any{nil}}}})},
		{"tag not a string", mustMarshalNoT([]any{1.0, []any{[]any{1, 2}}})},
		{"map event without type", mustMarshalNoT([]any{1.0, []any{map[string]any{"block_hashes": []any{}}}})},
		{"huge claimed list", []byte{0x92, 0x01, 0xdd, 0xff, 0xff, 0xff, 0xff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.payload)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode error %v, want ErrMalformed", err)
			}
		})
	}
}

func mustMarshalNoT(v any) []byte {
	raw, err := msgpack.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}

func BenchmarkEncode(b *testing.B) {
	batch := benchBatch()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(batch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	raw, err := Encode(benchBatch())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// benchBatch is one engine step storing a 1,024-token prompt in 16-token blocks.
func benchBatch() Batch {
	hashes := make([]uint64, 64)
	tokens := make([]uint32, 64*16)
	for i := range hashes {
		hashes[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	for i := range tokens {
		tokens[i] = uint32(i * 31 % 128000)
	}
	return Batch{TS: 1767225600.25, Events: []Event{
		BlockStored{BlockHashes: hashes, TokenIDs: tokens, BlockSize: 16, Medium: MediumGPU},
		BlockRemoved{BlockHashes: hashes[:8], Medium: MediumCPU},
	}}
}
