#!/usr/bin/python3
"""Greedy answers of a tinyvideo checkpoint in PyTorch, for items.jsonl files (make_eval.py):
the reference the exported GGUF pair must reproduce in vlkv and llama.cpp. One JSON line per item on
stdout, the accuracy table (per length and type) on stderr. The questions of one video are answered
together (greedy_packed: one forward per generated token for all of them).

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
from model import Config, TinyVideo, load_weights  # noqa: E402
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


@torch.no_grad()
def greedy_packed(model, tok, frames, questions, max_new=12, ignore_eos=False):
    """greedy() for several questions about one video at once: the frames are encoded and the prompt
    computed in one forward per generated token, with the questions packed after it as in training
    (each reads the frames and itself). Returns [(answer, generated ids, prompt ids)] in order."""
    n = frames.shape[0]
    prefix = vd.prefix_layout(tok, n)
    P = len(prefix)
    proj, _ = model.vision(torch.from_numpy(frames))
    img = proj.reshape(1, -1, proj.shape[-1])
    q_ids = [tok.encode(vd.question_fragment(q)) for q in questions]
    gens = [[] for _ in questions]
    done = [False] * len(questions)
    for _ in range(max_new):
        segs = [q + g for q, g in zip(q_ids, gens)]
        ids, pos, seg, last = list(prefix), list(range(P)), [], []
        for j, sg in enumerate(segs):
            ids += sg
            pos += range(P, P + len(sg))
            seg += [j] * len(sg)
            last.append(len(ids) - 1)
        seg_t = torch.tensor(seg)
        qi = torch.arange(len(seg))
        same = (seg_t[:, None] == seg_t[None, :]) & (qi[None, :] <= qi[:, None])
        q_mask = torch.cat([torch.ones(len(seg), P, dtype=torch.bool), same], dim=1)[None]
        logits = model(torch.tensor([ids]), torch.tensor([pos]), img, P, q_mask)
        for j in range(len(questions)):
            if done[j]:
                continue
            nxt = int(logits[0, last[j]].argmax())
            if nxt == tok.eos and not ignore_eos:
                done[j] = True
                continue
            gens[j].append(nxt)
        if all(done):
            break
    out = []
    for q, g in zip(q_ids, gens):
        text = detokenize(tok, [i for i in g if i != tok.eos])
        out.append((text[1:] if text.startswith(" ") else text, g, prefix + q))
    return out


def by_video(items):
    """Consecutive items of one video (items.jsonl is written video by video)."""
    group = []
    for it in items:
        if group and it["frames"] != group[0]["frames"]:
            yield group
            group = []
        group.append(it)
    if group:
        yield group


def load(ckpt):
    state = torch.load(ckpt, map_location="cpu")
    model = TinyVideo(Config(**state["config"]))
    load_weights(model, state["model"])
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
    items = [json.loads(x) for x in open(a.items) if x.strip()]
    if a.limit:
        items = items[:a.limit]
    score = {}
    for group in by_video(items):
        frames = np.stack([read_png(os.path.join(base, f)) for f in group[0]["frames"]])
        answers = greedy_packed(model, tok, frames, [it["question"] for it in group])
        for it, (ans, gen, prompt) in zip(group, answers):
            ok = ans == it["answer"]
            for key in ((it["n_frames"], it["type"]), (it["n_frames"], "all"), ("all", it["type"]), ("all", "all")):
                c, k = score.get(key, (0, 0))
                score[key] = (c + ok, k + 1)
            print(json.dumps({"id": it.get("id"), "n_frames": it["n_frames"], "type": it["type"], "answer": it["answer"],
                              "greedy": ans, "ok": ok, "prompt_tokens": len(prompt), "generated_ids": gen}), flush=True)
    lengths = sorted({k[0] for k in score if k[0] != "all"}) + ["all"]
    types = [t for t in vd.TYPES if ("all", t) in score] + ["all"]
    print("| frames | " + " | ".join(types) + " |", file=sys.stderr)
    print("|---" * (len(types) + 1) + "|", file=sys.stderr)
    for n in lengths:
        cells = ["%d/%d" % score[(n, t)] if (n, t) in score else "" for t in types]
        print("| %s | %s |" % (n, " | ".join(cells)), file=sys.stderr)


if __name__ == "__main__":
    main()
