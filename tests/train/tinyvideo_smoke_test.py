#!/usr/bin/python3
"""Bounded smoke of the tinyvideo pipeline in train/ (ctest label "train"): the data generator's
answers agree with its rendered frames, the GGUF writer reproduces a bundled model byte for byte,
a few training steps on a tiny model (then a resume), an export, and `vlkv run` loading the pair:
the prompt vlkv builds from 16 frames has exactly the token count training uses, and it answers.

Exit 77 (skipped, with the reason) where Debian's python3-torch or python3-numpy is missing.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check_generator(vd):
    """Every count / colour / where answer agrees with the per-cell labels of the rendered frames."""
    import numpy as np
    n_checked = 0
    for i in range(6):
        rng = np.random.default_rng([7, 9, i])
        v = vd.make_video(rng, 48)
        _, labels = v.render(rng)
        cands = vd.candidates(v)
        for s, name in enumerate(vd.SHAPES):
            on = [bool(((labels[f] - 1) // len(vd.COLORS) == s)[labels[f] > 0].any()) for f in range(v.n_frames)]
            episodes = sum(1 for f in range(v.n_frames) if on[f] and (f == 0 or not on[f - 1]))
            for q, a in cands["count"]:
                if q == "How many times did the %s appear?" % name:
                    n_checked += 1
                    if vd.COUNTS.index(a) + 1 != episodes:
                        fail("count: %s -> %s, but the frames show %d episodes" % (q, a, episodes))
            for q, a in cands["color_at"]:
                if (" the %s at " % name) in q:
                    t = float(q.split(" at ")[1].split(" s?")[0])
                    f = int(round(t * vd.FPS))
                    cells = labels[f][(labels[f] > 0) & ((labels[f] - 1) // len(vd.COLORS) == s)]
                    n_checked += 1
                    if len(cells) != 1 or vd.COLORS[(cells[0] - 1) % len(vd.COLORS)] != a:
                        fail("color_at: %s -> %s, frame %d labels %s" % (q, a, f, list(labels[f])))
    if n_checked < 50:
        fail("only %d generator answers checked" % n_checked)
    print("generator: %d answers agree with the rendered frames" % n_checked)


def check_frame_states(vd):
    """The last frame's state (the state auxiliary loss's labels) agrees with the questions' answers:
    left_of per pair, where_first, appear_time and count per shape."""
    import numpy as np
    k, n_checked = len(vd.SHAPES), 0
    offsets, col = {}, 0
    for name, cols, _ in vd.STATE_FIELDS:
        offsets[name] = col
        col += cols
    pairs = [(a, b) for a in range(k) for b in range(k) if a != b]
    for i in range(6):
        rng = np.random.default_rng([7, 11, i])
        v = vd.make_video(rng, 40)
        last = v.frame_states()[-1]
        if v.frame_states().shape != (v.n_frames, vd.N_STATE):
            fail("frame_states shape %s" % (v.frame_states().shape,))
        cands = vd.candidates(v)
        for q, a in cands["left_of"]:
            s1, s2 = (vd.SHAPES.index(w) for w in q[len("Was the "):-1].split(" ever left of the "))
            n_checked += 1
            if last[offsets["left_of_so_far"] + pairs.index((s1, s2))] != (a == "yes"):
                fail("left_of state disagrees: %s -> %s" % (q, a))
        for s, name in enumerate(vd.SHAPES):
            for qtype, field, value in (("where_first", "first_quadrant", lambda a: 1 + vd.QUADRANTS.index(a)),
                                        ("appear_time", "first_frame", lambda a: 1 + int(round(float(a[:-2]) * vd.FPS))),
                                        ("count", "appearances", lambda a: 1 + vd.COUNTS.index(a))):
                for q, a in cands[qtype]:
                    if (" the %s " % name) in q:
                        n_checked += 1
                        if last[offsets[field] + s] != value(a):
                            fail("%s state disagrees: %s -> %s (state %d)" % (qtype, q, a, last[offsets[field] + s]))
    if n_checked < 40:
        fail("only %d frame-state labels checked" % n_checked)
    print("frame states: %d labels agree with the answers" % n_checked)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vlkv", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--out-dir", default=None)
    a = ap.parse_args()
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print("SKIP: %s (install Debian's python3-torch python3-numpy libopenblas0-pthread)" % e)
        return 77
    train_dir = os.path.join(a.source_dir, "train")
    sys.path.insert(0, train_dir)
    import gguf_io
    import video_data as vd
    from spm_tokenizer import Tokenizer

    check_generator(vd)
    check_frame_states(vd)

    models = os.path.join(a.source_dir, "models")
    for name in ("tinyvlm-shapes.gguf", "tinyvlm-shapes-mmproj.gguf"):
        path = os.path.join(models, name)
        meta, tensors = gguf_io.read(path)
        out = tempfile.NamedTemporaryFile(suffix=".gguf", delete=False).name
        gguf_io.write(out, [(k, t, v) for k, (t, v) in meta.items()], list(tensors.items()))
        same = open(path, "rb").read() == open(out, "rb").read()
        os.unlink(out)
        if not same:
            fail("gguf_io round trip of %s differs" % name)
    print("gguf_io: both tinyvlm-shapes files round-trip byte for byte")

    tok = Tokenizer(os.path.join(models, "stories260K.gguf"))
    # tinyvlm-shapes' README: its prompt after the image is 27 tokens, ' red' is '▁r ed'.
    if len(tok.encode("What color is the circle?\nASSISTANT:")) != 27 or \
            [tok.piece(i) for i in tok.encode("red")] != ["\u2581r", "ed"]:
        fail("tokenizer disagrees with tinyvlm-shapes' documented tokens")

    work = a.out_dir or tempfile.mkdtemp(prefix="tinyvideo-smoke-")
    os.makedirs(work, exist_ok=True)
    run_dir = os.path.join(work, "run")
    common = [sys.executable, os.path.join(train_dir, "train.py"), "--out", run_dir, "--seed", "3",
              "--schedule", "16:6", "--tokens-per-step", "900", "--questions", "4", "--n-embd", "128",
              "--n-layers", "2", "--n-ff", "256", "--v-layers", "1", "--val-per-length", "1", "--val-lengths", "16",
              "--eval-every", "100", "--ckpt-every", "2", "--threads", "2"]
    if os.path.exists(os.path.join(run_dir, "ckpt.pt")):
        os.unlink(os.path.join(run_dir, "ckpt.pt"))
    if os.path.exists(os.path.join(run_dir, "log.jsonl")):
        os.unlink(os.path.join(run_dir, "log.jsonl"))
    subprocess.run(common + ["--max-steps", "4"], check=True, timeout=120)
    subprocess.run(common + ["--resume"], check=True, timeout=120)
    steps = [json.loads(x) for x in open(os.path.join(run_dir, "log.jsonl")) if '"step"' in x and '"val"' not in x]
    train_steps = [r["step"] for r in steps if "loss" in r]
    if train_steps != [1, 2, 3, 4, 5, 6]:
        fail("steps logged across the resume: %s (want 1..6)" % train_steps)
    if not all(r["loss"] == r["loss"] and r["loss"] < 20 for r in steps if "loss" in r):
        fail("loss not finite: %s" % [r.get("loss") for r in steps])
    print("train: 4 steps, resumed, 2 more; losses %s" % [r["loss"] for r in steps if "loss" in r])

    subprocess.run([sys.executable, os.path.join(train_dir, "export_gguf.py"), os.path.join(run_dir, "ckpt.pt"),
                    "--out-dir", work, "--name", "tinyvideo-smoke"], check=True, timeout=60)
    model = os.path.join(work, "tinyvideo-smoke.gguf")
    mmproj = os.path.join(work, "tinyvideo-smoke-mmproj.gguf")

    # A shipped pair is where the next run starts (--init-gguf): the import gives back every
    # exported tensor bit for bit, and a run from it starts where the checkpoint's loss was.
    import export_gguf
    import torch
    _, imported = export_gguf.import_pair(model)
    trained = torch.load(os.path.join(run_dir, "ckpt.pt"))["model"]
    if not all(torch.equal(imported[k], trained[k]) for k in imported) or \
            not all(k.startswith("aux_") for k in set(trained) - set(imported)):
        fail("import_pair does not give back the exported weights")
    init_dir = os.path.join(work, "init")
    if os.path.exists(os.path.join(init_dir, "log.jsonl")):
        os.unlink(os.path.join(init_dir, "log.jsonl"))
    subprocess.run(common[:3] + [init_dir] + common[4:] + ["--init-gguf", model, "--max-steps", "1"],
                   check=True, timeout=120)
    first = [json.loads(x) for x in open(os.path.join(init_dir, "log.jsonl")) if '"loss"' in x][0]
    if not first["loss"] < steps[0]["loss"]:
        fail("a run from the exported pair starts at loss %s, a fresh one at %s" % (first["loss"], steps[0]["loss"]))
    print("init from the exported pair: step 1 loss %s (fresh %s)" % (first["loss"], steps[0]["loss"]))

    import numpy as np
    rng = np.random.default_rng([7, 9, 100])
    v = vd.make_video(rng, 16)
    frames, _ = v.render(rng)
    images = []
    for i in range(16):
        p = os.path.join(work, "frame%02d.png" % i)
        vd.write_png(p, frames[i])
        images += ["--image", p]
    question = "What color was the square at 2.5 s?"
    prompt_file = os.path.join(work, "prompt.txt")
    open(prompt_file, "w").write(vd.user_message(16, question))
    base = [a.vlkv, "run", "-m", model, "--mmproj", mmproj] + images + ["-f", prompt_file]
    counted = subprocess.run(base + ["--count-tokens"], capture_output=True, text=True, timeout=60)
    want = "prompt_tokens=%d visual_tokens=%d" % (vd.n_prompt_tokens(tok, 16, question), 16 * 16)
    if counted.returncode != 0 or counted.stdout.strip() != want:
        fail("vlkv --count-tokens: %r (rc %d, %s), training lays out %r" % (
            counted.stdout.strip(), counted.returncode, counted.stderr.strip(), want))
    print("vlkv builds the training layout: " + want)
    ran = subprocess.run(base + ["--temp", "0", "-n", "4", "-q"], capture_output=True, timeout=60)
    if ran.returncode != 0:
        fail("vlkv run on the exported pair: rc %d, %s" % (ran.returncode, ran.stderr.decode(errors="replace")))
    print("vlkv run answered %r" % ran.stdout.decode(errors="replace"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
