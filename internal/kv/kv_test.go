package kv

import (
	"strings"
	"testing"
)

func TestTokenizeRule(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"", 0},
		{"hi", 1},
		{" the", 1},
		{"hello", 2},           // 5 bytes -> 2 chunks
		{"hello world", 2 + 2}, // "hello" + " world"(6 bytes)
		{"a, b.", 4},           // "a" "," " b" "."
		{"line\nnext", 1 + 1 + 1},
		{"   ", 1}, // trailing whitespace is one piece
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			ids := Tokenize(tt.text)
			if len(ids) != tt.want {
				t.Fatalf("Tokenize(%q) gave %d tokens, want %d", tt.text, len(ids), tt.want)
			}
			if c := CountTokens(tt.text); c != tt.want {
				t.Fatalf("CountTokens(%q) = %d, want %d", tt.text, c, tt.want)
			}
			for _, id := range ids {
				if id >= VocabSize {
					t.Fatalf("id %d outside vocabulary", id)
				}
			}
		})
	}
}

func TestTokenizeDeterministicAndPrefixStable(t *testing.T) {
	a := Tokenize("You are a helpful assistant. Answer briefly.")
	b := Tokenize("You are a helpful assistant. Answer briefly.")
	if len(a) != len(b) {
		t.Fatal("non-deterministic length")
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("non-deterministic ids")
		}
	}
	// Appending text never changes the tokens of a prefix that ends on a piece boundary.
	p := Tokenize("<|system|>\nshared context\n")
	q := Tokenize("<|system|>\nshared context\n<|user|>\nquestion")
	for i := range p {
		if p[i] != q[i] {
			t.Fatalf("prefix token %d differs", i)
		}
	}
}

func TestBlockHashesChainAndShareOnlyCommonPrefix(t *testing.T) {
	root := RootHash("llama-3.1-8b")
	shared := strings.Repeat("common system prompt words ", 20)
	a := BlockHashes(root, Tokenize(shared+"first question here"), 16)
	b := BlockHashes(root, Tokenize(shared+"second question is different"), 16)
	nShared := CountTokens(shared) / 16
	if nShared < 2 {
		t.Fatalf("test prompt too short: %d blocks", nShared)
	}
	for i := 0; i < nShared; i++ {
		if a[i] != b[i] {
			t.Fatalf("shared block %d hashes differ", i)
		}
	}
	other := BlockHashes(RootHash("qwen3-32b"), Tokenize(shared), 16)
	if other[0] == a[0] {
		t.Fatal("different models share a block hash")
	}
	// Only full blocks are hashed.
	if got := len(BlockHashes(root, make([]uint32, 47), 16)); got != 2 {
		t.Fatalf("47 tokens gave %d blocks, want 2", got)
	}
}

func TestChatPromptHistoryIsAPrefix(t *testing.T) {
	turn1 := []Message{{"system", "be brief"}, {"user", "hi"}}
	turn2 := append(append([]Message{}, turn1...), Message{"assistant", "hello"}, Message{"user", "more"})
	p1 := ChatPrompt(turn1)
	p2 := ChatPrompt(turn2)
	hist := strings.TrimSuffix(p1, "<|assistant|>\n")
	if !strings.HasPrefix(p2, hist) {
		t.Fatalf("history not a prefix:\n%q\n%q", p1, p2)
	}
}

func BenchmarkTokenize(b *testing.B) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 100)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Tokenize(text)
	}
}

func BenchmarkBlockHashes(b *testing.B) {
	tokens := Tokenize(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 400))
	root := RootHash("m")
	for b.Loop() {
		BlockHashes(root, tokens, 16)
	}
}
