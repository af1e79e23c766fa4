// The chat page of `vlkv serve` (docs/web_page.md). Plain JS, no framework: one page of a few
// hundred lines needs no build step and nothing vendored, and it must work offline.
// Server text is only ever set with textContent (never parsed as HTML).
'use strict';

const $ = (id) => document.getElementById(id);
const kMaxCompare = 3;

const state = {
  props: null,         // GET /props
  history: [],         // OpenAI messages of the conversation so far
  attachments: [],     // [{name, url, video}] pictures and videos for the next message (data: URIs)
  abort: null,         // AbortController of the request in flight
};

// ---- formatting ----

function fmtBytes(b) {
  if (b == null || !isFinite(b)) return '–';
  if (b < 1024) return `${Math.round(b)} B`;
  if (b < 1024 * 1024) return `${(b / 1024).toFixed(1)} KiB`;
  if (b < 1024 ** 3) return `${(b / 1024 ** 2).toFixed(2)} MiB`;
  return `${(b / 1024 ** 3).toFixed(2)} GiB`;
}
const fmtMs = (ms) => (ms == null ? '–' : ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`);
const fmtRate = (r) => (r ? `${r.toFixed(r < 10 ? 1 : 0)} tok/s` : '–');
const fmtBits = (b) => (b ? `${b.toFixed(2)} bits/elem` : '–');

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

function showNotice(text) {
  const n = $('notice');
  n.textContent = text;
  n.hidden = !text;
}

// ---- the server ----

function apiHeaders() {
  const h = { 'Content-Type': 'application/json' };
  const key = $('api-key').value.trim();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

async function errorText(res) {
  try {
    const j = await res.json();
    if (j.error && j.error.message) return `${res.status}: ${j.error.message}`;
  } catch (_) { /* not JSON */ }
  return `${res.status} ${res.statusText}`;
}

function bitsOf(method) {
  const bits = state.props && state.props.kv.bits_per_element;
  return (bits && bits[method]) || 0;
}

async function loadProps() {
  let res;
  try {
    res = await fetch('/props', { headers: apiHeaders() });
  } catch (e) {
    $('model-info').textContent = 'server unreachable';
    showNotice(`Cannot reach the server: ${e.message}`);
    return;
  }
  if (res.status === 401) {
    $('model-info').textContent = 'API key needed';
    showNotice('This server was started with --api-key: type the key above (it stays in this page only).');
    return;
  }
  if (res.status === 503) {  // the model is still loading
    $('model-info').textContent = 'loading the model…';
    setTimeout(loadProps, 1000);
    return;
  }
  if (!res.ok) {
    showNotice(`GET /props failed: ${await errorText(res)}`);
    return;
  }
  const p = await res.json();
  state.props = p;
  showNotice('');
  const vision = p.modalities && p.modalities.vision;
  $('model-info').textContent =
    `${p.model} · context ${p.n_ctx} tokens · ${vision ? 'vision' : 'text only'} · KV budget ${fmtBytes(p.kv.budget_bytes)}`;
  $('attach').disabled = !vision;
  $('attach').title = vision ? 'Attach pictures (or drop them on the page)' : 'This model has no vision encoder (--mmproj)';

  const select = $('method');
  const previous = select.value;
  select.replaceChildren();
  for (const name of p.kv.allowed) {
    const label = `${name}${name === p.kv.default ? ' (default)' : ''} — ${fmtBits(bitsOf(name))}`;
    select.append(el('option', { value: name, text: label }));
  }
  select.value = p.kv.allowed.includes(previous) ? previous : p.kv.default;
  updateMethodHint();

  const box = $('compare-methods');
  box.querySelectorAll('label').forEach((l) => l.remove());
  // Preselected: f16 (the reference) and the first compressed methods, up to three.
  const pre = [...p.kv.allowed].sort((a, b) => (a === 'f16' ? -1 : b === 'f16' ? 1 : 0)).slice(0, kMaxCompare);
  for (const name of p.kv.allowed) {
    const cb = el('input', { type: 'checkbox', value: name, name: 'compare-method' });
    cb.checked = pre.includes(name);
    cb.addEventListener('change', limitCompareChoice);
    box.append(el('label', { class: 'inline' }, cb, ` ${name}`));
  }
  limitCompareChoice();
  const canCompare = p.kv.allowed.length >= 2;
  $('compare').disabled = !canCompare;
  $('compare').parentElement.title = canCompare ? '' : 'Start the server with --kv-allow M1,M2 to compare methods';
}

function updateMethodHint() {
  const m = $('method').value;
  $('method-bits').textContent = m ? `${fmtBits(bitsOf(m))} in the KV cache` : '';
}

function compareChoice() {
  return [...document.querySelectorAll('input[name=compare-method]:checked')].map((c) => c.value);
}

function limitCompareChoice() {
  const full = compareChoice().length >= kMaxCompare;
  document.querySelectorAll('input[name=compare-method]').forEach((c) => { c.disabled = full && !c.checked; });
}

// POST /v1/chat/completions with stream: true. onText(textSoFar) after each delta.
// Resolves to {text, kv, timings, usage, ttftMs}; rejects with the server's error message.
async function streamChat(messages, method, onText, signal) {
  const body = {
    messages,
    kv: method,
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: Number($('max-tokens').value) || 128,
    temperature: Number($('temperature').value) || 0,
  };
  const t0 = performance.now();
  const res = await fetch('/v1/chat/completions', {
    method: 'POST', headers: apiHeaders(), body: JSON.stringify(body), signal,
  });
  if (!res.ok) throw new Error(await errorText(res));
  const out = { text: '', kv: null, timings: null, usage: null, ttftMs: null };
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, end);
      buf = buf.slice(end + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const data = line.slice(6);
        if (data === '[DONE]') return out;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message || 'the server reported an error');
        const delta = j.choices && j.choices[0] && j.choices[0].delta;
        if (delta && delta.content) {
          if (out.ttftMs === null) out.ttftMs = performance.now() - t0;
          out.text += delta.content;
          onText(out.text);
        }
        if (j.kv) out.kv = j.kv;
        if (j.timings) out.timings = j.timings;
        if (j.usage) out.usage = j.usage;
      }
    }
  }
  throw new Error('the stream ended before [DONE]');
}

// ---- rendering ----

function scrollToEnd() {
  const log = $('log');
  log.scrollTop = log.scrollHeight;
}

function statsLine(r) {
  const kv = r.kv || {};
  const t = r.timings || {};
  const items = [
    ['method', kv.method || '–'],
    ['bits', fmtBits(kv.bits_per_element)],
    ['held', `KV held ${fmtBytes(kv.held_bytes)}`],
    ['ttft', `TTFT ${fmtMs(r.ttftMs)}`],
    ['speed', fmtRate(t.predicted_per_second)],
    ['tokens', `${(r.usage && r.usage.completion_tokens) || t.predicted_n || 0} tokens`],
  ];
  // Prompt tokens served from a prefix cache, when the server reports them (OpenAI's
  // usage.prompt_tokens_details.cached_tokens or llama-server's timings.cache_n).
  const details = r.usage && r.usage.prompt_tokens_details;
  const cached = (details && details.cached_tokens) || t.cache_n;
  if (cached) items.push(['cached', `${cached} prompt tokens cached`]);
  return el('p', { class: 'stats' }, ...items.map(([k, v]) => el('span', { class: `stat stat-${k}`, text: v })));
}

// A picture or a (muted, still) video of an attachment.
function preview(a) {
  if (a.video) return el('video', { src: a.url, 'aria-label': a.name, muted: '', preload: 'metadata' });
  return el('img', { src: a.url, alt: a.name });
}

function userMessage(text, attachments) {
  const m = el('article', { class: 'msg user', 'aria-label': 'You' });
  if (attachments.length) {
    const pics = el('div', { class: 'pics' });
    for (const a of attachments) pics.append(preview(a));
    m.append(pics);
  }
  m.append(el('p', { class: 'text', text }));
  return m;
}

function answerBox(method, label) {
  const m = el('article', { class: 'msg assistant', 'aria-label': label, 'data-method': method, 'data-state': 'running' });
  const text = el('p', { class: 'text', text: '…' });
  m.append(text);
  return { box: m, text };
}

// ---- sending ----

function userContent(text, attachments) {
  if (!attachments.length) return text;
  return [
    ...attachments.map((a) => (a.video ? { type: 'video_url', video_url: { url: a.url } }
                                       : { type: 'image_url', image_url: { url: a.url } })),
    { type: 'text', text },
  ];
}

function setBusy(busy) {
  $('send').disabled = busy;
  $('stop').disabled = !busy;
  $('log').setAttribute('aria-busy', busy ? 'true' : 'false');
}

async function runOne(messages, method, box, text, signal) {
  try {
    // Shown without the leading space most tokenizers put on the first word.
    const show = (t) => { text.textContent = t.replace(/^\s+/, '') || '…'; scrollToEnd(); };
    const r = await streamChat(messages, method, show, signal);
    if (!r.text.trim()) text.textContent = '(empty answer)';
    box.append(statsLine(r));
    box.dataset.kv = JSON.stringify(r.kv);  // the server's figures, as sent (tests read them)
    box.dataset.state = 'done';
    return r;
  } catch (e) {
    const stopped = e.name === 'AbortError';
    box.append(el('p', { class: 'error', role: stopped ? null : 'alert', text: stopped ? 'stopped' : `Error: ${e.message}` }));
    box.dataset.state = stopped ? 'stopped' : 'error';
    return null;
  } finally {
    scrollToEnd();
  }
}

async function sendChat(question, attachments, signal) {
  const log = $('log');
  const content = userContent(question, attachments);
  log.append(userMessage(question, attachments));
  const method = $('method').value;
  const { box, text } = answerBox(method, `Answer (${method})`);
  log.append(box);
  scrollToEnd();
  const messages = [...state.history, { role: 'user', content }];
  const r = await runOne(messages, method, box, text, signal);
  if (r) state.history = [...messages, { role: 'assistant', content: r.text }];
}

// The same question, alone (no history), under each method in turn: one at a time, so
// each method's speed is measured without the others sharing the CPU.
async function sendCompare(question, attachments, methods, signal) {
  const log = $('log');
  log.append(userMessage(question, attachments));
  const section = el('section', { class: 'compare', 'aria-label': `Comparison of ${methods.join(', ')}`, 'data-state': 'running' });
  section.append(el('p', { class: 'compare-note', text: 'Same question, one request per KV method, run one after another (not added to the conversation).' }));
  const grid = el('div', { class: 'compare-grid' });
  section.append(grid);
  log.append(section);
  const cols = methods.map((m) => {
    const { box, text } = answerBox(m, `Answer with ${m}`);
    box.prepend(el('h2', { class: 'col-title', text: `${m} · ${fmtBits(bitsOf(m))}` }));
    grid.append(box);
    return { method: m, box, text };
  });
  const messages = [{ role: 'user', content: userContent(question, attachments) }];
  const results = [];
  for (const c of cols) {
    if (signal.aborted) break;
    results.push({ col: c, r: await runOne(messages, c.method, c.box, c.text, signal) });
  }
  // Bytes held as bars, relative to f16 when it ran (else to the largest).
  const ok = results.filter((x) => x.r && x.r.kv);
  const ref = ok.find((x) => x.col.method === 'f16');
  const base = ref ? ref.r.kv.held_bytes : Math.max(...ok.map((x) => x.r.kv.held_bytes));
  for (const { col, r } of ok) {
    const frac = base > 0 ? r.kv.held_bytes / base : 0;
    const label = `${fmtBytes(r.kv.held_bytes)}: ${Math.round(frac * 100)}% of ${ref ? "f16's KV bytes" : 'the largest'}`;
    const fill = el('div', { class: 'fill' });
    fill.style.width = `${Math.min(100, frac * 100).toFixed(1)}%`;  // CSSOM: the CSP forbids style attributes
    const bar = el('div', { class: 'bar', role: 'img', 'aria-label': label }, fill);
    col.box.append(bar, el('p', { class: 'bar-label', text: label }));
  }
  section.dataset.state = 'done';
  scrollToEnd();
}

async function onSubmit(ev) {
  ev.preventDefault();
  const question = $('prompt').value.trim();
  if (!question || state.abort) return;
  const compare = $('compare').checked;
  const methods = compareChoice();
  if (compare && methods.length < 2) {
    showNotice('Pick two or three methods to compare.');
    return;
  }
  showNotice('');
  $('empty-hint')?.remove();
  const attachments = state.attachments;
  state.attachments = [];
  renderAttachments();
  $('prompt').value = '';
  state.abort = new AbortController();
  setBusy(true);
  try {
    if (compare) await sendCompare(question, attachments, methods, state.abort.signal);
    else await sendChat(question, attachments, state.abort.signal);
  } finally {
    state.abort = null;
    setBusy(false);
    $('prompt').focus();
  }
}

// ---- attachments ----

function renderAttachments() {
  const list = $('attachments');
  list.replaceChildren();
  state.attachments.forEach((a, i) => {
    const remove = el('button', { type: 'button', class: 'remove', 'aria-label': `Remove ${a.name}`, text: '×' });
    remove.addEventListener('click', () => {
      state.attachments.splice(i, 1);
      renderAttachments();
      $('prompt').focus();
    });
    list.append(el('li', {}, preview(a), remove));
  });
}

function addFiles(files) {
  const refused = [];
  for (const f of files) {
    const video = f.type.startsWith('video/');
    if (!video && !f.type.startsWith('image/')) {
      refused.push(`${f.name}: not a picture or a video`);
      continue;
    }
    const reader = new FileReader();
    reader.onload = () => {
      state.attachments.push({ name: f.name, url: reader.result, video });
      renderAttachments();
    };
    reader.onerror = () => showNotice(`${f.name}: could not be read`);
    reader.readAsDataURL(f);
  }
  showNotice(refused.join('\n'));
}

function setupDrop() {
  const overlay = $('drop-overlay');
  let depth = 0;
  const hasFiles = (e) => e.dataTransfer && [...e.dataTransfer.types].includes('Files');
  document.addEventListener('dragenter', (e) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    depth++;
    overlay.hidden = false;
  });
  document.addEventListener('dragleave', () => {
    depth = Math.max(0, depth - 1);
    if (!depth) overlay.hidden = true;
  });
  document.addEventListener('dragover', (e) => { if (hasFiles(e)) e.preventDefault(); });
  document.addEventListener('drop', (e) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    depth = 0;
    overlay.hidden = true;
    if (!$('attach').disabled) addFiles(e.dataTransfer.files);
  });
}

// ---- wiring ----

function init() {
  $('composer').addEventListener('submit', onSubmit);
  $('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $('composer').requestSubmit();
    }
  });
  $('prompt').addEventListener('paste', (e) => {
    const files = [...e.clipboardData.files];
    if (files.length && !$('attach').disabled) addFiles(files);
  });
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && state.abort) state.abort.abort();
  });
  $('stop').addEventListener('click', () => state.abort && state.abort.abort());
  $('attach').addEventListener('click', () => $('file').click());
  $('file').addEventListener('change', () => {
    addFiles($('file').files);
    $('file').value = '';
  });
  $('method').addEventListener('change', updateMethodHint);
  $('compare').addEventListener('change', () => {
    const on = $('compare').checked;
    $('compare-methods').hidden = !on;
    $('method').disabled = on;
  });
  $('clear').addEventListener('click', () => {
    state.history = [];
    $('log').replaceChildren();
    $('prompt').focus();
  });
  $('api-key').addEventListener('change', loadProps);
  setupDrop();
  loadProps();
  $('prompt').focus();
}

init();
