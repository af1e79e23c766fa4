// The chat page of `vlkv serve` (docs/web_page.md). Plain JS, no framework: one page of a few
// hundred lines needs no build step and nothing vendored, and it must work offline.
// Server text is set with textContent or built into DOM nodes by markdown.js (never parsed
// as HTML). The conversation and the settings live in localStorage (kStore); the API key only
// in sessionStorage unless "remember key" is ticked.
'use strict';

const $ = (id) => document.getElementById(id);
const kMaxCompare = 3;
const kStore = 'vlkv.chat';            // localStorage: {items, method, settings}
const kKeyStore = 'vlkv.api_key';      // sessionStorage, or localStorage when remembered
const kMaxKeptMedia = 512 * 1024;      // a picture or video is kept across reloads up to this many characters of data: URI

// The sampling fields the API takes, with the server's ranges (SamplerParams' table in
// include/vlkv/sampler_params.h; max_tokens up to the context). Defaults come from /props.
const kParams = [
  { id: 'temperature', key: 'temperature', int: false, ok: (v) => isFinite(v), range: 'a number (<= 0: greedy)' },
  { id: 'top-p', key: 'top_p', int: false, ok: (v) => v > 0 && v <= 1, range: 'in (0, 1]' },
  { id: 'top-k', key: 'top_k', int: true, ok: (v) => Math.abs(v) < 2 ** 31, range: 'an integer (<= 0: off)' },
  { id: 'min-p', key: 'min_p', int: false, ok: (v) => v >= 0 && v <= 1, range: 'in [0, 1]' },
  { id: 'repeat-penalty', key: 'repeat_penalty', int: false, ok: (v) => v > 0 && isFinite(v), range: '> 0 (1: off)' },
  { id: 'seed', key: 'seed', int: true, ok: (v) => v >= -1 && v <= 4294967295, range: 'in [-1, 4294967295] (empty: random)', optional: true },
  { id: 'max-tokens', key: 'max_tokens', int: true, ok: (v) => v >= 1 && v <= ((state.props && state.props.n_ctx) || 2 ** 31 - 1), range: 'in [1, the context]' },
];
// The page's own defaults: greedy, so that answers repeat and Compare differs only by method.
const kPageDefaults = { temperature: '0', max_tokens: '128' };

const state = {
  props: null,       // GET /props
  items: [],         // the conversation: {role: user|assistant|compare, text, …} (docs/web_page.md)
  nodes: [],         // the log's element of each item
  attachments: [],   // [{name, url, video}] pictures and videos for the next message (data: URIs)
  abort: null,       // AbortController of the request in flight
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

// ---- what is kept across reloads ----

function keptMedia(a) {
  return { name: a.name, video: a.video, url: a.url && a.url.length <= kMaxKeptMedia ? a.url : null };
}

// What the user set; an empty field is not kept (it takes the server's default again).
function settingsNow() {
  const s = { system: $('system-prompt').value };
  for (const p of kParams) if ($(p.id).value !== '') s[p.key] = $(p.id).value;
  return s;
}

function save() {
  const items = state.items.map((it) => ({ ...it, attachments: (it.attachments || []).map(keptMedia) }));
  const data = { items, method: $('method').value || undefined, compare: $('compare').checked, settings: settingsNow() };
  try {
    localStorage.setItem(kStore, JSON.stringify(data));
  } catch (_) {  // over the quota: keep the words, drop the pictures
    data.items = items.map((it) => ({ ...it, attachments: it.attachments.map((a) => ({ ...a, url: null })) }));
    try { localStorage.setItem(kStore, JSON.stringify(data)); } catch (e) { showNotice(`The conversation could not be kept: ${e.message}`); }
  }
}

// A stored item in the shape the page writes, or null: a damaged store must not stop the page.
// An answer still streaming when the page went away was cut off: it shows as stopped.
function checkedAnswer(r) {
  if (!r || typeof r !== 'object' || typeof r.text !== 'string') return null;
  const st = ['done', 'error', 'stopped'].includes(r.state) ? r.state : 'stopped';
  return { ...r, state: st, method: String(r.method || ''), error: String(r.error || '') };
}

function checkedItem(it) {
  if (!it || typeof it !== 'object' || typeof it.text !== 'string') return null;
  const attachments = (Array.isArray(it.attachments) ? it.attachments : []).filter((a) => a && typeof a === 'object').map((a) => ({
    name: String(a.name || 'attachment'), video: !!a.video,
    url: typeof a.url === 'string' && a.url.startsWith('data:') ? a.url : null,
  }));
  if (it.role === 'user') return { role: 'user', text: it.text, attachments };
  if (it.role === 'assistant') return checkedAnswer(it) && { ...checkedAnswer(it), role: 'assistant' };
  if (it.role !== 'compare' || !Array.isArray(it.results)) return null;
  const results = it.results.map(checkedAnswer).filter(Boolean);
  return { role: 'compare', text: it.text, attachments, methods: results.map((r) => r.method), state: 'done', results };
}

function restore() {
  let data;
  try { data = JSON.parse(localStorage.getItem(kStore) || 'null'); } catch (_) { data = null; }
  if (!data || typeof data !== 'object') return null;
  state.items = Array.isArray(data.items) ? data.items.map(checkedItem).filter(Boolean) : [];
  const s = data.settings || {};
  if (typeof s.system === 'string') $('system-prompt').value = s.system;
  for (const p of kParams) if (typeof s[p.key] === 'string') $(p.id).value = s[p.key];
  $('compare').checked = !!data.compare;
  return data;
}

function keyStore() { return $('remember-key').checked ? localStorage : sessionStorage; }

function saveKey() {
  const key = $('api-key').value.trim();
  localStorage.removeItem(kKeyStore);
  sessionStorage.removeItem(kKeyStore);
  if (key) keyStore().setItem(kKeyStore, key);
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

// The settings not chosen yet take the server's defaults (SamplerParams{}), but for the page's own.
function applyDefaults(params, stored) {
  for (const p of kParams) {
    if (stored && typeof stored[p.key] === 'string') continue;
    let v = kPageDefaults[p.key] !== undefined ? kPageDefaults[p.key] : params[p.key];
    if (p.key === 'seed' && (v === undefined || v >= 4294967295 || v < 0)) v = '';  // random
    if (typeof v === 'number' && !Number.isInteger(v)) v = Number(v.toPrecision(6));  // 0.95f: 0.949999988…
    if (v !== undefined) $(p.id).value = String(v);
  }
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
    $('key-box').hidden = false;
    $('model-info').textContent = 'API key needed';
    showNotice('This server was started with --api-key: type the key above (kept for this tab only, unless you tick "remember").');
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
  $('key-box').hidden = p.api_key_required === false;
  const vision = p.modalities && p.modalities.vision;
  $('model-info').textContent =
    `${p.model} · context ${p.n_ctx} tokens · ${vision ? 'vision' : 'text only'} · KV budget ${fmtBytes(p.kv.budget_bytes)}`;
  $('attach').disabled = !vision;
  $('attach').title = vision ? 'Attach pictures (or drop them on the page)' : 'This model has no vision encoder (--mmproj)';
  const gen = (p.default_generation_settings && p.default_generation_settings.params) || {};
  if (!state.defaultsApplied) applyDefaults(gen, state.storedSettings);
  state.defaultsApplied = true;
  for (const p2 of kParams) {
    const d = kPageDefaults[p2.key] !== undefined ? `page default ${kPageDefaults[p2.key]}` : `server default ${gen[p2.key]}`;
    $(p2.id).title = `${p2.key}: ${p2.range}; ${d}`;
  }

  const select = $('method');
  const previous = select.value || state.storedMethod;
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
  if (!canCompare) $('compare').checked = false;
  $('compare').parentElement.title = canCompare ? '' : 'Start the server with --kv-allow M1,M2 to compare methods';
  onCompareToggle();
  if (!state.abort) renderLog();  // the stats of restored answers name the methods' bits
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

// The sampling fields of a request, or an error naming the first bad one (nothing is sent then).
function samplingFields() {
  const out = {};
  for (const p of kParams) {
    const input = $(p.id);
    const raw = input.value.trim();
    input.setCustomValidity('');
    if (raw === '' && p.optional) continue;
    const v = Number(raw);
    if (raw === '' || !Number.isFinite(v) || (p.int && !Number.isInteger(v)) || !p.ok(v)) {
      input.setCustomValidity(`${p.key} must be ${p.range}`);
      return { error: `${p.key} must be ${p.range}, got ${raw === '' ? 'nothing' : raw}`, input };
    }
    out[p.key] = v;
  }
  return { fields: out };
}

// POST /v1/chat/completions with stream: true. onText(textSoFar) after each delta.
// Resolves to {text, kv, timings, usage, ttftMs}; rejects with the server's error message.
async function streamChat(messages, method, sampling, onText, signal) {
  const body = { messages, kv: method || undefined, stream: true, stream_options: { include_usage: true }, ...sampling };
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

// ---- copying ----

// navigator.clipboard where the page is a secure context (localhost, https); elsewhere (the
// server on a LAN address over http) a selected, off-screen textarea and execCommand('copy').
async function copyText(text, button) {
  let ok = false;
  try {
    if (navigator.clipboard && navigator.clipboard.writeText) {
      await navigator.clipboard.writeText(text);
      ok = true;
    }
  } catch (_) { /* denied or not focused: the fallback below */ }
  if (!ok) {
    const area = el('textarea', { class: 'copy-buffer', readonly: '', 'aria-hidden': 'true' });
    area.value = text;
    document.body.append(area);
    area.select();
    try { ok = document.execCommand('copy'); } catch (_) { ok = false; }
    area.remove();
  }
  button.textContent = ok ? 'Copied' : 'Copy failed';
  setTimeout(() => { button.textContent = 'Copy'; }, 1500);
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

// A picture or a (muted, still) video of an attachment; one not kept across a reload, named.
function preview(a) {
  if (!a.url) return el('span', { class: 'media-gone', text: `[${a.video ? 'video' : 'picture'} not kept: ${a.name}]` });
  if (a.video) return el('video', { src: a.url, 'aria-label': a.name, muted: '', preload: 'metadata' });
  return el('img', { src: a.url, alt: a.name });
}

function actionButton(label, title, onClick) {
  const b = el('button', { type: 'button', class: 'action', title, text: label });
  b.disabled = !!state.abort && label !== 'Copy';
  b.addEventListener('click', () => onClick(b));
  return b;
}

// Sets an answer's text: Markdown rendered into DOM nodes (markdown.js), without the leading
// space most tokenizers put on the first word.
function setAnswerText(node, text) {
  node.replaceChildren(renderMarkdown(text.replace(/^\s+/, '') || '…'));
}

function userMessage(item, index) {
  const m = el('article', { class: 'msg user', 'aria-label': 'You', 'data-index': index });
  if (item.attachments.length) m.append(el('div', { class: 'pics' }, ...item.attachments.map(preview)));
  m.append(el('p', { class: 'text', text: item.text }));
  const actions = el('div', { class: 'actions' }, actionButton('Copy', 'Copy this message', (b) => copyText(item.text, b)));
  if (index != null) actions.append(actionButton('Edit', 'Edit and send again from here (what followed is dropped)', () => startEdit(m, index)));
  m.append(actions);
  return m;
}

// An answer box: its text (Markdown), then its stats or error, then copy / regenerate
// (chat.css shows Regenerate on the log's last answer only).
function answerBox(r, label, canRegenerate) {
  const m = el('article', { class: 'msg assistant', 'aria-label': label, 'data-method': r.method, 'data-state': r.state });
  const text = el('div', { class: 'text md' });
  setAnswerText(text, r.text || '');
  m.append(text);
  if (r.state === 'done') {
    if (!r.text.trim()) text.replaceChildren(el('p', { text: '(empty answer)' }));
    m.append(statsLine(r));
    m.dataset.kv = JSON.stringify(r.kv);  // the server's figures, as sent (tests read them)
    m.dataset.usage = JSON.stringify(r.usage);
  } else if (r.state === 'stopped' || r.state === 'error') {
    m.append(el('p', { class: 'error', text: r.state === 'stopped' ? 'stopped' : `Error: ${r.error}` }));
  }
  if (r.state !== 'running') {
    const actions = el('div', { class: 'actions' });
    if (r.text) actions.append(actionButton('Copy', 'Copy this answer (its Markdown)', (b) => copyText(r.text.replace(/^\s+/, ''), b)));
    if (canRegenerate) actions.append(actionButton('Regenerate', 'Ask for this answer again', regenerate));
    if (canRegenerate) actions.lastChild.classList.add('regenerate');
    m.append(actions);
  }
  return { box: m, text };
}

function compareSection(item) {
  const section = el('section', { class: 'compare', 'aria-label': `Comparison of ${item.methods.join(', ')}`, 'data-state': item.state });
  section.append(el('p', { class: 'compare-note', text: 'Same question, one request per KV method, run one after another (not added to the conversation).' }));
  const grid = el('div', { class: 'compare-grid' });
  section.append(grid);
  const cols = item.results.map((r) => {
    const { box, text } = answerBox(r, `Answer with ${r.method}`, false);
    box.prepend(el('h2', { class: 'col-title', text: `${r.method} · ${fmtBits(bitsOf(r.method))}` }));
    grid.append(box);
    return { box, text };
  });
  if (item.state === 'done') compareBars(item, cols);
  return { section, cols };
}

// Bytes held as bars, relative to f16 when it ran (else to the largest).
function compareBars(item, cols) {
  const ok = item.results.map((r, k) => ({ r, col: cols[k] })).filter((x) => x.r.state === 'done' && x.r.kv);
  const ref = ok.find((x) => x.r.method === 'f16');
  const base = ref ? ref.r.kv.held_bytes : Math.max(...ok.map((x) => x.r.kv.held_bytes));
  for (const { col, r } of ok) {
    const frac = base > 0 ? r.kv.held_bytes / base : 0;
    const label = `${fmtBytes(r.kv.held_bytes)}: ${Math.round(frac * 100)}% of ${ref ? "f16's KV bytes" : 'the largest'}`;
    const fill = el('div', { class: 'fill' });
    fill.style.width = `${Math.min(100, frac * 100).toFixed(1)}%`;  // CSSOM: the CSP forbids style attributes
    const bar = el('div', { class: 'bar', role: 'img', 'aria-label': label }, fill);
    col.box.querySelector('.actions').before(bar, el('p', { class: 'bar-label', text: label }));
  }
}

// The log shows state.items; state.nodes[k] is the element of items[k] (a comparison's
// section, its question just before it). Only what changed is replaced: the log is aria-live.
function itemNode(k) {
  const it = state.items[k];
  if (it.role === 'user') return userMessage(it, k);
  if (it.role === 'compare') return compareSection(it).section;
  return answerBox(it, `Answer (${it.method})`, true).box;
}

function appendItem(k) {
  const it = state.items[k];
  if (it.role === 'compare') $('log').append(userMessage(it, null));
  state.nodes[k] = itemNode(k);
  $('log').append(state.nodes[k]);
  $('empty-hint').hidden = true;
  scrollToEnd();
}

function replaceItem(k) {
  if (!state.nodes[k] || !state.nodes[k].isConnected) return;  // New chat while it ran
  const node = itemNode(k);
  state.nodes[k].replaceWith(node);
  state.nodes[k] = node;
  scrollToEnd();
}

// Drops items[k…] and their elements.
function truncateItems(k) {
  if (k < state.items.length) {
    const first = state.items[k].role === 'compare' ? state.nodes[k].previousElementSibling : state.nodes[k];
    while (first.nextSibling) first.nextSibling.remove();
    first.remove();
  }
  state.items.length = k;
  state.nodes.length = k;
  $('empty-hint').hidden = k > 0;
}

function renderLog() {
  $('log').replaceChildren($('empty-hint'));
  state.nodes = [];
  state.items.forEach((_, k) => appendItem(k));
  $('empty-hint').hidden = state.items.length > 0;
}

// ---- sending ----

function userContent(text, attachments) {
  const kept = attachments.filter((a) => a.url);
  if (!kept.length) return text;
  return [
    ...kept.map((a) => (a.video ? { type: 'video_url', video_url: { url: a.url } }
                                : { type: 'image_url', image_url: { url: a.url } })),
    { type: 'text', text },
  ];
}

// The OpenAI messages before items[end]: the system prompt, then each question with its
// finished answer (a failed or stopped answer and its question are left out).
function historyBefore(end) {
  const system = $('system-prompt').value.trim();
  const messages = system ? [{ role: 'system', content: system }] : [];
  for (let k = 0; k + 1 < end; k++) {
    const q = state.items[k];
    const a = state.items[k + 1];
    if (q.role === 'user' && a.role === 'assistant' && a.state === 'done') {
      messages.push({ role: 'user', content: userContent(q.text, q.attachments) }, { role: 'assistant', content: a.text });
    }
  }
  return messages;
}

function setBusy(busy) {
  $('send').disabled = busy;
  $('stop').disabled = !busy;
  $('log').setAttribute('aria-busy', busy ? 'true' : 'false');
  document.querySelectorAll('#log button.action').forEach((b) => { if (b.textContent !== 'Copy') b.disabled = busy; });
}

// Streams one answer into r (an assistant item or a compare result) and its text node.
async function runOne(messages, r, sampling, text, signal) {
  try {
    // Rendered at most once a frame: a long answer is not re-parsed for every token.
    let latest = null;
    const show = (t) => {
      if (latest === null) requestAnimationFrame(() => { setAnswerText(text, latest); latest = null; scrollToEnd(); });
      latest = t;
    };
    const got = await streamChat(messages, r.method, sampling, show, signal);
    Object.assign(r, { text: got.text, kv: got.kv, timings: got.timings, usage: got.usage, ttftMs: got.ttftMs, state: 'done' });
  } catch (e) {
    r.state = e.name === 'AbortError' ? 'stopped' : 'error';
    r.error = e.message;
  }
}

// Runs fn(signal, sampling) with the page busy; refused while another request runs or a
// setting is out of range.
async function busyWith(fn) {
  if (state.abort) return;
  const s = samplingFields();
  if (s.error) {
    $('settings').open = true;
    s.input.reportValidity();
    showNotice(`Not sent: ${s.error}.`);
    return;
  }
  showNotice('');
  state.abort = new AbortController();
  setBusy(true);
  try {
    await fn(state.abort.signal, s.fields);
  } finally {
    state.abort = null;
    setBusy(false);
    save();
    $('prompt').focus();
  }
}

// An answer to the conversation as it stands (its last item is the question).
async function answerLast(signal, sampling) {
  const r = { role: 'assistant', method: $('method').value, text: '', state: 'running' };
  const q = state.items[state.items.length - 1];
  const messages = [...historyBefore(state.items.length - 1), { role: 'user', content: userContent(q.text, q.attachments) }];
  state.items.push(r);
  save();  // a reload while it streams keeps the question
  const k = state.items.length - 1;
  appendItem(k);
  await runOne(messages, r, sampling, state.nodes[k].querySelector('.text'), signal);
  replaceItem(k);
}

// The same question, alone (no history but the system prompt), under each method in turn:
// one at a time, so each method's speed is measured without the others sharing the CPU.
async function compareLast(signal, sampling) {
  const item = state.items[state.items.length - 1];
  const messages = [...historyBefore(0), { role: 'user', content: userContent(item.text, item.attachments) }];
  save();
  const last = state.items.length - 1;
  for (let k = 0; k < item.results.length; k++) {
    if (signal.aborted) { item.results[k].state = 'stopped'; continue; }
    const col = state.nodes[last].querySelectorAll('.msg')[k];
    await runOne(messages, item.results[k], sampling, col.querySelector('.text'), signal);
    const r = item.results[k];
    const { box } = answerBox(r, `Answer with ${r.method}`, false);
    box.prepend(col.querySelector('.col-title'));
    col.replaceWith(box);
  }
  item.state = 'done';
  replaceItem(last);  // with the bars
}

function onSubmit(ev) {
  ev.preventDefault();
  const question = $('prompt').value.trim();
  if (!question || state.abort) return;
  const compare = $('compare').checked;
  const methods = compareChoice();
  if (compare && methods.length < 2) {
    showNotice('Pick two or three methods to compare.');
    return;
  }
  if (samplingFields().error) return busyWith(() => {});  // says what is wrong
  const attachments = state.attachments;
  state.attachments = [];
  renderAttachments();
  $('prompt').value = '';
  if (compare) {
    state.items.push({ role: 'compare', text: question, attachments, methods, state: 'running',
                       results: methods.map((m) => ({ method: m, text: '', state: 'running' })) });
    appendItem(state.items.length - 1);
    return busyWith(compareLast);
  }
  state.items.push({ role: 'user', text: question, attachments });
  appendItem(state.items.length - 1);
  return busyWith(answerLast);
}

function regenerate() {
  if (state.abort || state.items[state.items.length - 1].role !== 'assistant') return;
  if (samplingFields().error) return busyWith(() => {});  // says what is wrong, changes nothing
  truncateItems(state.items.length - 1);
  busyWith(answerLast);
}

// Edit a question in place; sending it drops everything after it and asks again.
function startEdit(box, index) {
  if (state.abort || box.querySelector('.edit')) return;
  const item = state.items[index];
  const area = el('textarea', { class: 'edit', rows: '3', 'aria-label': 'Edit your message' });
  area.value = item.text;
  const send = el('button', { type: 'button', class: 'primary', text: 'Send' });
  const cancel = el('button', { type: 'button', text: 'Cancel' });
  const form = el('div', { class: 'edit-form' }, area, el('div', { class: 'edit-buttons' }, cancel, send));
  box.querySelector('.text').replaceWith(form);
  box.querySelector('.actions').hidden = true;
  area.focus();
  cancel.addEventListener('click', () => replaceItem(index));
  const resend = () => {
    const text = area.value.trim();
    if (!text || state.abort) return;
    if (samplingFields().error) return busyWith(() => {});
    truncateItems(index);
    state.items.push({ role: 'user', text, attachments: item.attachments });
    appendItem(index);
    busyWith(answerLast);
  };
  send.addEventListener('click', resend);
  area.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); resend(); }
    if (e.key === 'Escape') { e.stopPropagation(); replaceItem(index); }
  });
}

function newChat() {
  if (state.abort) state.abort.abort();
  truncateItems(0);
  save();
  $('prompt').focus();
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

function onCompareToggle() {
  const on = $('compare').checked;
  $('compare-methods').hidden = !on;
  $('method').disabled = on;
}

function init() {
  const stored = restore();
  state.storedSettings = stored && stored.settings;
  state.storedMethod = stored && stored.method;
  $('remember-key').checked = localStorage.getItem(kKeyStore) !== null;
  $('api-key').value = localStorage.getItem(kKeyStore) || sessionStorage.getItem(kKeyStore) || '';
  if ($('api-key').value) $('key-box').hidden = false;
  try {
    renderLog();
  } catch (e) {  // whatever the store held, the page still opens
    state.items = [];
    renderLog();
    showNotice(`The stored conversation could not be shown and was dropped: ${e.message}`);
  }

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
  $('method').addEventListener('change', () => { updateMethodHint(); save(); });
  $('compare').addEventListener('change', () => { onCompareToggle(); save(); });
  $('settings').addEventListener('change', () => { samplingFields(); save(); });
  $('reset-settings').addEventListener('click', () => {
    applyDefaults((state.props && state.props.default_generation_settings.params) || {}, null);
    samplingFields();
    save();
  });
  $('new-chat').addEventListener('click', newChat);
  $('api-key').addEventListener('change', () => { saveKey(); loadProps(); });
  $('remember-key').addEventListener('change', saveKey);
  setupDrop();
  loadProps();
  $('prompt').focus();
}

init();
