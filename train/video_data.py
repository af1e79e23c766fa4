"""Synthetic videos of shapes that appear, move, change colour and leave, and questions about them.

A video is N frames of 32x32 RGB at 2 frames per second. A frame is a 4x4 grid of 8x8 cells (one
cell = one ViT patch = one visual token); each cell holds at most one shape. There are four shapes
(circle, square, triangle, cross); each one is on screen during 0-4 separate episodes, at most one
instance at a time, so "the triangle" always names one object. During an episode the shape keeps
moving to a neighbouring free cell now and then and changes colour now and then; between episodes
it is off screen.

Every question needs the whole video, not its end (each one is about a first appearance, a
moment in the middle, the order of appearances or all episodes), and is only asked when its answer
is unambiguous:

| type        | question                                         | answer                         |
| ----------- | ------------------------------------------------ | ------------------------------ |
| appear_time | At what time did the {shape} first appear?       | `{t} s` (a frame's time marker)|
| color_at    | What color was the {shape} at {t} s?             | red, green, blue, yellow, white|
| count       | How many times did the {shape} appear?           | one, two, three, four          |
| after       | What appeared right after the first {shape}?     | circle, square, triangle, cross|
| where_first | Where was the {shape} when it first appeared?    | top left, top right, bottom left, bottom right |
| left_of     | Was the {shape} ever left of the {shape2}?       | yes, no                        |

Categorical answers are drawn class first (uniform over the classes this video offers), then a
question with that answer, so the answers are close to balanced; make_eval balances exactly.

Randomness: every video comes from numpy's default_rng([seed, stream, index]); the streams keep
training (0), validation (1) and the bundled eval set (2) apart whatever the seeds.
"""
import struct
import zlib

import numpy as np

FPS = 2.0
FRAME = 32
CELL = 8
GRID = FRAME // CELL  # 4x4 cells = 16 patches
SHAPES = ["circle", "square", "triangle", "cross"]
COLORS = ["red", "green", "blue", "yellow", "white"]
RGB = np.array([[220, 40, 40], [40, 200, 60], [50, 90, 235], [230, 210, 40], [235, 235, 235]], np.float32)
QUADRANTS = ["top left", "top right", "bottom left", "bottom right"]
COUNTS = ["one", "two", "three", "four"]
TYPES = ["appear_time", "color_at", "count", "after", "where_first", "left_of"]
STREAM_TRAIN, STREAM_VAL, STREAM_EVAL = 0, 1, 2
MAX_STATE_FRAMES = 256  # frame-index classes of the state head
# Video.frame_states' fields, in column order: (name, columns, classes per column). Each is what one
# question type needs carried from the frames to the question (left_of: per ordered pair of shapes,
# "so far, the first was left of the second in a frame with both").
STATE_FIELDS = [
    ("on_screen", len(SHAPES), 2),
    ("appearances", len(SHAPES), 5),
    ("latest_new", 1, 1 + len(SHAPES)),
    ("frame_index", 1, MAX_STATE_FRAMES),
    ("left_of_so_far", len(SHAPES) * (len(SHAPES) - 1), 2),
    ("first_quadrant", len(SHAPES), 1 + len(QUADRANTS)),
    ("colour_now", len(SHAPES), 1 + len(COLORS)),
    ("first_frame", len(SHAPES), 1 + MAX_STATE_FRAMES),
]
N_STATE = sum(cols for _, cols, _ in STATE_FIELDS)  # Video.frame_states columns
N_STATE_LOGITS = sum(cols * classes for _, cols, classes in STATE_FIELDS)  # the state head's outputs
MIN_EPISODE, MIN_GAP = 2, 2  # frames: a shape is seen at least twice, and is away at least twice
N_CLASSES = 1 + len(SHAPES) * len(COLORS)  # per-cell label for the auxiliary loss: empty or (shape, colour)


def time_text(frame_index):
    """The time marker of frame i (0-based), as in the prompt: 0.0, 0.5, ..."""
    return "%.1f" % (frame_index / FPS)


def _masks():
    """8x8 masks of the shapes, drawn around the cell centre (3.5, 3.5)."""
    yy, xx = np.mgrid[0:CELL, 0:CELL].astype(np.float32)
    dy, dx = yy - 3.5, xx - 3.5
    circle = dx * dx + dy * dy <= 3.3 ** 2
    square = (np.abs(dx) <= 2.6) & (np.abs(dy) <= 2.6)
    # apex up: width grows from 0 at the top row (y=0.5) to 7 at the bottom (y=6.5)
    triangle = (yy >= 0.5) & (yy <= 6.5) & (np.abs(dx) <= (yy - 0.5) * 3.5 / 6.0 + 0.2)
    cross = ((np.abs(dx) <= 1.0) & (np.abs(dy) <= 3.5)) | ((np.abs(dy) <= 1.0) & (np.abs(dx) <= 3.5))
    return np.stack([circle, square, triangle, cross]).astype(np.float32)


MASKS = _masks()


class Video:
    """The ground truth of one video: per frame, per shape, (cell, colour) or None."""

    def __init__(self, n_frames, track, background, tint):
        self.n_frames = n_frames
        self.track = track  # track[s][f] = (row, col, color) or None
        self.background = background
        self.tint = tint  # per shape and colour: RGB jitter for this video

    def episodes(self, s):
        """[(first_frame, last_frame)] of shape s."""
        out, start = [], None
        for f in range(self.n_frames + 1):
            on = f < self.n_frames and self.track[s][f] is not None
            if on and start is None:
                start = f
            if not on and start is not None:
                out.append((start, f - 1))
                start = None
        return out

    def frame_states(self):
        """Per frame, what a viewer keeping track would know after it (for the decoder's auxiliary
        loss): [n, N_STATE] int64, STATE_FIELDS in order - per shape on screen (0/1) and appearances so
        far (0..4); the shape whose appearance started last (0 none, 1 + shape); the frame's own index
        (its time marker is index / FPS: appear_time and color_at tie a frame to its marker); per
        ordered pair of shapes whether the first was ever left of the second so far; per shape the
        quadrant it first appeared in (0 not yet, 1 + quadrant), its colour now (0 off screen,
        1 + colour) and the frame it first appeared in (0 not yet, 1 + frame)."""
        n, k = self.n_frames, len(SHAPES)
        out = np.zeros((n, N_STATE), np.int64)
        count, last_new = [0] * k, 0
        left = np.zeros((k, k), np.int64)
        first_quadrant, first_frame = [0] * k, [0] * k
        pairs = [(a, b) for a in range(k) for b in range(k) if a != b]
        for f in range(n):
            colour_now = [0] * k
            for s in range(k):
                st = self.track[s][f]
                if st is None:
                    continue
                if f == 0 or self.track[s][f - 1] is None:
                    count[s] += 1
                    last_new = 1 + s
                if first_frame[s] == 0:
                    first_frame[s] = 1 + min(f, MAX_STATE_FRAMES - 1)
                    first_quadrant[s] = 1 + (st[0] >= GRID // 2) * 2 + (st[1] >= GRID // 2)
                colour_now[s] = 1 + st[2]
            for a, b in pairs:
                if self.track[a][f] is not None and self.track[b][f] is not None and self.track[a][f][1] < self.track[b][f][1]:
                    left[a, b] = 1
            row = ([int(c > 0) for c in colour_now] + list(count) + [last_new, min(f, MAX_STATE_FRAMES - 1)] +
                   [int(left[a, b]) for a, b in pairs] + first_quadrant + colour_now + first_frame)
            out[f] = row
        return out

    def render(self, rng):
        """uint8 frames [n, 32, 32, 3] and per-cell labels [n, 16] (0 empty, 1 + shape * 5 + colour)."""
        n = self.n_frames
        frames = np.empty((n, FRAME, FRAME, 3), np.float32)
        frames[:] = self.background
        frames += rng.uniform(-6, 6, size=frames.shape).astype(np.float32)
        labels = np.zeros((n, GRID * GRID), np.int64)
        for s in range(len(SHAPES)):
            for f in range(n):
                st = self.track[s][f]
                if st is None:
                    continue
                r, c, col = st
                y0, x0 = r * CELL, c * CELL
                m = MASKS[s][:, :, None]
                patch = frames[f, y0:y0 + CELL, x0:x0 + CELL]
                colour = RGB[col] + self.tint[s, col]
                patch[:] = patch * (1 - m) + colour * m
                labels[f, r * GRID + c] = 1 + s * len(COLORS) + col
        return np.clip(np.rint(frames), 0, 255).astype(np.uint8), labels


def _schedule(rng, n_frames, k):
    """k disjoint episodes [(start, end)] in n_frames, each >= MIN_EPISODE long, gaps >= MIN_GAP."""
    slack = n_frames - k * MIN_EPISODE - (k - 1) * MIN_GAP
    if slack < 0:
        return None
    # split the slack into k+1 leftovers (before, between/after each episode) and k extra lengths
    cuts = np.sort(rng.integers(0, slack + 1, size=2 * k))
    parts = np.diff(np.concatenate([[0], cuts, [slack]]))  # 2k+1 non-negative parts summing to slack
    eps, f = [], int(parts[0])
    for i in range(k):
        length = MIN_EPISODE + int(parts[2 * i + 1])
        eps.append((f, f + length - 1))
        f += length + MIN_GAP + int(parts[2 * i + 2])
    return eps


def make_video(rng, n_frames, counts=None):
    """A random video; counts[s] fixes shape s's number of episodes (else drawn)."""
    n_shapes = len(SHAPES)
    max_k = max(k for k in range(0, 5) if k == 0 or k * MIN_EPISODE + (k - 1) * MIN_GAP <= n_frames * 3 // 4)
    for _ in range(100):
        ks = [int(rng.integers(0, max_k + 1)) if counts is None or counts[s] is None else counts[s]
              for s in range(n_shapes)]
        if sum(ks) == 0:
            continue
        scheds = [_schedule(rng, n_frames, k) if k else [] for k in ks]
        if any(sc is None for sc in scheds):
            continue
        starts = [a for sc in scheds for a, _ in sc]
        if len(set(starts)) != len(starts):  # one appearance per frame: "right after" is unambiguous
            continue
        track = _place(rng, n_frames, scheds)
        if track is not None:
            background = rng.uniform(0, 45, size=3).astype(np.float32)
            tint = rng.uniform(-20, 20, size=(n_shapes, len(COLORS), 3)).astype(np.float32)
            return Video(n_frames, track, background, tint)
    raise RuntimeError("could not lay out a video of %d frames" % n_frames)


def _place(rng, n_frames, scheds):
    """Cells and colours per frame: appear in a free cell, move to a free neighbour now and then."""
    n_shapes = len(scheds)
    on = [[False] * n_frames for _ in range(n_shapes)]
    for s, sc in enumerate(scheds):
        for a, b in sc:
            for f in range(a, b + 1):
                on[s][f] = True
    track = [[None] * n_frames for _ in range(n_shapes)]
    for f in range(n_frames):
        taken = set()
        for s in range(n_shapes):  # keep the ones that stay where they are first
            if on[s][f] and f > 0 and track[s][f - 1] is not None:
                r, c, col = track[s][f - 1]
                taken.add((r, c))
        for s in rng.permutation(n_shapes):
            if not on[s][f]:
                continue
            prev = track[s][f - 1] if f > 0 else None
            if prev is None:
                free = [(r, c) for r in range(GRID) for c in range(GRID) if (r, c) not in taken]
                r, c = free[int(rng.integers(len(free)))]
                col = int(rng.integers(len(COLORS)))
            else:
                r, c, col = prev
                if rng.random() < 0.3:
                    nbrs = [(r + dr, c + dc) for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1))
                            if 0 <= r + dr < GRID and 0 <= c + dc < GRID and (r + dr, c + dc) not in taken]
                    if nbrs:
                        taken.discard((r, c))
                        r, c = nbrs[int(rng.integers(len(nbrs)))]
                if rng.random() < 0.12:
                    col = int((col + rng.integers(1, len(COLORS))) % len(COLORS))
            taken.add((r, c))
            track[s][f] = (r, c, col)
    return track


def candidates(v):
    """Every unambiguous question of this video: {type: [(question, answer)]}."""
    out = {t: [] for t in TYPES}
    eps = [v.episodes(s) for s in range(len(SHAPES))]
    appearances = sorted((sc[0], s) for s in range(len(SHAPES)) for sc in eps[s])
    for s, name in enumerate(SHAPES):
        if not eps[s]:
            continue
        first = eps[s][0][0]
        out["appear_time"].append(("At what time did the %s first appear?" % name, time_text(first) + " s"))
        out["count"].append(("How many times did the %s appear?" % name, COUNTS[len(eps[s]) - 1]))
        r, c, _ = v.track[s][first]
        out["where_first"].append(("Where was the %s when it first appeared?" % name,
                                   QUADRANTS[(r >= GRID // 2) * 2 + (c >= GRID // 2)]))
        later = [t for t in appearances if t[0] > first]
        if later:
            out["after"].append(("What appeared right after the first %s?" % name, SHAPES[later[0][1]]))
        for f in range(v.n_frames):
            st = v.track[s][f]
            if st is not None:
                out["color_at"].append(("What color was the %s at %s s?" % (name, time_text(f)), COLORS[st[2]]))
        for s2, name2 in enumerate(SHAPES):
            if s2 == s:
                continue
            both = [f for f in range(v.n_frames) if v.track[s][f] is not None and v.track[s2][f] is not None]
            if both:
                left = any(v.track[s][f][1] < v.track[s2][f][1] for f in both)
                out["left_of"].append(("Was the %s ever left of the %s?" % (name, name2), "yes" if left else "no"))
    return out


def pick(rng, cands, qtype, answer=None):
    """A (question, answer) of qtype: the given answer, else a class drawn uniformly, then a question."""
    pool = cands[qtype]
    if not pool:
        return None
    if answer is None:
        if qtype == "appear_time":
            return pool[int(rng.integers(len(pool)))]
        classes = sorted({a for _, a in pool})
        answer = classes[int(rng.integers(len(classes)))]
    pool = [qa for qa in pool if qa[1] == answer]
    return pool[int(rng.integers(len(pool)))] if pool else None


# ----- prompt layout (what llama.cpp's mtmd and `vlkv run --image ... ` build) -----

MEDIA = "<__media__>"


# The text before and after each frame, as the mmproj declares them (vlkv.video.frame_label,
# vlkv.video.frame_separator): vlkv's `--video` lays a clip sampled at FPS out as these prompts do.
FRAME_LABEL = "{t} s: "
FRAME_SEPARATOR = "\n"


def frame_marker(i):
    """The text before frame i (0-based) inside the user message."""
    return FRAME_LABEL.replace("{t}", time_text(i))


def user_message(n_frames, question):
    """The user's message: one line per frame, the media marker after its time, then the question."""
    return FRAME_SEPARATOR.join(frame_marker(i) + MEDIA for i in range(n_frames)) + FRAME_SEPARATOR + question


def chat_prompt(n_frames, question):
    """The raw prompt after the vicuna chat template (llama.cpp's and vlkv's), as mtmd tokenizes it."""
    return "USER: " + user_message(n_frames, question) + "\nASSISTANT:"


def prefix_fragments(n_frames):
    """Text fragments before each frame: fragment i precedes frame i (mtmd tokenizes each alone)."""
    return ["USER: " + frame_marker(0)] + [FRAME_SEPARATOR + frame_marker(i) for i in range(1, n_frames)]


def question_fragment(question):
    """The text after the last frame."""
    return FRAME_SEPARATOR + question + "\nASSISTANT:"


def prefix_layout(tok, n_frames, tokens_per_frame=GRID * GRID):
    """Token ids of BOS + frames, with -1 at every visual token: mtmd's chunks for the prompt's prefix."""
    ids = [tok.bos]
    for frag in prefix_fragments(n_frames):
        ids += tok.encode(frag)
        ids += [-1] * tokens_per_frame
    return ids


def n_prompt_tokens(tok, n_frames, question):
    return len(prefix_layout(tok, n_frames)) + len(tok.encode(question_fragment(question)))


def write_png(path, rgb):
    """An 8-bit RGB PNG (no dependency beyond zlib)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\0" + rgb[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
