#!/usr/bin/python3
"""A loopback stand-in for the Hugging Face hub, for the -hf tests (tests/tools/hub_*_test.cpp).

Serves the endpoints llama.cpp's -hf (and vlkv's) use:
  GET  /api/models/OWNER/NAME/refs                       {"branches": [{"name": "main", "targetCommit": C}]}
  GET  /api/models/OWNER/NAME/tree/C?recursive=true      [{"type": "file", "path", "oid", "size", "lfs"}]
  GET  /OWNER/NAME/resolve/C/PATH                        302 to /cdn/<sha256> for .gguf (as the hub does for
                                                         LFS files), the bytes themselves for other files
  GET|HEAD /cdn/<sha256>, /plain/NAME                    the bytes, with Range (206) and ETag
Config (JSON file, argv[1]): {"commit": C, "repos": {"OWNER/NAME": {"files": {PATH: LOCAL_FILE},
  "token": T (401 unless "Authorization: Bearer T"), "cut_first": [PATH] (the first transfer of
  that file stops halfway, the connection closed), "corrupt": [PATH] (one byte flipped),
  "slow": [PATH] (sent in 20 pieces 20 ms apart), "token_files": T (as "token", for the files
  only: the listing is public, as for the hub's gated repos), "claim_size": {PATH: N}}},
  "plain": {NAME: LOCAL_FILE}}.
Writes its port to argv[2] once listening; appends one JSON line per request to argv[3]
(method, path, range, authorization, user_agent).
"""
import hashlib
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

CONFIG = json.load(open(sys.argv[1]))
LOG_PATH = sys.argv[3]
LOG_LOCK = threading.Lock()
CUT_DONE = set()
COMMIT = CONFIG["commit"]


def read(path):
    with open(path, "rb") as f:
        return f.read()


def entry(path, data):
    if path.endswith(".gguf"):
        sha = hashlib.sha256(data).hexdigest()
        return {"type": "file", "path": path, "oid": "0" * 40, "size": len(data),
                "lfs": {"oid": sha, "size": len(data), "pointerSize": 130}}
    git = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    return {"type": "file", "path": path, "oid": git, "size": len(data)}


class Hub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self):
        line = json.dumps({"method": self.command, "path": self.path,
                           "range": self.headers.get("Range", ""),
                           "authorization": self.headers.get("Authorization", ""),
                           "user_agent": self.headers.get("User-Agent", "")})
        with LOG_LOCK, open(LOG_PATH, "a") as f:
            f.write(line + "\n")

    def send_json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def authorized(self, repo):
        token = CONFIG["repos"][repo].get("token")
        return token is None or self.headers.get("Authorization") == "Bearer " + token

    def send_bytes(self, data, file_key=None):
        etag = '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
        start = 0
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", etag)
        self.end_headers()
        if self.command == "HEAD":
            return
        if file_key is not None and file_key[1] in CONFIG["repos"][file_key[0]].get("cut_first", []) \
                and file_key not in CUT_DONE:
            CUT_DONE.add(file_key)
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if file_key is not None and file_key[1] in CONFIG["repos"][file_key[0]].get("slow", []):
            for i in range(0, len(body), max(1, len(body) // 20)):
                self.wfile.write(body[i:i + max(1, len(body) // 20)])
                self.wfile.flush()
                time.sleep(0.02)
            return
        self.wfile.write(body)

    def find_lfs(self, sha):
        for repo, cfg in CONFIG["repos"].items():
            for path, local in cfg["files"].items():
                data = read(local)
                if hashlib.sha256(data).hexdigest() == sha:
                    return repo, path, data
        return None

    def serve_file(self, repo, path, data):
        cfg = CONFIG["repos"][repo]
        if path in cfg.get("corrupt", []):
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        self.send_bytes(data, (repo, path))

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self.record()
        parts = urlsplit(self.path)
        p = parts.path.strip("/").split("/")
        if p[:2] == ["api", "models"] and len(p) >= 5:
            repo = p[2] + "/" + p[3]
            if repo not in CONFIG["repos"]:
                return self.send_json(404, {"error": "Repository not found"})
            if not self.authorized(repo):
                return self.send_json(401, {"error": "Access to model %s is restricted." % repo})
            files = CONFIG["repos"][repo]["files"]
            if p[4] == "refs":
                return self.send_json(200, {"branches": [{"name": "main", "ref": "refs/heads/main",
                                                          "targetCommit": COMMIT}], "tags": [], "converts": []})
            if p[4] == "tree" and len(p) == 6 and p[5] == COMMIT:
                listing = [entry(path, read(local)) for path, local in sorted(files.items())]
                for e in listing:  # "claim_size": {PATH: N}, a size the listing claims
                    claimed = CONFIG["repos"][repo].get("claim_size", {}).get(e["path"])
                    if claimed is not None:
                        e["size"] = e["lfs"]["size"] = claimed
                return self.send_json(200, listing)
            return self.send_json(404, {"error": "Revision not found"})
        if len(p) >= 5 and p[2] == "resolve":
            repo = p[0] + "/" + p[1]
            path = "/".join(p[4:])
            if repo not in CONFIG["repos"]:
                return self.send_json(404, {"error": "Repository not found"})
            if not self.authorized(repo):
                return self.send_json(401, {"error": "Access to model %s is restricted." % repo})
            files_token = CONFIG["repos"][repo].get("token_files")  # gated files, public listing
            if files_token is not None and self.headers.get("Authorization") != "Bearer " + files_token:
                return self.send_json(401, {"error": "Access to this file is restricted."})
            local = CONFIG["repos"][repo]["files"].get(path)
            if local is None or p[3] != COMMIT:
                return self.send_json(404, {"error": "Entry not found"})
            data = read(local)
            if path.endswith(".gguf"):  # LFS: to the CDN, a relative Location as the hub sends
                self.send_response(302)
                self.send_header("Location", "/cdn/" + hashlib.sha256(data).hexdigest() + "?x=1")
                self.send_header("X-Linked-Etag", '"' + hashlib.sha256(data).hexdigest() + '"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            return self.serve_file(repo, path, data)
        if len(p) == 2 and p[0] == "cdn":
            found = self.find_lfs(p[1])
            if found is None:
                return self.send_json(404, {"error": "no such object"})
            return self.serve_file(*found)
        if len(p) == 2 and p[0] == "plain" and p[1] in CONFIG.get("plain", {}):
            return self.send_bytes(read(CONFIG["plain"][p[1]]))
        self.send_json(404, {"error": "not found"})


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    server.daemon_threads = True
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    server.serve_forever()


if __name__ == "__main__":
    main()
