#!/usr/bin/python3
"""Greedy answers of a tinyvideo checkpoint in PyTorch, for items.jsonl files (make_eval.py):
the reference the exported GGUF pair must reproduce in vlkv and llama.cpp.

  /usr/bin/python3 train/infer.py runs/tv/ckpt.pt tests/data/vlm/tinyvideo/items.jsonl --limit 8
"""
import argparse
import json
import os
import sys
import zlib

import numpy as np

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import video_data as vd  # noqa: E402
from model import Config, TinyVideo  # noqa: E402
from spm_tokenizer import Tokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def read_png(path):
    """The 8-bit RGB PNGs video_data.write_png writes (filter 0 rows)."""
    data = open(path, "rb").read()
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h = int.from_bytes(body[0:4], "big"), int.from_bytes(body[4:8], "big")
            if body[8:13] != bytes([8, 2, 0, 0, 0]):
                raise ValueError(path + ": only 8-bit RGB, no interlace")
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * 3)
    if raw[:, 0].any():
        raise ValueError(path + ": only filter type 0")
    return raw[:, 1:].reshape(h, w, 3)


def detokenize(tok, ids):
    out = b""
    for i in ids:
        p = tok.piece(i)
        if tok.types[i] == 6:
            out += bytes([int(p[3:5], 16)])
        else:
            out += p.replace("\u2581", " ").encode("utf-8")
    return out.decode("utf-8", errors="replace")


@torch.no_grad()
def greedy(model, tok, frames, question, max_new=12, ignore_eos=False):
    """frames uint8 [N, 32, 32, 3]; returns (answer without its leading space, generated ids, prompt ids).
    ignore_eos: go on past </s> for max_new tokens (as `vlkv run --ignore-eos`), </s> printing nothing."""
    n = frames.shape[0]
    prompt = vd.prefix_layout(tok, n) + tok.encode(vd.question_fragment(question))
    proj, _ = model.vision(torch.from_numpy(frames))
    img = proj.reshape(1, -1, proj.shape[-1])
    ids = list(prompt)
    gen = []
    for _ in range(max_new):
        t = torch.tensor([ids])
        logits = model(t, torch.arange(len(ids))[None], img, len(ids), None)
        nxt = int(logits[0, -1].argmax())
        if nxt == tok.eos and not ignore_eos:
            break
        gen.append(nxt)
        ids.append(nxt)
    text = detokenize(tok, [i for i in gen if i != tok.eos])
    return (text[1:] if text.startswith(" ") else text), gen, prompt


def load(ckpt):
    state = torch.load(ckpt, map_location="cpu")
    model = TinyVideo(Config(**state["config"]))
    model.load_state_dict(state["model"])
    model.eval()
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("items")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    tok = Tokenizer(os.path.join(HERE, "..", "models", "stories260K.gguf"))
    model = load(a.checkpoint)
    base = os.path.dirname(a.items)
    n_ok = n = 0
    for line in open(a.items):
        it = json.loads(line)
        frames = np.stack([read_png(os.path.join(base, f)) for f in it["frames"]])
        ans, gen, prompt = greedy(model, tok, frames, it["question"])
        n += 1
        n_ok += ans == it["answer"]
        print(json.dumps({"id": it.get("id"), "n_frames": it["n_frames"], "type": it["type"], "answer": it["answer"],
                          "greedy": ans, "ok": ans == it["answer"], "prompt_tokens": len(prompt),
                          "generated_ids": gen}), flush=True)
        if a.limit and n >= a.limit:
            break
    print("accuracy %d/%d" % (n_ok, n), file=sys.stderr)


if __name__ == "__main__":
    main()
