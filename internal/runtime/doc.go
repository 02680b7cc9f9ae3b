// Package runtime defines how capstan runs replicas: the Runtime interface the
// endpoint and deployment controllers drive, and the replica states they see.
// Implementations live in subpackages (local: OS processes of `capstan engine
// sim` on this host; a Kubernetes runtime can be added behind the same seam).
//
// It must not know about endpoints' lifecycle: controllers decide what runs;
// a runtime only runs it and reports states.
package runtime
