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
import video_data as vd  # noqa: E402

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


def text_tensor_names(c):
    """(GGUF tensor name, state-dict key) of the text model, in file order."""
    out = [("token_embd.weight", "tok_embd.weight")]
    for i in range(c.n_layers):
        for dst, src in (("attn_norm", "attn_norm"), ("attn_q", "wq"), ("attn_k", "wk"), ("attn_v", "wv"),
                         ("attn_output", "wo"), ("ffn_norm", "ffn_norm"), ("ffn_gate", "gate"), ("ffn_up", "up"),
                         ("ffn_down", "down")):
            out.append(("blk.%d.%s.weight" % (i, dst), "blocks.%d.%s.weight" % (i, src)))
    return out + [("output_norm.weight", "norm.weight"), ("output.weight", "output.weight")]


def mmproj_tensor_names(c):
    """(GGUF tensor name, state-dict key) of the mmproj, in file order."""
    v = "vision."
    out = [("v.patch_embd.weight", v + "patch.weight"), ("v.patch_embd.bias", v + "patch.bias"),
           ("v.position_embd.weight", v + "pos"), ("v.pre_ln.weight", v + "pre_ln.weight"),
           ("v.pre_ln.bias", v + "pre_ln.bias")]
    for i in range(c.v_layers):
        for dst, src in (("attn_q", "q"), ("attn_k", "k"), ("attn_v", "v"), ("attn_out", "out"), ("ffn_up", "up"),
                         ("ffn_down", "down"), ("ln1", "ln1"), ("ln2", "ln2")):
            for part in ("weight", "bias"):
                out.append(("v.blk.%d.%s.%s" % (i, dst, part), v + "blocks.%d.%s.%s" % (i, src, part)))
    return out + [("v.post_ln.weight", v + "post_ln.weight"), ("v.post_ln.bias", v + "post_ln.bias"),
                  ("mm.0.weight", v + "mm0.weight"), ("mm.0.bias", v + "mm0.bias"),
                  ("mm.2.weight", v + "mm2.weight"), ("mm.2.bias", v + "mm2.bias")]


def import_pair(text_path, mmproj_path=None):
    """The inverse of export: (Config, state dict of the exported tensors) from a shipped pair, so a
    later run can continue training from models/tinyvideo*.gguf (the training-only auxiliary heads
    are not in the files and start afresh)."""
    mmproj_path = mmproj_path or text_path[:-len(".gguf")] + "-mmproj.gguf"
    tm, tt = g.read(text_path)
    mm, mt = g.read(mmproj_path)
    u = lambda meta, k: meta[k][1]  # noqa: E731
    c = Config(image_size=u(mm, "clip.vision.image_size"), patch_size=u(mm, "clip.vision.patch_size"),
               v_embd=u(mm, "clip.vision.embedding_length"), v_layers=u(mm, "clip.vision.block_count"),
               v_heads=u(mm, "clip.vision.attention.head_count"), v_ff=u(mm, "clip.vision.feed_forward_length"),
               n_vocab=u(tm, "llama.vocab_size"), n_embd=u(tm, "llama.embedding_length"),
               n_layers=u(tm, "llama.block_count"), n_head=u(tm, "llama.attention.head_count"),
               n_head_kv=u(tm, "llama.attention.head_count_kv"), n_ff=u(tm, "llama.feed_forward_length"),
               rope_base=u(tm, "llama.rope.freq_base"), eps=u(tm, "llama.attention.layer_norm_rms_epsilon"),
               n_ctx=u(tm, "llama.context_length"))
    sd = {key: torch.from_numpy(tt[name].astype(np.float32)) for name, key in text_tensor_names(c)}
    sd.update({key: torch.from_numpy(mt[name].astype(np.float32)) for name, key in mmproj_tensor_names(c)})
    return c, sd


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
    tensors = [(name, f32(sd[key])) for name, key in text_tensor_names(c)]
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
        # how a video's frames are laid out, as in training (video_data.frame_marker): vlkv's
        # `--video` puts the label before each frame and the separator after it (docs/cli.md)
        ("vlkv.video.frame_label", g.STRING, vd.FRAME_LABEL),
        ("vlkv.video.frame_separator", g.STRING, vd.FRAME_SEPARATOR),
    ]
    tensors = [(name, f32(sd[key])) for name, key in mmproj_tensor_names(c)]
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
