// Package kv holds what the engine and the router must agree on about the KV
// cache: the deterministic tokenizer that turns text into token ids, the chat
// template, and the chained block hashes that name cached prompt blocks.
// Subpackages own the tiered block stores (tier) and the vLLM-compatible KV
// event stream (events). Nothing here does I/O.
package kv
