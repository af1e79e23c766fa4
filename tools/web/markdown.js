// A small Markdown renderer for the chat page's answers (docs/web_page.md lists the subset).
// It builds DOM nodes from the text: nothing the model writes is ever parsed as HTML, so
// `<img onerror=…>` stays text, and a link is made only for an http(s) URL.
// renderMarkdown(text) → DocumentFragment. Unclosed constructs (a fence still streaming,
// a lone `*`) are shown as text or closed at the end, never dropped.
'use strict';

const mdSafeUrl = (url) => /^https?:\/\/[^\s<>]+$/i.test(url);

function mdLink(href, children) {
  const a = document.createElement('a');
  a.href = href;
  a.rel = 'noopener noreferrer';
  a.target = '_blank';
  a.append(...children);
  return a;
}

function mdWrap(tag, children) {
  const e = document.createElement(tag);
  e.append(...children);
  return e;
}

// The closing delimiter `delim` at or after `from` that can end an emphasis (not after a space).
function mdFindClose(s, delim, from) {
  for (let j = s.indexOf(delim, from); j >= 0; j = s.indexOf(delim, j + 1)) {
    if (!/\s/.test(s[j - 1]) && (delim[0] !== '_' || !/[\p{L}\p{N}]/u.test(s[j + delim.length] || ''))) return j;
  }
  return -1;
}

// Inline Markdown: code spans, **strong**, *em*, ~~del~~, [links](http…), <http…> and bare
// http(s) URLs, backslash escapes. Returns an array of nodes.
function mdInline(s) {
  const out = [];
  let text = '';
  const flush = () => { if (text) out.push(document.createTextNode(text)); text = ''; };
  const push = (node) => { flush(); out.push(node); };
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (c === '\\' && i + 1 < s.length && /[!-/:-@[-`{-~]/.test(s[i + 1])) {
      text += s[i + 1];
      i += 2;
      continue;
    }
    if (c === '`') {
      let n = 1;
      while (s[i + n] === '`') n++;
      const ticks = '`'.repeat(n);
      let j = s.indexOf(ticks, i + n);
      while (j >= 0 && s[j + n] === '`') j = s.indexOf(ticks, j + n + 1);  // a longer run does not close
      if (j < 0) { text += ticks; i += n; continue; }
      let code = s.slice(i + n, j);
      if (/^ .*[^ ].* $/.test(code)) code = code.slice(1, -1);
      push(mdWrap('code', [code]));
      i = j + n;
      continue;
    }
    if (c === '[') {
      const m = /^\[((?:\\.|[^\]\\])*)\]\(\s*(\S+?)(?:\s+"[^"]*")?\s*\)/.exec(s.slice(i));
      if (m && mdSafeUrl(m[2])) {
        push(mdLink(m[2], mdInline(m[1])));
        i += m[0].length;
        continue;
      }
      if (m) {  // not an http(s) link (javascript:, data:, a relative path): shown as written
        text += m[0];
        i += m[0].length;
        continue;
      }
    }
    if (c === '<') {
      const m = /^<(https?:\/\/[^\s<>]+)>/i.exec(s.slice(i));
      if (m) { push(mdLink(m[1], [m[1]])); i += m[0].length; continue; }
    }
    if ((c === 'h' || c === 'H') && !/[\p{L}\p{N}]/u.test(s[i - 1] || '')) {
      const m = /^https?:\/\/[^\s<>]+/i.exec(s.slice(i));
      if (m) {
        const url = m[0].replace(/[.,;:!?'")\]]+$/, '');
        push(mdLink(url, [url]));
        i += url.length;
        continue;
      }
    }
    const two = s.slice(i, i + 2);
    if ((two === '**' || two === '__' || two === '~~') && s[i + 2] && !/\s/.test(s[i + 2])) {
      const j = mdFindClose(s, two, i + 3);
      if (j >= 0) {
        push(mdWrap(two === '~~' ? 'del' : 'strong', mdInline(s.slice(i + 2, j))));
        i = j + 2;
        continue;
      }
    }
    if ((c === '*' || c === '_') && s[i + 1] && !/\s/.test(s[i + 1]) && s[i + 1] !== c &&
        (c === '*' || !/[\p{L}\p{N}]/u.test(s[i - 1] || ''))) {
      const j = mdFindClose(s, c, i + 2);
      if (j >= 0 && s[j + 1] !== c) {
        push(mdWrap('em', mdInline(s.slice(i + 1, j))));
        i = j + 1;
        continue;
      }
    }
    text += c;
    i++;
  }
  flush();
  return out;
}

// Lines joined with <br> (an answer's line breaks are usually meant), each line inline-parsed.
function mdLines(lines) {
  const nodes = [];
  lines.forEach((l, k) => {
    if (k) nodes.push(document.createElement('br'));
    nodes.push(...mdInline(l));
  });
  return nodes;
}

const mdFence = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
const mdHeading = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const mdRule = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const mdItem = /^ {0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/;
const mdQuote = /^ {0,3}>\s?(.*)$/;

// Blocks: fenced code, headings, rules, lists (one level; indented lines continue an item),
// block quotes, paragraphs.
function renderMarkdown(src) {
  const frag = document.createDocumentFragment();
  const lines = String(src).replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i++; continue; }
    let m = mdFence.exec(line);
    if (m) {
      const fence = m[1];
      const body = [];
      i++;
      while (i < lines.length && !(lines[i].trim().startsWith(fence[0].repeat(fence.length)) &&
                                   /^[`~]+$/.test(lines[i].trim()))) body.push(lines[i++]);
      i++;  // the closing fence (or the end while it streams)
      const code = mdWrap('code', [body.join('\n')]);
      if (m[2]) code.className = `language-${m[2]}`;
      const pre = mdWrap('pre', [code]);
      frag.append(pre);
      continue;
    }
    if ((m = mdHeading.exec(line))) {
      frag.append(mdWrap(`h${Math.min(6, m[1].length + 2)}`, mdInline(m[2])));  // h1, h2 are the page's
      i++;
      continue;
    }
    if (mdRule.test(line)) {
      frag.append(document.createElement('hr'));
      i++;
      continue;
    }
    if ((m = mdItem.exec(line))) {
      const ordered = /\d/.test(m[1]);
      const list = document.createElement(ordered ? 'ol' : 'ul');
      if (ordered && parseInt(m[1], 10) !== 1) list.start = parseInt(m[1], 10);
      while (i < lines.length && (m = mdItem.exec(lines[i])) && /\d/.test(m[1]) === ordered) {
        const item = [m[2]];
        i++;
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !mdItem.exec(lines[i])) item.push(lines[i++].trim());
        list.append(mdWrap('li', mdLines(item)));
      }
      frag.append(list);
      continue;
    }
    if (mdQuote.test(line)) {
      const quoted = [];
      while (i < lines.length && (m = mdQuote.exec(lines[i]))) { quoted.push(m[1]); i++; }
      frag.append(mdWrap('blockquote', [renderMarkdown(quoted.join('\n'))]));
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && !mdFence.test(lines[i]) && !mdHeading.test(lines[i]) &&
           !mdRule.test(lines[i]) && !mdItem.test(lines[i]) && !mdQuote.test(lines[i])) para.push(lines[i++]);
    if (!para.length) para.push(lines[i++]);  // cannot happen; never loop forever
    frag.append(mdWrap('p', mdLines(para)));
  }
  return frag;
}
