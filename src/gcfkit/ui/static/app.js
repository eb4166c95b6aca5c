// gcfkit ui: the playground and the savings dashboard. Plain JavaScript, no dependencies;
// every number comes from the JSON API (/api/...), which computes it in Python.
"use strict";

const ENC = "o200k_base";
const ENC2 = "cl100k_base";
const NAMES = {
  "json-pretty": "JSON, pretty",
  "json-compact": "JSON, compact",
  "toon": "TOON",
  "gcx1": "GCX1",
  "gcf": "GCF",
  "gcf-ext": "GCF with extensions",
};

const $ = (sel) => document.querySelector(sel);
const fmt = (n) => Number(n).toLocaleString("en-US");

// Builds an element; children may be strings, nodes or null. Text is always text, never HTML.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// A saving as the tables show it: a minus sign for fewer tokens.
function change(before, after) {
  if (!before || before === after) return "±0%";
  const f = after / before - 1;
  return (f < 0 ? "−" : "+") + (Math.abs(f) * 100).toFixed(1) + "%";
}
function savingPill(fraction, isBase) {
  if (isBase) return h("span", { class: "pill base", "data-field": "saving" }, "baseline");
  if (fraction === null || fraction === undefined) return h("span", { class: "pill" }, "—");
  const pct = Math.round(fraction * 1000) / 10;
  const text = (pct > 0 ? "−" : pct < 0 ? "+" : "±") + Math.abs(pct).toFixed(1) + "%";
  return h("span", { class: "pill " + (pct > 0 ? "good" : pct < 0 ? "bad" : ""), "data-field": "saving" }, text);
}

async function api(path, options) {
  const res = await fetch(path, options);
  let body = null;
  try { body = await res.json(); } catch (e) { body = null; }
  if (!res.ok) {
    const err = (body && body.error) || { code: "http_" + res.status, message: res.statusText };
    throw Object.assign(new Error(err.message), { info: err });
  }
  return body;
}

// ---------------------------------------------------------------------------------------
// Tabs
// ---------------------------------------------------------------------------------------

function showTab() {
  const name = location.hash === "#savings" ? "savings" : "playground";
  for (const v of document.querySelectorAll(".view")) v.hidden = v.dataset.view !== name;
  for (const t of document.querySelectorAll(".tab")) t.classList.toggle("active", t.dataset.tab === name);
  if (name === "savings") loadSavings();
}

// ---------------------------------------------------------------------------------------
// Playground
// ---------------------------------------------------------------------------------------

let timer = null;
let seq = 0;

function setStatus(text, kind) {
  const s = $("#status");
  s.textContent = text;
  s.className = "status" + (kind ? " " + kind : "");
}

function schedule() {
  clearTimeout(timer);
  timer = setTimeout(measure, 250);
}

async function measure() {
  const text = $("#input").value;
  const mine = ++seq;
  if (!text.trim()) {
    setStatus("");
    render(null);
    return;
  }
  setStatus("measuring…");
  try {
    const data = await api("/api/playground", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text }),
    });
    if (mine !== seq) return;
    const inp = data.input;
    const what = inp.kind === "gcf" ? `GCF (${inp.profile} profile), decoded` : "valid JSON";
    setStatus(`${what} · ${fmt(inp.bytes)} bytes`, "ok");
    render(data);
  } catch (e) {
    if (mine !== seq) return;
    const info = e.info || { code: "error", message: String(e) };
    const where = info.line ? ` (line ${info.line})` : "";
    setStatus(`${info.code}${where}: ${info.message}`, "error");
    render(null, `${info.code}${where}: ${info.message}`);
  }
}

// data: the API's answer, or null with the reason the input could not be measured.
function render(data, problem) {
  const bars = $("#bars");
  const cards = $("#formats");
  const headline = $("#headline");
  bars.replaceChildren();
  cards.replaceChildren();
  headline.replaceChildren();
  $("#decoded-panel").hidden = !(data && data.decoded);
  if (!data) {
    headline.append(problem
      ? h("span", { class: "why-none", "data-field": "problem" }, "Nothing to measure until the input parses. " + problem)
      : h("span", { class: "muted" }, "Paste something on the left to see it in every format."));
    $("#counts-note").textContent = "";
    return;
  }
  if (data.decoded) $("#decoded").textContent = data.decoded;
  const formats = data.formats;
  const base = formats.find((f) => f.format === data.baseline);
  const best = data.best_lossless;
  const counted = formats.filter((f) => f.tokens);
  const top = Math.max(1, ...counted.map((f) => f.tokens[ENC]));
  const bestF = formats.find((f) => f.format === best);
  if (bestF) {
    const vs = base && base.tokens ? change(base.tokens[ENC], bestF.tokens[ENC]) : "";
    headline.append(
      h("span", { class: "big", "data-field": "best-tokens" }, fmt(bestF.tokens[ENC])),
      h("span", {}, "tokens as ", h("strong", { "data-field": "best-format" }, NAMES[best] || best)),
      vs ? h("span", { class: "pill " + (vs.startsWith("−") ? "good" : "") }, vs + " vs compact JSON") : null,
    );
  }
  for (const f of formats) {
    const row = h("div", { class: "bar-row" + (f.format === best ? " best" : "") + (f.format.startsWith("gcf") ? " gcf" : "") + (f.tokens ? "" : " na"), "data-format": f.format },
      h("span", { class: "name" }, NAMES[f.format] || f.label));
    if (f.tokens) {
      const fill = h("div", { class: "bar-fill" });
      fill.style.width = (100 * f.tokens[ENC] / top).toFixed(1) + "%";
      row.append(h("div", { class: "bar-track" }, fill), h("span", { class: "num" }, fmt(f.tokens[ENC])));
    } else {
      row.append(h("span", { class: "muted" }, shortWhy(f)), h("span"));
    }
    bars.append(row);
    cards.append(card(f, f.format === best, f.format === data.baseline));
  }
  const methods = Object.entries(data.token_counts).map(([e, m]) => `${e} ${m}`).join(", ");
  $("#counts-note").textContent = `Token counts: ${methods}. A change reads as on every gcfkit view: −13.4% is 13.4% fewer tokens than compact JSON. The proxy sends GCF, GCF dense (with extensions) or compact JSON, whichever is fewest tokens, and only after decoding it back.`;
}

function shortWhy(f) {
  if (!f.error) return "n/a";
  if (f.error.includes("not installed")) return "not installed";
  if (f.error.startsWith("refused")) return "cannot carry this shape";
  return "failed";
}

function card(f, isBest, isBase) {
  const title = h("div", { class: "fmt-title" }, NAMES[f.format] || f.label, isBest ? h("span", { class: "tag" }, "fewest tokens") : null);
  let lossless;
  if (f.lossless === true) lossless = h("span", { class: "pill good", "data-field": "lossless" }, "✓ lossless");
  else if (f.lossless === false) lossless = h("span", { class: "pill bad", "data-field": "lossless" }, "✗ not lossless");
  else lossless = h("span", { class: "pill", "data-field": "lossless" }, shortWhy(f));
  const el = h("div", { class: "panel fmt" + (isBest ? " best" : ""), "data-format": f.format },
    h("div", { class: "fmt-head" }, title, lossless));
  if (!f.tokens) {
    el.append(h("div", { class: "why", "data-field": "error" }, f.error || "not available"));
    return el;
  }
  const saving = f.saving ? f.saving[ENC] : null;
  el.append(
    h("div", { class: "stats" },
      stat("o200k", fmt(f.tokens[ENC]), "o200k"),
      stat("cl100k", fmt(f.tokens[ENC2]), "cl100k"),
      stat("bytes", fmt(f.bytes), "bytes"),
      h("div", { class: "stat" }, h("div", { class: "k" }, "vs compact"), h("div", { class: "v" }, savingPill(saving, isBase)))),
    h("pre", { class: "code", "data-field": "text" }, f.text),
  );
  const notes = [f.note, f.error].filter(Boolean).join("; ");
  const copy = h("button", { type: "button", onclick: async () => {
    try { await navigator.clipboard.writeText(f.text); copy.textContent = "Copied"; }
    catch (e) { copy.textContent = "Copy failed"; }
    setTimeout(() => { copy.textContent = "Copy"; }, 1500);
  } }, "Copy");
  el.append(h("div", { class: "fmt-foot" }, h("span", {}, notes), copy));
  return el;
}

function stat(label, value, field) {
  return h("div", { class: "stat" }, h("div", { class: "k" }, label), h("div", { class: "v", "data-field": field }, value));
}

async function loadExamples() {
  const list = await api("/api/examples");
  const sel = $("#example");
  for (const e of list) sel.append(h("option", { value: e.id }, e.title));
  sel.addEventListener("change", async () => {
    if (!sel.value) return;
    const ex = await api("/api/examples/" + encodeURIComponent(sel.value));
    $("#input").value = ex.text;
    measure();
  });
}

function setupDrop() {
  const drop = $("#drop");
  const on = (e) => { e.preventDefault(); drop.classList.add("over"); };
  const off = () => drop.classList.remove("over");
  drop.addEventListener("dragenter", on);
  drop.addEventListener("dragover", on);
  drop.addEventListener("dragleave", off);
  drop.addEventListener("drop", async (e) => {
    e.preventDefault();
    off();
    const file = e.dataTransfer.files && e.dataTransfer.files[0];
    if (!file) return;
    $("#input").value = await file.text();
    $("#example").value = "";
    measure();
  });
}

// ---------------------------------------------------------------------------------------
// Savings
// ---------------------------------------------------------------------------------------

let since = "all";
let drawnFor = 0;

// The width the timeline has on this screen: the server draws it that wide, so its labels
// keep their size on a phone instead of being scaled down with the picture.
function chartWidth() {
  const panel = $("#sv-timeline");
  if (panel.clientWidth) {
    const cs = getComputedStyle(panel);
    return Math.floor(panel.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight));
  }
  const main = $("main");
  const cs = getComputedStyle(main);
  return Math.floor(main.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 40);
}

async function loadSavings() {
  let data;
  drawnFor = chartWidth();
  try {
    data = await api("/api/savings?since=" + encodeURIComponent(since) + "&width=" + drawnFor);
  } catch (e) {
    $("#sv-ledger").textContent = "Cannot read the ledger: " + e.message;
    return;
  }
  const s = data.summary;
  const t = s.total;
  $("#sv-ledger").textContent = `Ledger: ${data.ledger}` + (s.corrupt_lines ? ` (${s.corrupt_lines} unreadable lines skipped)` : "") + ` · token counts: ${s.encodings.join(", ") || "—"}`;
  $("#sv-empty").hidden = t.calls > 0;
  $("#sv-body").hidden = t.calls === 0;
  if (t.calls === 0) return;
  const leftAlone = data.decisions.filter((d) => d.left_alone).reduce((n, d) => n + d.calls, 0);
  $("#sv-cards").replaceChildren(
    bigCard("tokens saved", fmt(t.tokens_saved), `${(t.token_savings * 100).toFixed(1)}% of ${fmt(t.tokens_before)}`, "tokens_saved", true),
    bigCard("tokens delivered", fmt(t.tokens_after), `instead of ${fmt(t.tokens_before)}`, "tokens_after"),
    bigCard("tool results", fmt(t.calls), `${s.servers.length} server${s.servers.length === 1 ? "" : "s"}, ${s.tools.length} tool${s.tools.length === 1 ? "" : "s"}`, "calls"),
    bigCard("left alone", fmt(leftAlone), "passed on exactly as sent", "left_alone"),
  );
  $("#sv-timeline").innerHTML = data.charts.timeline; // SVG built and escaped by the server
  $("#sv-servers").innerHTML = data.charts.servers;
  table($("#sv-server-table"), ["server", "calls", "tokens", "change"], s.servers.map((r) => [
    r.server, fmt(r.calls), `${fmt(r.tokens_before)} → ${fmt(r.tokens_after)}`, savedCell(r)]), [1, 2, 3],
    ["total", fmt(t.calls), `${fmt(t.tokens_before)} → ${fmt(t.tokens_after)}`, savedCell(t)]);
  table($("#sv-tool-table"), ["server", "tool", "calls", "tokens", "change", "decisions"], s.tools.map((r) => [
    r.server, r.tool, fmt(r.calls), `${fmt(r.tokens_before)} → ${fmt(r.tokens_after)}`, savedCell(r),
    Object.entries(r.decisions).map(([k, v]) => `${k} ${v}`).join(", ")]), [2, 3, 4]);
  table($("#sv-decisions"), ["decision", "results", "", "what it means"], data.decisions.map((d) => [
    h("code", {}, d.decision), fmt(d.calls),
    h("span", { class: "pill " + (d.left_alone ? "" : "good") }, d.left_alone ? "left alone" : "rewritten"), d.meaning]), [1]);
}

function bigCard(label, value, sub, field, good) {
  return h("div", { class: "card", "data-card": field },
    h("div", { class: "k" }, label),
    h("div", { class: "v" + (good ? " good" : ""), "data-field": field }, value),
    h("div", { class: "s" }, sub));
}

// The change as every gcfkit view writes it (−: fewer tokens; from the API, computed in
// Python), a bar of the saving, and why a result grew when its ref= handle is the reason.
function savedCell(r) {
  const bar = h("span", { class: "mini" }, h("span"));
  bar.firstChild.style.width = Math.max(0, Math.min(100, r.token_savings * 100)).toFixed(1) + "%";
  const why = r.why_larger ? h("span", { class: "change-why", "data-field": "why-larger" }, "larger by " + r.why_larger) : null;
  return h("span", { "data-field": "change" }, r.change, bar, why);
}

function table(el, head, rows, numeric, foot) {
  const num = new Set(numeric || []);
  // data-label: on a phone each row is a small block of "label  value" lines (style.css).
  const cell = (tag, c, i) => h(tag, { class: num.has(i) ? "num" : null, "data-label": tag === "td" ? head[i] : null }, c);
  const parts = [
    h("thead", {}, h("tr", {}, head.map((c, i) => cell("th", c, i)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c, i) => cell("td", c, i))))),
  ];
  if (foot) parts.push(h("tfoot", {}, h("tr", {}, foot.map((c, i) => cell("td", c, i)))));
  el.replaceChildren(...parts);
}

// ---------------------------------------------------------------------------------------

async function start() {
  window.addEventListener("hashchange", showTab);
  $("#input").addEventListener("input", () => { $("#example").value = ""; schedule(); });
  $("#clear").addEventListener("click", () => { $("#input").value = ""; $("#example").value = ""; measure(); $("#input").focus(); });
  for (const b of document.querySelectorAll("#since button")) {
    b.addEventListener("click", () => {
      since = b.dataset.since;
      for (const x of document.querySelectorAll("#since button")) x.classList.toggle("on", x === b);
      loadSavings();
    });
  }
  setupDrop();
  let resized = null;
  window.addEventListener("resize", () => {
    clearTimeout(resized);
    resized = setTimeout(() => {
      if (!$("#view-savings").hidden && Math.abs(chartWidth() - drawnFor) > 40) loadSavings();
    }, 300);
  });
  render(null);
  showTab();
  try {
    const info = await api("/api/info");
    $("#version").textContent = "v" + info.version;
    const exact = Object.values(info.token_counts).every((m) => m === "exact");
    $("#meta").textContent = exact ? "exact token counts · runs locally" : "estimated token counts (install gcfkit[tokens] for exact) · runs locally";
    await loadExamples();
  } catch (e) {
    setStatus("Cannot reach the gcfkit server: " + e.message, "error");
  }
}

start();
