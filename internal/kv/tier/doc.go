// Package tier owns the KV block stores below the GPU: L1, a node-local
// CPU-memory LRU bounded by bytes; Disk, the tieredstorage tier, a bounded,
// checksummed store of block records on a node's local disk (one slot file
// per namespace, LRU within each block's two 16-way sets) that every replica (process) on the
// node shares; and L2, a store shared by replicas on different nodes (Redis
// in production, an in-memory fake in tests). Disk also implements L2's
// interface, so the engine asks it the same way.
//
// A simulated engine keeps no real KV tensors, so a tier holds one small
// record per block, keyed by the block's chained hash (kv.BlockHash). The
// engine charges transfer time for each block's simulated size and accounts
// the bytes moved; this package only answers "which leading blocks of this
// prefix do you hold?" and "remember these blocks". Disk counts capacity in
// simulated block bytes too (DiskOptions.BlockBytes per record), while its
// file holds a 64-byte slot per block: the budget is the one a real engine's
// tensors would use, the disk footprint is not. It does no timing, emits no
// events and knows nothing about models beyond a namespace string.
package tier
