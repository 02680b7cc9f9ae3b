package nodes

import (
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/hyperpod"
)

const gib = int64(1) << 30

// catalog is a small instance-type table for tests.
var catalog = map[string]cluster.Resources{
	"ml.g5.xlarge":    {GPUs: 1, MilliCPU: 4000, MemoryBytes: 16 * gib},
	"ml.g5.12xlarge":  {GPUs: 4, MilliCPU: 48000, MemoryBytes: 192 * gib},
	"ml.p4d.24xlarge": {GPUs: 8, MilliCPU: 96000, MemoryBytes: 1152 * gib},
	"ml.m5.xlarge":    {GPUs: 0, MilliCPU: 4000, MemoryBytes: 16 * gib},
}

func capacityOf(t string) (cluster.Resources, bool) {
	r, ok := catalog[t]
	return r, ok
}

func gpus(n int) cluster.Resources {
	return cluster.Resources{GPUs: n, MilliCPU: int64(n) * 1000, MemoryBytes: int64(n) * 4 * gib}
}

func offer(group, typ string, ct hyperpod.CapacityType, price float64, avail int) hyperpod.Offering {
	return hyperpod.Offering{Cluster: "c", Group: group, InstanceType: typ, CapacityType: ct, PricePerHour: price, Available: avail}
}

func pend(id string, req cluster.Resources, types ...string) PendingReplica {
	return PendingReplica{ID: id, Cluster: "c", InstanceTypes: types, Request: req}
}
