"""Does the model read the video? Per question type: how far its answer-token distributions (the
one that moves most, teacher-forced) move when the same questions are asked about another video (mean L1 distance, 0..2), next to
its accuracy. A model answering from priors (the plateau the first 2026-12-07 run sat on for
1,200 steps) moves ~0 on every type while its training loss still looks low.

  /usr/bin/python3 train/video_dependence.py runs/tinyvideo/ckpt.pt --frames 16 --videos 24
"""
import argparse
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import train as T  # noqa: E402
import video_data as vd  # noqa: E402
from model import Config, TinyVideo, load_weights  # noqa: E402
from spm_tokenizer import Tokenizer  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt")
    ap.add_argument("--frames", type=int, default=16)
    ap.add_argument("--videos", type=int, default=24)
    ap.add_argument("--seed", type=int, default=77, help="videos from stream [seed, 9, i]: neither training nor eval")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    state = torch.load(args.ckpt)
    model = TinyVideo(Config(**state["config"]))
    load_weights(model, state["model"])
    model.eval()
    tok = Tokenizer(T.DEFAULT_VOCAB)
    samples = []
    for i in range(args.videos):
        rng = np.random.default_rng([args.seed, 9, i])
        v, frames, labels = T.sample_video(rng, args.frames)
        samples.append((frames, labels, T.make_questions(rng, v, len(vd.TYPES))))
    # the same questions about the next video's frames
    swapped = [(samples[(i + 1) % len(samples)][0], samples[(i + 1) % len(samples)][1], s[2])
               for i, s in enumerate(samples)]
    with torch.no_grad():
        batch, qs = T.build_batch(tok, args.frames, samples)
        own = T.forward_loss(model, batch, 0.0, 512)[3]
        batch2, _ = T.build_batch(tok, args.frames, swapped)
        other = T.forward_loss(model, batch2, 0.0, 512)[3]
    moved, correct, n = {}, {}, {}
    for b, t, positions in qs:
        # the answer token that moves most (an answer's first token may be fixed, e.g. the space of "3.0 s")
        d = max(float((torch.softmax(own[b, p], -1) - torch.softmax(other[b, p], -1)).abs().sum()) for p in positions)
        ok = all(int(own[b, q].argmax()) == int(batch["targets"][b, q]) for q in positions)
        moved[t] = moved.get(t, 0.0) + d
        correct[t] = correct.get(t, 0) + ok
        n[t] = n.get(t, 0) + 1
    print("step %d, %d videos of %d frames" % (state["step"], args.videos, args.frames))
    print("%-12s %6s %9s %9s" % ("type", "items", "accuracy", "L1 moved"))
    for t in vd.TYPES:
        if t in n:
            print("%-12s %6d %8.1f%% %9.3f" % (t, n[t], 100.0 * correct[t] / n[t], moved[t] / n[t]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
