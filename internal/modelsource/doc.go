// Package modelsource turns a deployment's model source (the manifest's
// modelSourceConfig, or a JumpStart model id) into a local model folder that
// holds a Hugging Face config.json, which the engine reads for the
// architecture.
//
// It owns: downloading from any S3-compatible endpoint into a cache
// (atomic, checksum-verified, skipping unchanged files), resolving FSx paths
// in place under a configured root, fetching config.json from the Hugging
// Face hub (with a clear error when it cannot be reached), and generating a
// folder for JumpStart hub ids from the model catalog. It bounds what
// archive extractions may write (per archive, in total across the cache, and
// by compression ratio) and removes extracted archives no model uses any
// more (RemoveUnusedModelData). Every failure is a
// *SourceError whose Reason (NotFound, Unreachable, …) becomes the
// deployment's failure condition. See docs/model-sources.md.
package modelsource
