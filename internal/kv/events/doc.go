// Package events owns capstan's KV event stream, byte-compatible with vLLM's
// (vllm/distributed/kv_events.py), so a router written for vLLM engines can
// consume capstan engines' events and capstan's router can consume vLLM's.
//
// It owns the event types and their msgpack codec (Encode/Decode), the ZMQ
// Publisher an engine uses to announce the blocks it stores and drops (with
// vLLM's replay socket), and the Subscriber a router uses to follow one or
// many engines, detecting gaps by sequence number. It does not decide what
// an event means for routing; that is the router's business.
//
// # Wire format
//
// One ZMQ PUB multipart message per batch, three frames:
//
//	frame 1: topic bytes (may be empty)
//	frame 2: sequence number, 8 bytes big-endian, consecutive from 0
//	frame 3: msgpack payload, a KVEventBatch
//
// The payload is encoded as msgspec encodes vLLM's structs (array_like=True,
// omit_defaults=True, tag=True on events):
//
//	batch:            [ts float64, [event, ...]]            (+ data_parallel_rank int, only when set)
//	BlockStored:      ["BlockStored", block_hashes [uint64...], parent_block_hash uint64|nil,
//	                   token_ids [uint...], block_size int, lora_id nil, medium str, lora_name nil]
//	BlockRemoved:     ["BlockRemoved", block_hashes [uint64...], medium str]
//	AllBlocksCleared: ["AllBlocksCleared"]
//
// Encode always writes exactly these arrays: all eight BlockStored positions
// (vLLM's lora_id, medium and lora_name have no defaults, so msgspec writes
// them too) and medium always present, so a consumer can weight tiers. The
// newer optional BlockStored fields (extra_keys, group_idx, ...) equal their
// defaults and are omitted, as msgspec does. Integers use msgpack's smallest
// encoding, ts is always a float64.
//
// Decode accepts what real vLLM versions send: positional events as above
// with any number of trailing fields (extra ones are skipped), the named-field
// map encoding ({"type": "BlockStored", "block_hashes": ..., ...}, also for the
// batch: {"ts":..., "events":..., "data_parallel_rank":...}), and block
// hashes as integers (negative ones, from old vLLM's builtin hash, are taken
// as their two's complement uint64) or as bytes, which become the big-endian
// uint64 of their last 8 bytes (shorter byte strings are zero-extended on the
// left). A nil or absent medium decodes as "GPU", vLLM's default. Events
// with an unknown tag are skipped, not fatal.
package events
