// Package tagging owns the tags of capstan's SageMaker resources (models,
// endpoint configurations, endpoints, training plans and HyperPod clusters)
// as AddTags, ListTags and DeleteTags address them: by ARN.
//
// A resource's create-time tags live in its own record, written by the
// package that owns it in the transaction that creates it. The first AddTags
// or DeleteTags on the resource copies that set into this package's bucket
// (keyed by the resource's bucket and key), which from then on holds the
// resource's current tags. Every change is one store transaction that reads
// the resource and writes the new set, so a change never lands on a resource
// that is gone, and a refused change writes nothing. The record goes with
// the resource: the store deletes it in the transaction that deletes the
// resource (store.OnDelete), so a resource created again under the same name
// starts from its own create-time tags, never from its predecessor's.
//
// The package finds resources through a Resolver per ARN resource type and
// knows nothing else about them. It does not check tag syntax (the protocol
// package does, in its own words); it enforces the per-resource limit of
// MaxTags after a merge. It must not touch the resources' records.
package tagging
