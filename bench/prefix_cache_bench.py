#!/usr/bin/env python3
"""Issue 22's prefix-cache benchmark: time to first token of every turn of a conversation
about one video (or one or many images), each request resending the media and every earlier
turn (what OpenAI clients do), with and without the prefix cache, per KV method; and the
bytes the cache holds after a conversation (from /metrics), so how many fit in 1 GiB.
    python3 bench/prefix_cache_bench.py build/vlkv [--turns 3,10] [--kv f16,kivi2,vidkv]
        [--video FRAMES | --images N] [--repeat R] [--llama-server PATH]
--video FRAMES: turn 1 sends a clip of FRAMES frames (ffmpeg testsrc, 96x96, made here; or
  env VIDEO=path.mp4), sampled whole (--video-frames FRAMES). --images N: turn 1 sends N
  pictures (models/demo, cycled). Default: one image.
--repeat R: each conversation R times on fresh servers (default 1); the summary takes medians
  (turn 1: of both servers' first turns, all repeats; turn 2+: of every later turn), so one
  slow sample on a loaded machine does not decide the ratio.
--llama-server PATH: the same conversation on llama-server (same GGUF pair, cache_prompt on;
  images only, it takes no video), for its TTFT per turn and its cached tokens.
Env MODEL, MMPROJ (default: the bundled tinyvlm-shapes pair), THREADS (1), MAX_TOKENS (16),
CTX (0: the model's), SERVE_ARGS (more `vlkv serve` flags). Both servers of a method (cache
off: --cache-budget 0, cache on: 512M) run side by side and each turn goes to both, in
alternating order; greedy answers; TTFT is the time from sending the request to the first
streamed content byte, as the client sees it."""
import base64, json, os, re, subprocess, sys, tempfile, time, urllib.request

binary = sys.argv[1]
opts = dict(zip(sys.argv[2::2], sys.argv[3::2]))
turn_counts = [int(x) for x in opts.get("--turns", "3,10").split(",")]
methods = opts.get("--kv", "f16,kivi2,vidkv").split(",")
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
model = os.environ.get("MODEL", os.path.join(root, "models", "tinyvlm-shapes.gguf"))
mmproj = os.environ.get("MMPROJ", os.path.join(root, "models", "tinyvlm-shapes-mmproj.gguf"))
threads = os.environ.get("THREADS", "1")
max_tokens = int(os.environ.get("MAX_TOKENS", "16"))
ctx = os.environ.get("CTX", "0")
serve_args = os.environ.get("SERVE_ARGS", "").split()
work = tempfile.mkdtemp(prefix="vlkv_pc_")


def data_uri(path, mime):
    return f"data:{mime};base64," + base64.b64encode(open(path, "rb").read()).decode()


frames = int(opts.get("--video", "0"))
n_images = int(opts.get("--images", "1"))
if frames > 0:
    clip = os.environ.get("VIDEO")
    if not clip:
        clip = os.path.join(work, "clip.mp4")
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=96x96:rate=10",
                        "-frames:v", str(frames), "-c:v", "mpeg4", "-q:v", "2", clip], check=True)
    media = [{"type": "video_url", "video_url": {"url": data_uri(clip, "video/mp4")}}]
    serve_args += ["--video-frames", str(frames)]
    what = f"a video of {frames} frames"
else:
    demo = sorted(f for f in os.listdir(os.path.join(root, "models", "demo")) if f.endswith(".png"))
    media = [{"type": "image_url", "image_url": {"url": data_uri(os.path.join(root, "models", "demo",
                                                                              demo[i % len(demo)]), "image/png")}}
             for i in range(n_images)]
    serve_args += ["--max-images", str(max(8, n_images))]
    what = f"{n_images} image(s)"
questions = ["Describe the image.", "Where is the shape?", "What colour is it?", "Is it large?", "Is it round?",
             "What is next to it?", "Is there text?", "How many shapes?", "What is the background?", "Anything else?"]


def wait_ready(p, log_path, pattern):
    for _ in range(12000):
        time.sleep(0.05)
        t = open(log_path).read()
        m = re.search(pattern, t)
        if m:
            return int(m.group(1))
        if p.poll() is not None:
            break
    p.kill()
    raise SystemExit(open(log_path).read())


def start(method, cache):
    log_path = os.path.join(work, f"serve_{method}_{cache}.log")
    p = subprocess.Popen([binary, "serve", "-m", model, "--mmproj", mmproj, "-t", threads, "-np", "1", "--kv", method,
                          "--backend", "batch", "-c", ctx, "--kv-budget", "2G", "--cache-budget", cache,
                          "--host", "127.0.0.1", "--port", "0"] + serve_args, stderr=open(log_path, "w"))
    port = wait_ready(p, log_path, r"listening on http://127.0.0.1:(\d+)[\s\S]* ready \(")
    return p, port


def start_llama(path):
    log_path = os.path.join(work, "llama_server.log")
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    p = subprocess.Popen([path, "-m", model, "--mmproj", mmproj, "-t", threads, "-np", "1", "--host", "127.0.0.1",
                          "--port", str(port), "-c", ctx if ctx != "0" else "4096", "--no-webui"],
                         stderr=open(log_path, "w"), stdout=subprocess.DEVNULL)
    for _ in range(6000):
        time.sleep(0.05)
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).status == 200:
                return p, port
        except Exception:
            if p.poll() is not None:
                break
    p.kill()
    raise SystemExit(open(log_path).read())


def ask(port, messages):
    body = json.dumps({"messages": messages, "temperature": 0, "max_tokens": max_tokens, "stream": True,
                       "cache_prompt": True, "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    ttft, text, usage, timings = None, "", {}, {}
    with urllib.request.urlopen(req, timeout=3600) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            usage = ev.get("usage") or usage
            timings = ev.get("timings") or timings
            for c in ev.get("choices", []):
                piece = c.get("delta", {}).get("content")
                if piece:
                    if ttft is None:
                        ttft = time.perf_counter() - t0
                    text += piece
    cached = usage.get("prompt_tokens_details", {}).get("cached_tokens")
    if cached is None:
        cached = timings.get("cache_n", 0)  # llama-server's count of prompt tokens it did not evaluate
    return (ttft if ttft is not None else time.perf_counter() - t0) * 1000, text, cached, usage.get("prompt_tokens", 0)


def metric(port, name):
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    m = re.search("^" + re.escape(name) + r" (\S+)$", body, re.M)
    return float(m.group(1)) if m else 0.0


def turn_message(t):
    return {"role": "user", "content": (media if t == 0 else []) + [{"type": "text", "text": questions[t % len(questions)]}]}


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return float("nan") if not n else xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


repeats = int(opts.get("--repeat", "1"))


load = open("/proc/loadavg").read().split()[0]
print(f"model {os.path.basename(model)} + {os.path.basename(mmproj)}, {what}, -t {threads}, max_tokens {max_tokens}, "
      f"SIMD {os.environ.get('VLKV_SIMD', 'auto')}, load {load} at start; TTFT ms per turn (client side)")
summary = []
for n_turns in turn_counts:
    for method in methods:
        first, later_off, later_on, same = [], [], [], "yes"
        for rep in range(repeats):
            servers = {c: start(method, c) for c in ("0", "512M")}
            try:
                conv = {c: [] for c in servers}
                res = {c: [] for c in servers}
                for t in range(n_turns):
                    order = ("0", "512M") if t % 2 == 0 else ("512M", "0")
                    for c in order:
                        conv[c].append(turn_message(t))
                        res[c].append(ask(servers[c][1], conv[c]))
                        conv[c].append({"role": "assistant", "content": res[c][-1][1]})
                port = servers["512M"][1]
                entry_bytes = metric(port, "vlkv:prefix_cache_bytes")
                encodes = {c: metric(servers[c][1], "vlkv:media_encodes_total") for c in servers}
            finally:
                for p, _ in servers.values():
                    p.terminate()
                    p.wait()
            off, on = res["0"], res["512M"]
            if [r[1] for r in off] != [r[1] for r in on]:
                same = "NO"
            print(f"\n{n_turns} turns, --kv {method}, round {rep + 1} (answers equal: {same}; prompt {off[0][3]} -> "
                  f"{off[-1][3]} tokens; encoder runs: {encodes['0']:.0f} without the cache, {encodes['512M']:.0f} with)")
            print("turn | no cache ms | cache ms | cached tokens | speedup | turn 1 (no cache) / this")
            for t in range(n_turns):
                print(f"{t + 1:4} | {off[t][0]:11.1f} | {on[t][0]:8.1f} | {on[t][2]:13} | {off[t][0] / on[t][0]:6.1f}x | "
                      f"{off[0][0] / on[t][0]:6.1f}x")
            first += [off[0][0], on[0][0]]
            later_off += [r[0] for r in off[1:]]
            later_on += [r[0] for r in on[1:]]
        summary.append((n_turns, method, median(first), median(later_off), median(later_on), entry_bytes, same))

print(f"\nSummary ({repeats} round(s); medians: turn 1 of both servers' first turns, turn 2+ of turns 2..N; per GiB = 1 GiB / the cache's bytes after the conversation)")
print("turns | method | turn 1 ms | turn 2+ no cache | turn 2+ cache | turn 1 / turn 2+ cache | cache KiB | per GiB | vs f16")
f16_bytes = {n: b for n, m, _, _, _, b, _ in summary if m == "f16"}
for n, m, t1, off_later, on_later, b, same in summary:
    per_gib = str(int((1 << 30) // b)) if b else "-"
    rel = f"{f16_bytes[n] / b:.2f}x" if b and f16_bytes.get(n) else "-"
    print(f"{n:5} | {m:6} | {t1:9.1f} | {off_later:16.1f} | {on_later:13.1f} | {t1 / on_later:21.1f}x | "
          f"{b / 1024:9.0f} | {per_gib:>7} | {rel}")

if "--llama-server" in opts:
    if frames > 0:
        print("\nllama-server: skipped (it takes no video; use --images N)")
    else:
        p, port = start_llama(opts["--llama-server"])
        try:
            for n_turns in turn_counts:
                conv, rows = [], []
                for t in range(n_turns):
                    conv.append(turn_message(t))
                    rows.append(ask(port, conv))
                    conv.append({"role": "assistant", "content": rows[-1][1]})
                print(f"\nllama-server, {n_turns} turns (same pair, cache_prompt true, -np 1)")
                print("turn | TTFT ms | cached tokens (timings.cache_n) | prompt tokens | turn 1 / this")
                for t, r in enumerate(rows):
                    print(f"{t + 1:4} | {r[0]:7.1f} | {r[2]:31} | {r[3]:13} | {rows[0][0] / r[0]:6.1f}x")
        finally:
            p.terminate()
            p.wait()
