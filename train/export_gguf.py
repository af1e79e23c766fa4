#!/usr/bin/python3
"""Writes a tinyvideo checkpoint as llama.cpp's LLaVA-style pair: a `llama` text model GGUF and a
`clip` mmproj GGUF (projector type `mlp`), with the keys and tensor names llama.cpp's converters
write (the same layout as models/tinyvlm-shapes*.gguf). All tensors f32.

  /usr/bin/python3 train/export_gguf.py runs/tv/ckpt.pt --out-dir models --name tinyvideo
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as g  # noqa: E402
from model import Config  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = os.path.join(HERE, "..", "models", "stories260K.gguf")
# llama.cpp's `vicuna` template (what tinyvlm-shapes carries); recognised without --jinja.
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' %}{{ message['content'] }}\n\n"
    "{% elif message['role'] == 'user' %}USER: {{ message['content'] }}\n"
    "{% elif message['role'] == 'assistant' %}ASSISTANT: {{ message['content'] }}</s>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}")


def f32(t):
    return t.detach().cpu().numpy().astype(np.float32)


def text_model(sd, c, name, vocab_meta):
    meta = [
        ("general.architecture", g.STRING, "llama"),
        ("general.name", g.STRING, name),
        ("general.description", g.STRING, "tiny LLaVA-style video VLM trained on synthetic shape videos (text decoder)"),
        ("llama.context_length", g.UINT32, c.n_ctx),
        ("llama.embedding_length", g.UINT32, c.n_embd),
        ("llama.block_count", g.UINT32, c.n_layers),
        ("llama.feed_forward_length", g.UINT32, c.n_ff),
        ("llama.attention.head_count", g.UINT32, c.n_head),
        ("llama.attention.head_count_kv", g.UINT32, c.n_head_kv),
        ("llama.rope.dimension_count", g.UINT32, c.head_dim),
        ("llama.rope.freq_base", g.FLOAT32, c.rope_base),
        ("llama.attention.layer_norm_rms_epsilon", g.FLOAT32, c.eps),
        ("llama.vocab_size", g.UINT32, c.n_vocab),
        ("general.file_type", g.UINT32, 0),
        ("tokenizer.ggml.model", g.STRING, "llama"),
        ("tokenizer.ggml.pre", g.STRING, "default"),
    ]
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        meta.append((key, g.ARRAY, vocab_meta[key][1]))
    meta += [
        ("tokenizer.ggml.unknown_token_id", g.UINT32, 0),
        ("tokenizer.ggml.bos_token_id", g.UINT32, 1),
        ("tokenizer.ggml.eos_token_id", g.UINT32, 2),
        ("tokenizer.ggml.add_bos_token", g.BOOL, True),
        ("tokenizer.ggml.add_eos_token", g.BOOL, False),
        ("tokenizer.ggml.add_space_prefix", g.BOOL, True),
        ("tokenizer.chat_template", g.STRING, CHAT_TEMPLATE),
    ]
    tensors = [("token_embd.weight", f32(sd["tok_embd.weight"]))]
    for i in range(c.n_layers):
        p = "blocks.%d." % i
        for dst, src in (("attn_norm", "attn_norm"), ("attn_q", "wq"), ("attn_k", "wk"), ("attn_v", "wv"),
                         ("attn_output", "wo"), ("ffn_norm", "ffn_norm"), ("ffn_gate", "gate"), ("ffn_up", "up"),
                         ("ffn_down", "down")):
            tensors.append(("blk.%d.%s.weight" % (i, dst), f32(sd[p + src + ".weight"])))
    tensors += [("output_norm.weight", f32(sd["norm.weight"])), ("output.weight", f32(sd["output.weight"]))]
    return meta, tensors


def mmproj(sd, c, name):
    meta = [
        ("general.architecture", g.STRING, "clip"),
        ("general.name", g.STRING, name + "-mmproj"),
        ("general.description", g.STRING,
         "tiny LLaVA-style video VLM trained on synthetic shape videos (vision encoder + mlp projector)"),
        ("general.file_type", g.UINT32, 0),
        ("clip.has_text_encoder", g.BOOL, False),
        ("clip.has_vision_encoder", g.BOOL, True),
        ("clip.has_llava_projector", g.BOOL, True),
        ("clip.projector_type", g.STRING, "mlp"),
        ("clip.vision.image_size", g.UINT32, c.image_size),
        ("clip.vision.patch_size", g.UINT32, c.patch_size),
        ("clip.vision.embedding_length", g.UINT32, c.v_embd),
        ("clip.vision.feed_forward_length", g.UINT32, c.v_ff),
        ("clip.vision.projection_dim", g.UINT32, c.n_embd),
        ("clip.vision.attention.head_count", g.UINT32, c.v_heads),
        ("clip.vision.attention.layer_norm_epsilon", g.FLOAT32, c.eps),
        ("clip.vision.block_count", g.UINT32, c.v_layers),
        ("clip.vision.image_mean", g.ARRAY, (g.FLOAT32, [0.5, 0.5, 0.5])),
        ("clip.vision.image_std", g.ARRAY, (g.FLOAT32, [0.5, 0.5, 0.5])),
        # the last layer's output (after post_ln); without it llama.cpp's LLaVA graph stops one layer early
        ("clip.vision.feature_layer", g.ARRAY, (g.INT32, [c.v_layers])),
        ("clip.use_gelu", g.BOOL, True),
    ]
    v = "vision."
    tensors = [("v.patch_embd.weight", f32(sd[v + "patch.weight"])), ("v.patch_embd.bias", f32(sd[v + "patch.bias"])),
               ("v.position_embd.weight", f32(sd[v + "pos"])),
               ("v.pre_ln.weight", f32(sd[v + "pre_ln.weight"])), ("v.pre_ln.bias", f32(sd[v + "pre_ln.bias"]))]
    for i in range(c.v_layers):
        p = v + "blocks.%d." % i
        for dst, src in (("attn_q", "q"), ("attn_k", "k"), ("attn_v", "v"), ("attn_out", "out"), ("ffn_up", "up"),
                         ("ffn_down", "down"), ("ln1", "ln1"), ("ln2", "ln2")):
            for part in ("weight", "bias"):
                tensors.append(("v.blk.%d.%s.%s" % (i, dst, part), f32(sd[p + src + "." + part])))
    tensors += [("v.post_ln.weight", f32(sd[v + "post_ln.weight"])), ("v.post_ln.bias", f32(sd[v + "post_ln.bias"])),
                ("mm.0.weight", f32(sd[v + "mm0.weight"])), ("mm.0.bias", f32(sd[v + "mm0.bias"])),
                ("mm.2.weight", f32(sd[v + "mm2.weight"])), ("mm.2.bias", f32(sd[v + "mm2.bias"]))]
    return meta, tensors


def export(ckpt_path, out_dir, name):
    state = torch.load(ckpt_path, map_location="cpu")
    c = Config(**state["config"])
    sd = state["model"]
    vocab_meta, _ = g.read(VOCAB)
    os.makedirs(out_dir, exist_ok=True)
    paths = (os.path.join(out_dir, name + ".gguf"), os.path.join(out_dir, name + "-mmproj.gguf"))
    g.write(paths[0], *text_model(sd, c, name, vocab_meta))
    g.write(paths[1], *mmproj(sd, c, name))
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--out-dir", default=".")
    ap.add_argument("--name", default="tinyvideo")
    a = ap.parse_args()
    for p in export(a.checkpoint, a.out_dir, a.name):
        print("wrote %s (%d bytes)" % (p, os.path.getsize(p)))


if __name__ == "__main__":
    main()
