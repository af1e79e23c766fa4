#!/usr/bin/env python3
"""Issue 22's prefix-cache benchmark: time to first token of every turn of a conversation
about one image, each request resending the image and every earlier turn (what OpenAI
clients do), with and without the prefix cache, per KV method; and the bytes a cached
conversation holds (from /metrics), so how many fit in 1 GiB.
    python3 bench/prefix_cache_bench.py build/vlkv [--turns 3,10] [--kv f16,kivi2]
Env MODEL, MMPROJ, IMAGE (default: the bundled tinyvlm-shapes and models/demo/005.png),
THREADS (1), MAX_TOKENS (16). For each method and cache setting a fresh `vlkv serve`
(--kv-budget 1G; --cache-budget 512M or 0) on a loopback port; greedy answers; TTFT is
the time from sending the request to the first streamed content byte."""
import base64, json, os, re, subprocess, sys, tempfile, time, urllib.request

binary = sys.argv[1]
opts = dict(zip(sys.argv[2::2], sys.argv[3::2]))
turn_counts = [int(x) for x in opts.get("--turns", "3,10").split(",")]
methods = opts.get("--kv", "f16,kivi2").split(",")
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
model = os.environ.get("MODEL", os.path.join(root, "models", "tinyvlm-shapes.gguf"))
mmproj = os.environ.get("MMPROJ", os.path.join(root, "models", "tinyvlm-shapes-mmproj.gguf"))
image = os.environ.get("IMAGE", os.path.join(root, "models", "demo", "005.png"))
threads = os.environ.get("THREADS", "1")
max_tokens = int(os.environ.get("MAX_TOKENS", "16"))
uri = "data:image/png;base64," + base64.b64encode(open(image, "rb").read()).decode()
questions = ["Describe the image.", "Where is the shape?", "What colour is it?", "Is it large?", "Is it round?",
             "What is next to it?", "Is there text?", "How many shapes?", "What is the background?", "Anything else?"]


def start(method, cache):
    log_path = os.path.join(tempfile.mkdtemp(prefix="vlkv_pc_"), "server.log")
    log = open(log_path, "w+")
    p = subprocess.Popen([binary, "serve", "-m", model, "--mmproj", mmproj, "-t", threads, "-np", "1", "--kv", method,
                          "--kv-budget", "1G", "--cache-budget", cache, "--host", "127.0.0.1", "--port", "0"], stderr=log)
    for _ in range(6000):
        time.sleep(0.05)
        t = open(log_path).read()
        m = re.search(r"listening on http://127.0.0.1:(\d+)", t)
        if m and " ready (" in t:
            return p, int(m.group(1))
    p.kill()
    raise SystemExit(open(log_path).read())


def ask(port, messages):
    body = json.dumps({"messages": messages, "temperature": 0, "max_tokens": max_tokens, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    ttft, text, usage = None, "", {}
    with urllib.request.urlopen(req, timeout=3600) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("usage"):
                usage = ev["usage"]
            for c in ev.get("choices", []):
                piece = c.get("delta", {}).get("content")
                if piece:
                    if ttft is None:
                        ttft = time.perf_counter() - t0
                    text += piece
    return ttft if ttft is not None else time.perf_counter() - t0, text, usage


def metric(port, name):
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    m = re.search("^" + re.escape(name) + r" (\S+)$", body, re.M)
    return float(m.group(1)) if m else 0.0


print(f"model {os.path.basename(model)} + {os.path.basename(mmproj)}, image {os.path.basename(image)}, "
      f"-t {threads}, max_tokens {max_tokens}; TTFT ms per turn")
rows = []
for n_turns in turn_counts:
    for method in methods:
        results = {}
        for cache in ("0", "512M"):
            p, port = start(method, cache)
            try:
                messages, ttfts, cached, answers = [], [], [], []
                for t in range(n_turns):
                    content = ([{"type": "image_url", "image_url": {"url": uri}}] if t == 0 else []) + \
                              [{"type": "text", "text": questions[t % len(questions)]}]
                    messages.append({"role": "user", "content": content})
                    ttft, text, usage = ask(port, messages)
                    messages.append({"role": "assistant", "content": text})
                    ttfts.append(ttft * 1000)
                    cached.append(usage.get("prompt_tokens_details", {}).get("cached_tokens", 0))
                    answers.append(text)
                entry_bytes = metric(port, "vlkv:prefix_cache_bytes")
                results[cache] = (ttfts, cached, answers, entry_bytes, usage.get("prompt_tokens", 0))
            finally:
                p.terminate()
                p.wait()
        (t0, _, a0, _, n_prompt), (t1, c1, a1, b1, _) = results["0"], results["512M"]
        same = "yes" if a0 == a1 else "NO"
        print(f"\n{n_turns} turns, --kv {method} (answers equal: {same}; last prompt {n_prompt} tokens)")
        print("turn | no cache | cache | cached tokens | speedup")
        for t in range(n_turns):
            print(f"{t + 1:4} | {t0[t]:8.1f} | {t1[t]:6.1f} | {c1[t]:13} | {t0[t] / t1[t]:6.1f}x")
        print(f"entries after the conversation: {b1 / 1024:.0f} KiB -> {int((1 << 30) // b1) if b1 else 0} "
              f"such conversations in 1 GiB")
