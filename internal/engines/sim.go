package engines

import "strconv"

// SimAPIKeyEnv is where `capstan engine sim` reads the API key it requires
// (Adapter.APIKeyEnv).
const SimAPIKeyEnv = "CAPSTAN_ENGINE_API_KEY"

// simAdapter is capstan's simulated engine (`capstan engine sim`): the
// default, calibrated to the catalog's GPUs, with vLLM's metrics and KV
// events.
var simAdapter = &Adapter{
	Name:          Sim,
	Title:         "capstan simulated engine",
	Images:        []string{"capstan/sim", "capstan/sim:*"},
	Format:        FormatHF,
	Invocations:   InvocationsAll,
	AnnouncesPort: true,
	HealthPath:    "/health",
	APIKeyEnv:     SimAPIKeyEnv,
	KVEvents:      true,
	TieredKV:      true,
	Metrics:       vllmMetrics,
	args: func(l Launch) []string {
		s := l.Spec
		args := []string{"engine", "sim", "--gpu", s.GPU, "--host", l.Host, "--port", strconv.Itoa(l.Port)}
		if s.Model != "" {
			args = append(args, "--model", s.Model)
		}
		if s.ModelDir != "" {
			args = append(args, "--model-dir", s.ModelDir)
		}
		if s.TensorParallel > 0 {
			args = append(args, "--tensor-parallel", strconv.Itoa(s.TensorParallel))
		}
		if s.MIGProfile != "" {
			args = append(args, "--mig-profile", s.MIGProfile)
		}
		if s.ServedModelName != "" {
			args = append(args, "--served-model-name", s.ServedModelName)
		}
		if t := s.KVTiers; t.CPUBytes > 0 {
			args = append(args, "--cpu-cache-bytes="+strconv.FormatInt(t.CPUBytes, 10))
		}
		if t := s.KVTiers; t.StorageBytes > 0 {
			args = append(args, "--tiered-storage-dir="+t.StorageDir, "--tiered-storage-bytes="+strconv.FormatInt(t.StorageBytes, 10))
		}
		if t := s.KVTiers; t.RedisURL != "" {
			args = append(args, "--shared-cache="+t.RedisURL)
		}
		if s.KVEventsEndpoint != "" {
			args = append(args, "--kv-events="+s.KVEventsEndpoint)
		}
		return args
	},
}
