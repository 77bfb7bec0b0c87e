"""The explorer page: one self-contained HTML file that runs trained ablate models in the browser.

`build_page(models, images)` inlines forward.js, the page's UI script below, the exported models (JSON, from
`export_model`) and a few MNIST test images as raw pixels; nothing is fetched (no server, no CDN, no other
file), so the page opens offline from disk. `page_model(exported, name)` strips what must not travel with
the page: absolute paths (`run.dir`, `source`).

The page keeps its last forward pass in `window.ablateExplorer.last` ({logits, probabilities, attention,
residualNorms, hiddenStates, tokenCosine, input, options}) and its position view in
`window.ablateExplorer.positions` ({kind, table, position, vector}: the sinusoidal table, RoPE's angles or the
learned table, positions x columns, and the row the slider selects), so that tests read exactly what it drew.
"""

from __future__ import annotations

import json
from typing import Any

from . import FORWARD_JS

UI = r"""
"use strict";
const MODELS = JSON.parse(document.getElementById("models").textContent).map(AblateForward.load);
const DATA = JSON.parse(document.getElementById("images").textContent); // {mean, std, images: [{index, label, pixels}]}
const ROWS = 28, $ = (id) => document.getElementById(id);
const S = { model: 0, pixels: new Float64Array(ROWS * ROWS), label: null, tau: 1, qkScale: true, pe: true,
            masked: new Set(), perm: null, hover: null, shuffles: 0, pos: 0 };
const hook = (window.ablateExplorer = { state: S, last: null, positions: null, render: () => render() });

// ---- controls ----
MODELS.forEach((m, i) => $("model").add(new Option(`${m.name} (${m.params.toLocaleString("en")} parameters)`, i)));
DATA.images.forEach((im, i) => $("image").add(new Option(`digit ${im.label} (test #${im.index})`, i)));
$("image").add(new Option("(drawn)", -1));

function loadModel(i) {
  S.model = i;
  const m = MODELS[i].model;
  S.tau = m.temperature; S.qkScale = m.qk_scale; S.pe = m.pos_enc !== "none"; S.masked.clear();
  $("tau").value = S.tau; $("sqrtdk").checked = S.qkScale; $("pe").checked = S.pe; $("pe").disabled = m.pos_enc === "none";
  $("pename").textContent = $("posname2").textContent = m.pos_enc;
  const c = MODELS[i].config, keys = ["model.d_model", "model.n_heads", "model.n_layers", "model.norm", "model.residual",
    "model.pos_enc", "model.qk_scale", "model.temperature", "model.activation", "pooling", "data.permute"];
  $("config").textContent = keys.filter((k) => k in c).map((k) => `${k}=${c[k]}`).join("  ") +
    `  steps=${MODELS[i].global_step}`;
  const T = ROWS + (MODELS[i].pooling === "cls" ? 1 : 0); // positions are added after the [CLS] token
  $("pos").max = T - 1; S.pos = Math.min(S.pos, T - 1); $("pos").value = S.pos;
  hook.positions = positionTable(MODELS[i], T);
}

// ---- the model's positions: what pos_enc adds (or rotates by), position x column ----
function positionTable(model, T) {
  const m = model.model;
  if (m.pos_enc === "sinusoidal") return { kind: "sinusoidal", table: AblateForward.sinusoidal(T, m.d_model).map((r) => Array.from(r)) };
  if (m.pos_enc === "rope") return { kind: "rope", table: AblateForward.ropeAngles(T, m.head_dim).map((r) => Array.from(r)) };
  if (m.pos_enc === "learned") {
    const data = model.w["encoder.pos_enc.weight"].data, d = m.d_model;
    return { kind: "learned", table: Array.from({ length: Math.min(T, m.max_len) }, (_, t) => Array.from(data.subarray(t * d, (t + 1) * d))) };
  }
  return { kind: m.pos_enc, table: [] }; // none; alibi biases the scores, it adds no vector
}
const WAVE_COLOURS = ["#5b8fd6", "#e65c00", "#2a9d4b", "#9b59b6", "#c0392b", "#7f8c8d"];
function diverging(v) { // -1 blue, 0 white, +1 orange
  const a = Math.min(1, Math.abs(v));
  return v >= 0 ? `rgb(255,${Math.round(255 - 120 * a)},${Math.round(255 - 255 * a)})`
                : `rgb(${Math.round(255 - 200 * a)},${Math.round(255 - 110 * a)},255)`;
}
function drawPositions() {
  const P = hook.positions, cv = $("posview"), ctx = cv.getContext("2d"), W = cv.width, H = cv.height;
  ctx.clearRect(0, 0, W, H);
  const T = P.table.length, pos = Math.min(S.pos, Math.max(0, T - 1));
  P.position = pos; P.vector = T ? P.table[pos].slice() : [];
  $("posvec").getContext("2d").clearRect(0, 0, $("posvec").width, $("posvec").height);
  if (!T) {
    ctx.fillStyle = "#555"; ctx.font = "13px system-ui";
    ctx.fillText(P.kind === "alibi" ? "alibi: no position vector (a bias -m|i-j| on the scores)" : "none: no positional encoding", 8, H / 2);
    $("posnote").textContent = ""; return;
  }
  const cols = P.table[0].length, x = (t) => ((t + 0.5) * W) / T;
  let picked = [];
  if (P.kind === "sinusoidal") { // a few dimensions as waves over the positions
    picked = [0, 1, 4, 5, 16, 17].filter((i) => i < cols);
    picked.forEach((i, k) => {
      ctx.strokeStyle = WAVE_COLOURS[k]; ctx.lineWidth = 1.5; ctx.beginPath();
      P.table.forEach((row, t) => { const y = H / 2 - row[i] * (H / 2 - 4); t ? ctx.lineTo(x(t), y) : ctx.moveTo(x(t), y); });
      ctx.stroke();
    });
    $("posnote").textContent = `dimensions ${picked.join(", ")} (sin even, cos odd) over ${T} positions`;
  } else { // rope: angle mod 2pi as a colour wheel; learned: the table's values
    const max = P.kind === "learned" ? Math.max(...P.table.flat().map(Math.abs), 1e-12) : 1;
    const ch = H / T, cw = W / cols;
    P.table.forEach((row, t) => row.forEach((v, c) => {
      ctx.fillStyle = P.kind === "rope" ? `hsl(${(((v % (2 * Math.PI)) / (2 * Math.PI)) * 360).toFixed(1)},70%,60%)` : diverging(v / max);
      ctx.fillRect(c * cw, t * ch, cw + 0.5, ch + 0.5);
    }));
    ctx.strokeStyle = "#222"; ctx.lineWidth = 1.5; ctx.strokeRect(0.5, pos * ch, W - 1, ch);
    $("posnote").textContent = P.kind === "rope"
      ? `rotation angle pos·10000^(-2i/${2 * cols}) mod 2π: ${T} positions (rows) × ${cols} frequencies i (columns)`
      : `the learned table: ${T} positions (rows) × ${cols} dimensions, colour ±${max.toFixed(2)}`;
  }
  if (P.kind === "sinusoidal") { ctx.strokeStyle = "#222"; ctx.lineWidth = 1; ctx.beginPath(); ctx.moveTo(x(pos), 0); ctx.lineTo(x(pos), H); ctx.stroke(); }
  const vc = $("posvec"), vctx = vc.getContext("2d"), vw = vc.width / cols, vmax = P.kind === "learned" ? Math.max(...P.vector.map(Math.abs), 1e-12) : 1;
  P.vector.forEach((v, c) => {
    vctx.fillStyle = P.kind === "rope" ? `hsl(${(((v % (2 * Math.PI)) / (2 * Math.PI)) * 360).toFixed(1)},70%,60%)` : diverging(v / vmax);
    vctx.fillRect(c * vw, 0, vw + 0.5, vc.height);
  });
  $("posval").textContent = `position ${pos}`;
}
function loadImage(i) {
  if (i < 0) return;
  const im = DATA.images[i];
  S.pixels = Float64Array.from(im.pixels); S.label = im.label;
}
function input() { // the normalised rows the model reads, as training fed them
  const rows = [];
  for (let r = 0; r < ROWS; r++) rows.push(Array.from(S.pixels.subarray(r * ROWS, (r + 1) * ROWS),
                                                     (p) => (p / 255 - DATA.mean) / DATA.std));
  return rows;
}
function options() {
  const o = { temperature: S.tau, qkScale: S.qkScale, headMask: [...S.masked].map((k) => k.split(",").map(Number)) };
  if (!S.pe && MODELS[S.model].model.pos_enc !== "none") o.posEnc = false;
  if (S.perm) o.permute = S.perm.slice();
  return o;
}
function shuffle() { // a fixed sequence of permutations (mulberry32), so that a run of the page is repeatable
  let a = (0x9e3779b9 * ++S.shuffles) >>> 0;
  const rand = () => { a = (a + 0x6d2b79f5) >>> 0; let t = a; t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
  const p = [...Array(ROWS).keys()];
  for (let i = ROWS - 1; i > 0; i--) { const j = Math.floor(rand() * (i + 1)); [p[i], p[j]] = [p[j], p[i]]; }
  return p;
}

// ---- drawing ----
const CELL = 8;
function drawDigit() {
  const ctx = $("digit").getContext("2d");
  for (let r = 0; r < ROWS; r++) for (let c = 0; c < ROWS; c++) {
    const v = 255 - Math.round(S.pixels[r * ROWS + c]);
    ctx.fillStyle = `rgb(${v},${v},${v})`; ctx.fillRect(c * CELL, r * CELL, CELL, CELL);
  }
  const row = imageRow(S.hover);
  if (row !== null) { ctx.strokeStyle = "#e65c00"; ctx.lineWidth = 2; ctx.strokeRect(1, row * CELL, ROWS * CELL - 2, CELL); }
}
function imageRow(token) { // the image row a token (query) reads, or null for none or the [CLS] token
  if (token === null) return null;
  const t = token - (MODELS[S.model].pooling === "cls" ? 1 : 0);
  if (t < 0) return null;
  return S.perm ? S.perm[t] : t;
}
let painting = false;
function paint(ev) {
  const box = $("digit").getBoundingClientRect();
  const c = Math.floor((ev.clientX - box.left) / CELL), r = Math.floor((ev.clientY - box.top) / CELL);
  for (let dr = -1; dr <= 1; dr++) for (let dc = -1; dc <= 1; dc++) {
    const rr = r + dr, cc = c + dc;
    if (rr < 0 || cc < 0 || rr >= ROWS || cc >= ROWS) continue;
    const v = dr === 0 && dc === 0 ? 255 : (dr === 0 || dc === 0 ? 160 : 60);
    S.pixels[rr * ROWS + cc] = Math.max(S.pixels[rr * ROWS + cc], v);
  }
  $("image").value = -1; S.label = null; render();
}
$("digit").addEventListener("mousedown", (ev) => { painting = true; paint(ev); });
$("digit").addEventListener("mousemove", (ev) => { if (painting) paint(ev); });
window.addEventListener("mouseup", () => { painting = false; });
$("clear").addEventListener("click", () => { S.pixels.fill(0); $("image").value = -1; S.label = null; render(); });

// ---- drawing the output ----
function heat(canvas, A, masked) {
  const T = A.length, cell = canvas.width / T, ctx = canvas.getContext("2d");
  for (let i = 0; i < T; i++) for (let j = 0; j < T; j++) {
    const v = Math.min(1, A[i][j] * 4); // attention weights are small: 0.25 is already full colour
    ctx.fillStyle = `rgb(${Math.round(255 - 215 * v)},${Math.round(255 - 160 * v)},${Math.round(255 - 40 * v)})`;
    ctx.fillRect(j * cell, i * cell, cell + 0.5, cell + 0.5);
  }
  if (S.hover !== null && S.hover < T) {
    ctx.strokeStyle = "#e65c00"; ctx.lineWidth = 2; ctx.strokeRect(1, S.hover * cell, canvas.width - 2, cell);
  }
  if (masked) { ctx.fillStyle = "rgba(80,80,80,0.55)"; ctx.fillRect(0, 0, canvas.width, canvas.height); }
}
function drawMaps() {
  const out = hook.last;
  document.querySelectorAll("canvas.map").forEach((c) => {
    const l = +c.dataset.layer, h = +c.dataset.head;
    heat(c, out.attention[l][h], S.masked.has(`${l},${h}`));
  });
  drawDigit();
}
function buildMaps(out) {
  const maps = $("maps"); maps.innerHTML = "";
  out.attention.forEach((layer, l) => {
    const row = document.createElement("div"); row.className = "layer";
    row.appendChild(Object.assign(document.createElement("span"), { className: "lname", textContent: `layer ${l}` }));
    layer.forEach((A, h) => {
      const fig = document.createElement("figure");
      const c = Object.assign(document.createElement("canvas"), { className: "map" });
      c.width = c.height = A.length * Math.max(2, Math.floor(140 / A.length));
      c.dataset.layer = l; c.dataset.head = h; c.title = `layer ${l} head ${h}: click to mask`;
      c.addEventListener("click", () => {
        const k = `${l},${h}`;
        if (S.masked.has(k)) S.masked.delete(k); else S.masked.add(k);
        render();
      });
      c.addEventListener("mousemove", (ev) => {
        const box = c.getBoundingClientRect();
        const i = Math.floor((ev.clientY - box.top) / box.height * A.length);
        if (i !== S.hover) { S.hover = Math.max(0, Math.min(A.length - 1, i)); drawMaps(); }
      });
      fig.appendChild(c);
      fig.appendChild(Object.assign(document.createElement("figcaption"), { textContent: `head ${h}` }));
      row.appendChild(fig);
    });
    maps.appendChild(row);
  });
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

function render() {
  const model = MODELS[S.model], rows = input(), opts = options();
  const out = AblateForward.forward(model, rows, opts);
  const max = Math.max(...out.logits), exp = out.logits.map((z) => Math.exp(z - max)), sum = exp.reduce((a, b) => a + b);
  const probabilities = exp.map((e) => e / sum), best = probabilities.indexOf(Math.max(...probabilities));
  const shapeChanged = !hook.last || hook.last.attention.length !== out.attention.length ||
    hook.last.attention[0].length !== out.attention[0].length || hook.last.attention[0][0].length !== out.attention[0][0].length;
  const tokenCosine = out.hiddenStates.map(AblateForward.meanTokenCosine);
  hook.last = { logits: out.logits, probabilities, attention: out.attention, residualNorms: out.residualNorms,
                hiddenStates: out.hiddenStates, tokenCosine, input: rows, options: opts };
  if (shapeChanged) { S.hover = null; buildMaps(out); }
  $("tauval").textContent = S.tau.toFixed(2);
  $("permstate").textContent = S.perm ? `rows permuted: ${S.perm.join(" ")}` : "rows in order";
  $("masked").textContent = S.masked.size ? `masked: ${[...S.masked].map((k) => `L${k.replace(",", "H")}`).join(" ")}` : "no head masked";
  $("pred").textContent = `prediction ${best} (${(100 * probabilities[best]).toFixed(1)} %)` +
    (S.label === null ? "" : `, label ${S.label}`);
  bars($("probs"), probabilities, [...probabilities.keys()].map(String), (p) => p.toFixed(3), best);
  const mean = out.residualNorms.map((n) => n.reduce((a, b) => a + b, 0) / n.length);
  const layerNames = mean.map((_, l) => (l === 0 ? "embedding" : `after layer ${l - 1}`));
  bars($("norms"), mean, layerNames, (v) => v.toFixed(2), -1);
  bars($("cosine"), tokenCosine, layerNames, (v) => v.toFixed(3), -1);
  drawMaps();
  drawPositions();
}

$("model").addEventListener("change", () => { loadModel(+$("model").value); render(); });
$("image").addEventListener("change", () => { loadImage(+$("image").value); render(); });
$("tau").addEventListener("input", () => { S.tau = +$("tau").value; render(); });
$("sqrtdk").addEventListener("change", () => { S.qkScale = $("sqrtdk").checked; render(); });
$("pe").addEventListener("change", () => { S.pe = $("pe").checked; render(); });
$("pos").addEventListener("input", () => { S.pos = +$("pos").value; drawPositions(); });
$("permute").addEventListener("click", () => { S.perm = shuffle(); render(); });
$("order").addEventListener("click", () => { S.perm = null; render(); });
$("maps").addEventListener("mouseleave", () => { S.hover = null; drawMaps(); });
loadModel(0);
if (DATA.images.length) loadImage(0); else $("image").value = -1;
render();
"""

STYLE = """
body{font:14px system-ui,sans-serif;margin:12px 16px;color:#222}
h1{font-size:20px;margin:0 0 8px} .row{display:flex;gap:24px;align-items:flex-start}
.controls{width:300px}.controls label{display:block;margin:4px 0} #config{font:12px monospace;color:#555;margin:4px 0 8px}
#digit{border:1px solid #999;cursor:crosshair} canvas.map{border:1px solid #ccc;cursor:pointer;display:block}
.layer{display:flex;gap:6px;align-items:center;margin-bottom:4px} .lname{writing-mode:vertical-rl;font-size:12px;color:#555}
figure{margin:0} figcaption{font-size:11px;text-align:center;color:#555}
.bar{display:flex;align-items:center;gap:6px;font:12px monospace;height:16px}
.bl{width:110px;text-align:right;white-space:nowrap} .bt{width:140px;height:10px;background:#eee} .bf{display:block;height:10px;background:#5b8fd6}
.best .bf{background:#e65c00} .note{font-size:12px;color:#555;max-width:260px}
h3{font-size:14px;margin:10px 0 4px} #posview,#posvec{border:1px solid #ccc;display:block}
"""


def page_model(exported: dict[str, Any], name: str) -> dict[str, Any]:
    """An exported model as the page carries it: named, without the run's absolute paths."""
    model = {k: v for k, v in exported.items() if k != "source"}
    model["config"] = {k: v for k, v in exported["config"].items()
                       if k != "run.dir" and not (isinstance(v, str) and v.startswith("/"))}
    model["name"] = name
    return model


# Inside <script> the HTML parser still reads `<!--`, `<script` and `</script`: a run named `<!--<script>` put it
# in the "double-escaped" state and the page went blank. JSON's \u003c escapes say the same characters to JSON.parse.
SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                             "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _script_json(value: Any) -> str:
    """`value` as JSON that holds no character the HTML parser acts on inside a <script> block."""
    return json.dumps(value, separators=(",", ":")).translate(SCRIPT_SAFE)


def build_page(models: list[dict], images: list[dict], mean: float, std: float) -> str:
    """The page's HTML: `models` as page_model returns them, `images` as images.mnist_test_images does."""
    data = {"mean": mean, "std": std, "images": images}
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ablate explore</title>
<link rel="icon" href="data:,"><style>{STYLE}</style></head>
<body><h1>ablate explore: trained models, run in this page</h1>
<div class="row">
<div class="controls">
<label>model <select id="model"></select></label><div id="config"></div>
<label>image <select id="image"></select></label>
<canvas id="digit" width="224" height="224" title="draw here"></canvas><br>
<button id="clear">clear</button> <button id="permute">permute rows</button> <button id="order">restore order</button>
<div id="permstate" class="note"></div>
<label>&tau; <input id="tau" type="range" min="0.1" max="5" step="0.05" value="1"> <span id="tauval"></span></label>
<label><input id="sqrtdk" type="checkbox" checked> scale scores by 1/&radic;d<sub>k</sub></label>
<label><input id="pe" type="checkbox" checked> positional encoding (<span id="pename"></span>)</label>
<p class="note">Click a head to mask it (its output is zeroed before W<sub>O</sub>); move the mouse over a map to
highlight that query row and the image row it reads. Everything is computed here, from the trained weights.</p>
<div id="masked" class="note"></div>
</div>
<div><p id="pred"></p><div id="probs"></div><h3>residual-stream norm (mean over tokens)</h3><div id="norms"></div>
<h3>token cosine (mean over pairs of tokens)</h3><div id="cosine"></div>
<h3>positions (<span id="posname2"></span>)</h3><canvas id="posview" width="300" height="150"></canvas>
<canvas id="posvec" width="300" height="12" title="the selected position's vector"></canvas>
<label><input id="pos" type="range" min="0" max="27" step="1" value="0"> <span id="posval"></span></label>
<div id="posnote" class="note"></div></div>
<div><h3>attention: query row &times; key column, every layer and head</h3><div id="maps"></div></div>
</div>
<script type="application/json" id="models">{_script_json(models)}</script>
<script type="application/json" id="images">{_script_json(data)}</script>
<script>{FORWARD_JS.read_text()}</script>
<script>{UI}</script>
</body></html>
"""
