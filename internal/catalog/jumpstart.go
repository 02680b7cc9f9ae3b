package catalog

import (
	"fmt"
	"sort"
	"strings"
)

// PublicHub is the JumpStart hub whose ids the catalog resolves
// (JumpStartModel spec.model.modelHubName defaults to it).
const PublicHub = "SageMakerPublicHub"

// JumpStartModel resolves a JumpStart hub content id (e.g.
// "deepseek-llm-r1-distill-qwen-1-5b" or
// "meta-textgeneration-llama-3-1-8b-instruct") to a catalog model. Ids listed
// under a model's jumpStartIds win; a catalog id or alias is accepted as well,
// so a hub id that happens to equal the catalog id needs no extra entry. An
// unknown id is an error listing a few known ids.
func (c *Catalog) JumpStartModel(id string) (Model, error) {
	k := strings.ToLower(strings.TrimSpace(id))
	if m, ok := c.jumpStart[k]; ok {
		return m, nil
	}
	if m, ok := c.models[k]; ok {
		return m, nil
	}
	known := c.JumpStartIDs()
	const show = 6
	more := ""
	if len(known) > show {
		more = fmt.Sprintf(" (and %d more)", len(known)-show)
		known = known[:show]
	}
	return Model{}, fmt.Errorf("unknown JumpStart model id %q; known ids include: %s%s", id, strings.Join(known, ", "), more)
}

// JumpStartIDs lists every JumpStart id the catalog resolves, sorted.
func (c *Catalog) JumpStartIDs() []string {
	out := make([]string, 0, len(c.jumpStart))
	for _, id := range c.modelNames {
		m := c.models[strings.ToLower(id)]
		out = append(out, m.JumpStartIDs...)
	}
	sort.Strings(out)
	return out
}
