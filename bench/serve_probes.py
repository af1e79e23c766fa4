#!/usr/bin/env python3
"""Issue 24's hostile-client probes against a vlkv binary, as a Markdown table:
    python3 bench/serve_probes.py build/vlkv [--cors]
Starts `vlkv serve -m models/stories260K.gguf -np 4 --kv-budget 256M --api-key secret
--max-queue 2 --max-body 32M` (--cors adds --cors-origin http://page.test) on a free
loopback port and prints one row per probe: status, time, the server's RSS change.
Takes about a minute; every step is bounded. Binaries older than the Beast layer lack
--cors-origin: run them without --cors."""
import json, os, re, socket, subprocess, sys, tempfile, threading, time

binary = sys.argv[1]
after = "--cors" in sys.argv[2:]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
model = os.environ.get("MODEL", os.path.join(root, "models", "stories260K.gguf"))
args = [binary, "serve", "-m", model, "-t", "1", "-np", "4", "--kv-budget", "256M", "--api-key", "secret",
        "--max-queue", "2", "--max-body", "32M", "--host", "127.0.0.1", "--port", "0"]
if after:
    args += ["--cors-origin", "http://page.test"]
log_path = os.path.join(tempfile.mkdtemp(prefix="vlkv_probes_"), "server.log")
log = open(log_path, "w+")
p = subprocess.Popen(args, stderr=log)
port = None
for _ in range(300):
    time.sleep(0.05)
    t = open(log_path).read()
    m = re.search(r"listening on http://127.0.0.1:(\d+)", t)
    if m and " ready (" in t:
        port = int(m.group(1)); break
assert port, open(log_path).read()

def rss():
    for line in open(f"/proc/{p.pid}/status"):
        if line.startswith("VmRSS:"): return int(line.split()[1]) * 1024
def conn():
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(5); return s
def read_all(s, timeout=5):
    s.settimeout(timeout); out = b""; t0 = time.time()
    try:
        while time.time() - t0 < timeout:
            b = s.recv(65536)
            if not b: break
            out += b
    except (socket.timeout, ConnectionResetError): pass
    return out
def statuses(b): return [int(x) for x in re.findall(rb"HTTP/1.1 (\d+)", b)]
def sendall(s, data):
    try: s.sendall(data); return True
    except OSError: return False
def request(method, path, body=None, headers=None, timeout=5):
    s = conn(); h = {"Host": "x", "Authorization": "Bearer secret", "Connection": "close"}; h.update(headers or {})
    data = body.encode() if body else b""
    if body is not None: h["Content-Length"] = str(len(data))
    sendall(s, (f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n").encode() + data)
    out = read_all(s, timeout); s.close(); return out
def row(name, result): print(f"| {name} | {result} |", flush=True)

print("| probe | result |\n|---|---|", flush=True)

# 1. 2M small headers, no key
r0 = rss(); t0 = time.time(); s = conn()
ok = sendall(s, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 2_000_000 + b"\r\n")
out = read_all(s, 30); s.close(); time.sleep(0.5)
row("one request with 2M small headers (16 MB), no key", f"status {statuses(out)}, {time.time()-t0:.2f} s, RSS {(rss()-r0)/2**20:+.0f} MiB after it")

# 2. 20 slow heads, /health latency
slow = []
for i in range(20):
    s = conn(); s.sendall(b"GET /health HTTP/1.1\r\n"); slow.append(s)
def trickle():
    for _ in range(3):
        for s in slow:
            try: s.send(b"X")
            except OSError: pass
        time.sleep(1)
th = threading.Thread(target=trickle); th.start(); time.sleep(0.3)
t_slow = time.time(); t0 = time.time()
try:
    out = request("GET", "/health", timeout=5); lat = time.time() - t0
    res = f"/health {statuses(out)} in {lat:.2f} s"
except Exception as e:
    res = f"/health failed: {e}"
th.join()
time.sleep(max(0, 11 - (time.time() - t_slow)))
closed = 0
for s in slow:
    s.setblocking(False)
    try:
        d = s.recv(4096); closed += 1 if (d == b"" or b"408" in d) else 0
    except BlockingIOError: pass
    except OSError: closed += 1
    s.close()
row("20 connections sending headers at 1 byte/s (--max-queue 2)", f"{res}; {closed}/20 slow ones answered 408/closed 11 s later")

# 3. chunked bodies over --max-body 32M
for mib in (33, 100):
    r0 = rss(); t0 = time.time(); s = conn()
    sendall(s, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n" % (1 << 20) + b"x" * (1 << 20) + b"\r\n"
    sendall(s, b"%x\r\n" % 11 + b'{"prompt":"' + b"\r\n")
    sent = 0
    for i in range(mib):
        if not sendall(s, chunk): break
        sent += 1
    sendall(s, b"%x\r\n" % 2 + b'"}' + b"\r\n0\r\n\r\n")
    out = read_all(s, 60); s.close(); t1 = time.time(); time.sleep(2.5)
    row(f"chunked body of {mib} MiB with --max-body 32M", f"status {statuses(out)[:1]}, sent and answered in {t1-t0:.2f} s, RSS {(rss()-r0)/2**20:+.0f} MiB 2.5 s later")

# 4. pipelined GETs
s = conn(); s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 3)
out = read_all(s, 2); s.close()
row("3 pipelined GETs in one write", f"{len(statuses(out))} answered: {statuses(out)}")

# 5. 401 POST with smuggled request
sm = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
s = conn(); s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(sm) + sm)
out = read_all(s, 2); s.close()
row("a POST refused with 401 whose body holds another request", f"replies {statuses(out)}")

# 6. two different Content-Length
s = conn(); s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}")
out = read_all(s, 2); s.close()
msg = re.search(rb'"message":"([^"]*)"', out)
row("two different Content-Length headers", f"replies {statuses(out)} ({msg.group(1).decode() if msg else ''})")

# 7. unsupported params
res = []
for k, v in [("logprobs", True), ("top_logprobs", 2), ("response_format", {"type": "json_object"}), ("tools", [{"type": "function", "function": {"name": "f"}}]), ("n_probs", 3)]:
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, k: v}
    if k == "top_logprobs": body["logprobs"] = True if not after else False
    out = request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"}, timeout=30)
    res.append(f"{k}: {statuses(out)[:1]}")
row("logprobs, top_logprobs, response_format, tools, n_probs", ", ".join(res))

# 8. CORS preflight
out = request("OPTIONS", "/v1/chat/completions", None, {"Origin": "http://page.test", "Access-Control-Request-Method": "POST", "Authorization": ""})
acao = re.search(rb"(?i)access-control-allow-origin: ([^\r]*)", out)
row("CORS preflight from another origin (no key)", f"status {statuses(out)[:1]}, Allow-Origin {acao.group(1).decode() if acao else None}")

# 9. endpoints
res = []
for m, path, body in [("GET", "/v1/models/stories260K", None), ("POST", "/tokenize", '{"content":"Once upon"}'),
                      ("POST", "/detokenize", '{"tokens":[1,2,3]}'), ("GET", "/props", None), ("GET", "/slots", None)]:
    out = request(m, path, body, {"Content-Type": "application/json"})
    res.append(f"{path}: {statuses(out)[:1]}")
row("GET /v1/models/{id}, /tokenize, /detokenize, /props, /slots", ", ".join(res))

# 10. log
n = len([l for l in open(log_path).read().splitlines() if " request id=" in l])
row("server log", f"{n} per-request lines for the probes above")
p.terminate(); p.wait(timeout=20)
