package deployment

import (
	"context"
	"fmt"

	dto "github.com/prometheus/client_model/go"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/runtime"
)

// The simulator's KV tier series a KV report reads, beyond what the
// engine's adapter maps (usage, cache size, prefix hits). Their tier label
// is "l1", "tieredstorage" or "l2" (Redis). The used/capacity gauges are
// read when an engine exports them (by these names) and the tier's use
// shows "-" otherwise.
const (
	metricTierHits     = "capstan_engine_kv_tier_hits_total"
	metricTierBytes    = "capstan_engine_kv_tier_bytes_total"
	metricTierUsed     = "capstan_engine_kv_tier_used_bytes"
	metricTierCapacity = "capstan_engine_kv_tier_capacity_bytes"
)

// engineTier maps the engine's tier label to the report's tier name.
var engineTier = map[string]string{"l1": manifest.KVTierL1, "tieredstorage": manifest.KVTierTieredStorage, "l2": manifest.KVTierRedis}

// engineKV is what one replica's /metrics says about its KV cache.
type engineKV struct {
	usage                float64
	gpuBlocks, blockSize int64
	queries, hits        float64
	tierHits             map[string]float64 // blocks, by report tier name
	tierLoad             map[string]float64 // bytes loaded, by report tier name
	tierUsed, tierCap    map[string]float64 // bytes, by report tier name, when exported
}

// kvReplica is one running replica of a report: its engine flags and, once
// scraped, its metrics.
type kvReplica struct {
	id, model, node, engine string
	l1Bytes, tieredBytes    int64
	redis                   bool
	m                       *engineKV
}

// KVCache reports the KV cache tiers of one object: their sizes from the
// running replicas' engine flags (from the spec when none runs), their use
// and hit rates from the gateway's last read of the replicas' /metrics (at
// most one scrape interval old). manifest.ErrNotFound for an unknown object;
// a replica whose last read failed, or that the gateway has not read, is
// left out of use and hit rates (Scraped says how many count).
func (s *Service) KVCache(ctx context.Context, kind, namespace, name string) (manifest.KVCacheReport, error) {
	if err := checkKind(kind); err != nil {
		return manifest.KVCacheReport{}, err
	}
	if namespace == "" {
		namespace = manifest.DefaultNamespace
	}
	rec, found, err := s.load(key(kind, namespace, name))
	if err != nil {
		return manifest.KVCacheReport{}, err
	}
	if !found {
		return manifest.KVCacheReport{}, fmt.Errorf("%s %s/%s: %w", kind, namespace, name, manifest.ErrNotFound)
	}
	c := s.ctrl
	var reps []*kvReplica
	for _, r := range rec.Replicas {
		rep, err := c.rt.Get(r.ID)
		if err != nil || rep.State != runtime.StateHealthy || rep.Addr == "" {
			continue
		}
		kr := replicaFlags(rep)
		if n, ok := c.o.Cluster.NodeOf(r.ID); ok {
			kr.node = n.Name
		}
		reps = append(reps, kr)
	}
	c.readKV(reps)
	p, _ := planFor(rec.obj(), c.o.Engines) // nil: no tier beyond what the replicas run
	return c.kvReport(p, reps), nil
}

// replicaFlags reads the KV tiers a replica was started with.
func replicaFlags(rep runtime.Replica) *kvReplica {
	t := rep.Spec.KVTiers
	return &kvReplica{id: rep.Spec.ID, model: rep.Spec.Model, engine: rep.Spec.Engine,
		l1Bytes: t.CPUBytes, tieredBytes: t.StorageBytes, redis: t.RedisURL != ""}
}

// readKV takes each replica's KV figures from the gateway's last read of
// its /metrics: the one reader of engine metrics, mapped by the replica's
// engine adapter.
func (c *Controller) readKV(reps []*kvReplica) {
	for _, r := range reps {
		rd, ok := c.o.Gateway.LastEngineRead(r.id)
		if !ok || rd.Err != nil {
			continue
		}
		r.m = engineKVOf(rd.Stats)
	}
}

// engineKVOf is the KV part of one read of an engine's metrics (the
// simulator's tier counters are read by their own names).
func engineKVOf(st engines.Stats) *engineKV {
	fams := st.Families
	m := &engineKV{tierHits: map[string]float64{}, tierLoad: map[string]float64{}, tierUsed: map[string]float64{}, tierCap: map[string]float64{},
		usage: st.KVUsage, queries: st.PrefixQueries, hits: st.PrefixHits,
		gpuBlocks: int64(st.NumGPUBlocks), blockSize: int64(st.BlockSize)}
	byTier := func(name string, into map[string]float64, keep func(*dto.Metric) bool) {
		for _, s := range fams[name].GetMetric() {
			if keep != nil && !keep(s) {
				continue
			}
			if t, ok := engineTier[engines.LabelValue(s, "tier")]; ok {
				into[t] += engines.SampleValue(s)
			}
		}
	}
	byTier(metricTierHits, m.tierHits, nil)
	byTier(metricTierBytes, m.tierLoad, func(s *dto.Metric) bool { return engines.LabelValue(s, "direction") == "load" })
	byTier(metricTierUsed, m.tierUsed, nil)
	byTier(metricTierCapacity, m.tierCap, nil)
	return m
}

// kvReport aggregates the replicas into tiers: GPU always, and each lower
// tier the plan or a running replica has.
func (c *Controller) kvReport(p *plan, reps []*kvReplica) manifest.KVCacheReport {
	rep := manifest.KVCacheReport{Replicas: len(reps)}
	var it *catalog.InstanceType // for sizes from the spec when no replica runs
	if p != nil && len(p.instanceTypes) > 0 {
		if t, err := c.o.Catalog.InstanceType(p.instanceTypes[0]); err == nil {
			it = &t
		}
	}
	l1 := &manifest.KVTierReport{Name: manifest.KVTierL1, Scope: manifest.KVScopeReplica}
	ts := &manifest.KVTierReport{Name: manifest.KVTierTieredStorage, Scope: manifest.KVScopeNode}
	redis := &manifest.KVTierReport{Name: manifest.KVTierRedis, Scope: manifest.KVScopeShared}
	hasL1, hasTS, hasRedis := p != nil && p.l1, p != nil && p.tiered, p != nil && p.l2URL != ""

	// GPU, and the hit counts of every tier.
	gpu := manifest.KVTierReport{Name: manifest.KVTierGPU, Scope: manifest.KVScopeReplica}
	var gpuBlocks, usedBlocks, gpuHits float64
	tierTok := map[string]float64{}
	bytesKnown := true
	for _, r := range reps {
		if r.l1Bytes > 0 {
			hasL1 = true
			l1.Units++
			l1.CapacityBytes += r.l1Bytes
		}
		hasTS = hasTS || r.tieredBytes > 0
		hasRedis = hasRedis || r.redis
		m := r.m
		if m == nil {
			continue
		}
		rep.Scraped++
		rep.QueriedTokens += m.queries
		var tiersTok float64
		for t, blocks := range m.tierHits {
			tierTok[t] += blocks * float64(m.blockSize)
			tiersTok += blocks * float64(m.blockSize)
		}
		gpuHits += max(m.hits-tiersTok, 0)
		if m.gpuBlocks <= 0 {
			continue
		}
		gpu.Units++
		tokens := m.gpuBlocks * m.blockSize
		gpu.CapacityTokens += tokens
		gpuBlocks += float64(m.gpuBlocks)
		usedBlocks += m.usage * float64(m.gpuBlocks)
		if bpt := c.kvBytesPerToken(r); bpt > 0 {
			gpu.CapacityBytes += tokens * bpt
		} else {
			bytesKnown = false
		}
	}
	if !bytesKnown {
		gpu.CapacityBytes = 0
	}
	if gpuBlocks > 0 {
		gpu.Usage = ptrTo(usedBlocks / gpuBlocks)
	}
	if gpu.Units > 0 {
		gpu.EachBytes = gpu.CapacityBytes / int64(gpu.Units)
	}
	gpu.HitRate = hitRate(gpuHits, rep.QueriedTokens)
	rep.Tiers = append(rep.Tiers, gpu)

	if hasL1 {
		switch {
		case l1.Units > 0:
			l1.EachBytes = l1.CapacityBytes / int64(l1.Units)
		case it != nil && p != nil:
			l1.EachBytes = p.l1Bytes(*it)
		}
		l1.Usage = gaugeUse(reps, manifest.KVTierL1, func(r *kvReplica) int64 { return r.l1Bytes })
		l1.HitRate = hitRate(tierTok[manifest.KVTierL1], rep.QueriedTokens)
		rep.Tiers = append(rep.Tiers, *l1)
	}
	if hasTS {
		nodeTS(ts, reps)
		if ts.Units == 0 && it != nil && p != nil {
			ts.EachBytes = c.tieredBytes(p, *it)
		}
		ts.HitRate = hitRate(tierTok[manifest.KVTierTieredStorage], rep.QueriedTokens)
		rep.Tiers = append(rep.Tiers, *ts)
	}
	if hasRedis {
		// One server for all: the largest reading is the freshest.
		var used, capacity float64
		for _, r := range reps {
			if r.m != nil {
				used, capacity = max(used, r.m.tierUsed[manifest.KVTierRedis]), max(capacity, r.m.tierCap[manifest.KVTierRedis])
			}
		}
		if capacity > 0 {
			redis.CapacityBytes, redis.EachBytes, redis.Usage = int64(capacity), int64(capacity), ptrTo(used/capacity)
		}
		redis.HitRate = hitRate(tierTok[manifest.KVTierRedis], rep.QueriedTokens)
		rep.Tiers = append(rep.Tiers, *redis)
	}
	return rep
}

// nodeTS sizes the tieredstorage tier by node: each node's store counts
// once, at the largest budget its replicas were given, and its use is the
// largest reading among them (replicas of one model given one budget read
// one file).
func nodeTS(ts *manifest.KVTierReport, reps []*kvReplica) {
	budget, used, read := map[string]int64{}, map[string]float64{}, map[string]bool{}
	var order []string
	for _, r := range reps {
		if r.tieredBytes <= 0 {
			continue
		}
		n := r.node
		if n == "" {
			n = r.id // placement forgotten: count the replica alone
		}
		if _, seen := budget[n]; !seen {
			order = append(order, n)
		}
		budget[n] = max(budget[n], r.tieredBytes)
		if r.m != nil {
			if u, ok := r.m.tierUsed[manifest.KVTierTieredStorage]; ok {
				used[n], read[n] = max(used[n], u), true
			}
		}
	}
	var usedSum, capRead float64
	for _, n := range order {
		ts.Units++
		ts.CapacityBytes += budget[n]
		if read[n] {
			usedSum += used[n]
			capRead += float64(budget[n])
		}
	}
	if ts.Units > 0 {
		ts.EachBytes = ts.CapacityBytes / int64(ts.Units)
	}
	if capRead > 0 {
		ts.Usage = ptrTo(min(usedSum/capRead, 1))
	}
}

// gaugeUse is a per-replica tier's use from the engines' used-bytes
// gauges over their size (the capacity gauge, else the flag); nil when no
// replica exports it.
func gaugeUse(reps []*kvReplica, tier string, size func(*kvReplica) int64) *float64 {
	var used, capacity float64
	for _, r := range reps {
		if r.m == nil {
			continue
		}
		u, ok := r.m.tierUsed[tier]
		if !ok {
			continue
		}
		c := r.m.tierCap[tier]
		if c <= 0 {
			c = float64(size(r))
		}
		used, capacity = used+u, capacity+c
	}
	if capacity <= 0 {
		return nil
	}
	return ptrTo(min(used/capacity, 1))
}

// kvBytesPerToken is the KV bytes of one token of r's model: from the
// catalog, else from what its engine loaded from a tier per block.
func (c *Controller) kvBytesPerToken(r *kvReplica) int64 {
	if m, err := c.o.Catalog.Model(r.model); err == nil {
		return m.KVBytesPerToken()
	}
	if r.m == nil || r.m.blockSize <= 0 {
		return 0
	}
	for t, b := range r.m.tierLoad {
		if h := r.m.tierHits[t]; h > 0 && b > 0 {
			return int64(b / h / float64(r.m.blockSize))
		}
	}
	return 0
}

func hitRate(hitTokens, queried float64) *float64 {
	if queried <= 0 {
		return nil
	}
	return ptrTo(min(max(hitTokens/queried, 0), 1))
}

func ptrTo[T any](v T) *T { return &v }
