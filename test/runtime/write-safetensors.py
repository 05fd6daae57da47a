"""Writes a Llama model.safetensors of zeros for a config.json, with the
standard library only (for hf-errors.test): every tensor transformers'
LlamaForCausalLM has, in float32, with NAME=ROWS,COLS overriding a
tensor's shape.

    write-safetensors.py CONFIG OUT [NAME=D0,D1 ...]
"""
import json
import struct
import sys

config = json.load(open(sys.argv[1]))
h = config["hidden_size"]
heads = config["num_attention_heads"]
kv = config.get("num_key_value_heads", heads)
head_dim = h // heads
ffn = config["intermediate_size"]
shapes = {"model.embed_tokens.weight": [config["vocab_size"], h],
          "model.norm.weight": [h]}
for i in range(config["num_hidden_layers"]):
    p = f"model.layers.{i}."
    shapes.update({
        p + "self_attn.q_proj.weight": [heads * head_dim, h],
        p + "self_attn.k_proj.weight": [kv * head_dim, h],
        p + "self_attn.v_proj.weight": [kv * head_dim, h],
        p + "self_attn.o_proj.weight": [h, heads * head_dim],
        p + "mlp.gate_proj.weight": [ffn, h],
        p + "mlp.up_proj.weight": [ffn, h],
        p + "mlp.down_proj.weight": [h, ffn],
        p + "input_layernorm.weight": [h],
        p + "post_attention_layernorm.weight": [h],
    })
if not config.get("tie_word_embeddings", False):
    shapes["lm_head.weight"] = [config["vocab_size"], h]
for override in sys.argv[3:]:
    name, dims = override.split("=")
    shapes[name] = [int(d) for d in dims.split(",")]
header, offset = {}, 0
for name, shape in shapes.items():
    size = 4
    for d in shape:
        size *= d
    header[name] = {"dtype": "F32", "shape": shape,
                    "data_offsets": [offset, offset + size]}
    offset += size
text = json.dumps(header).encode()
with open(sys.argv[2], "wb") as out:
    out.write(struct.pack("<Q", len(text)) + text + bytes(offset))
