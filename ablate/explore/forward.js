/*
 * ablate's encoder, forward pass only, in plain JavaScript: the explorer page runs the trained model
 * itself, not an approximation of it. It computes what ablate/models computes in model.eval():
 *
 *   input embedding   MNIST rows: Linear(in_features, d) (RowEmbedding); token tasks: the embedding table
 *   pooling           mean over tokens, or a learned [CLS] token prepended and read out (ClsPool)
 *   positions         none | sinusoidal | learned (added to the input) | rope (q, k rotated) |
 *                     alibi (-m_h |i - j| added to the scaled scores, not divided by tau)
 *   attention         softmax(Q K^T * scale [+ bias] [+ causal mask]) V per head,
 *                     scale = (1/sqrt(d_head) if qk_scale else 1) / tau
 *   sub-layers        norm pre: x + f(LN(x)); post: LN(x + f(x)); none: x + f(x); residual off drops x
 *   FFN               Linear(d, ffn) -> relu | gelu (exact, erf) -> Linear(ffn, d); absent when ffn_mult=0
 *   final norm        LayerNorm after the last block with norm=pre; then pooling and the head
 *
 * and, at inference on the same weights, the explorer's overrides: tau, sqrt(d_k) on/off, heads masked
 * (a masked head's output is zeroed before W_O, as ablate.probes.heads does), one head's W_Q, W_K, W_V
 * scaled (options.project = {layer, head, q, k, v}: each factor multiplies that projection's weights and bias),
 * positional encoding off
 * (the model run as pos_enc=none) and the input rows (tokens) permuted.
 *
 * Why no library: the page must open offline from a single file, with no server and no CDN. A tensor
 * library (TensorFlow.js, ONNX Runtime Web) would be megabytes inlined into the page to run a model of
 * ~100k parameters, and would not hand back the attention maps and residual-stream norms the page draws.
 * This file is a few hundred lines, has no dependencies, and is tested against PyTorch to 1e-4
 * (tests/test_explore.py, under node).
 *
 * Weights come as float32 or float16 (decoded exactly); arithmetic is in float64; PyTorch computes in float32, so results agree to ~1e-6.
 *
 * Use: AblateForward.load(exported) once (decodes the weights), then
 *      AblateForward.forward(model, input, options) -> {logits, attention, residualNorms, hiddenStates, hidden}
 *   input    classify: T rows of in_features numbers (normalised pixels); tokens: T token ids
 *   options  {temperature, qkScale, headMask: [[layer, head], ...], posEnc: false, permute: [T indices],
 *             trace: true}
 *   logits   classify: n_classes numbers; tokens: T rows of n_out numbers
 *   attention[layer][head] a (T', T') matrix (T' = T + 1 with a [CLS] token), post-softmax
 *   residualNorms[l]  the L2 norm of every token's hidden state: l = 0 after the embedding (and input
 *                     positions), l = i + 1 after block i
 *   streamNorms[l]    the same before the block's last norm: x + f(x) ahead of a Post-LN LayerNorm, which
 *                     rescales every token to about √d_model (Pre-LN and no norm: residualNorms itself)
 *   hiddenStates[l]   those hidden states themselves, (T', d) each (before a Pre-LN model's final norm)
 *   hidden            the tokens after the final norm, (T', d)
 *   layerLogits[l]    classify: the model's readout (final norm, pooling, head) of hiddenStates[l], the logit
 *                     lens; the last equals logits
 *   trace             with options.trace only, per layer: heads[h] = {q, k, v (T', d_head; after RoPE),
 *                     raw (q_i . k_j), scaled (raw * scale [+ ALiBi bias]: the softmax's input), scale},
 *                     attnNorm / ffnNorm = {name, input, output} (each sub-layer's LayerNorm; null with
 *                     norm=none), ffnHidden (T', ffn_dim: the FFN's activations) and ffnInput (T', d: what
 *                     the FFN reads)
 *
 * and, for the page's views: meanTokenCosine(h) (ablate.probes' `cosine`: the mean cosine over the pairs of
 * distinct tokens, Dong et al. 2021), sinusoidal(T, d) (the added table) and ropeAngles(T, hs) (the angle
 * pos * 10000^(-2i/hs) each pair i of q and k is rotated by).
 */
(function (root, factory) {
  const api = factory();
  if (typeof module === "object" && module.exports) module.exports = api;
  else root.AblateForward = api;
})(typeof self !== "undefined" ? self : this, function () {
  "use strict";

  const EPS = 1e-5; // nn.LayerNorm's default

  // What this forward pass computes, per model.* key: "any" (a size or a number it reads), or the values it
  // computes as ablate/models computes them. A key not listed is computed at its default only (a toggle
  // added to the model is refused here until this file computes it). `ablate explore` reads this block
  // (JSON between the two markers) and refuses any other value in one line; tests/test_explore.py builds a
  // model for every value of every model key and compares this forward pass with PyTorch's.
  // SUPPORTS-BEGIN
  const SUPPORTS = {
    "d_model": "any", "n_heads": "any", "d_head": "any", "n_layers": "any", "ffn_mult": "any",
    "temperature": "any", "max_len": "any", "learned_std": "any", "dropout": "any", "init": "any",
    "activation": ["relu", "gelu", "identity"],
    "qk_scale": [true, false],
    "residual": [true, false],
    "norm": ["pre", "post", "none"],
    "pos_enc": ["none", "sinusoidal", "learned", "rope", "alibi"],
    "causal": [true, false],
    "qkv_tie": ["none", "kv", "qk"]
  };
  // SUPPORTS-END
  // model.qkv_tie: the row block of qkv that W_Q, W_K, W_V read (ablate/models/attention.py TIES)
  const TIES = { none: [0, 1, 2], kv: [0, 1, 1], qk: [0, 0, 1] };

  function bytesOf(b64) {
    if (typeof Buffer !== "undefined") {
      const buf = Buffer.from(b64, "base64");
      return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength).slice();
    }
    const bin = atob(b64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return bytes;
  }

  /** IEEE 754 half (binary16) bits -> number: exact, every float16 is a float32. */
  function half(h) {
    const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
    if (e === 0) return s * f * Math.pow(2, -24); // subnormal
    if (e === 31) return f ? NaN : s * Infinity;
    return s * (1 + f / 1024) * Math.pow(2, e - 15);
  }

  /** base64 of little-endian float32 (dtype "float32", the default) or float16 (dtype "float16") -> Float32Array. */
  function decode(b64, dtype) {
    const bytes = bytesOf(b64), view = new DataView(bytes.buffer);
    if (dtype === "float16") {
      const out = new Float32Array(bytes.byteLength / 2);
      for (let i = 0; i < out.length; i++) out[i] = half(view.getUint16(2 * i, true));
      return out;
    }
    const out = new Float32Array(bytes.byteLength / 4);
    for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(4 * i, true); // little-endian
    return out;
  }

  /** The exported dict with its weights decoded: model.w[name] = {shape, data: Float32Array}. */
  function load(exported) {
    if (exported.format !== "ablate-explore-model") throw new Error("not an ablate explorer model");
    const w = {};
    for (const [name, t] of Object.entries(exported.weights)) {
      const data = decode(t.b64, t.dtype);
      const n = t.shape.reduce((a, b) => a * b, 1);
      if (data.length !== n) throw new Error(`weight ${name}: ${data.length} numbers for shape ${t.shape}`);
      w[name] = { shape: t.shape, data };
    }
    return Object.assign({}, exported, { w });
  }

  // ---- small dense helpers: a matrix is an array of rows (Float64Array) ----

  /** x (T, in) -> x W^T + b with W (out, in) row-major, as nn.Linear. */
  function linear(x, W, b) {
    const [out, inp] = W.shape;
    const y = [];
    for (const row of x) {
      const r = new Float64Array(out);
      for (let o = 0; o < out; o++) {
        let s = b ? b.data[o] : 0;
        const off = o * inp;
        for (let i = 0; i < inp; i++) s += W.data[off + i] * row[i];
        r[o] = s;
      }
      y.push(r);
    }
    return y;
  }

  function layerNorm(x, g, b) {
    return x.map((row) => {
      const n = row.length;
      let mean = 0;
      for (const v of row) mean += v;
      mean /= n;
      let variance = 0;
      for (const v of row) variance += (v - mean) * (v - mean);
      variance /= n; // biased, as nn.LayerNorm
      const inv = 1 / Math.sqrt(variance + EPS);
      const r = new Float64Array(n);
      for (let i = 0; i < n; i++) r[i] = (row[i] - mean) * inv * g.data[i] + b.data[i];
      return r;
    });
  }

  function add(a, b) {
    return a.map((row, t) => row.map((v, i) => v + b[t][i]));
  }

  /** erf to ~1e-15: Abramowitz-Stegun 7.1.5's series for |x| < 3, Lentz's continued fraction beyond. */
  function erf(x) {
    const ax = Math.abs(x);
    if (ax < 3) {
      let term = ax, sum = ax;
      for (let n = 1; n < 200; n++) {
        term *= (-ax * ax) / n;
        const next = term / (2 * n + 1);
        sum += next;
        if (Math.abs(next) < 1e-17 * Math.abs(sum)) break;
      }
      return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * sum;
    }
    // erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + 1/2/(x + 1/(x + 3/2/(x + ...)))) for large x
    let f = ax;
    for (let k = 60; k >= 1; k--) f = ax + (k / 2) / f;
    const erfc = Math.exp(-ax * ax) / Math.sqrt(Math.PI) / f;
    return Math.sign(x) * (1 - erfc);
  }

  const ACTIVATIONS = {
    relu: (v) => (v > 0 ? v : 0),
    gelu: (v) => 0.5 * v * (1 + erf(v / Math.SQRT2)), // nn.GELU(), approximate='none'
    identity: (v) => v, // a linear FFN: nothing folds
  };

  // ---- positions ----

  /** PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...) (Vaswani et al. 2017). */
  function sinusoidal(T, d) {
    const table = [];
    for (let pos = 0; pos < T; pos++) {
      const r = new Float64Array(d);
      for (let i = 0; 2 * i < d; i++) {
        const angle = pos * Math.exp(2 * i * (-Math.log(10000) / d));
        r[2 * i] = Math.sin(angle);
        if (2 * i + 1 < d) r[2 * i + 1] = Math.cos(angle);
      }
      table.push(r);
    }
    return table;
  }

  /** theta[pos][i] = pos * 10000^(-2i/hs), (T, hs/2): RoPE's rotation angles (ablate.models.positional.rope_angles). */
  function ropeAngles(T, hs) {
    const angles = [];
    for (let pos = 0; pos < T; pos++) {
      const r = new Float64Array(hs >> 1);
      for (let i = 0; 2 * i < hs; i++) r[i] = pos * Math.pow(10000, -(2 * i) / hs);
      angles.push(r);
    }
    return angles;
  }

  /** Rotate each pair (x_{2i}, x_{2i+1}) of a (T, hs) matrix by pos * 10000^(-2i/hs) (Su et al. 2021). */
  function rope(x) {
    const hs = x[0].length;
    return x.map((row, pos) => {
      const r = new Float64Array(hs);
      for (let i = 0; 2 * i < hs; i++) {
        const angle = pos * Math.pow(10000, -(2 * i) / hs);
        const c = Math.cos(angle), s = Math.sin(angle);
        const x1 = row[2 * i], x2 = row[2 * i + 1];
        r[2 * i] = x1 * c - x2 * s;
        r[2 * i + 1] = x1 * s + x2 * c;
      }
      return r;
    });
  }

  /** ALiBi slopes as Press et al.'s reference code computes them (ablate.models.positional.alibi_slopes). */
  function alibiSlopes(H) {
    if ((H & (H - 1)) === 0) return Array.from({ length: H }, (_, h) => Math.pow(2, (-8 * (h + 1)) / H));
    const p = Math.pow(2, Math.floor(Math.log2(H)));
    return alibiSlopes(p).concat(alibiSlopes(2 * p).filter((_, i) => i % 2 === 0).slice(0, H - p));
  }

  // ---- the encoder ----

  function attention(x, w, prefix, cfg, opts, layer) {
    const T = x.length, H = cfg.n_heads, hs = cfg.head_dim, inner = H * hs;
    const qkv = linear(x, w[prefix + "qkv.weight"], w[prefix + "qkv.bias"]); // (T, 3*inner): [Q; K; V], heads contiguous
    const blocks = TIES[cfg.qkv_tie || "none"]; // with a tie two of Q, K, V read one block of (T, 2*inner)
    const scale = (cfg.qk_scale ? 1 / Math.sqrt(hs) : 1) / cfg.temperature;
    const slopes = cfg.pos_enc === "alibi" ? alibiSlopes(H) : null;
    const merged = x.map(() => new Float64Array(inner));
    const maps = [], heads = [];
    for (let h = 0; h < H; h++) {
      const part = (which) => qkv.map((row) => row.slice(which * inner + h * hs, which * inner + (h + 1) * hs));
      let q = part(blocks[0]), k = part(blocks[1]), v = part(blocks[2]);
      const p = opts.project && opts.project.layer === layer && opts.project.head === h ? opts.project : null;
      if (p) { // demo 2: this head's W_Q, W_K, W_V (and biases) scaled: q, k, v scale with them
        const times = (m, f) => m.map((row) => row.map((a) => a * f));
        q = times(q, p.q); k = times(k, p.k); v = times(v, p.v);
      }
      if (cfg.pos_enc === "rope") { q = rope(q); k = rope(k); }
      const A = [], raw = [], scaled = [];
      for (let i = 0; i < T; i++) {
        const s = new Float64Array(T), r = new Float64Array(T);
        let max = -Infinity;
        for (let j = 0; j < T; j++) {
          if (cfg.causal && j > i) { s[j] = -Infinity; r[j] = NaN; continue; }
          let dot = 0;
          for (let c = 0; c < hs; c++) dot += q[i][c] * k[j][c];
          r[j] = dot;
          s[j] = dot * scale + (slopes ? -slopes[h] * Math.abs(i - j) : 0);
          if (s[j] > max) max = s[j];
        }
        if (opts.trace) { raw.push(Array.from(r)); scaled.push(Array.from(s)); }
        let sum = 0;
        for (let j = 0; j < T; j++) { s[j] = s[j] === -Infinity ? 0 : Math.exp(s[j] - max); sum += s[j]; }
        for (let j = 0; j < T; j++) s[j] /= sum;
        A.push(s);
      }
      maps.push(A);
      if (opts.trace) heads.push({ q: q.map((row) => Array.from(row)), k: k.map((row) => Array.from(row)),
                                   v: v.map((row) => Array.from(row)), raw, scaled, scale });
      if (opts.masked.has(`${layer},${h}`)) continue; // the head's output stays zero before W_O
      for (let i = 0; i < T; i++) {
        for (let c = 0; c < hs; c++) {
          let y = 0;
          for (let j = 0; j < T; j++) y += A[i][j] * v[j][c];
          merged[i][h * hs + c] = y;
        }
      }
    }
    return { y: linear(merged, w[prefix + "out.weight"], w[prefix + "out.bias"]), maps, heads };
  }

  function feedForward(x, w, prefix, cfg) {
    const act = ACTIVATIONS[cfg.activation];
    const hidden = linear(x, w[prefix + "fc1.weight"], w[prefix + "fc1.bias"]).map((row) => row.map(act));
    return { y: linear(hidden, w[prefix + "fc2.weight"], w[prefix + "fc2.bias"]), hidden };
  }

  /** x -> post_norm(skip(x) + f(pre_norm(x))), as ablate.models.block.SubLayer in eval. */
  function subLayer(x, w, prefix, cfg, f) {
    const inp = cfg.norm === "pre" ? layerNorm(x, w[prefix + "pre_norm.weight"], w[prefix + "pre_norm.bias"]) : x;
    const out = f(inp);
    const y = cfg.residual ? add(x, out.y) : out.y;
    const z = cfg.norm === "post" ? layerNorm(y, w[prefix + "post_norm.weight"], w[prefix + "post_norm.bias"]) : y;
    // the sub-layer's LayerNorm: what it read and what it wrote (Pre-LN: x -> LN(x); Post-LN: x + f(x) -> z)
    const norm = cfg.norm === "pre" ? { name: prefix + "pre_norm", input: x, output: inp }
      : cfg.norm === "post" ? { name: prefix + "post_norm", input: y, output: z } : null;
    return { x: z, sum: y, input: inp, maps: out.maps, heads: out.heads, hidden: out.hidden, norm };
  }

  /** The model's own readout (pooling, then the head; a Pre-LN model's final norm first) applied to every
   *  layer's hidden state h (T', d): the logit lens (nostalgebraist 2020). The last layer's is the model's logits. */
  function readout(model, h, cfg) {
    const w = model.w;
    if (cfg.norm === "pre") h = layerNorm(h, w["encoder.final_norm.weight"], w["encoder.final_norm.bias"]);
    let pooled;
    if (model.pooling === "cls") pooled = h[0];
    else {
      pooled = new Float64Array(cfg.d_model);
      for (const row of h) for (let i = 0; i < cfg.d_model; i++) pooled[i] += row[i] / h.length;
    }
    return Array.from(linear([pooled], w["head.weight"], w["head.bias"])[0]);
  }

  function norms(x) {
    return x.map((row) => Math.sqrt(row.reduce((s, v) => s + v * v, 0)));
  }

  /** Mean cosine over the T(T-1) ordered pairs of distinct rows of h (T, d), as ablate.probes.mean_token_cosine
   *  (a zero row counts as cosine 0, as F.normalize makes it); NaN for fewer than two rows. */
  function meanTokenCosine(h) {
    const T = h.length;
    if (T < 2) return NaN;
    const u = h.map((row) => {
      const n = Math.max(Math.sqrt(row.reduce((s, v) => s + v * v, 0)), 1e-12);
      return row.map((v) => v / n);
    });
    let sum = 0;
    for (let i = 0; i < T; i++) for (let j = 0; j < T; j++) {
      if (i === j) continue;
      let dot = 0;
      for (let c = 0; c < u[i].length; c++) dot += u[i][c] * u[j][c];
      sum += dot;
    }
    return sum / (T * (T - 1));
  }

  function options(model, opts) {
    opts = opts || {};
    const cfg = Object.assign({}, model.model);
    if (opts.temperature !== undefined) cfg.temperature = opts.temperature;
    if (opts.qkScale !== undefined) cfg.qk_scale = !!opts.qkScale;
    if (opts.posEnc === false) cfg.pos_enc = "none";
    const masked = new Set((opts.headMask || []).map(([l, h]) => `${l},${h}`));
    return { cfg, masked, permute: opts.permute || null, trace: !!opts.trace, project: opts.project || null };
  }

  function forward(model, input, opts) {
    if (!model.w) throw new Error("load(exported) the model first");
    const w = model.w, o = options(model, opts), cfg = o.cfg;
    if (o.permute) input = o.permute.map((i) => input[i]);
    let x = model.kind === "classify"
      ? linear(input.map((row) => Float64Array.from(row)), w["embed.weight"], w["embed.bias"])
      : input.map((t) => Float64Array.from(w["embed.weight"].data.subarray(t * cfg.d_model, (t + 1) * cfg.d_model)));
    const cls = model.kind === "classify" && model.pooling === "cls";
    if (cls) x.unshift(Float64Array.from(w["pool.token"].data));
    const T = x.length;
    if (cfg.pos_enc === "sinusoidal") x = add(x, sinusoidal(T, cfg.d_model));
    if (cfg.pos_enc === "learned") {
      if (T > cfg.max_len) throw new Error(`sequence length ${T} exceeds the learned table (max_len=${cfg.max_len})`);
      const table = w["encoder.pos_enc.weight"].data;
      x = x.map((row, t) => row.map((v, i) => v + table[t * cfg.d_model + i]));
    }
    const attentionMaps = [], residualNorms = [norms(x)], streamNorms = [norms(x)], hiddenStates = [x], layers = [];
    const rows = (m) => m.map((row) => Array.from(row));
    for (let l = 0; l < cfg.n_layers; l++) {
      const p = `encoder.blocks.${l}.`;
      const a = subLayer(x, w, p + "attn.", cfg, (h) => attention(h, w, p + "attn.fn.", cfg, o, l));
      x = a.x;
      attentionMaps.push(a.maps);
      let f = null;
      if (cfg.ffn_dim > 0) {
        f = subLayer(x, w, p + "ffn.", cfg, (h) => feedForward(h, w, p + "ffn.fn.", cfg));
        x = f.x;
      }
      residualNorms.push(norms(x));
      streamNorms.push(norms((f || a).sum));  // before a Post-LN norm rescales it
      hiddenStates.push(x);
      if (o.trace) {
        const norm = (n) => n && { name: n.name, input: rows(n.input), output: rows(n.output) };
        layers.push({ heads: a.heads, attnNorm: norm(a.norm), ffnNorm: f && norm(f.norm),
                      ffnHidden: f ? rows(f.hidden) : null, ffnInput: f ? rows(f.input) : null });
      }
    }
    const layerLogits = model.kind === "classify" ? hiddenStates.map((h) => readout(model, h, cfg)) : null;
    if (cfg.norm === "pre") x = layerNorm(x, w["encoder.final_norm.weight"], w["encoder.final_norm.bias"]);
    let logits;
    if (model.kind === "classify") {
      let pooled;
      if (cls) pooled = x[0];
      else {
        pooled = new Float64Array(cfg.d_model);
        for (const row of x) for (let i = 0; i < cfg.d_model; i++) pooled[i] += row[i] / T;
      }
      logits = Array.from(linear([pooled], w["head.weight"], w["head.bias"])[0]);
    } else {
      logits = linear(x, w["head.weight"], w["head.bias"]).map((row) => Array.from(row));
    }
    return {
      logits,
      attention: attentionMaps.map((layer) => layer.map((A) => A.map((row) => Array.from(row)))),
      residualNorms,
      streamNorms,
      hiddenStates: hiddenStates.map((h) => h.map((row) => Array.from(row))),
      hidden: x.map((row) => Array.from(row)),
      layerLogits,
      trace: o.trace ? { layers } : null,
    };
  }

  /**
   * Demo 8, the FFN folding a plane: the points centre + a·u + b·v (`coords`: [a, b] pairs) carried through layer
   * `layer`'s trained FFN, as feedForward computes it, and through its linear part alone (the activation taken
   * out: W2 (W1 p + b1) + b2, one affine map). Returns {linear, folded, pre}: the two outputs and the
   * pre-activations W1 p + b1, one row per point.
   */
  function foldPlane(model, layer, centre, u, v, coords, full = 4) {
    // The plane's points are centre + a u + b v, and fc1 and fc2 are affine maps: fc1's pre-activations at (a, b)
    // are p0 + a (p_u - p0) + b (p_v - p0) from three evaluations, and so are the linear part's outputs. The page
    // draws every output in the plane the linear part spans (orthonormal b1, b2 from its images of u and v), so the
    // folded points need only two dot products with W2ᵀb1 and W2ᵀb2, not all of fc2. Returned: `view` (every
    // point's 2-D coordinates, linear and folded) and, for the first `full` coordinates, the whole vectors
    // (`linear`, `folded`, `pre`), which the tests compare with PyTorch.
    const w = model.w, prefix = `encoder.blocks.${layer}.ffn.fn.`, act = ACTIVATIONS[model.model.activation];
    const W1 = w[prefix + "fc1.weight"], B1 = w[prefix + "fc1.bias"], W2 = w[prefix + "fc2.weight"], B2 = w[prefix + "fc2.bias"];
    const corners = [Float64Array.from(centre), Float64Array.from(centre, (c, i) => c + u[i]),
      Float64Array.from(centre, (c, i) => c + v[i])];
    const affine = ([o, pu, pv]) => {
      const du = pu.map((x, i) => x - o[i]), dv = pv.map((x, i) => x - o[i]), n = o.length;
      return ([a, b]) => { const r = new Float64Array(n); for (let i = 0; i < n; i++) r[i] = o[i] + a * du[i] + b * dv[i]; return r; };
    };
    const dot = (a, b) => { let t = 0; for (let i = 0; i < a.length; i++) t += a[i] * b[i]; return t; };
    const preCorners = linear(corners, W1, B1), preAt = affine(preCorners), linearAt = affine(linear(preCorners, W2, B2));
    const L0 = linearAt([0, 0]), e1 = linearAt([1, 0]).map((x, i) => x - L0[i]);
    const b1 = e1.map((x) => x / (Math.hypot(...e1) || 1));
    let e2 = linearAt([0, 1]).map((x, i) => x - L0[i]);
    const c12 = dot(e2, b1); e2 = e2.map((x, i) => x - c12 * b1[i]);
    const b2 = e2.map((x) => x / (Math.hypot(...e2) || 1));
    const [out, inp] = W2.shape, back = (b) => { // W2ᵀ b
      const r = new Float64Array(inp);
      for (let o = 0; o < out; o++) for (let i = 0; i < inp; i++) r[i] += W2.data[o * inp + i] * b[o];
      return r;
    };
    const P1 = back(b1), P2 = back(b2), shift = Float64Array.from(B2.data, (x, o) => x - L0[o]);
    const k1 = dot(shift, b1), k2 = dot(shift, b2);
    const pre = coords.slice(0, full).map((c) => Array.from(preAt(c)));
    const hidden = coords.map((c) => { const row = preAt(c); for (let i = 0; i < row.length; i++) row[i] = act(row[i]); return row; });
    const view = {
      linear: coords.map((c) => { const q = linearAt(c).map((x, i) => x - L0[i]); return [dot(q, b1), dot(q, b2)]; }),
      folded: hidden.map((h) => [dot(h, P1) + k1, dot(h, P2) + k2]),
    };
    const first = coords.slice(0, full);
    return { view, linear: first.map((c) => Array.from(linearAt(c))),
      folded: linear(hidden.slice(0, full), W2, B2).map((row) => Array.from(row)),
      pre };
  }

  return { load, forward, decode, half, erf, sinusoidal, ropeAngles, meanTokenCosine, alibiSlopes, layerNorm,
    foldPlane, SUPPORTS };
});
