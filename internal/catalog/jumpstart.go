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
	if close := c.CloseJumpStartIDs(id, 5); len(close) > 0 {
		return Model{}, fmt.Errorf("unknown JumpStart model id %q; did you mean %s? (%d ids are known, see docs/model-sources.md)",
			id, strings.Join(close, ", "), len(c.jumpStart))
	}
	return Model{}, fmt.Errorf("unknown JumpStart model id %q; no known id is close to it (%d ids are known, see docs/model-sources.md; a catalog id such as %s works too)",
		id, len(c.jumpStart), strings.Join(c.modelNames[:min(3, len(c.modelNames))], ", "))
}

// genericTokens appear in many JumpStart ids and say nothing about which
// model is meant, so sharing them does not make two ids close.
var genericTokens = map[string]bool{"huggingface": true, "llm": true, "meta": true, "textgeneration": true,
	"instruct": true, "it": true, "chat": true, "hf": true, "model": true, "base": true}

func idTokens(s string) map[string]bool {
	out := map[string]bool{}
	for _, t := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return r == '-' || r == '_' || r == '.' || r == '/' }) {
		if !genericTokens[t] {
			out[t] = true
		}
	}
	return out
}

// CloseJumpStartIDs returns up to n known JumpStart ids close to id, closest
// first: those sharing a model-specific token with it (a family name, a
// version, a size; "huggingface", "llm", "instruct" … do not count) or
// within an edit distance of a quarter of its length. Ranked by edit
// distance less three per shared token.
func (c *Catalog) CloseJumpStartIDs(id string, n int) []string {
	q := strings.ToLower(strings.TrimSpace(id))
	if len(q) > 200 {
		q = q[:200] // bounds the edit-distance work
	}
	qt := idTokens(q)
	type cand struct {
		id    string
		score int
	}
	var cands []cand
	for _, k := range c.JumpStartIDs() {
		shared := 0
		for t := range idTokens(k) {
			if qt[t] {
				shared++
			}
		}
		d := levenshtein(q, k)
		if shared == 0 && d > max(2, len(q)/4) {
			continue
		}
		cands = append(cands, cand{k, d - 3*shared})
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].score < cands[j].score })
	out := make([]string, 0, n)
	for _, c := range cands {
		if len(out) == n {
			break
		}
		out = append(out, c.id)
	}
	return out
}

// levenshtein is the edit distance between a and b (bytes).
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
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

// JumpStart's default inference containers: the images SageMaker runs a
// public hub model in when the deployment names none. The hub's Meta and
// DeepSeek text-generation models run the Large Model Inference container
// (DJL Serving with vLLM); its huggingface-llm-* models run Hugging Face's
// TGI container.
const (
	JumpStartLMIImage = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.31.0-lmi13.0.0-cu124"
	JumpStartTGIImage = "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference:2.4.0-tgi2.4.0-gpu-py311-cu124-ubuntu22.04"
)

// JumpStartImage is the container image JumpStart serves hub model id in:
// the TGI container for huggingface-llm-* ids, the LMI container for the
// rest (and for catalog ids, which name no hub family).
func JumpStartImage(id string) string {
	if strings.HasPrefix(strings.ToLower(strings.TrimSpace(id)), "huggingface-llm-") {
		return JumpStartTGIImage
	}
	return JumpStartLMIImage
}
