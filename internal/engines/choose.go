package engines

import (
	"errors"
	"fmt"
)

// Machine is the engines installed on this machine: capstan.yaml's engines
// map, by adapter name.
type Machine map[string]Installed

// Choice is what a container image runs on this machine.
type Choice struct {
	Adapter *Adapter
	// Engine is the adapter replicas run: Adapter's name, or the simulator
	// when it stands in for an engine this machine lacks.
	Engine string
	// Note, when set, says the simulator stands in and why: docs, logs and
	// events show it so a stand-in is never silent.
	Note string
}

// Simulated reports whether the simulator stands in for the image's engine.
func (c Choice) Simulated() bool { return c.Adapter.Name != Sim && c.Engine == Sim }

// ErrNotInstalled says an image's engine is not on this machine and the
// simulator cannot stand in for it.
var ErrNotInstalled = errors.New("engine not installed")

// Choose decides what image runs here:
//   - an image no adapter matches is an error (*ErrUnknownImage);
//   - capstan/sim (or no image) is the simulator;
//   - an engine with engines.<name>.binary set runs that binary, and it
//     missing is an error naming the key: configured means meant;
//   - an engine not configured runs its default binary when that is on PATH;
//   - otherwise the simulator stands in (with a Note) for engines that
//     load Hugging Face models, which it reads too, so the published
//     vLLM and LMCache manifests run on a laptop; a GGUF engine cannot be
//     simulated and is an error naming the key.
func (m Machine) Choose(image string) (Choice, error) {
	a, err := ForImage(image)
	if err != nil {
		return Choice{}, err
	}
	if a.Name == Sim {
		return Choice{Adapter: a, Engine: Sim}, nil
	}
	inst, configured := m[a.Name]
	if configured && inst.Binary != "" {
		if _, err := a.Resolve(inst); err != nil {
			return Choice{}, err
		}
		return Choice{Adapter: a, Engine: a.Name}, nil
	}
	if a.DefaultBinary != "" {
		if _, err := a.Resolve(inst); err == nil {
			return Choice{Adapter: a, Engine: a.Name}, nil
		}
	}
	if a.Format == FormatGGUF {
		return Choice{}, fmt.Errorf("image %q is %s, which is not installed here: set engines.%s.binary in capstan.yaml to its %s (the simulated engine cannot load .gguf files): %w",
			image, a.Title, a.Name, a.binaryNoun(), ErrNotInstalled)
	}
	return Choice{Adapter: a, Engine: Sim, Note: fmt.Sprintf(
		"image %s is %s, which is not installed here (set engines.%s.binary in capstan.yaml): capstan's simulated engine stands in", image, a.Title, a.Name)}, nil
}

func (a *Adapter) binaryNoun() string {
	if a.DefaultBinary != "" {
		return a.DefaultBinary + " executable"
	}
	return "executable"
}
