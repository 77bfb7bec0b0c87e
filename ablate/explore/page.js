/*
 * The explorer page's script: the input column (model, image, drawing, permutation, query token) and the
 * tutorial's nine demos, each drawn from one forward pass of forward.js over the trained weights.
 *
 * window.ablateExplorer holds what the page drew, so that tests read exactly that:
 *   last       {logits, probabilities, attention, residualNorms, streamNorms, hiddenStates, tokenCosine, layerLogits,
 *               input, options}
 *   trace      forward.js's per-layer trace of the current model (q, k, v, scores, LayerNorms, FFN activations)
 *   positions  {kind, table, position, vector}: what pos_enc adds (or rotates by), positions x columns
 *   views      {spotlight, qkv, entropy, residual, ln, ffn, lens}: the numbers behind each demo's drawing
 *   sentence   the tutorial's sentence as the copy models read it: {words, perm_words, tokens, perm_tokens, labels}
 *              (the conventions of ablate.results.export.sentence)
 *   views.q1   demo 1's copy part: {model, order, words, input, labels, layer, head, query, weights, attention,
 *              logits, predicted, copied}
 *   state, q1 (its state), render(), t(key, vars), setLang(lang)
 */
"use strict";
const ALL_MODELS = JSON.parse(document.getElementById("models").textContent).map(AblateForward.load);
const MODELS = ALL_MODELS.filter((m) => m.kind === "classify"); // MNIST rows: the input column and the nine demos
const TOKEN_MODELS = ALL_MODELS.filter((m) => m.kind === "tokens"); // copy models: demo 1's Q1 part
const DATA = JSON.parse(document.getElementById("images").textContent); // {mean, std, images: [{index, label, pixels}]}
const ROWS = 28, $ = (id) => document.getElementById(id), $$ = (sel) => [...document.querySelectorAll(sel)];
const S = { model: 0, pixels: new Float64Array(ROWS * ROWS), drawn: new Float64Array(ROWS * ROWS), label: null, pen: [14, 14],
            tau: 1, qkScale: true, pe: true, masked: new Set(), perm: null, shuffles: 0, pos: 0, query: 14,
            layer: 0, head: 0, lang: "en", lnWhich: "0,attn", lnEdit: null, lnComp: 0, image: 0,
            proj: { q: 1, k: 1, v: 1 } }; // demo 2: the factors on the chosen head's W_Q, W_K, W_V
// demo 1's Q1 part: the copy model, the word order (0: 猫坐在垫子上, 1: 垫子在猫坐上), layer, head (-1: mean), query
const Q = { model: 0, order: 0, layer: 0, head: -1, query: 0 };
const hook = (window.ablateExplorer = { state: S, q1: Q, last: null, trace: null, positions: null, views: {},
                                        render: () => render(), t: (k, v) => t(k, v), setLang: (l) => setLang(l) });

// ---- words ----
function t(key, vars) {
  let s = (I18N[S.lang] && I18N[S.lang][key]) ?? I18N.en[key] ?? key;
  for (const [k, v] of Object.entries(vars || {})) s = s.split(`{${k}}`).join(String(v));
  return s;
}
// Each demo's answer: its question's section of the report's HTML index (reports/build/index.html#<key>, and
// index.zh.html), named by the question's key in its study manifest (reports/*.yaml; tests/test_explore_demos.py
// checks each key is there).
const ANSWERS = { q1: "q1", q2: "q2", q3: "q3", q4: "q4", preln: "claim-norm", ffn: "claim-ffn", tau: "claim-temperature" };
function setLang(lang) {
  S.lang = lang === "zh" ? "zh" : "en";
  document.documentElement.lang = S.lang === "zh" ? "zh-CN" : "en";
  $$("[data-i18n]").forEach((el) => { el.textContent = t(el.dataset.i18n); });
  $$("[data-i18n-title]").forEach((el) => { el.title = t(el.dataset.i18nTitle); });
  $$("[data-i18n-aria]").forEach((el) => el.setAttribute("aria-label", t(el.dataset.i18nAria)));
  $("back").href = `build/index${S.lang === "zh" ? ".zh" : ""}.html`;  // the findings' page, and back (issue 39)
  $$("a.findings").forEach((a) => {
    a.href = `build/index${S.lang === "zh" ? ".zh" : ""}.html#${ANSWERS[a.dataset.find]}`;
  });
  fillSelects();
  render();
}

// ---- models and their controls ----
const byName = (name) => MODELS.findIndex((m) => m.name === name);
const pct = (v) => (100 * v).toFixed(1);
function modelLabel(m) {
  const acc = m.metrics && m.metrics["test/acc"] !== undefined ? ` · ${pct(m.metrics["test/acc"])} %` : "";
  return `${m.name}${acc}`;
}
function fillSelects() {
  const keepImage = $("image").value;
  $("model").innerHTML = ""; $("image").innerHTML = "";
  MODELS.forEach((m, i) => $("model").add(new Option(modelLabel(m), i)));
  DATA.images.forEach((im, i) => $("image").add(new Option(t("digitOpt", im), i)));
  $("image").add(new Option(t("drawn"), -1));
  $("model").value = S.model; $("image").value = keepImage === "" ? (DATA.images.length ? 0 : -1) : keepImage;
  for (const id of ["res-a", "res-b"]) {
    const sel = $(id), keep = sel.value;
    sel.innerHTML = "";
    MODELS.forEach((m, i) => sel.add(new Option(m.name, i)));
    const want = byName(id === "res-a" ? "residual-8" : "no-residual-8"); // demo 6's pair, when shipped
    sel.value = keep !== "" ? keep : want >= 0 ? want : id === "res-a" ? 0 : MODELS.length - 1;
  }
  fillLayerControls();
  fillHeadButtons();
  if (TOKEN_MODELS.length) q1Controls();
}
function tokens() { return ROWS + (MODELS[S.model].pooling === "cls" ? 1 : 0); }
function fillLayerControls() {
  const m = MODELS[S.model].model;
  $$(".ctl-layer").forEach((sel) => {
    sel.innerHTML = "";
    for (let l = 0; l < m.n_layers; l++) sel.add(new Option(String(l), l));
    sel.value = S.layer;
  });
  $$(".ctl-head").forEach((sel) => {
    sel.innerHTML = "";
    if (!sel.dataset.nomean && m.n_heads > 1) sel.add(new Option(t("head.mean"), -1));
    for (let h = 0; h < m.n_heads; h++) sel.add(new Option(String(h), h));
    sel.value = sel.dataset.nomean ? Math.max(0, S.head) : S.head;
  });
  const ln = $("lnwhich"), keep = S.lnWhich;
  ln.innerHTML = "";
  if (m.norm !== "none") {
    for (let l = 0; l < m.n_layers; l++) for (const part of m.ffn_dim > 0 ? ["attn", "ffn"] : ["attn"]) {
      ln.add(new Option(`${t("layerN", { l })} · ${t((m.norm === "pre" ? "s7.pre." : "s7.") + part)}`, `${l},${part}`));
    }
    ln.value = keep; if (ln.value !== keep) { ln.value = "0,attn"; S.lnWhich = "0,attn"; }
  }
}
function fillHeadButtons() {
  const box = $("hbuttons");
  box.innerHTML = "";
  [1, 2, 4, 8].forEach((h) => {
    const i = byName(h === 4 ? "tutorial" : `heads-${h}`);
    if (i < 0) return;
    const m = MODELS[i], b = document.createElement("button");
    b.type = "button"; b.className = "pick"; b.dataset.pick = m.name;
    const acc = m.metrics && m.metrics["test/acc"] !== undefined ? ` · ${pct(m.metrics["test/acc"])} %` : "";
    b.textContent = `h = ${h} (d_k = ${m.model.head_dim})${acc}`;
    box.appendChild(b);
  });
  bindPicks();
}
function bindPicks() {
  $$("button.pick").forEach((b) => {
    const i = byName(b.dataset.pick);
    b.hidden = i < 0;
    b.setAttribute("aria-pressed", String(i === S.model));
    b.onclick = () => { if (i >= 0) { loadModel(i); render(); } };
  });
}
function configTable(model) {
  const m = model.model, yes = (v) => t(v ? "yes" : "no"), rows = [
    ["cfg.d_model", m.d_model], ["cfg.heads", m.n_heads], ["cfg.d_head", m.head_dim], ["cfg.layers", m.n_layers],
    ["cfg.ffn", m.ffn_dim > 0 ? `${m.ffn_dim} (${m.ffn_dim / m.d_model}× d_model)` : "0"], ["cfg.norm", t(`norm.${m.norm}`)],
    ["cfg.residual", yes(m.residual)], ["cfg.pe", t(`pe.${m.pos_enc}`)], ["cfg.scale", yes(m.qk_scale)],
    ["cfg.tau", m.temperature], ["cfg.pooling", t(`pool.${model.pooling}`)], ["cfg.params", model.params.toLocaleString("en")],
  ];
  const mt = model.metrics || {};
  if (mt["test/acc"] !== undefined) rows.push(["cfg.acc", `${pct(mt["test/acc"])} %`]);
  if (mt["test/acc_perm"] !== undefined) rows.push(["cfg.accPerm", `${pct(mt["test/acc_perm"])} %`]);
  rows.push(["cfg.steps", model.global_step]);
  const table = $("config");
  table.innerHTML = "";
  rows.forEach(([k, v]) => {
    const tr = table.insertRow();
    tr.dataset.key = k;
    tr.insertCell().textContent = t(k); tr.insertCell().textContent = String(v);
  });
}

function loadModel(i) {
  // every inference override starts from the model's own config; the permutation and edits do not carry over
  S.model = i;
  const m = MODELS[i].model;
  S.tau = m.temperature; S.qkScale = m.qk_scale; S.pe = m.pos_enc !== "none"; S.masked.clear();
  S.perm = null; S.lnEdit = null;
  S.layer = Math.min(S.layer, m.n_layers - 1); S.head = Math.min(S.head, m.n_heads - 1);
  if (m.n_heads === 1) S.head = 0;
  $("model").value = i;
  $("tau").value = S.tau; $("sqrtdk").checked = S.qkScale; $("pe").checked = S.pe; $("pe").disabled = m.pos_enc === "none";
  $("pename").textContent = t(`pe.${m.pos_enc}`);
  const T = tokens();
  $("pos").max = T - 1; S.pos = Math.min(S.pos, T - 1); $("pos").value = S.pos;
  $("query").max = T - 1; S.query = Math.min(S.query, T - 1); $("query").value = S.query;
  hook.positions = positionTable(MODELS[i], T);
  fillLayerControls();
  bindPicks();
}

// ---- the input ----
function loadImage(i) {
  S.image++;
  if (i < 0) { S.pixels = Float64Array.from(S.drawn); S.label = null; return; } // "(drawn)" brings the drawing back
  const im = DATA.images[i];
  S.pixels = Float64Array.from(im.pixels); S.label = im.label;
}
function input() { // the normalised rows the model reads, as training fed them (in image order; forward.js permutes)
  const rows = [];
  for (let r = 0; r < ROWS; r++) rows.push(Array.from(S.pixels.subarray(r * ROWS, (r + 1) * ROWS),
                                                     (p) => (p / 255 - DATA.mean) / DATA.std));
  return rows;
}
function options() {
  const o = { temperature: S.tau, qkScale: S.qkScale, headMask: [...S.masked].map((k) => k.split(",").map(Number)) };
  if (!S.pe && MODELS[S.model].model.pos_enc !== "none") o.posEnc = false;
  if (S.perm) o.permute = S.perm.slice();
  const { q, k, v } = S.proj;
  if (q !== 1 || k !== 1 || v !== 1) o.project = { layer: S.layer, head: Math.max(0, S.head), q, k, v };
  return o;
}
function shuffle() { // a fixed sequence of permutations (mulberry32), so that a run of the page is repeatable
  let a = (0x9e3779b9 * ++S.shuffles) >>> 0;
  const rand = () => { a = (a + 0x6d2b79f5) >>> 0; let x = a; x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61); return ((x ^ (x >>> 14)) >>> 0) / 4294967296; };
  const p = [...Array(ROWS).keys()];
  for (let i = ROWS - 1; i > 0; i--) { const j = Math.floor(rand() * (i + 1)); [p[i], p[j]] = [p[j], p[i]]; }
  return p;
}
const offset = () => (MODELS[S.model].pooling === "cls" ? 1 : 0);
const imageRowOf = (displayRow) => (S.perm ? S.perm[displayRow] : displayRow); // the image row shown at a display row

// ---- colours, legends, charts ----
const INK = [28, 80, 190];
function weightColour(v) { // attention weight 0..1 on a square-root scale: small weights stay visible, 1 is darkest
  const a = Math.sqrt(Math.max(0, Math.min(1, v)));
  return `rgb(${Math.round(255 - (255 - INK[0]) * a)},${Math.round(255 - (255 - INK[1]) * a)},${Math.round(255 - (255 - INK[2]) * a)})`;
}
function diverging(v) { // -1 blue, 0 white, +1 orange
  const a = Math.min(1, Math.abs(v));
  return v >= 0 ? `rgb(255,${Math.round(255 - 120 * a)},${Math.round(255 - 255 * a)})`
                : `rgb(${Math.round(255 - 200 * a)},${Math.round(255 - 110 * a)},255)`;
}
// Charts at the screen's resolution (issue 40: they were drawn at 1 pixel per CSS pixel, blurry on phones and
// Retina screens). A canvas keeps its size in CSS pixels as its `width` and `height`, which every drawing reads; its
// bitmap holds devicePixelRatio times as many pixels, and the context draws through that scale.
const DPR = Math.max(1, Math.min(3, window.devicePixelRatio || 1));
const BITMAP = { w: Object.getOwnPropertyDescriptor(HTMLCanvasElement.prototype, "width"),
  h: Object.getOwnPropertyDescriptor(HTMLCanvasElement.prototype, "height") };
function sharp(cv) {
  if (cv.cssSize) return;
  cv.cssSize = { w: BITMAP.w.get.call(cv), h: BITMAP.h.get.call(cv) };
  const fit = () => {
    BITMAP.w.set.call(cv, Math.round(cv.cssSize.w * DPR)); BITMAP.h.set.call(cv, Math.round(cv.cssSize.h * DPR));
    cv.style.setProperty("--css-w", `${cv.cssSize.w}px`);
  };
  for (const [key, side] of [["width", "w"], ["height", "h"]]) {
    Object.defineProperty(cv, key, { configurable: true, get: () => cv.cssSize[side],
      set: (v) => { cv.cssSize[side] = +v; fit(); } });
  }
  fit();
}
function canvasCtx(cv) {
  sharp(cv);
  const ctx = cv.getContext("2d");
  ctx.setTransform(DPR, 0, 0, DPR, 0, 0); ctx.clearRect(0, 0, cv.width, cv.height);
  ctx.font = "10px system-ui, sans-serif"; ctx.textBaseline = "middle";
  return ctx;
}
function legend(cv, label) { // the weight scale: 0 .. 1, ticks where the square root puts them
  const ctx = canvasCtx(cv), L = 8, W = cv.width - 16;
  for (let x = 0; x < W; x++) { ctx.fillStyle = weightColour((x / (W - 1)) ** 2); ctx.fillRect(L + x, 2, 1, 12); }
  ctx.strokeStyle = "#999"; ctx.strokeRect(L + 0.5, 2.5, W - 1, 12);
  ctx.fillStyle = "#333"; ctx.textAlign = "center";
  for (const v of [0, 0.05, 0.25, 0.5, 1]) {
    const x = L + Math.sqrt(v) * (W - 1);
    ctx.fillRect(x, 14, 1, 3); ctx.fillText(String(v), Math.min(Math.max(x, L + 6), L + W - 6), 22);
  }
  ctx.textAlign = "left"; ctx.fillText(label, L, 35);
}
const MAP = { left: 20, top: 14 };
function ticksFor(n) { // tick positions for n cells: every one up to 10, the rows' 0 7 14 21 27 up to 29, quarters beyond
  if (n <= 10) return [...Array(n).keys()];
  const ticks = n <= 29 ? [0, 7, 14, 21, n - 1] : [0, n >> 2, n >> 1, (3 * n) >> 2, n - 1];
  return ticks.filter((v, i, a) => v < n && a.indexOf(v) === i);
}
function heatmap(cv, A, { hover = null, masked = false } = {}) {
  const T = A.length, ctx = canvasCtx(cv), cell = (cv.width - MAP.left - 2) / T;
  for (let i = 0; i < T; i++) for (let j = 0; j < T; j++) {
    ctx.fillStyle = weightColour(A[i][j]); ctx.fillRect(MAP.left + j * cell, MAP.top + i * cell, cell + 0.5, cell + 0.5);
  }
  ctx.fillStyle = "#555";
  for (const v of ticksFor(T)) {
    ctx.textAlign = "center"; ctx.fillText(String(v), MAP.left + (v + 0.5) * cell, 6);
    ctx.textAlign = "right"; ctx.fillText(String(v), MAP.left - 3, MAP.top + (v + 0.5) * cell);
  }
  if (hover !== null && hover < T) {
    ctx.strokeStyle = "#e65c00"; ctx.lineWidth = 2; ctx.strokeRect(MAP.left + 1, MAP.top + hover * cell, T * cell - 2, cell);
  }
  if (masked) { ctx.fillStyle = "rgba(80,80,80,0.55)"; ctx.fillRect(MAP.left, MAP.top, T * cell, T * cell); }
}
function mapRowAt(cv, ev, T) { // the query row under a pointer on a heatmap canvas
  const box = cv.getBoundingClientRect(), sy = cv.height / box.height, cell = (cv.width - MAP.left - 2) / T;
  return Math.max(0, Math.min(T - 1, Math.floor(((ev.clientY - box.top) * sy - MAP.top) / cell)));
}
const CHART = { left: 36, right: 4, top: 6, bottom: 16 };
/** Bars of `values` with a zero line, y ticks (min, 0, max) and x ticks (first, middle, last index). */
function barChart(cv, values, { highlight = -1, range = null, colour = "#5b8fd6", xlabel = "" } = {}) {
  const ctx = canvasCtx(cv), n = values.length, W = cv.width - CHART.left - CHART.right, H = cv.height - CHART.top - CHART.bottom;
  const finite = values.filter(Number.isFinite);
  let lo = range ? range[0] : Math.min(0, ...finite), hi = range ? range[1] : Math.max(0, ...finite);
  if (hi - lo < 1e-12) hi = lo + 1;
  const y = (v) => CHART.top + ((hi - v) / (hi - lo)) * H, bw = W / Math.max(1, n);
  values.forEach((v, i) => {
    if (!Number.isFinite(v)) return;
    ctx.fillStyle = i === highlight ? "#e65c00" : colour;
    const y0 = y(Math.max(lo, Math.min(hi, 0))), y1 = y(Math.max(lo, Math.min(hi, v)));
    ctx.fillRect(CHART.left + i * bw + (bw > 3 ? 0.5 : 0), Math.min(y0, y1), Math.max(1, bw - (bw > 3 ? 1 : 0)), Math.max(1, Math.abs(y1 - y0)));
  });
  ctx.strokeStyle = "#888"; ctx.lineWidth = 1; ctx.beginPath();
  ctx.moveTo(CHART.left, CHART.top); ctx.lineTo(CHART.left, CHART.top + H);
  const yz = y(Math.max(lo, Math.min(hi, 0))); ctx.moveTo(CHART.left, yz); ctx.lineTo(CHART.left + W, yz); ctx.stroke();
  ctx.fillStyle = "#444"; ctx.textAlign = "right";
  const fmt = (v) => (Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2));
  for (const v of [lo, 0, hi]) ctx.fillText(fmt(v), CHART.left - 3, y(v));
  ctx.textAlign = "center";
  for (const i of [0, Math.floor((n - 1) / 2), n - 1]) { // the last label kept inside the canvas ("127", not "12")
    if (i < 0) continue;
    const half = ctx.measureText(String(i)).width / 2;
    ctx.fillText(String(i), Math.min(CHART.left + (i + 0.5) * bw, cv.width - 1 - half), cv.height - 6);
  }
  if (xlabel) { ctx.textAlign = "right"; ctx.fillText(`${xlabel} →`, CHART.left - 3, cv.height - 6); }
  return { lo, hi, bw };
}
function bars(el, values, labels, fmt, highlight) {
  const max = Math.max(...values.map(Math.abs), 1e-12);
  el.innerHTML = "";
  values.forEach((v, i) => {
    const row = Object.assign(document.createElement("div"), { className: "bar" + (i === highlight ? " best" : "") });
    row.innerHTML = `<span class="bl"></span><span class="bt"><span class="bf"></span></span><span class="bv"></span>`;
    row.children[0].textContent = labels[i];
    row.children[1].firstChild.style.width = `${(100 * Math.abs(v)) / max}%`;
    row.children[2].textContent = fmt(v);
    el.appendChild(row);
  });
}
const softmax = (z) => { const m = Math.max(...z), e = z.map((v) => Math.exp(v - m)), s = e.reduce((a, b) => a + b); return e.map((v) => v / s); };
const layerNames = (n) => [...Array(n).keys()].map((l) => (l === 0 ? t("embedding") : t("afterLayer", { l: l - 1 })));

// ---- the input column: digit (drawn as the model reads it), prediction ----
const CELL = 8;
function drawDigit() {
  const ctx = canvasCtx($("digit"));
  for (let r = 0; r < ROWS; r++) for (let c = 0; c < ROWS; c++) {
    const v = 255 - Math.round(S.pixels[imageRowOf(r) * ROWS + c]);
    ctx.fillStyle = `rgb(${v},${v},${v})`; ctx.fillRect(c * CELL, r * CELL, CELL, CELL);
  }
  const row = S.query - offset();
  if (row >= 0) { ctx.strokeStyle = "#e65c00"; ctx.lineWidth = 2; ctx.strokeRect(1, row * CELL, ROWS * CELL - 2, CELL); }
  if (document.activeElement === $("digit")) { // the keyboard's pen
    const [r, c] = S.pen; ctx.strokeStyle = "#1f6fd1"; ctx.lineWidth = 2; ctx.strokeRect(c * CELL + 1, r * CELL + 1, CELL - 2, CELL - 2);
  }
}
let painting = null;
function paint(ev) {
  const cv = $("digit"), box = cv.getBoundingClientRect(), sx = cv.width / box.width, sy = cv.height / box.height;
  paintAt(Math.floor(((ev.clientY - box.top) * sy) / CELL), Math.floor(((ev.clientX - box.left) * sx) / CELL));
}
function paintAt(r, c) { // the brush at row r (as shown), column c: the cell, its neighbours fainter
  for (let dr = -1; dr <= 1; dr++) for (let dc = -1; dc <= 1; dc++) {
    const rr = r + dr, cc = c + dc;
    if (rr < 0 || cc < 0 || rr >= ROWS || cc >= ROWS) continue;
    const v = dr === 0 && dc === 0 ? 255 : (dr === 0 || dc === 0 ? 160 : 60), k = imageRowOf(rr) * ROWS + cc;
    S.pixels[k] = Math.max(S.pixels[k], v);
  }
  S.drawn = Float64Array.from(S.pixels); S.image++;
  $("image").value = -1; S.label = null; render();
}
// A mouse paints from its press. A finger paints once it moves (more than a few px): a tap, as demo 1 asks ("move
// over the digit"), picks the tapped row as the query and leaves the test image and its label as they are.
let tapStart = null;
const TAP_SLOP = 6; // px a finger may wander and still tap
$("digit").addEventListener("pointerdown", (ev) => {
  painting = ev.pointerId; $("digit").setPointerCapture(ev.pointerId); ev.preventDefault();
  if (ev.pointerType === "mouse") paint(ev); else tapStart = { clientX: ev.clientX, clientY: ev.clientY };
});
$("digit").addEventListener("pointermove", (ev) => {
  if (painting !== ev.pointerId) return;
  if (tapStart) {
    if (Math.hypot(ev.clientX - tapStart.clientX, ev.clientY - tapStart.clientY) < TAP_SLOP) return;
    paint(tapStart); tapStart = null;
  }
  paint(ev);
});
$("digit").addEventListener("pointerup", (ev) => {
  if (tapStart && painting === ev.pointerId) {
    const box = $("digit").getBoundingClientRect(), r = Math.floor((((ev.clientY - box.top) * $("digit").height) / box.height) / CELL);
    if (r >= 0 && r < ROWS) setQuery(r + offset());
  }
  painting = null; tapStart = null;
});
$("digit").addEventListener("pointercancel", () => { painting = null; tapStart = null; });
// by keyboard: the arrows move the pen (blue), Space or Enter paints, Shift + an arrow paints as it moves
const PEN_MOVES = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
$("digit").addEventListener("keydown", (ev) => {
  const move = PEN_MOVES[ev.key];
  if (move) {
    S.pen = [Math.max(0, Math.min(ROWS - 1, S.pen[0] + move[0])), Math.max(0, Math.min(ROWS - 1, S.pen[1] + move[1]))];
    if (ev.shiftKey) paintAt(...S.pen); else drawDigit();
  } else if (ev.key === " " || ev.key === "Enter") paintAt(...S.pen);
  else return;
  ev.preventDefault();
});
for (const what of ["focus", "blur"]) $("digit").addEventListener(what, () => drawDigit());
$("clear").addEventListener("click", () => { S.pixels.fill(0); S.drawn.fill(0); S.image++; $("image").value = -1; S.label = null; render(); });

// ---- demo 1: spotlight ----
function headMap(l) { // the selected head's map, or the mean of the heads
  const maps = hook.last.attention[l];
  if (S.head >= 0) return maps[Math.min(S.head, maps.length - 1)];
  return maps[0].map((row, i) => row.map((_, j) => maps.reduce((s, A) => s + A[i][j], 0) / maps.length));
}
function drawSpotlight() {
  const cv = $("spot"), ctx = canvasCtx(cv), A = headMap(S.layer), off = offset(), q = S.query;
  const weights = A[q].slice(off), c = 7, L = 20, top = 4, barX = L + ROWS * c + 4, barW = cv.width - barX - 2;
  for (let r = 0; r < ROWS; r++) {
    for (let x = 0; x < ROWS; x++) {
      const v = 255 - Math.round(S.pixels[imageRowOf(r) * ROWS + x]);
      ctx.fillStyle = `rgb(${v},${v},${v})`; ctx.fillRect(L + x * c, top + r * c, c, c);
    }
    ctx.fillStyle = weightColour(weights[r]).replace("rgb", "rgba").replace(")", ",0.6)");
    ctx.fillRect(L + 0, top + r * c, ROWS * c, c);
    ctx.fillStyle = weightColour(weights[r]); ctx.fillRect(barX, top + r * c + 1, Math.max(3, weights[r] * barW), c - 2);
  }
  ctx.strokeStyle = "#999"; ctx.strokeRect(barX + 0.5, top, barW, ROWS * c);
  ctx.fillStyle = "#555"; ctx.textAlign = "right";
  for (const v of ticksFor(ROWS)) ctx.fillText(String(v + off), L - 3, top + (v + 0.5) * c);
  if (q - off >= 0) { ctx.strokeStyle = "#e65c00"; ctx.lineWidth = 2; ctx.strokeRect(L + 1, top + (q - off) * c, ROWS * c - 2, c); }
  legend($("spotlegend"), t("legend"));
  hook.views.spotlight = { layer: S.layer, head: S.head, query: q, weights: off ? A[q].slice() : weights };
}
function spotAt(ev) { // the row under the pointer becomes the query: a mouse hovering, a finger dragging or tapping
  const box = $("spot").getBoundingClientRect(), r = Math.floor((((ev.clientY - box.top) * $("spot").height) / box.height - 4) / 7);
  if (r >= 0 && r < ROWS) setQuery(r + offset());
}
$("spot").addEventListener("pointermove", spotAt);
$("spot").addEventListener("pointerdown", spotAt);
$("digit").addEventListener("pointermove", (ev) => {
  if (painting !== null) return;
  const box = $("digit").getBoundingClientRect(), r = Math.floor((((ev.clientY - box.top) * $("digit").height) / box.height) / CELL);
  if (r >= 0 && r < ROWS && ev.pointerType === "mouse") setQuery(r + offset());
});
function setQuery(q) { if (q !== S.query) { S.query = q; $("query").value = q; draw(); } }

// ---- demo 2: q, k, v and the scores ----
function drawQKV() {
  const l = S.layer, h = Math.max(0, S.head), q = S.query, H = hook.trace.layers[l].heads[h];
  const soft = hook.last.attention[l][h][q];
  barChart($("qv"), H.q[q]); barChart($("kv"), H.k[q]); barChart($("vv"), H.v[q]);
  barChart($("rawv"), H.raw[q], { highlight: q, xlabel: "j" }); barChart($("scaledv"), H.scaled[q], { highlight: q, xlabel: "j" });
  barChart($("softv"), soft, { highlight: soft.indexOf(Math.max(...soft)), range: [0, Math.max(...soft)], xlabel: "j" });
  $("scaledcap").textContent = t("s2.scaled", { scale: H.scale.toPrecision(3) });
  hook.views.qkv = { layer: l, head: h, query: q, q: H.q[q], k: H.k[q], v: H.v[q], raw: H.raw[q], scaled: H.scaled[q],
                     softmax: soft, scale: H.scale, project: { ...S.proj } };
  for (const w of ["q", "k", "v"]) $(`w${w}val`).textContent = `× ${S.proj[w].toFixed(1)}`;
}
// the factors change the weights the forward pass uses: a new pass, not a redraw
const projected = () => S.proj.q !== 1 || S.proj.k !== 1 || S.proj.v !== 1;
for (const w of ["q", "k", "v"]) {
  $(`w${w}`).addEventListener("input", (ev) => { S.proj[w] = +ev.target.value; render(); });
}
$("wreset").addEventListener("click", () => {
  S.proj = { q: 1, k: 1, v: 1 };
  for (const w of ["q", "k", "v"]) $(`w${w}`).value = 1;
  render();
});

// ---- demo 3: tau, entropy ----
const entropy = (p) => -p.reduce((s, v) => s + (v > 0 ? v * Math.log2(v) : 0), 0);
function drawTau() {
  const l = S.layer, h = Math.max(0, S.head), A = hook.last.attention[l][h];
  heatmap($("taumap"), A, { hover: S.query, masked: S.masked.has(`${l},${h}`) });
  legend($("taulegend"), `${t("legend")} · ${t("map.axes")}`);
  const rows = A.map(entropy), mean = rows.reduce((a, b) => a + b, 0) / rows.length;
  barChart($("entropyv"), rows, { highlight: S.query, range: [0, Math.log2(A.length)], xlabel: "i" });
  $("entropy").textContent = t("entropy", { i: S.query, h: rows[S.query].toFixed(3), m: mean.toFixed(3), max: Math.log2(A.length).toFixed(3) });
  $("tauval").textContent = S.tau.toFixed(2);
  hook.views.entropy = { layer: l, head: h, rows, mean, max: Math.log2(A.length) };
}

// ---- demo 4: every head of every layer, masking ----
function buildMaps(out) {
  const maps = $("maps");
  maps.innerHTML = "";
  out.attention.forEach((layer, l) => {
    const row = document.createElement("div");
    row.className = "layer";
    row.appendChild(Object.assign(document.createElement("span"), { className: "lname", textContent: t("layerN", { l }) }));
    layer.forEach((A, h) => {
      const fig = document.createElement("figure");
      const c = Object.assign(document.createElement("canvas"), { className: "map", tabIndex: 0 });
      c.width = c.height = MAP.left + 2 + A.length * 5;
      c.dataset.layer = l; c.dataset.head = h; c.setAttribute("role", "button");
      const toggle = () => { const k = `${l},${h}`; if (S.masked.has(k)) S.masked.delete(k); else S.masked.add(k); render(); };
      // a tap (touch, pen) toggles on pointerup, where it lifted without moving; the click that may follow is skipped
      let down = null, tapped = 0;
      c.addEventListener("pointerdown", (ev) => { down = ev.pointerType === "mouse" ? null : [ev.clientX, ev.clientY]; });
      c.addEventListener("pointerup", (ev) => {
        if (down && Math.hypot(ev.clientX - down[0], ev.clientY - down[1]) < 10) { tapped = performance.now(); toggle(); }
        down = null;
      });
      c.addEventListener("click", () => { if (performance.now() - tapped > 800) toggle(); });
      c.addEventListener("keydown", (ev) => {
        if (ev.key === "Enter" || ev.key === " ") { toggle(); ev.preventDefault(); }
        if (ev.key === "ArrowDown" || ev.key === "ArrowUp") { setQuery(Math.max(0, Math.min(A.length - 1, S.query + (ev.key === "ArrowDown" ? 1 : -1)))); ev.preventDefault(); }
      });
      c.addEventListener("pointermove", (ev) => setQuery(mapRowAt(c, ev, A.length)));
      fig.appendChild(c);
      fig.appendChild(Object.assign(document.createElement("figcaption"), { textContent: `${t("head")} ${h}` }));
      row.appendChild(fig);
    });
    maps.appendChild(row);
  });
}
function drawMaps() {
  $$("canvas.map").forEach((c) => {
    const l = +c.dataset.layer, h = +c.dataset.head, k = `${l},${h}`;
    heatmap(c, hook.last.attention[l][h], { hover: S.query, masked: S.masked.has(k) });
    c.setAttribute("aria-pressed", String(S.masked.has(k)));
    c.setAttribute("aria-label", `${t("layerN", { l })} ${t("head")} ${h}${t("itemSep")}${t("mask")}`);
    c.title = `${t("layerN", { l })} ${t("head")} ${h}${t("itemSep")}${t("mask")}`;
  });
  legend($("maplegend"), `${t("legend")} · ${t("map.axes")}`);
  $("masked").textContent = S.masked.size ? t("masked", { list: [...S.masked].map((k) => `L${k.replace(",", "H")}`).join(" ") }) : t("masked.none");
}

// ---- demo 5: positions ----
function positionTable(model, T) {
  const m = model.model;
  if (m.pos_enc === "sinusoidal") return { kind: "sinusoidal", table: AblateForward.sinusoidal(T, m.d_model).map((r) => Array.from(r)) };
  if (m.pos_enc === "rope") return { kind: "rope", table: AblateForward.ropeAngles(T, m.head_dim).map((r) => Array.from(r)) };
  if (m.pos_enc === "learned") {
    const data = model.w["encoder.pos_enc.weight"].data, d = m.d_model;
    return { kind: "learned", table: Array.from({ length: Math.min(T, m.max_len) }, (_, p) => Array.from(data.subarray(p * d, (p + 1) * d))) };
  }
  return { kind: m.pos_enc, table: [] }; // none; alibi biases the scores, it adds no vector
}
const WAVE_COLOURS = ["#5b8fd6", "#e65c00", "#2a9d4b", "#9b59b6", "#c0392b", "#7f8c8d"];
function drawPositions() {
  const P = hook.positions, T = P.table.length, off = !S.pe || !T;
  $("posbox").hidden = off; $("posoff").hidden = !off;
  $("posoff").textContent = P.kind === "alibi" ? t("pe.alibinote") : P.kind === "none" ? t("pe.nonemodel") : t("pe.off");
  $("pename").textContent = t(`pe.${MODELS[S.model].model.pos_enc}`);
  const pos = Math.min(S.pos, Math.max(0, T - 1));
  P.position = pos; P.vector = T && !off ? P.table[pos].slice() : [];
  $("poslegend").innerHTML = "";
  if (off) return;
  const cv = $("posview"), ctx = canvasCtx(cv), L = 30, B = 30, W = cv.width - L - 6, H = cv.height - B - 6, cols = P.table[0].length;
  const x = (p) => L + ((p + 0.5) * W) / T;
  ctx.fillStyle = "#444";
  if (P.kind === "sinusoidal") {
    const picked = [0, 1, 4, 5, 16, 17].filter((i) => i < cols), y = (v) => 6 + ((1 - v) / 2) * H;
    ctx.strokeStyle = "#bbb"; ctx.beginPath();
    for (const v of [-1, 0, 1]) { ctx.moveTo(L, y(v)); ctx.lineTo(L + W, y(v)); }
    ctx.stroke();
    ctx.textAlign = "right"; for (const v of [-1, 0, 1]) ctx.fillText(String(v), L - 4, y(v));
    picked.forEach((i, k) => {
      ctx.strokeStyle = WAVE_COLOURS[k]; ctx.lineWidth = 1.5; ctx.beginPath();
      P.table.forEach((row, p) => (p ? ctx.lineTo(x(p), y(row[i])) : ctx.moveTo(x(p), y(row[i]))));
      ctx.stroke();
      const key = document.createElement("span");
      key.innerHTML = `<i style="background:${WAVE_COLOURS[k]}"></i>`;
      key.append(`${i % 2 ? "cos" : "sin"} · dim ${i}`);
      $("poslegend").appendChild(key);
    });
    ctx.strokeStyle = "#222"; ctx.lineWidth = 1; ctx.beginPath(); ctx.moveTo(x(pos), 6); ctx.lineTo(x(pos), 6 + H); ctx.stroke();
    $("posnote").textContent = t("pe.waves", { dims: picked.join(", "), T });
  } else {
    const max = P.kind === "learned" ? Math.max(...P.table.flat().map(Math.abs), 1e-12) : 1, ch = H / T, cw = W / cols;
    P.table.forEach((row, p) => row.forEach((v, c) => {
      ctx.fillStyle = P.kind === "rope" ? `hsl(${(((v % (2 * Math.PI)) / (2 * Math.PI)) * 360).toFixed(1)},70%,60%)` : diverging(v / max);
      ctx.fillRect(L + c * cw, 6 + p * ch, cw + 0.5, ch + 0.5);
    }));
    ctx.fillStyle = "#444"; ctx.textAlign = "right";
    for (const p of ticksFor(T)) ctx.fillText(String(p), L - 4, 6 + (p + 0.5) * ch);
    ctx.strokeStyle = "#222"; ctx.lineWidth = 1.5; ctx.strokeRect(L + 0.5, 6 + pos * ch, W - 1, ch);
    $("posnote").textContent = P.kind === "rope" ? t("pe.ropeAngles", { hs: 2 * cols, T, n: cols })
      : t("pe.learnednote", { T, d: cols, max: max.toFixed(2) });
  }
  ctx.fillStyle = "#444"; ctx.textAlign = "center";
  const n = P.kind === "sinusoidal" ? T : cols, xs = P.kind === "sinusoidal" ? x : (c) => L + ((c + 0.5) * W) / cols;
  for (const v of ticksFor(n)) ctx.fillText(String(v), xs(v), cv.height - 20);
  ctx.fillText(P.kind === "sinusoidal" ? t("axis.position") : P.kind === "rope" ? t("pe.freq") : t("pe.dim"), L + W / 2, cv.height - 7);
  const vc = $("posvec"), vctx = canvasCtx(vc), vw = (vc.width - L - 6) / cols;
  const vmax = P.kind === "learned" ? Math.max(...P.vector.map(Math.abs), 1e-12) : 1;
  P.vector.forEach((v, c) => {
    vctx.fillStyle = P.kind === "rope" ? `hsl(${(((v % (2 * Math.PI)) / (2 * Math.PI)) * 360).toFixed(1)},70%,60%)` : diverging(v / vmax);
    vctx.fillRect(L + c * vw, 0, vw + 0.5, vc.height);
  });
  $("posval").textContent = t("pos", { pos });
}

// ---- demo 6: residual stream, this model and a pair side by side ----
const pairCache = new Map(); // model|permutation|image -> its forward pass: tau and masks do not touch the pair
function pairForward(i) {
  const key = `${i}|${S.perm}|${S.image}`;
  if (!pairCache.has(key)) {
    if (pairCache.size > 4) pairCache.clear();
    pairCache.set(key, AblateForward.forward(MODELS[i], input(), S.perm ? { permute: S.perm.slice() } : {}));
  }
  return pairCache.get(key);
}
// The bars show the stream before a Post-LN norm (x + f(x); f(x) alone without the skip): after the norm every
// token has length about √d_model whatever the block did (issue 40: the panel read 8.0 at every layer).
const meanOf = (rows) => rows.map((n) => n.reduce((a, b) => a + b, 0) / n.length);
function residualColumn(i, normsEl, cosEl, predEl) {
  const model = MODELS[i], out = pairForward(i), p = softmax(out.logits), best = p.indexOf(Math.max(...p));
  const mean = meanOf(out.residualNorms), stream = meanOf(out.streamNorms), cos = out.hiddenStates.map(AblateForward.meanTokenCosine);
  const names = layerNames(mean.length);
  bars($(normsEl), stream, names, (v) => v.toFixed(2), -1);
  bars($(cosEl), cos, names, (v) => v.toFixed(3), -1);
  $(predEl).textContent = t("pred", { best, p: pct(p[best]) }) + (S.label === null ? "" : t("predLabel", { label: S.label }));
  return { name: model.name, norms: mean, stream, cosine: cos, probabilities: p };
}
function drawResidual() {
  const last = hook.last, stream = meanOf(last.streamNorms), names = layerNames(stream.length);
  bars($("norms"), stream, names, (v) => v.toFixed(2), -1);
  bars($("cosine"), last.tokenCosine, names, (v) => v.toFixed(3), -1);
  $("resname0").textContent = MODELS[S.model].name;
  hook.views.residual = { a: residualColumn(+$("res-a").value, "norms-a", "cosine-a", "respred-a"),
                          b: residualColumn(+$("res-b").value, "norms-b", "cosine-b", "respred-b") };
}

// ---- demo 7: LayerNorm ----
function lnSource() {
  const m = MODELS[S.model].model;
  if (m.norm === "none") return null;
  const [l, part] = S.lnWhich.split(",");
  const layer = hook.trace.layers[+l], norm = part === "ffn" ? layer.ffnNorm : layer.attnNorm;
  return norm && { key: `${S.model}|${S.lnWhich}|${S.query}`, norm };
}
function drawLN() {
  const src = lnSource();
  $("lnbox").hidden = !src; $("lnnone").hidden = !!src;
  if (!src) { hook.views.ln = null; return; }
  const w = MODELS[S.model].w, orig = src.norm.input[S.query];
  const x = S.lnEdit && S.lnEdit.key === src.key ? S.lnEdit.vector : orig, d = x.length;
  const [out] = AblateForward.layerNorm([Float64Array.from(x)], w[`${src.norm.name}.weight`], w[`${src.norm.name}.bias`]);
  const mean = x.reduce((a, b) => a + b, 0) / d, centred = x.map((v) => v - mean);
  const std = Math.sqrt(centred.reduce((a, v) => a + v * v, 0) / d), hat = centred.map((v) => v / Math.sqrt(std * std + 1e-5));
  const norm = Math.sqrt(centred.reduce((a, v) => a + v * v, 0)), normHat = Math.sqrt(hat.reduce((a, v) => a + v * v, 0));
  const lim = Math.max(3, 1.4 * Math.max(...orig.map(Math.abs)));
  barChart($("lnin"), x, { highlight: S.lnComp, range: [-lim, lim] });
  barChart($("lnhat"), hat); barChart($("lnout"), Array.from(out));
  const mean2 = hat.reduce((a, b) => a + b, 0) / d;
  $("lnstats").textContent = t("s7.stats", { mean: mean.toFixed(3), std: std.toFixed(3), norm: norm.toFixed(2), mean2: mean2.toFixed(3),
                                             norm2: normHat.toFixed(2), sqrtd: Math.sqrt(d).toFixed(2) });
  const cv = $("lnsphere"), ctx = canvasCtx(cv), R = Math.max(norm, Math.sqrt(d)), s = (cv.width / 2 - 8) / R;
  ctx.strokeStyle = "#e65c00"; ctx.setLineDash([4, 3]); ctx.beginPath(); ctx.arc(cv.width / 2, cv.height / 2, Math.sqrt(d) * s, 0, 2 * Math.PI); ctx.stroke();
  ctx.setLineDash([]); ctx.strokeStyle = "#1c50be"; ctx.beginPath(); ctx.arc(cv.width / 2, cv.height / 2, Math.max(1, norm * s), 0, 2 * Math.PI); ctx.stroke();
  ctx.fillStyle = "#444"; ctx.textAlign = "center"; ctx.fillText(`√d = ${Math.sqrt(d).toFixed(1)}`, cv.width / 2, 10);
  hook.views.ln = { name: src.norm.name, token: S.query, input: Array.from(x), hat, output: Array.from(out), mean, std, norm, normHat, edited: x !== orig, component: S.lnComp };
}
function lnSet(c, value) {
  const src = lnSource();
  if (!src) return;
  if (!S.lnEdit || S.lnEdit.key !== src.key) S.lnEdit = { key: src.key, vector: src.norm.input[S.query].slice() };
  S.lnComp = c; S.lnEdit.vector[c] = value; drawLN();
}
let lnDrag = null;
function lnPointer(ev) {
  const cv = $("lnin"), box = cv.getBoundingClientRect(), sx = cv.width / box.width, sy = cv.height / box.height;
  const src = lnSource(); if (!src) return;
  const orig = src.norm.input[S.query], d = orig.length, lim = Math.max(3, 1.4 * Math.max(...orig.map(Math.abs)));
  const W = cv.width - CHART.left - CHART.right, H = cv.height - CHART.top - CHART.bottom;
  const c = lnDrag !== null && lnDrag.c !== undefined ? lnDrag.c : Math.floor((((ev.clientX - box.left) * sx - CHART.left) / W) * d);
  if (c < 0 || c >= d) return;
  const v = lim - ((((ev.clientY - box.top) * sy) - CHART.top) / H) * 2 * lim;
  lnDrag = { id: ev.pointerId, c };
  lnSet(c, Math.max(-lim, Math.min(lim, v)));
}
$("lnin").addEventListener("pointerdown", (ev) => { lnDrag = { id: ev.pointerId }; $("lnin").setPointerCapture(ev.pointerId); lnPointer(ev); ev.preventDefault(); });
$("lnin").addEventListener("pointermove", (ev) => { if (lnDrag && lnDrag.id === ev.pointerId) lnPointer(ev); });
for (const end of ["pointerup", "pointercancel"]) $("lnin").addEventListener(end, () => { lnDrag = null; });
$("lnin").addEventListener("keydown", (ev) => {
  const view = hook.views.ln; if (!view) return;
  const d = view.input.length, step = 0.25;
  if (ev.key === "ArrowLeft" || ev.key === "ArrowRight") { S.lnComp = (S.lnComp + (ev.key === "ArrowRight" ? 1 : d - 1)) % d; drawLN(); }
  else if (ev.key === "ArrowUp" || ev.key === "ArrowDown") lnSet(S.lnComp, view.input[S.lnComp] + (ev.key === "ArrowUp" ? step : -step));
  else return;
  ev.preventDefault();
});
$("lnreset").addEventListener("click", () => { S.lnEdit = null; drawLN(); });
$("lnwhich").addEventListener("change", () => { S.lnWhich = $("lnwhich").value; S.lnEdit = null; drawLN(); });

// ---- demo 8: FFN ----
function drawFFN() {
  const layer = hook.trace.layers[S.layer], hidden = layer.ffnHidden;
  if (!hidden) {
    for (const id of ["ffnv", "foldin", "foldlin", "foldact"]) canvasCtx($(id));
    $("ffnstats").textContent = t("s8.none"); $("foldstats").textContent = "";
    hook.views.ffn = hook.views.fold = null;
    return;
  }
  const h = hidden[S.query], active = h.filter((v) => v > 0).length, max = Math.max(...h);
  barChart($("ffnv"), h, { highlight: h.indexOf(max), xlabel: "unit" });
  $("ffnstats").textContent = t("s8.active", { k: active, n: h.length, max: max.toFixed(3) });
  hook.views.ffn = { layer: S.layer, token: S.query, hidden: h, active };
  drawFold(layer);
}

// The fold (the tutorial's 折纸): a plane through the query token's FFN input, spanned by the two directions in
// which this layer's FFN inputs spread most, carried through the trained FFN. Its linear part alone (the
// activation taken out) is one affine map: the grid stays a grid of straight lines. Each hidden unit whose
// pre-activation changes sign inside the plane creases it along a line (drawn in the plane, left); after the
// activation the grid bends at those lines (right).
const FOLD = { lines: 11, samples: 41 };
const dot = (a, b) => { let s = 0; for (let i = 0; i < a.length; i++) s += a[i] * b[i]; return s; };
function spreadDirections(rows) { // the two orthonormal directions of largest spread (power iteration, deflated)
  const n = rows.length, d = rows[0].length, X = rows.map((r) => Float64Array.from(r)), mean = new Float64Array(d);
  for (const r of X) for (let i = 0; i < d; i++) mean[i] += r[i] / n;
  for (const r of X) for (let i = 0; i < d; i++) r[i] -= mean[i];
  const dirs = [];
  for (let k = 0; k < 2; k++) {
    let u = Float64Array.from({ length: d }, (_, i) => Math.sin(1 + i + 7 * k)); // a fixed start: the same plane every time
    for (let it = 0; it < 100; it++) {
      const next = new Float64Array(d);
      for (const r of X) { const s = dot(r, u); for (let i = 0; i < d; i++) next[i] += s * r[i]; }
      for (const e of dirs) { const c = dot(next, e); for (let i = 0; i < d; i++) next[i] -= c * e[i]; }
      const norm = Math.hypot(...next) || 1;
      u = next.map((x) => x / norm);
    }
    dirs.push(Array.from(u));
  }
  const spread = Math.max(...dirs.map((e) => Math.sqrt(X.reduce((s, r) => s + dot(r, e) ** 2, 0) / n)));
  return { u: dirs[0], v: dirs[1], spread };
}
function drawMesh(cv, lines, creases) { // lines: [{pts: [[x, y], ...], dir: 0 | 1}]; creases: [[[x, y], [x, y]], ...]
  const ctx = canvasCtx(cv), all = lines.flatMap((l) => l.pts);
  const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
  const k = Math.min((cv.width - 8) / Math.max(1e-9, x1 - x0), (cv.height - 8) / Math.max(1e-9, y1 - y0));
  const X = (x) => 4 + (x - x0) * k + (cv.width - 8 - (x1 - x0) * k) / 2, Y = (y) => cv.height - 4 - (y - y0) * k;
  ctx.lineWidth = 1;
  ctx.strokeStyle = "#bbb";
  for (const [a, b] of creases || []) { ctx.beginPath(); ctx.moveTo(X(a[0]), Y(a[1])); ctx.lineTo(X(b[0]), Y(b[1])); ctx.stroke(); }
  for (const l of lines) {
    ctx.strokeStyle = l.dir ? "#e65c00" : "#2c6fbb";
    ctx.beginPath();
    l.pts.forEach(([x, y], i) => (i ? ctx.lineTo(X(x), Y(y)) : ctx.moveTo(X(x), Y(y))));
    ctx.stroke();
  }
}
function bend(lines) { // the largest distance of a point from the straight line through its line's two ends
  let worst = 0;
  for (const { pts } of lines) {
    const [a, b] = [pts[0], pts[pts.length - 1]], len = Math.hypot(b[0] - a[0], b[1] - a[1]) || 1;
    for (const p of pts) worst = Math.max(worst, Math.abs((b[0] - a[0]) * (a[1] - p[1]) - (a[0] - p[0]) * (b[1] - a[1])) / len);
  }
  return worst;
}
function drawFold(layer) {
  const rows = layer.ffnInput, centre = rows[S.query], { u, v, spread } = spreadDirections(rows), r = 2 * spread;
  const steps = (n) => Array.from({ length: n }, (_, i) => -r + (2 * r * i) / (n - 1));
  const coords = [[0, 0], [1, 0], [0, 1], [r, r]];
  const lines = [];
  for (const dir of [0, 1]) {
    for (const c of steps(FOLD.lines)) {
      lines.push({ dir, from: coords.length });
      for (const s of steps(FOLD.samples)) coords.push(dir ? [s, c] : [c, s]);
    }
  }
  const out = AblateForward.foldPlane(MODELS[S.model], S.layer, centre, u, v, coords);
  const meshes = { plane: [], linear: [], folded: [] };
  for (const l of lines) {
    const idx = Array.from({ length: FOLD.samples }, (_, i) => l.from + i);
    meshes.plane.push({ dir: l.dir, pts: idx.map((i) => coords[i]) });
    meshes.linear.push({ dir: l.dir, pts: idx.map((i) => out.view.linear[i]) });
    meshes.folded.push({ dir: l.dir, pts: idx.map((i) => out.view.folded[i]) });
  }
  // each hidden unit's zero line in the plane: pre = c0 + a·ga + b·gb (affine in a, b)
  const p0 = out.pre[0], ga = out.pre[1].map((x, i) => x - p0[i]), gb = out.pre[2].map((x, i) => x - p0[i]);
  const creases = [];
  p0.forEach((c, i) => {
    const ends = [];
    for (const [a, b] of [[-r, -r], [r, -r], [r, r], [-r, r], [-r, -r]]) ends.push(c + a * ga[i] + b * gb[i]);
    if (Math.min(...ends) < 0 && Math.max(...ends) > 0) { // the line crosses the square: its two edge points
      const corners = [[-r, -r], [r, -r], [r, r], [-r, r]], hits = [];
      for (let e = 0; e < 4; e++) {
        const [a0, b0] = corners[e], [a1, bEnd] = corners[(e + 1) % 4], f0 = ends[e], f1 = ends[e + 1];
        if ((f0 < 0) !== (f1 < 0)) { const frac = f0 / (f0 - f1); hits.push([a0 + frac * (a1 - a0), b0 + frac * (bEnd - b0)]); }
      }
      if (hits.length >= 2) creases.push([hits[0], hits[1]]);
    }
  });
  drawMesh($("foldin"), meshes.plane, creases);
  drawMesh($("foldlin"), meshes.linear);
  drawMesh($("foldact"), meshes.folded);
  $("foldstats").textContent = t("s8.fold", { k: creases.length, n: p0.length });
  hook.views.fold = { layer: S.layer, token: S.query, radius: r, creases: creases.length, units: p0.length,
                      bentLinear: bend(meshes.linear), bentFolded: bend(meshes.folded),
                      probe: { coord: coords[3], point: Array.from(centre, (c, i) => c + r * u[i] + r * v[i]),
                               linear: out.linear[3], folded: out.folded[3] } };
}

// ---- demo 9: per-layer readout ----
function drawLens() {
  const probs = hook.last.layerLogits.map(softmax), n = probs.length, cv = $("lens");
  cv.height = 16 + 18 * n;
  const ctx = canvasCtx(cv), L = 96, cw = (cv.width - L - 4) / 10, ch = 18, names = layerNames(n);
  ctx.fillStyle = "#444"; ctx.textAlign = "center";
  for (let c = 0; c < 10; c++) ctx.fillText(String(c), L + (c + 0.5) * cw, 7);
  const list = $("lenslist"); list.innerHTML = "";
  const predictions = probs.map((p) => p.indexOf(Math.max(...p)));
  probs.forEach((p, l) => {
    ctx.fillStyle = "#444"; ctx.textAlign = "right"; ctx.fillText(names[l], L - 4, 16 + (l + 0.5) * ch);
    p.forEach((v, c) => {
      ctx.fillStyle = weightColour(v); ctx.fillRect(L + c * cw, 14 + l * ch, cw - 1, ch - 1);
      ctx.fillStyle = Math.sqrt(v) > 0.6 ? "#fff" : "#333"; ctx.textAlign = "center";
      ctx.fillText(v >= 0.995 ? "1" : v.toFixed(2).replace(/^0/, ""), L + (c + 0.5) * cw, 14 + (l + 0.5) * ch);
    });
    ctx.strokeStyle = "#e65c00"; ctx.lineWidth = 2; ctx.strokeRect(L + predictions[l] * cw + 1, 15 + l * ch, cw - 3, ch - 3);
    list.appendChild(Object.assign(document.createElement("li"), { textContent: `${names[l]}${t("itemSep")}${t("s9.pred", { c: predictions[l], p: pct(p[predictions[l]]) })}` }));
  });
  if (S.label !== null) { ctx.strokeStyle = "#2a9d4b"; ctx.lineWidth = 1; ctx.strokeRect(L + S.label * cw + 0.5, 13.5, cw, n * ch + 1); }
  legend($("lenslegend"), t("s9.layer"));
  hook.views.lens = { probabilities: probs, predictions };
}

// ---- demo 1, Q1: word order on a copy model (猫坐在垫子上 <-> 垫子在猫坐上) ----
// The tutorial's sentence as ablate.results.export feeds it to a copy model: one character per token, the id its
// index in WORDS; the copy input is the tokens, SEP (= data.vocab), then a BLANK (= data.vocab + 1) per token,
// as ablate.data.copytask builds it; the targets at the blanks are the tokens in order.
const WORDS = ["猫", "坐", "在", "垫", "子", "上"], REORDERED = ["垫", "子", "在", "猫", "坐", "上"];
const SENTENCE = { words: WORDS, perm_words: REORDERED, tokens: WORDS.map((w) => WORDS.indexOf(w)),
                   perm_tokens: REORDERED.map((w) => WORDS.indexOf(w)),
                   labels: [...WORDS, "SEP", ...WORDS.map(() => "_")] };
hook.sentence = SENTENCE;
const copyInput = (tokens, vocab) => [...tokens, vocab, ...tokens.map(() => vocab + 1)];
const tokenWord = (id) => (id < WORDS.length ? WORDS[id] : `#${id}`);
function q1Controls() {
  const box = $("q1models");
  box.innerHTML = "";
  TOKEN_MODELS.forEach((m, i) => {
    const b = document.createElement("button"), acc = m.metrics && m.metrics["test/acc"] !== undefined ? ` · ${pct(m.metrics["test/acc"])} %` : "";
    b.type = "button"; b.dataset.q1model = i;
    b.textContent = (m.model.pos_enc === "learned" ? t("q1.learned") : m.model.pos_enc === "none" ? t("q1.nope") : m.name) + acc;
    b.setAttribute("aria-pressed", String(i === Q.model));
    b.onclick = () => { q1Model(i); drawQ1(); };
    box.appendChild(b);
  });
  const m = TOKEN_MODELS[Q.model].model;
  $("q1layer").innerHTML = ""; $("q1head").innerHTML = "";
  for (let l = 0; l < m.n_layers; l++) $("q1layer").add(new Option(String(l), l));
  if (m.n_heads > 1) $("q1head").add(new Option(t("head.mean"), -1));
  for (let h = 0; h < m.n_heads; h++) $("q1head").add(new Option(String(h), h));
  $("q1layer").value = Q.layer; $("q1head").value = Q.head;
  $$("#q1order button").forEach((b) => b.setAttribute("aria-pressed", String(+b.dataset.order === Q.order)));
}
function q1Model(i) {
  Q.model = i;
  const m = TOKEN_MODELS[i].model;
  Q.layer = Math.min(Q.layer, m.n_layers - 1); Q.head = m.n_heads > 1 ? Math.min(Q.head, m.n_heads - 1) : 0;
  q1Controls();
}
function q1Cell(row, label, cls) {
  const c = Object.assign(document.createElement("div"), { className: "tok" + (cls ? ` ${cls}` : "") });
  c.append(label); row.appendChild(c);
  return c;
}
function drawQ1() {
  if (!TOKEN_MODELS.length) { hook.views.q1 = null; return; }
  const model = TOKEN_MODELS[Q.model], vocab = model.config["data.vocab"];
  const words = Q.order ? SENTENCE.perm_words : SENTENCE.words, tokens = words.map((w) => WORDS.indexOf(w));
  const x = copyInput(tokens, vocab), out = AblateForward.forward(model, x), T = x.length, L = tokens.length;
  const maps = out.attention[Q.layer];
  const A = Q.head >= 0 ? maps[Q.head] : maps[0].map((row, i) => row.map((_, j) => maps.reduce((s, M) => s + M[i][j], 0) / maps.length));
  const q = Math.min(Q.query, T - 1), weights = A[q];
  const labels = [...words, "SEP", ...words.map(() => "_")];
  const inRow = $("q1in"); inRow.innerHTML = "";
  labels.forEach((label, j) => {
    const c = q1Cell(inRow, label, (j === q ? "q" : "") + (label === "SEP" ? " sep" : ""));
    c.style.background = weightColour(weights[j]); c.style.color = Math.sqrt(weights[j]) > 0.6 ? "#fff" : "#222";
    c.prepend(Object.assign(document.createElement("small"), { textContent: String(j) }));
    c.appendChild(Object.assign(document.createElement("small"), { textContent: weights[j].toFixed(2) }));
    c.dataset.pos = j; c.title = `${j} ${label}: ${weights[j].toFixed(3)}`;
  });
  const predicted = out.logits.map((row) => row.indexOf(Math.max(...row)));
  const outRow = $("q1out"); outRow.innerHTML = "";
  let copied = 0;
  predicted.forEach((id, j) => {
    if (j <= L) { q1Cell(outRow, "", "empty"); return; }
    const right = id === tokens[j - L - 1]; copied += right;
    const c = q1Cell(outRow, tokenWord(id), right ? "" : "wrong"); c.dataset.pos = j;
  });
  const written = predicted.slice(L + 1).map(tokenWord);
  $("q1pred").textContent = `${t("q1.query", { i: q, tok: labels[q] })} · ${t("q1.pred", { words: written.join(""), k: copied, n: L })}`;
  $("q1query").max = T - 1; $("q1query").value = q; $("q1queryval").textContent = q;
  legend($("q1legend"), t("legend"));
  hook.views.q1 = { model: model.name, order: Q.order, words, input: x, labels, layer: Q.layer, head: Q.head, query: q,
                    weights: Array.from(weights), attention: out.attention, logits: out.logits, predicted: written, copied };
}
function q1Query(q) { if (q !== Q.query) { Q.query = q; drawQ1(); } }
function q1At(ev) { const c = ev.target.closest(".tok"); if (c && c.dataset.pos !== undefined) q1Query(+c.dataset.pos); }
for (const row of ["q1in", "q1out"]) {
  $(row).addEventListener("pointermove", q1At);
  $(row).addEventListener("pointerdown", q1At);
}
$("q1in").addEventListener("keydown", (ev) => {
  const T = hook.views.q1 ? hook.views.q1.input.length : 13;
  if (ev.key === "ArrowRight" || ev.key === "ArrowLeft") { q1Query((Q.query + (ev.key === "ArrowRight" ? 1 : T - 1)) % T); ev.preventDefault(); }
});
$("q1query").addEventListener("input", () => q1Query(+$("q1query").value));
$("q1layer").addEventListener("change", () => { Q.layer = +$("q1layer").value; drawQ1(); });
$("q1head").addEventListener("change", () => { Q.head = +$("q1head").value; drawQ1(); });
$$("#q1order button").forEach((b) => b.addEventListener("click", () => { Q.order = +b.dataset.order; q1Controls(); drawQ1(); }));

// ---- the forward pass and every view ----
function render() {
  const model = MODELS[S.model], rows = input(), opts = options();
  const out = AblateForward.forward(model, rows, Object.assign({ trace: true }, opts));
  const probabilities = softmax(out.logits), best = probabilities.indexOf(Math.max(...probabilities));
  const shapeChanged = !hook.last || hook.last.attention.length !== out.attention.length ||
    hook.last.attention[0].length !== out.attention[0].length || hook.last.attention[0][0].length !== out.attention[0][0].length ||
    hook.lang !== S.lang;
  hook.trace = out.trace;
  hook.last = { logits: out.logits, probabilities, attention: out.attention, residualNorms: out.residualNorms,
                streamNorms: out.streamNorms,
                hiddenStates: out.hiddenStates, tokenCosine: out.hiddenStates.map(AblateForward.meanTokenCosine),
                layerLogits: out.layerLogits, input: rows, options: opts };
  if (shapeChanged) { buildMaps(out); hook.lang = S.lang; }
  configTable(model);
  $("permstate").textContent = S.perm ? t("perm.some", { perm: S.perm.join(" ") }) : t("perm.none");
  $("pred").textContent = t("pred", { best, p: pct(probabilities[best]) }) + (S.label === null ? "" : t("predLabel", { label: S.label }));
  bars($("probs"), probabilities, [...probabilities.keys()].map(String), (p) => p.toFixed(3), best);
  drawResidual();
  draw();
  drawQ1();
}
function draw() { // what depends on the query token, layer and head, not on the forward pass
  $("queryval").textContent = S.query;
  $$(".ctl-layer").forEach((s) => { s.value = S.layer; });
  $$(".ctl-head").forEach((s) => { s.value = s.dataset.nomean ? Math.max(0, S.head) : S.head; });
  drawDigit(); drawSpotlight(); drawQKV(); drawTau(); drawMaps(); drawPositions(); drawLN(); drawFFN(); drawLens();
  labelCharts();
}
// a chart says what it draws: its figure's caption as its text alternative (issue 40, accessibility), taken after
// the drawing has written the caption (some captions carry the current numbers, and the language may have changed)
function labelCharts() {
  $$("figure canvas").forEach((cv) => {
    if (cv.hasAttribute("role") && cv.getAttribute("role") !== "img") return; // a control (a head's map) keeps its own
    cv.setAttribute("role", "img");
    cv.setAttribute("aria-label", cv.closest("figure").querySelector("figcaption")?.textContent || "");
  });
}

$("model").addEventListener("change", () => { loadModel(+$("model").value); render(); });
$("image").addEventListener("change", () => { loadImage(+$("image").value); render(); });
$("tau").addEventListener("input", () => { S.tau = +$("tau").value; render(); });
$("sqrtdk").addEventListener("change", () => { S.qkScale = $("sqrtdk").checked; render(); });
$("pe").addEventListener("change", () => { S.pe = $("pe").checked; render(); });
$("pos").addEventListener("input", () => { S.pos = +$("pos").value; drawPositions(); });
$("query").addEventListener("input", () => setQuery(+$("query").value));
$("permute").addEventListener("click", () => { S.perm = shuffle(); render(); });
$("order").addEventListener("click", () => { S.perm = null; render(); });
$("res-a").addEventListener("change", render); $("res-b").addEventListener("change", render);
$$(".ctl-layer").forEach((s) => s.addEventListener("change", () => { S.layer = +s.value; (projected() ? render : draw)(); }));
$$(".ctl-head").forEach((s) => s.addEventListener("change", () => { S.head = +s.value; (projected() ? render : draw)(); }));
$("lang").addEventListener("click", () => setLang(S.lang === "en" ? "zh" : "en"));

const asked = new URLSearchParams(location.search).get("lang") || location.hash.replace("#lang=", "");
S.lang = asked === "zh" || asked === "en" ? asked : (navigator.language || "").toLowerCase().startsWith("zh") ? "zh" : "en";
$("q1").hidden = !TOKEN_MODELS.length;
Q.query = WORDS.length + 1; // the first blank (after the words and SEP): where the copy begins
fillSelects();
loadModel(0);
if (DATA.images.length) loadImage(0); else $("image").value = -1;
setLang(S.lang);
