#!/usr/bin/env python3
"""The chat page of `vlkv serve` in headless Chromium (Debian chromium + chromium-driver,
driven by python3-selenium), against a `vlkv serve` this test starts on loopback with the
bundled VLM and --api-key: types the key, attaches a picture with the file picker, asks,
checks the streamed answer is the bytes `vlkv run` gives for the same question (greedy),
switches the KV method, attaches a second picture by drag-and-drop, runs a three-method
comparison, checks the stats each answer shows against the server's JSON, that the page
logged no error (a CSP violation would), and saves light and dark screenshots. Then: a reload
keeps the conversation (and the key, for the tab); copy (navigator.clipboard and its fallback);
edit and resend; regenerate; a bad setting is refused in the page; a system prompt and
max_tokens reach the server; hostile Markdown in a stored answer stays inert text; New chat
clears; the key box is hidden where the server needs no key.

Exit 77 (ctest: skipped) with a message when Chromium, chromedriver or Selenium is absent.
Every wait is bounded; the whole run takes a few seconds.
"""
import argparse
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77
METHODS = ["f16", "kivi2", "akvq_vl"]  # --kv and --kv-allow; the comparison uses all three
KEY = "browser-test-key"


def skip(why):
    print(f"SKIPPED: {why}", flush=True)
    sys.exit(SKIP)


def find_browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or (os.path.exists("/usr/bin/chromedriver") and "/usr/bin/chromedriver")
    if not chromium or not driver:
        skip("no Chromium here: install Debian's chromium and chromium-driver (make deps does) to run the browser test")
    try:
        import selenium  # noqa: F401
    except ImportError:
        skip(f"no Selenium for {sys.executable}: install Debian's python3-selenium (make deps does)")
    return chromium, driver


class Server:
    """vlkv serve on 127.0.0.1, a free port (--port 0, read from its log)."""

    def __init__(self, vlkv, source_dir, log_path, extra):
        m = os.path.join(source_dir, "models")
        args = [vlkv, "serve", "-m", f"{m}/tinyvlm-shapes.gguf", "--mmproj", f"{m}/tinyvlm-shapes-mmproj.gguf",
                "--host", "127.0.0.1", "--port", "0", "--timeout", "60"] + extra
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log)
        self.port = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = open(log_path).read()
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", text)
            if m:
                self.port = int(m.group(1))
            if " ready (" in text and self.port:
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"vlkv serve exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        raise RuntimeError("vlkv serve was not ready within 60 s:\n" + open(log_path).read())

    def url(self, path="/"):
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def fmt_bytes(b):  # as chat.js's fmtBytes
    if b < 1024:
        return f"{round(b)} B"
    if b < 1024 ** 2:
        return f"{b / 1024:.1f} KiB"
    return f"{b / 1024 ** 2:.2f} MiB" if b < 1024 ** 3 else f"{b / 1024 ** 3:.2f} GiB"


def expected_answer(vlkv, source_dir, image, question, method, max_tokens):
    m = os.path.join(source_dir, "models")
    out = subprocess.run([vlkv, "run", "-m", f"{m}/tinyvlm-shapes.gguf", "--mmproj", f"{m}/tinyvlm-shapes-mmproj.gguf",
                          "--image", image, "-p", question, "--temp", "0", "-n", str(max_tokens), "--kv", method],
                         capture_output=True, timeout=60, check=True)
    return out.stdout.decode()


# Hostile Markdown an answer might hold: each construct must render as DOM nodes or stay text.
HOSTILE = """# Title
**bold** and *em* and `code <b>x</b>` and ~~gone~~

```js
let x = '<b>';
```

- one
- two

1. first
2. second

> quoted

[ok](https://example.com/a) [bad](javascript:window.__pwned=3) [data](data:text/html,hi)
<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> <a href="javascript:alert(1)">a</a>"""


def api_answer(server, body):
    return json.load(urllib.request.urlopen(urllib.request.Request(
        server.url("/v1/chat/completions"), data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}), timeout=30))


def conversation_features(browser, wait, q, check, answers, ask, server, a, demo, max_tokens, texts):
    """Reload, copy, edit, regenerate, settings, Markdown, New chat. Returns the number of checks."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select
    n = 0

    def ok(cond, what):
        nonlocal n
        n += 1
        check(cond, what)

    def text_of(box):
        return box.find_element(By.CSS_SELECTOR, ".text").text.strip()

    # Every request body the page sends, recorded in the page (reset by a reload).
    record = """window.__sent = []; const f = window.fetch;
                window.fetch = (u, o) => { if (o && o.body) window.__sent.push(JSON.parse(o.body)); return f(u, o); };"""

    def sent():
        return browser.execute_script("return window.__sent")

    def loaded():
        wait.until(lambda b: len(Select(q(By.ID, "method")).options) == 3 and not q(By.ID, "notice").is_displayed())

    # A reload keeps the conversation (pictures included: they are small) and the key (this tab).
    browser.refresh()
    loaded()
    ok([text_of(x) for x in answers()] == texts, f"after a reload: {[x.text for x in answers()]} != {texts}")
    ok(len(browser.find_elements(By.CSS_SELECTOR, "#log article.user img")) == 3, "pictures after a reload")
    ok(len(browser.find_elements(By.CSS_SELECTOR, "section.compare article.msg[data-state=done]")) == 3, "comparison after a reload")
    ok(q(By.ID, "compare").is_selected() and Select(q(By.ID, "method")).first_selected_option.get_attribute("value") == "kivi2",
       "Compare or the method after a reload")
    q(By.ID, "compare").click()
    Select(q(By.ID, "method")).select_by_value("f16")

    # Copy: navigator.clipboard, then the fallback (no clipboard API: a page served over http on
    # a LAN address), whose execCommand('copy') reaches the same clipboard.
    read_clipboard = "navigator.clipboard.readText().then(arguments[0], (e) => arguments[0]('ERR ' + e))"
    answers()[0].find_element(By.XPATH, ".//button[text()='Copy']").click()
    wait.until(lambda b: answers()[0].find_element(By.XPATH, ".//button[text()='Copied' or text()='Copy failed']"))
    ok(browser.execute_async_script(read_clipboard).strip() == texts[0], "the answer copied")
    browser.execute_script("Object.defineProperty(navigator, 'clipboard', {value: undefined, configurable: true})")
    first_user = browser.find_elements(By.CSS_SELECTOR, "#log > article.user")[0]
    first_user.find_element(By.XPATH, ".//button[text()='Copy']").click()
    ok(first_user.find_element(By.CSS_SELECTOR, ".actions button").text == "Copied", "the fallback did not copy")
    browser.execute_script("delete navigator.clipboard")
    ok(browser.execute_async_script(read_clipboard) == "Where is the blue circle?", "the question copied by the fallback")

    # Edit the first question and send it again: what followed (the second turn, the comparison)
    # goes; the picture stays; the request holds that one question.
    browser.execute_script(record)
    first_user.find_element(By.XPATH, ".//button[text()='Edit']").click()
    area = q(By.CSS_SELECTOR, "#log textarea.edit")
    area.clear()
    area.send_keys("Where is the red square?", Keys.ENTER)
    wait.until(lambda b: len(answers()) == 1 and answers()[0].get_attribute("data-state") != "running")
    want = expected_answer(a.vlkv, a.source_dir, os.path.join(demo, "005.png"), "Where is the red square?", "f16", max_tokens)
    edited = text_of(answers()[0])
    ok(edited == want.strip(), f"edited answer {edited!r} != vlkv run's {want!r}")
    ok(not browser.find_elements(By.CSS_SELECTOR, "section.compare"), "the comparison after the edit stayed")
    users = browser.find_elements(By.CSS_SELECTOR, "#log > article.user")
    ok(len(users) == 1 and users[0].find_elements(By.CSS_SELECTOR, "img"), "the edited question or its picture")
    msgs = sent()[-1]["messages"]
    ok(len(msgs) == 1 and msgs[0]["content"][-1]["text"] == "Where is the red square?", f"edit sent {msgs}")

    # Regenerate the last answer: the same request again, one answer in its place (greedy: same text).
    answers()[0].find_element(By.XPATH, ".//button[text()='Regenerate']").click()
    wait.until(lambda b: len(sent()) == 2 and answers()[0].get_attribute("data-state") == "done")
    ok(len(answers()) == 1 and text_of(answers()[0]) == edited, "regenerated answer")
    ok(sent()[1]["messages"] == sent()[0]["messages"], "regenerate sent other messages")

    # A setting out of the server's range is refused in the page (nothing is sent).
    q(By.CSS_SELECTOR, "#settings summary").click()
    defaults = browser.execute_script("return fetch('/props', {headers: {Authorization: 'Bearer ' + arguments[0]}})"
                                      ".then((r) => r.json())", KEY)["default_generation_settings"]["params"]
    ok(float(q(By.ID, "top-p").get_attribute("value")) == round(defaults["top_p"], 6) and
       int(q(By.ID, "top-k").get_attribute("value")) == defaults["top_k"], "settings do not show /props' defaults")
    q(By.ID, "top-p").clear()
    q(By.ID, "top-p").send_keys("0")
    q(By.ID, "prompt").send_keys("What is in the picture?", Keys.ENTER)
    ok("top_p must be in (0, 1]" in q(By.ID, "notice").text and len(sent()) == 2, "top_p 0 was not refused")
    q(By.ID, "top-p").clear()
    q(By.ID, "top-p").send_keys("0.9")

    # A system prompt and max_tokens reach the server: the request holds them, the answer is one
    # token, and the server counted more prompt tokens than for the same messages without it.
    q(By.ID, "system-prompt").send_keys("Answer in one word.")
    q(By.ID, "max-tokens").clear()
    q(By.ID, "max-tokens").send_keys("1")
    q(By.ID, "prompt").send_keys(Keys.ENTER)  # the question is still in the box
    wait.until(lambda b: len(answers()) == 2 and answers()[1].get_attribute("data-state") != "running")
    body = sent()[-1]
    ok(body["messages"][0] == {"role": "system", "content": "Answer in one word."} and body["max_tokens"] == 1 and
       body["top_p"] == 0.9 and body["temperature"] == 0 and "seed" not in body, f"sent {dict(body, messages='…')}")
    usage = json.loads(answers()[1].get_attribute("data-usage"))
    ok(usage["completion_tokens"] == 1, f"max_tokens 1 gave {usage}")
    direct = dict(body, messages=body["messages"][1:], stream=False)
    direct.pop("stream_options")
    plain = api_answer(server, direct)
    ok(usage["prompt_tokens"] > plain["usage"]["prompt_tokens"], f"system prompt: {usage} vs {plain['usage']}")

    # Hostile Markdown in an answer (put in the stored conversation, rendered after a reload as a
    # streamed answer is): the constructs render as elements, the HTML and javascript: stay text.
    browser.execute_script("""const s = JSON.parse(localStorage.getItem('vlkv.chat'));
        s.items = [{role: 'user', text: 'markdown?', attachments: []},
                   {role: 'assistant', method: 'f16', state: 'done', text: arguments[0], kv: null, usage: null}];
        localStorage.setItem('vlkv.chat', JSON.stringify(s));""", HOSTILE)
    browser.refresh()
    loaded()
    ok(q(By.ID, "system-prompt").get_attribute("value") == "Answer in one word." and
       q(By.ID, "max-tokens").get_attribute("value") == "1", "settings after a reload")
    md = answers()[0].find_element(By.CSS_SELECTOR, ".md")
    tags = browser.execute_script("return [...arguments[0].querySelectorAll('*')].map((e) => e.tagName.toLowerCase())", md)
    for tag in ["h3", "strong", "em", "code", "del", "pre", "ul", "ol", "li", "blockquote", "a"]:
        ok(tag in tags, f"no <{tag}> in {tags}")
    ok(not {"img", "script", "iframe"} & set(tags), f"HTML from the answer became elements: {tags}")
    links = [(x.get_attribute("href"), x.get_attribute("rel")) for x in md.find_elements(By.TAG_NAME, "a")]
    ok(links == [("https://example.com/a", "noopener noreferrer")], f"links {links}")
    shown = md.text
    for inert in ['<img src=x onerror="window.__pwned=1">', "<script>window.__pwned=2</script>",
                  "[bad](javascript:window.__pwned=3)", '<a href="javascript:alert(1)">a</a>']:
        ok(inert in shown, f"{inert!r} not shown as text in {shown!r}")
    ok(md.find_element(By.CSS_SELECTOR, "pre code.language-js").text == "let x = '<b>';", "fenced code")
    ok(md.find_element(By.CSS_SELECTOR, "code").text == "code <b>x</b>", "code span")
    ok(browser.execute_script("return window.__pwned") is None, "hostile Markdown ran")
    q(By.CSS_SELECTOR, "#settings summary").click()  # open: the screenshot shows the settings too
    shot = os.path.join(a.out_dir, "chat_page_markdown.png")
    browser.save_screenshot(shot)
    print(f"screenshot (Markdown, settings): {shot}", flush=True)

    # New chat clears the conversation, here and in storage; "remember key" moves the key.
    q(By.ID, "new-chat").click()
    ok(not browser.find_elements(By.CSS_SELECTOR, "#log article") and q(By.ID, "empty-hint").is_displayed(), "New chat")
    ok(browser.execute_script("return JSON.parse(localStorage.getItem('vlkv.chat')).items.length") == 0, "stored after New chat")
    q(By.ID, "remember-key").click()
    stored = browser.execute_script("return [sessionStorage.getItem('vlkv.api_key'), localStorage.getItem('vlkv.api_key')]")
    ok(stored == [None, KEY], f"remembered key stored as {stored}")

    # A damaged store (not what the page writes) does not stop the page: what makes sense is shown.
    browser.execute_script("""localStorage.setItem('vlkv.chat', JSON.stringify({items: [
        7, {role: 'user', text: 5}, {role: 'user', text: 'q', attachments: [{url: 'javascript:x'}]},
        {role: 'assistant', text: 'an *answer*', state: 'running', kv: 'bad'}, {role: 'compare', text: 'c'}]}))""")
    browser.refresh()
    loaded()
    ok([text_of(x) for x in answers()] == ["an answer"] and answers()[0].get_attribute("data-state") == "stopped",
       f"damaged store: {[x.text for x in answers()]}")
    ok(browser.find_elements(By.CSS_SELECTOR, "#log article.user .media-gone"), "a stored non-data: URL was kept")
    browser.execute_script("localStorage.clear(); sessionStorage.clear()")
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vlkv", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--out-dir", required=True, help="screenshots and the server log go here")
    a = ap.parse_args()
    chromium, driver_path = find_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait
    from selenium.common.exceptions import StaleElementReferenceException

    os.makedirs(a.out_dir, exist_ok=True)
    a.source_dir = os.path.abspath(a.source_dir)
    demo = os.path.join(a.source_dir, "models", "demo")
    server = Server(a.vlkv, a.source_dir, os.path.join(a.out_dir, "serve.log"),
                    ["--api-key", KEY, "--kv", METHODS[0], "--kv-allow", ",".join(METHODS[1:])])
    slow = None
    profile = tempfile.mkdtemp(prefix="vlkv-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,1000", "--no-first-run", "--disable-extensions", f"--user-data-dir={profile}"]:
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = None
    try:
        browser = webdriver.Chrome(service=Service(executable_path=driver_path), options=opts)
        browser.set_page_load_timeout(30)
        browser.set_script_timeout(30)
        # The page replaces an answer's element when it ends: a stale one is looked up again.
        wait = WebDriverWait(browser, 60, ignored_exceptions=[StaleElementReferenceException])
        q = browser.find_element
        checks = 0

        def check(cond, what):
            nonlocal checks
            checks += 1
            if not cond:
                raise AssertionError(what)

        # The page needs no key; its /props call does, and says so: the key box shows.
        browser.execute_cdp_cmd("Browser.grantPermissions", {"origin": server.url("").rstrip("/"),
                                "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
        browser.get(server.url("/"))
        wait.until(lambda b: "API key" in q(By.ID, "model-info").text)
        check(q(By.ID, "notice").is_displayed(), "no notice asking for the key")
        check(q(By.ID, "key-box").is_displayed(), "no key box on a server with --api-key")
        key = q(By.ID, "api-key")
        key.send_keys(KEY)
        key.send_keys(Keys.TAB)  # "change": /props again, with the key
        wait.until(lambda b: len(Select(q(By.ID, "method")).options) == len(METHODS))
        info = q(By.ID, "model-info").text
        check("tinyvlm-shapes" in info and "vision" in info, f"model line: {info!r}")
        props = json.load(urllib.request.urlopen(urllib.request.Request(
            server.url("/props"), headers={"Authorization": f"Bearer {KEY}"}), timeout=10))
        labels = [o.text for o in Select(q(By.ID, "method")).options]
        for name, label in zip(METHODS, labels):
            bits = props["kv"]["bits_per_element"][name]
            check(label.startswith(name) and f"{bits:.2f} bits/elem" in label, f"method option {label!r} vs {bits}")

        def answers():
            return browser.find_elements(By.CSS_SELECTOR, "#log > article.msg.assistant")

        def ask(question, n_before):
            box = q(By.ID, "prompt")
            box.send_keys(question)
            box.send_keys(Keys.ENTER)  # Enter sends
            wait.until(lambda b: len(answers()) > n_before and answers()[-1].get_attribute("data-state") != "running")
            return answers()[-1]

        def stats(el):
            # textContent: a comparison column hides its method and bits pills (they are in its title)
            return {s.get_attribute("class").split("stat-")[1]: s.get_attribute("textContent")
                    for s in el.find_elements(By.CSS_SELECTOR, ".stat")}

        max_tokens = int(q(By.ID, "max-tokens").get_attribute("value"))

        # 1. A picture from the file picker, a question, the streamed answer.
        q(By.ID, "file").send_keys(os.path.join(demo, "005.png"))
        wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#attachments img")) == 1)
        question = "Where is the blue circle?"
        first = ask(question, 0)
        check(first.get_attribute("data-state") == "done", f"first answer: {first.text!r}")
        want = expected_answer(a.vlkv, a.source_dir, os.path.join(demo, "005.png"), question, "f16", max_tokens)
        got = first.find_element(By.CSS_SELECTOR, ".text").text
        check(got.strip() == want.strip() and want.strip(), f"answer {got!r} != vlkv run's {want!r}")
        s = stats(first)
        check(s["method"] == "f16" and s["bits"] == "16.00 bits/elem", f"stats {s}")
        check(re.fullmatch(r"KV held [\d.]+ (B|KiB|MiB)", s["held"]) and re.fullmatch(r"TTFT \d+(\.\d+)? m?s", s["ttft"]),
              f"stats {s}")
        check(re.fullmatch(r"[\d.]+ tok/s", s["speed"]), f"speed {s}")
        kv = json.loads(first.get_attribute("data-kv"))
        check(s["held"] == f"KV held {fmt_bytes(kv['held_bytes'])}" and kv["held_bytes"] > 0, f"held {s} vs {kv}")
        check(len(browser.find_elements(By.CSS_SELECTOR, "#log article.user img")) == 1, "the picture is not in the conversation")

        # 2. Another method; a picture by drag-and-drop (a DataTransfer with the file's bytes).
        Select(q(By.ID, "method")).select_by_value("kivi2")
        png = base64.b64encode(open(os.path.join(demo, "009.png"), "rb").read()).decode()
        browser.execute_script("""
            const bytes = Uint8Array.from(atob(arguments[0]), (c) => c.charCodeAt(0));
            const dt = new DataTransfer();
            dt.items.add(new File([bytes], '009.png', {type: 'image/png'}));
            for (const type of ['dragenter', 'dragover', 'drop'])
              document.getElementById('log').dispatchEvent(new DragEvent(type, {dataTransfer: dt, bubbles: true, cancelable: true}));
        """, png)
        wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#attachments img")) == 1)
        check(not q(By.ID, "drop-overlay").is_displayed(), "the drop overlay stayed")
        second = ask("How many shapes are there?", 1)
        check(second.get_attribute("data-state") == "done", f"second answer: {second.text!r}")
        s2 = stats(second)
        second_text = second.find_element(By.CSS_SELECTOR, ".text").text
        bits = props["kv"]["bits_per_element"]["kivi2"]
        check(s2["method"] == "kivi2" and s2["bits"] == f"{bits:.2f} bits/elem", f"stats {s2}")
        check(second.get_attribute("data-method") == "kivi2", "second answer's method")

        # A video (a real clip made by ffmpeg) is attached as a video_url part, previewed, and can
        # be taken off again (the server's video path: tests/tools/serve_video_test.cpp).
        clip = os.path.join(tempfile.mkdtemp(prefix="vlkv_page_"), "clip.mp4")
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=48x32:rate=10",
                        "-frames:v", "6", "-c:v", "mpeg4", "-pix_fmt", "yuv420p", clip], check=True)
        browser.execute_script("""
            const bytes = Uint8Array.from(atob(arguments[0]), (c) => c.charCodeAt(0));
            const dt = new DataTransfer();
            dt.items.add(new File([bytes], 'clip.mp4', {type: 'video/mp4'}));
            for (const type of ['dragenter', 'dragover', 'drop'])
              document.body.dispatchEvent(new DragEvent(type, {dataTransfer: dt, bubbles: true, cancelable: true}));
        """, base64.b64encode(open(clip, "rb").read()).decode())
        wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#attachments video")) == 1)
        video = q(By.CSS_SELECTOR, "#attachments video")
        check(video.get_attribute("aria-label") == "clip.mp4" and video.get_attribute("src").startswith("data:video/mp4"),
              "the video preview")
        q(By.CSS_SELECTOR, "#attachments button.remove").click()
        check(not browser.find_elements(By.CSS_SELECTOR, "#attachments video"), "the video was not removed")

        # 3. Compare: the same question under the three methods, side by side.
        check(not q(By.ID, "compare-methods").is_displayed(), "the methods to compare show before Compare is ticked")
        q(By.ID, "compare").click()
        check(q(By.ID, "compare-methods").is_displayed() and not q(By.ID, "method").is_enabled(), "compare controls")
        chosen = [c.get_attribute("value") for c in browser.find_elements(By.CSS_SELECTOR, "input[name=compare-method]:checked")]
        check(chosen == METHODS, f"preselected for comparison: {chosen}")
        q(By.ID, "file").send_keys(os.path.join(demo, "026.png"))
        wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#attachments img")) == 1)
        q(By.ID, "prompt").send_keys("Describe the image.", Keys.ENTER)
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "section.compare[data-state=done]"))
        cols = browser.find_elements(By.CSS_SELECTOR, "section.compare article.msg")
        check([c.get_attribute("data-method") for c in cols] == METHODS, "comparison columns")
        want = expected_answer(a.vlkv, a.source_dir, os.path.join(demo, "026.png"), "Describe the image.", "f16", max_tokens)
        for c in cols:
            sc = stats(c)
            check(c.get_attribute("data-state") == "done" and sc["method"] == c.get_attribute("data-method"), f"column {sc}")
            check(c.find_elements(By.CSS_SELECTOR, ".bar .fill"), f"no bytes bar in {sc['method']}")
        f16_text = cols[0].find_element(By.CSS_SELECTOR, ".text").text
        check(f16_text.strip() == want.strip(), f"f16 column {f16_text!r} != vlkv run's {want!r}")
        for c in cols:
            held = json.loads(c.get_attribute("data-kv"))["held_bytes"]
            check(held > 0, f"{c.get_attribute('data-method')} held {held}")
            if c is cols[0]:
                check(c.find_element(By.CSS_SELECTOR, ".bar-label").text.endswith(": 100% of f16's KV bytes"), "f16 bar label")
            else:
                f16_held = json.loads(cols[0].get_attribute("data-kv"))["held_bytes"]
                pct = round(held / f16_held * 100)
                label = c.find_element(By.CSS_SELECTOR, ".bar-label").text
                check(label.endswith(f": {pct}% of f16's KV bytes"), f"bar label {label!r}, want {pct}%")
        check(len(answers()) == 2, "the comparison went into the conversation's answers")

        # The key stays in the tab (sessionStorage), not in localStorage ("remember key" is unticked).
        stored_key = browser.execute_script("return [sessionStorage.getItem('vlkv.api_key'), localStorage.getItem('vlkv.api_key')]")
        check(stored_key == [KEY, None], f"key stored as {stored_key}")

        # No error in the page's console (a CSP violation, a failed fetch, a script error).
        # The one expected: /props before the key was typed.
        errors = [e for e in browser.get_log("browser")
                  if e["level"] == "SEVERE" and not ("/props" in e["message"] and "(Unauthorized)" in e["message"])]
        check(not errors, f"console errors: {errors}")

        shot = os.path.join(a.out_dir, "chat_page.png")
        browser.save_screenshot(shot)
        print(f"screenshot: {shot}", flush=True)
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        dark = os.path.join(a.out_dir, "chat_page_dark.png")
        browser.save_screenshot(dark)
        print(f"screenshot (dark): {dark}", flush=True)
        log_before = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        check(not log_before, f"console errors: {log_before}")
        more = conversation_features(browser, wait, q, check, answers, ask, server, a, demo, max_tokens,
                                     [got.strip(), second_text.strip()])
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        check(not errors, f"console errors after the conversation features: {errors}")

        # 4. Escape stops an answer mid-stream, and the server hears it (its request is cancelled).
        slow = Server(a.vlkv, a.source_dir, os.path.join(a.out_dir, "serve_slow.log"), ["--token-delay-ms", "300"])
        browser.get(slow.url("/"))
        wait.until(lambda b: len(Select(q(By.ID, "method")).options) == 1)
        check(not q(By.ID, "key-box").is_displayed(), "the key box shows on a server without --api-key")
        check(browser.execute_script("return fetch('/props').then((r) => r.json())")["api_key_required"] is False,
              "/props' api_key_required without --api-key")
        q(By.ID, "file").send_keys(os.path.join(demo, "026.png"))
        wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#attachments img")) == 1)
        q(By.ID, "prompt").send_keys("Describe the image.", Keys.ENTER)
        wait.until(lambda b: answers() and answers()[-1].find_element(By.CSS_SELECTOR, ".text").text not in ("", "…"))
        check(q(By.ID, "send").get_attribute("disabled") and q(By.ID, "stop").is_enabled(), "busy controls")
        q(By.ID, "prompt").send_keys(Keys.ESCAPE)
        wait.until(lambda b: answers()[-1].get_attribute("data-state") != "running")
        check(answers()[-1].get_attribute("data-state") == "stopped", f"after Escape: {answers()[-1].text!r}")
        check(q(By.ID, "send").is_enabled(), "Send stays disabled after a stop")

        def disconnected():
            text = urllib.request.urlopen(slow.url("/metrics"), timeout=10).read().decode()
            m = re.search(r"^vlkv:requests_disconnected_total (\S+)$", text, re.M)
            return float(m.group(1)) if m else -1
        wait.until(lambda b: disconnected() == 1)
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        check(not errors, f"console errors after the stop: {errors}")

        print(f"OK: {checks + more} checks; answers: {got.strip()!r} (f16), {second_text.strip()!r} (kivi2)")
        return 0
    finally:
        if browser:
            browser.quit()
        server.stop()
        if slow:
            slow.stop()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
