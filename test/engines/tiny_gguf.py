"""Writes a tiny llama-architecture GGUF model with random weights.

Usage: tiny_gguf.py VOCAB.gguf OUT.gguf  (gguf-py on PYTHONPATH)

The tokenizer is copied whole from a llama.cpp vocab-only file, so prompts
tokenize exactly as a real llama model's do; the network is 2 layers of
width 128, so a CPU prefills and decodes it quickly and any prompt-length
effect (prefix caching, routing) shows in real compute. The seed is fixed:
the same inputs always write the same file.
"""
import sys

import numpy as np
import gguf

N_EMBD, N_LAYER, N_HEAD, N_HEAD_KV, N_FF, N_CTX = 128, 2, 4, 4, 384, 4096

vocab_path, out_path = sys.argv[1], sys.argv[2]
vocab = gguf.GGUFReader(vocab_path)
tokens = vocab.fields["tokenizer.ggml.tokens"]
n_vocab = len(tokens.data)

w = gguf.GGUFWriter(out_path, "llama")
w.add_name("capstan-tiny-llama")
w.add_context_length(N_CTX)
w.add_embedding_length(N_EMBD)
w.add_block_count(N_LAYER)
w.add_feed_forward_length(N_FF)
w.add_head_count(N_HEAD)
w.add_head_count_kv(N_HEAD_KV)
w.add_rope_dimension_count(N_EMBD // N_HEAD)
w.add_layer_norm_rms_eps(1e-5)
w.add_vocab_size(n_vocab)
w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

for key, field in vocab.fields.items():
    if not key.startswith("tokenizer."):
        continue
    vtype = field.types[0]
    if vtype == gguf.GGUFValueType.ARRAY:
        w.add_array(key, [field.contents(i) for i in range(len(field.data))])
    else:
        w.add_key_value(key, field.contents(), vtype)
# A chat template, so /v1/chat/completions formats messages the usual way.
w.add_chat_template(
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

rng = np.random.default_rng(7)


def tensor(name, *shape, dtype=np.float32):
    # gguf-py takes numpy's row-major shape; small weights keep activations sane.
    w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(dtype))


# The two vocabulary-sized matrices are most of the file: f16 halves it.
tensor("token_embd.weight", n_vocab, N_EMBD, dtype=np.float16)
w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
tensor("output.weight", n_vocab, N_EMBD, dtype=np.float16)
for i in range(N_LAYER):
    w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    tensor(f"blk.{i}.attn_q.weight", N_EMBD, N_EMBD)
    tensor(f"blk.{i}.attn_k.weight", N_EMBD * N_HEAD_KV // N_HEAD, N_EMBD)
    tensor(f"blk.{i}.attn_v.weight", N_EMBD * N_HEAD_KV // N_HEAD, N_EMBD)
    tensor(f"blk.{i}.attn_output.weight", N_EMBD, N_EMBD)
    w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    tensor(f"blk.{i}.ffn_gate.weight", N_FF, N_EMBD)
    tensor(f"blk.{i}.ffn_up.weight", N_FF, N_EMBD)
    tensor(f"blk.{i}.ffn_down.weight", N_EMBD, N_FF)

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
