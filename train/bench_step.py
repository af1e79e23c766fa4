#!/usr/bin/python3
"""Times one training step (forward, backward, AdamW) of tinyvideo at several prompt lengths, and
counts its matmul FLOPs, to size the curriculum.

  /usr/bin/python3 train/bench_step.py --tokens 512,1024,2048,4096 --threads 2
"""
import argparse
import os
import sys
import time

import numpy as np

# Idle OpenMP threads sleep instead of spinning: on a shared, loaded machine spinning threads made a
# 2-thread step 7x slower than a 1-thread one (measured); on an idle machine it costs nothing.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train as tr  # noqa: E402
import video_data as vd  # noqa: E402
from model import Config, TinyVideo  # noqa: E402
from spm_tokenizer import Tokenizer  # noqa: E402


def frames_for_tokens(tok, tokens):
    n = 1
    while len(vd.prefix_layout(tok, n + 1)) <= tokens:
        n += 1
    return n


def step_flops(cfg, P, Qt, n_frames, block):
    """Matmul FLOPs of one training step (x3 of the forward: backward is about twice the forward)."""
    T = P + Qt
    d, hd = cfg.n_embd, cfg.head_dim
    lin = 2 * T * (d * cfg.n_head * hd * 2 + d * cfg.n_head_kv * hd * 2 + 3 * d * cfg.n_ff) * cfg.n_layers
    lin += 2 * T * d * cfg.n_vocab
    keys = sum(min(s + block, P) * (min(s + block, P) - s) for s in range(0, P, block)) + Qt * T  # score entries
    att = 2 * 2 * keys * hd * cfg.n_head * cfg.n_layers
    n_p, e = cfg.n_patches, cfg.v_embd
    vis = n_frames * (2 * n_p * (3 * cfg.patch_size ** 2 * e + cfg.v_layers * (4 * e * e + 2 * e * cfg.v_ff)
                                 + e * d + d * d) + cfg.v_layers * 4 * n_p * n_p * e)
    return 3 * (lin + att + vis), 3 * lin, 3 * att, 3 * vis


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="512,1024,2048,4096")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--block", type=int, default=512)
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--n-layers", type=int, default=8)
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--n-ff", type=int, default=512)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tok = Tokenizer(tr.DEFAULT_VOCAB)
    cfg = Config(n_layers=args.n_layers, n_embd=args.n_embd, n_ff=args.n_ff)
    torch.manual_seed(0)
    model = TinyVideo(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    a = torch.randn(1024, 1024)
    t = time.time()
    for _ in range(10):
        a @ a
    gf = 2 * 1024 ** 3 * 10 / (time.time() - t) / 1e9
    print("threads %d, f32 matmul 1024^3: %.1f GFLOPS; load average %s; params %d" % (
        args.threads, gf, os.getloadavg(), model.n_params()))
    for tokens in [int(x) for x in args.tokens.split(",")]:
        n = frames_for_tokens(tok, tokens)
        rng = np.random.default_rng([0, 9, tokens])
        v, frames, labels = tr.sample_video(rng, n)
        batch, _ = tr.build_batch(tok, n, [(frames, labels, tr.make_questions(rng, v, args.questions))])
        P, T = batch["n_prefix"], batch["ids"].shape[1]
        times = []
        for _ in range(args.repeat):
            c0 = time.process_time()
            t0 = time.time()
            loss = tr.forward_loss(model, batch, 0.3, args.block, 0.3)[0]
            opt.zero_grad()
            loss.backward()
            opt.step()
            times.append((time.time() - t0, time.process_time() - c0))
        best = min(times)
        fl, lin, att, vis = step_flops(cfg, P, T - P, n, args.block)
        print("%5d tokens (%3d frames, prompt %d + questions %d): step %.2f s wall (best of %d; cpu %.2f s), "
              "%.0f GFLOP (linear %.0f, attention %.0f, vision %.0f) -> %.1f GFLOPS" % (
                  T, n, P, T - P, best[0], args.repeat, best[1], fl / 1e9, lin / 1e9, att / 1e9, vis / 1e9,
                  fl / 1e9 / best[0]), flush=True)


if __name__ == "__main__":
    main()
