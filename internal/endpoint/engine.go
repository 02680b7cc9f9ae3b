package endpoint

import (
	"errors"
	"fmt"

	"github.com/capstan-dev/capstan/internal/engines"
)

// SetEngines says which real engines this machine has (capstan.yaml
// engines). Without it every image but capstan/sim's stands in as simulated
// when it can (engines.Machine.Choose with nothing installed).
func (s *Service) SetEngines(m engines.Machine) { s.engines = m }

// chooseEngine decides, at CreateModel, which engine m's container image
// runs (engines.Machine.Choose) and records it in m. Errors are
// ValidationExceptions naming the field, and nothing is stored.
func (s *Service) chooseEngine(m *Model) (engines.Choice, error) {
	c, path := m.PrimaryContainer, "PrimaryContainer"
	if c == nil && len(m.Containers) > 0 {
		c, path = &m.Containers[0], "Containers.1"
	}
	image := ""
	if c != nil {
		image = c.Image
	}
	ch, err := s.engines.Choose(image)
	if err != nil {
		var unknown *engines.ErrUnknownImage
		if errors.As(err, &unknown) {
			return ch, &Error{Kind: ErrInvalid, Err: err, Message: fmt.Sprintf(
				"%s.Image: %s (capstan/sim is the simulated engine; docs/engines.md lists each engine's images)", path, err)}
		}
		return ch, &Error{Kind: ErrInvalid, Err: err, Message: fmt.Sprintf("%s.Image: %s", path, err)}
	}
	m.Engine, m.EngineNote = ch.Engine, ch.Note
	if ch.Engine == engines.Sim {
		return ch, nil
	}
	if ch.Adapter.Format == engines.FormatGGUF {
		md, err := containerModelData(c, path)
		if err != nil {
			return ch, err
		}
		if md.uri == "" {
			return ch, &Error{Kind: ErrInvalid, Message: fmt.Sprintf(
				"%s: %s loads a .gguf file: give ModelDataUrl (a model.tar.gz holding it) or ModelDataSource.S3DataSource", path, ch.Adapter.Title)}
		}
		if s.models == nil {
			return ch, &Error{Kind: ErrInvalid, Message: fmt.Sprintf(
				"%s: %s loads a .gguf file from the model data, and this server fetches none (configure modelSources.s3)", path, ch.Adapter.Title)}
		}
	}
	return ch, nil
}

// modelFormat is what m's model folder must hold for the engine it runs.
func modelFormat(m *Model) engines.ModelFormat {
	a, err := engines.ByName(m.Engine)
	if err != nil {
		return engines.FormatHF
	}
	return a.Format
}
