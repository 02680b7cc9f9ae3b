package events

// Media a block may live on, as vLLM names them in the medium field. GPU
// and CPU are vLLM's own (the CPU one is its offloading connector's); DISK
// and REMOTE are capstan's for the tiers shared beyond one replica:
// tieredstorage, a store shared by the replicas of one node, and a store
// shared by every replica (Redis). A BlockStored on DISK or REMOTE says the
// publisher wrote the block there; the block is then as near to every
// replica that shares the tier.
const (
	MediumGPU    = "GPU"
	MediumCPU    = "CPU"
	MediumDisk   = "DISK"
	MediumRemote = "REMOTE"
)

// Event is one KV cache event: BlockStored, BlockRemoved or AllBlocksCleared.
// Decode always yields values; Encode also accepts pointers to them.
type Event interface{ isEvent() }

// BlockStored says the engine now holds these blocks, a chain that continues
// from ParentBlockHash (nil: the chain starts at the root). TokenIDs are the
// tokens of all the blocks, BlockSize per block.
type BlockStored struct {
	BlockHashes     []uint64
	ParentBlockHash *uint64
	TokenIDs        []uint32
	BlockSize       int
	Medium          string
}

// BlockRemoved says the engine dropped these blocks from Medium.
type BlockRemoved struct {
	BlockHashes []uint64
	Medium      string
}

// AllBlocksCleared says the engine dropped every block (e.g. a cache reset).
type AllBlocksCleared struct{}

func (BlockStored) isEvent()      {}
func (BlockRemoved) isEvent()     {}
func (AllBlocksCleared) isEvent() {}

// Batch is vLLM's KVEventBatch: the events of one engine step. TS is the
// engine's clock in seconds since the Unix epoch.
type Batch struct {
	TS               float64
	Events           []Event
	DataParallelRank *int
}

// Tag names on the wire (msgspec uses the class name).
const (
	tagBlockStored      = "BlockStored"
	tagBlockRemoved     = "BlockRemoved"
	tagAllBlocksCleared = "AllBlocksCleared"
)
