package runtimeapi

import (
	"io"
	"testing"
)

// BenchmarkPayloadPartFrame measures encoding one 64-byte PayloadPart event.
func BenchmarkPayloadPartFrame(b *testing.B) {
	fw := newFrameWriter(io.Discard)
	chunk := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		if err := fw.payloadPart(chunk); err != nil {
			b.Fatal(err)
		}
	}
}
