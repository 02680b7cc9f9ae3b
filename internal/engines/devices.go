package engines

import (
	"strings"

	"github.com/capstan-dev/capstan/internal/runtime"
)

// cudaDevices is the device selection of a CUDA engine: the GPU indices
// (or MIG device UUIDs) placement gave the replica. With none, the engine
// sees every device of the machine.
func cudaDevices(l Launch) map[string]string {
	if len(l.Spec.Devices) == 0 {
		return nil
	}
	return map[string]string{"CUDA_VISIBLE_DEVICES": strings.Join(l.Spec.Devices, ",")}
}

// gpuDevice reports whether the replica runs on a GPU rather than a CPU
// instance type (whose catalog device name is the instance type, ml.*).
func gpuDevice(s runtime.ReplicaSpec) bool {
	return s.GPU != "" && !strings.HasPrefix(s.GPU, "ml.")
}
