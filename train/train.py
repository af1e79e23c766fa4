#!/usr/bin/python3
"""Trains tinyvideo on synthetic shape videos (video_data.py), on CPU, with a length curriculum.

Each step draws videos of one length N (same prompt layout, so they batch without padding), packs
several questions after each video's frames (each question reads the frames and itself, with
positions continuing after the frames, exactly what inference sees), and minimises the
cross-entropy of the answer tokens and </s>, plus auxiliary per-patch losses (which shape and
colour is in each cell, and which cell it is; training only, not exported). Data of step s comes from
default_rng([seed, 0, s]), so a resumed run sees the same stream as an uninterrupted one.

  /usr/bin/python3 train/train.py --out runs/tv --seed 1 --schedule 8:800,16:600,32:400,64:300,128:250,168:150
  /usr/bin/python3 train/train.py --out runs/tv --resume            # continues from runs/tv/ckpt.pt
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

# Idle OpenMP threads sleep instead of spinning: on a shared, loaded machine spinning threads made a
# 2-thread step 7x slower than a 1-thread one (measured); on an idle machine it costs nothing.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import video_data as vd  # noqa: E402
import export_gguf  # noqa: E402
from model import Config, TinyVideo, load_weights  # noqa: E402
from spm_tokenizer import Tokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_VOCAB = os.path.join(HERE, "..", "models", "stories260K.gguf")
VAL_LENGTHS = (16, 32, 64, 128)


def parse_schedule(text):
    """'16:400,32:400' -> [(16, 400), (32, 400)]: up to 16 frames for 400 steps, then up to 32..."""
    out = []
    for part in text.split(","):
        frames, steps = part.split(":")
        out.append((int(frames), int(steps)))
    return out


def stage_at(schedule, step):
    done = 0
    for frames, steps in schedule:
        if step < done + steps:
            return frames
        done += steps
    return schedule[-1][0]


def draw_length(rng, max_frames, min_frames):
    """Mostly the stage's long end, sometimes anything shorter (so short videos are not forgotten)."""
    lo = max(min_frames, max_frames // 2) if rng.random() < 0.75 else min_frames
    return int(rng.integers(lo, max_frames + 1))


def make_questions(rng, video, n_questions):
    """Up to n_questions of distinct types first, then repeats; [(type, question, answer)]."""
    cands = vd.candidates(video)
    types = [t for t in vd.TYPES if cands[t]]
    order = list(rng.permutation(types))
    while len(order) < n_questions and types:
        order.append(types[int(rng.integers(len(types)))])
    out = []
    for t in order[:n_questions]:
        qa = vd.pick(rng, cands, t)
        if qa:
            out.append((t, qa[0], qa[1]))
    return out


def build_batch(tok, n_frames, samples):
    """samples: [(frames uint8 [N,32,32,3], labels [N,16], [(type, q, a)])] of one length N.

    Returns tensors and, per question, (batch row, type, target positions) for the accuracy."""
    prefix = vd.prefix_layout(tok, n_frames)
    P = len(prefix)
    segs_all, qt_max = [], 0
    for _, _, qas in samples:
        segs = []
        for t, q, a in qas:
            q_ids = tok.encode(vd.question_fragment(q))
            a_ids = tok.encode(a) + [tok.eos]
            segs.append((t, q_ids, a_ids))
        segs_all.append(segs)
        qt_max = max(qt_max, sum(len(q) + len(a) - 1 for _, q, a in segs))
    B, T = len(samples), P + qt_max
    ids = torch.full((B, T), 0, dtype=torch.long)
    ids[:, :P] = torch.tensor(prefix)
    pos = torch.zeros((B, T), dtype=torch.long)
    pos[:, :P] = torch.arange(P)
    targets = torch.full((B, T), -100, dtype=torch.long)
    seg = torch.full((B, qt_max), -1, dtype=torch.long)
    questions = []
    for b, segs in enumerate(segs_all):
        o = P
        for j, (t, q_ids, a_ids) in enumerate(segs):
            inp = q_ids + a_ids[:-1]
            L = len(inp)
            ids[b, o:o + L] = torch.tensor(inp)
            pos[b, o:o + L] = torch.arange(P, P + L)
            first = o + len(q_ids) - 1  # this position predicts the answer's first token
            targets[b, first:first + len(a_ids)] = torch.tensor(a_ids)
            seg[b, o - P:o - P + L] = j
            questions.append((b, t, list(range(first, first + len(a_ids)))))
            o += L
    # the question rows: every prefix key, and their own segment causally
    qi = torch.arange(qt_max)
    same = (seg[:, :, None] == seg[:, None, :]) & (qi[None, None, :] <= qi[None, :, None]) & (seg[:, :, None] >= 0)
    same |= torch.eye(qt_max, dtype=torch.bool)[None]  # padding rows attend to themselves (no NaN)
    q_mask = torch.cat([torch.ones(B, qt_max, P, dtype=torch.bool), same], dim=2)
    frames = torch.from_numpy(np.stack([s[0] for s in samples]))  # [B, N, 32, 32, 3]
    labels = torch.from_numpy(np.stack([s[1] for s in samples]))  # [B, N, 16 cells + vd.N_STATE state]
    visual = torch.nonzero(torch.tensor(prefix) < 0).flatten().reshape(n_frames, -1)
    return dict(ids=ids, pos=pos, targets=targets, q_mask=q_mask, n_prefix=P, frames=frames,
                labels=labels[..., :vd.GRID * vd.GRID].contiguous(), states=labels[..., vd.GRID * vd.GRID:],
                frame_ends=visual[:, -1]), questions


def state_loss(model, hidden, batch):
    """Cross-entropy of the frame-state labels (video_data.Video.frame_states) read from the decoder's
    hidden state at each frame's last visual token: the mean over video_data.STATE_FIELDS."""
    ends = batch["frame_ends"]  # [N] positions in the prefix
    out = model.aux_state_head(hidden[:, ends])  # [B, N, vd.N_STATE_LOGITS]
    st = batch["states"]  # [B, N, vd.N_STATE]
    losses, col, logit = [], 0, 0
    for _, cols, classes in vd.STATE_FIELDS:
        losses.append(F.cross_entropy(out[..., logit:logit + cols * classes].reshape(-1, classes),
                                      st[..., col:col + cols].reshape(-1)))
        col, logit = col + cols, logit + cols * classes
    return sum(losses) / len(losses)


def forward_loss(model, batch, aux_weight, block, state_weight=0.0):
    B, N = batch["frames"].shape[:2]
    proj, _ = model.vision(batch["frames"].reshape(B * N, *batch["frames"].shape[2:]))
    logits, hidden = model(batch["ids"], batch["pos"], proj.reshape(B, N * proj.shape[1], -1), batch["n_prefix"],
                           batch["q_mask"], block, return_hidden=True)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["targets"].reshape(-1), ignore_index=-100)
    aux = F.cross_entropy(model.aux_head(proj).reshape(-1, vd.N_CLASSES), batch["labels"].reshape(-1))
    cells = torch.arange(proj.shape[1]).expand(proj.shape[0], -1)  # patch i of a frame is cell i
    aux = aux + F.cross_entropy(model.aux_cell_head(proj).reshape(-1, proj.shape[1]), cells.reshape(-1))
    state = state_loss(model, hidden, batch) if state_weight > 0 else torch.zeros(())
    return loss + aux_weight * aux + state_weight * state, loss, aux, logits, state


def sample_video(rng, n_frames):
    """The video, its frames, and per frame its cells' labels [N, 16] then its state labels [N, vd.N_STATE]."""
    v = vd.make_video(rng, n_frames)
    frames, labels = v.render(rng)
    return v, frames, np.concatenate([labels, v.frame_states()], axis=1)


def make_val_set(seed, per_length, lengths):
    """Fixed held-out videos (stream 1): per length, per_length videos with one question per type."""
    sets = {}
    for n in lengths:
        items = []
        for i in range(per_length):
            rng = np.random.default_rng([seed, vd.STREAM_VAL, n, i])
            v, frames, labels = sample_video(rng, n)
            items.append((frames, labels, make_questions(rng, v, len(vd.TYPES))))
        sets[n] = items
    return sets


@torch.no_grad()
def evaluate(model, tok, val_sets, block, batch_videos=4):
    """Teacher-forced exact match (= greedy exact match): every answer token and </s> is the argmax."""
    model.eval()
    res = {}
    for n, items in val_sets.items():
        for i in range(0, len(items), batch_videos):
            batch, qs = build_batch(tok, n, items[i:i + batch_videos])
            _, _, _, logits, _ = forward_loss(model, batch, 0.0, block)
            pred = logits.argmax(-1)
            for b, t, positions in qs:
                ok = all(int(pred[b, p]) == int(batch["targets"][b, p]) for p in positions)
                key = (n, t)
                c, k = res.get(key, (0, 0))
                res[key] = (c + ok, k + 1)
    model.train()
    return res


def summarize(res):
    by_len, by_type = {}, {}
    for (n, t), (c, k) in res.items():
        a = by_len.setdefault(n, [0, 0])
        a[0] += c
        a[1] += k
        b = by_type.setdefault(t, [0, 0])
        b[0] += c
        b[1] += k
    total = [sum(v[0] for v in by_len.values()), sum(v[1] for v in by_len.values())]
    return {"acc": total[0] / max(1, total[1]),
            "by_length": {str(n): round(c / k, 3) for n, (c, k) in sorted(by_len.items())},
            "by_type": {t: round(c / k, 3) for t, (c, k) in sorted(by_type.items())},
            "cells": {"%d/%s" % key: "%d/%d" % v for key, v in sorted(res.items())}}


def lr_at(step, total, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def save_checkpoint(path, model, opt, step, args, cfg):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "args": vars(args),
                "config": cfg.to_dict()}, tmp)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="run folder: ckpt.pt, log.jsonl")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--schedule", default="8:800,16:600,32:400,64:300,128:250,168:150",
                    help="curriculum: MAX_FRAMES:STEPS,...; the last stage's length is kept after its steps")
    ap.add_argument("--min-frames", type=int, default=4)
    ap.add_argument("--tokens-per-step", type=int, default=8192, help="videos per step = this // (prompt + questions) tokens (>= 1)")
    ap.add_argument("--questions", type=int, default=8, help="questions packed after each video (at least)")
    ap.add_argument("--max-questions", type=int, default=24,
                    help="long videos get one question per 200 prompt tokens, up to this: the frames cost far more "
                         "than the questions, so more answers per long video are almost free")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--aux-weight", type=float, default=0.3)
    ap.add_argument("--state-weight", type=float, default=0.3,
                    help="weight of the frame-state auxiliary loss (what has appeared so far, read at each frame's end)")
    ap.add_argument("--block", type=int, default=512, help="attention query block (memory vs. speed)")
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--val-per-length", type=int, default=8, help="held-out videos per length (6 questions each)")
    ap.add_argument("--val-lengths", default=",".join(map(str, VAL_LENGTHS)))
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this step (0: the schedule's total)")
    ap.add_argument("--max-minutes", type=float, default=0, help="stop (with a checkpoint) after this much wall time")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--resume", action="store_true", help="continue from OUT/ckpt.pt")
    ap.add_argument("--init-gguf", default="",
                    help="start from an exported pair (NAME.gguf beside NAME-mmproj.gguf, e.g. models/tinyvideo.gguf):"
                         " its weights, a fresh optimizer and auxiliary heads, this run's schedule from step 0")
    ap.add_argument("--vocab", default=DEFAULT_VOCAB, help="GGUF whose tokenizer is used (stories260K)")
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--n-layers", type=int, default=8)
    ap.add_argument("--n-ff", type=int, default=512)
    ap.add_argument("--v-layers", type=int, default=2)
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    ckpt_path = os.path.join(args.out, "ckpt.pt")
    tok = Tokenizer(args.vocab)
    schedule = parse_schedule(args.schedule)
    total = sum(s for _, s in schedule)
    max_steps = args.max_steps or total
    state = None
    if args.resume:
        if not os.path.exists(ckpt_path):
            sys.exit("--resume: no checkpoint at " + ckpt_path)
        state = torch.load(ckpt_path)
        cfg = Config(**state["config"])
    elif args.init_gguf:
        cfg, init_sd = export_gguf.import_pair(args.init_gguf)
    else:
        longest = max(f for f, _ in schedule)
        n_ctx = (vd.n_prompt_tokens(tok, longest, "x" * 60) + 32 + 255) // 256 * 256
        cfg = Config(n_embd=args.n_embd, n_layers=args.n_layers, n_ff=args.n_ff, v_layers=args.v_layers, n_ctx=n_ctx)
    torch.manual_seed(args.seed)
    model = TinyVideo(cfg)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "pos" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or "pos" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95))
    step = 0
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
        print("resumed at step %d" % step, flush=True)
    elif args.init_gguf:
        try:
            load_weights(model, init_sd)
        except ValueError as e:
            sys.exit("--init-gguf %s: %s" % (args.init_gguf, e))
        print("started from the weights of " + args.init_gguf, flush=True)
    print("model: %d parameters (%d vision + projector), config %s" % (
        model.n_params() - sum(p.numel() for n, p in model.named_parameters() if n.startswith("aux_")),
        sum(p.numel() for p in model.vision.parameters()), cfg.to_dict()), flush=True)
    val_sets = make_val_set(1001, args.val_per_length, [int(x) for x in args.val_lengths.split(",") if x])
    log = open(os.path.join(args.out, "log.jsonl"), "a")
    t_start = time.time()
    while step < max_steps:
        rng = np.random.default_rng([args.seed, vd.STREAM_TRAIN, step])
        n = draw_length(rng, stage_at(schedule, step), args.min_frames)
        P = len(vd.prefix_layout(tok, n))
        n_questions = min(max(args.questions, P // 200), max(args.questions, args.max_questions))
        n_videos = max(1, args.tokens_per_step // (P + 33 * n_questions))  # a question + answer is ~33 tokens
        samples = []
        for _ in range(n_videos):
            v, frames, labels = sample_video(rng, n)
            samples.append((frames, labels, make_questions(rng, v, n_questions)))
        t0 = time.time()
        batch, qs = build_batch(tok, n, samples)
        lr = lr_at(step, total, args.lr, args.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        loss, lm, aux, logits, state = forward_loss(model, batch, args.aux_weight, args.block, args.state_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        opt.step()
        step += 1
        dt = time.time() - t0
        pred = logits.detach().argmax(-1)
        acc = sum(all(int(pred[b, p]) == int(batch["targets"][b, p]) for p in ps) for b, _, ps in qs) / max(1, len(qs))
        rec = {"step": step, "frames": n, "videos": n_videos, "tokens": int(batch["ids"].numel()), "loss": round(float(lm), 4),
               "aux": round(float(aux), 4), "state": round(float(state), 4), "train_acc": round(acc, 3), "lr": round(lr, 6), "gnorm": round(gnorm, 3),
               "step_s": round(dt, 3), "elapsed_min": round((time.time() - t_start) / 60, 2)}
        log.write(json.dumps(rec) + "\n")
        log.flush()
        print(json.dumps(rec), flush=True)
        out_of_time = args.max_minutes and (time.time() - t_start) / 60 >= args.max_minutes
        if step % args.ckpt_every == 0 or step >= max_steps or out_of_time:
            save_checkpoint(ckpt_path, model, opt, step, args, cfg)
        if val_sets and (step % args.eval_every == 0 or step >= max_steps or out_of_time):
            s = summarize(evaluate(model, tok, val_sets, args.block))
            s["step"] = step
            s["val"] = True
            log.write(json.dumps(s) + "\n")
            log.flush()
            print("val step %d: acc %.3f by length %s by type %s" % (step, s["acc"], s["by_length"], s["by_type"]),
                  flush=True)
        if out_of_time:
            print("stopped after %.1f minutes (--max-minutes)" % args.max_minutes, flush=True)
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
