package kv

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
)

// VocabSize is the size of the simulated vocabulary token ids fall into.
const VocabSize = 128000

// CharsPerToken is the tokenizer's chunk width: a piece of text costs one token
// per started CharsPerToken bytes, close to the ~4 characters per token that
// BPE tokenizers average on English.
const CharsPerToken = 4

// Tokenize turns text into token ids with a documented, deterministic rule:
//
//  1. Text is cut into pieces: a run of letters and digits together with the
//     whitespace before it, or a single other character (punctuation, symbol,
//     a newline) together with the whitespace before it.
//  2. Each piece becomes ceil(len(piece)/4) tokens: its bytes cut into 4-byte
//     chunks.
//  3. A chunk's id is xxhash64(chunk) mod VocabSize.
//
// The same text always gives the same ids, on every machine, so the engine's
// prefix cache, the router's prefix index and the load generator agree on
// token counts and block boundaries without a real tokenizer.
func Tokenize(text string) []uint32 {
	ids := make([]uint32, 0, len(text)/CharsPerToken+1)
	forEachPiece(text, func(piece string) {
		for len(piece) > 0 {
			n := min(CharsPerToken, len(piece))
			ids = append(ids, uint32(xxhash.Sum64String(piece[:n])%VocabSize))
			piece = piece[n:]
		}
	})
	return ids
}

// CountTokens returns len(Tokenize(text)) without allocating the ids.
func CountTokens(text string) int {
	n := 0
	forEachPiece(text, func(piece string) { n += (len(piece) + CharsPerToken - 1) / CharsPerToken })
	return n
}

func forEachPiece(text string, fn func(string)) {
	start := 0 // start of the current piece, including leading whitespace
	i := 0
	for i < len(text) {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case unicode.IsSpace(r) && r != '\n':
			i += size // whitespace joins the next piece
		case isWordRune(r):
			i += size
			for i < len(text) {
				r, size = utf8.DecodeRuneInString(text[i:])
				if !isWordRune(r) {
					break
				}
				i += size
			}
			fn(text[start:i])
			start = i
		default:
			i += size
			fn(text[start:i])
			start = i
		}
	}
	if start < len(text) {
		fn(text[start:]) // trailing whitespace
	}
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// Message is one chat turn.
type Message struct {
	Role    string
	Content string
}

// ChatPrompt renders chat messages with capstan's chat template, the text the
// engine tokenizes for a chat request:
//
//	<|role|>\ncontent\n   for each message, then   <|assistant|>\n
//
// Because earlier turns render identically, a conversation's next request shares
// its whole history as a prefix with the previous one.
func ChatPrompt(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|")
		b.WriteString(m.Role)
		b.WriteString("|>\n")
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	b.WriteString("<|assistant|>\n")
	return b.String()
}
