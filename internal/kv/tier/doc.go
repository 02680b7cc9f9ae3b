// Package tier owns the KV block stores below the GPU: L1, a node-local
// CPU-memory LRU bounded by bytes, and L2, a store shared by replicas on
// different nodes (Redis in production, an in-memory fake in tests).
//
// A simulated engine keeps no real KV tensors, so a tier holds one small
// record per block, keyed by the block's chained hash (kv.BlockHash). The
// engine charges transfer time for each block's simulated size and accounts
// the bytes moved; this package only answers "which leading blocks of this
// prefix do you hold?" and "remember these blocks". It does no timing, emits
// no events and knows nothing about models beyond an L2 namespace string.
package tier
