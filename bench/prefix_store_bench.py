#!/usr/bin/env python3
"""vlkv serve --redis: turn 2's time to first token of an image conversation on a fresh
replica without any cache, on a fresh replica whose entry comes from Redis (turn 1 ran on
another replica), and on a replica that ran turn 2 itself (local hit, encoder cache warm).
    python3 bench/prefix_store_bench.py build/vlkv [rounds]
Starts redis-server (must be installed) and the replicas on loopback ports; the bundled
tinyvlm-shapes pair, models/demo/005.png, -t 1, greedy; TTFT is the server's logged ttft_ms.
Rounds alternate the order of the three settings; redis_encodes: the vision encoder's runs
on each fresh replica that took the entry from Redis (0: the hit covered the image)."""
import json, subprocess, sys, time, urllib.request, base64, os, signal, re, socket, tempfile
W = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.abspath(sys.argv[1])
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
os.chdir(tempfile.mkdtemp(prefix="vlkv_store_bench_"))
img = base64.b64encode(open(W + "/models/demo/005.png", "rb").read()).decode()
t1 = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + img}},
                                    {"type": "text", "text": "Describe the image."}]}]
def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def serve(extra, log):
    p = port()
    proc = subprocess.Popen([BIN, "serve", "-m", W + "/models/tinyvlm-shapes.gguf", "--mmproj",
                             W + "/models/tinyvlm-shapes-mmproj.gguf", "-t", "1", "--port", str(p), "--kv-budget", "64M"] + extra,
                            stderr=open(log, "w"))
    for _ in range(500):
        if " ready (" in open(log).read(): break
        time.sleep(0.02)
    return proc, p
def ask(p, msgs):
    body = json.dumps({"messages": msgs, "temperature": 0, "max_tokens": 8}).encode()
    r = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{p}/v1/chat/completions", body, {"Content-Type": "application/json"}))
    j = json.load(r); return j["choices"][0]["message"]["content"], j["usage"]["prompt_tokens_details"]["cached_tokens"]
def ttft(log):
    return float(re.findall(r"ttft_ms=([0-9.]+)", open(log).read())[-1])
rp = port()
redis = subprocess.Popen(["redis-server", "--port", str(rp), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", ".", "--logfile", "redis.log"])
time.sleep(0.5)
a, pa = serve(["--redis", f"127.0.0.1:{rp}", "--cache-secret-file", "cache.secret"], "a.log")
ans, _ = ask(pa, t1); time.sleep(0.5)
t2 = t1 + [{"role": "assistant", "content": ans}, {"role": "user", "content": "Where is the shape?"}]
res = {"none": [], "redis": [], "local": [], "redis_encodes": []}
for r in range(ROUNDS):
    for kind in ["none", "redis", "local"] if r % 2 == 0 else ["local", "redis", "none"]:
        if kind == "none":
            s, p = serve(["--cache-budget", "0"], "n.log"); ask(p, t2); res[kind].append(ttft("n.log"))
        elif kind == "redis":
            s, p = serve(["--redis", f"127.0.0.1:{rp}", "--cache-secret-file", "cache.secret"], "b.log"); _, c = ask(p, t2); assert c > 0; res[kind].append(ttft("b.log"))
            m = urllib.request.urlopen(f"http://127.0.0.1:{p}/metrics").read().decode()
            res["redis_encodes"].append(float(re.search(r"^vlkv:media_encodes_total (\S+)$", m, re.M).group(1)))
        else:
            s, p = serve([], "l.log"); ask(p, t2); _, c = ask(p, t2); assert c > 0; res[kind].append(ttft("l.log"))
        s.send_signal(signal.SIGTERM); s.wait()
a.send_signal(signal.SIGTERM); a.wait(); redis.kill(); redis.wait()
print(json.dumps(res))
