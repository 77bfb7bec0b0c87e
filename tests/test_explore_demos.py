"""The explorer's nine demos in a real browser (Playwright driving the system's Chromium, network blocked), on
one page of random-init models named as the shipped ones (built once for this module): each demo's control
changes what it should, and each new view equals PyTorch to 1e-4: q, k, v, the raw and scaled scores and the
softmax (demo 2), the row entropy (3), the residual stream of a pair side by side (6), LayerNorm's input and
output, dragged too (7), the FFN's activations (8) and the per-layer readout (9); the language switch changes
every label; at 390 px wide with touch the page reflows and a finger draws, drags and masks.

Without Chromium (or Playwright) these tests skip, saying how to get it; with ABLATE_REQUIRE_BROWSER=1
(.ci/run sets it) that is a failure instead."""

from __future__ import annotations

import copy
import json
import math
import re

import pytest
import torch
import torch.nn.functional as F

from ablate import config as C
from ablate.explore.export import export_model
from ablate.explore.images import normalisation
from ablate.explore.page import build_page, page_model
from ablate.explore.shipped import SHIPPED
from ablate.models import SequenceClassifier
from ablate.probes.common import blocks_of
from ablate.probes.heads import masked_heads
from tests import browser_gate
from tests.browser_gate import browser_type_launch_args, gate, open_tab  # noqa: F401 (a fixture)

TOL = 1e-4
pytestmark = gate()
desk, page = browser_gate.desk, browser_gate.page  # the desktop tab on this module's `built` page, reloaded per test

# the shipped models the demos pick by name; residual-8/no-residual-8 at 3 layers keep the test quick
NAMES = ["tutorial", "heads-1", "heads-2", "heads-8", "sinusoidal", "pre-ln", "residual-8", "no-residual-8",
         "ffn-1", "ffn-8", "rope"]
SHALLOW = {"residual-8": {"model.n_layers": 3}, "no-residual-8": {"model.n_layers": 3}}
ACCURACY = {"tutorial": 0.921, "heads-1": 0.873}  # written into the runs' summary.json: the page shows them


def _run(root, name: str, seed: int):
    overrides = {"tracking": "none", "budget": "quick", "run.probes": "false",
                 **C.parse_overrides(SHIPPED[name]), **SHALLOW.get(name, {})}
    cfg = C.build(overrides, machine=False)
    torch.manual_seed(seed)
    model = SequenceClassifier(cfg.encoder, 28, 10, cfg.pooling)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    run = root / name
    run.mkdir()
    torch.save({"state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}, "global_step": 7,
                "hyper_parameters": {"config": C.to_dict(cfg), "in_features": 28, "n_classes": 10}}, run / "last.ckpt")
    if name in ACCURACY:
        (run / "summary.json").write_text(json.dumps({"status": "completed",
                                                      "metrics": {"test/acc": ACCURACY[name], "test/acc_perm": 0.25}}))
    return cfg, model.eval()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The page of NAMES (float32 weights: compared with PyTorch to 1e-4) and three images, built once."""
    root = tmp_path_factory.mktemp("demos")
    runs = {name: _run(root, name, seed=20 + i) for i, name in enumerate(NAMES)}
    g = torch.Generator().manual_seed(5)
    images = [{"index": i, "label": i, "pixels": (torch.rand(784, generator=g) ** 4 * 255).round().int().tolist()}
              for i in range(3)]
    mean, std = normalisation()
    html = root / "explorer.html"
    html.write_text(build_page([page_model(export_model(root / n), n) for n in NAMES], images, mean, std))
    return {"html": html, "runs": runs, "images": images, "mean": mean, "std": std}


def _x(built, i: int = 1) -> torch.Tensor:
    pixels = torch.tensor(built["images"][i]["pixels"], dtype=torch.float32).reshape(28, 28)
    return (pixels / 255 - built["mean"]) / built["std"]


def _pick(page, name: str, section: str):
    page.click(f"{section} button.pick[data-pick='{name}']")
    assert page.evaluate("window.ablateExplorer.state.model") == NAMES.index(name)


def _query(page, q: int):
    page.focus("#query")
    page.keyboard.press("Home")
    for _ in range(q):
        page.keyboard.press("ArrowRight")
    assert page.evaluate("window.ablateExplorer.state.query") == q


def _view(page, name: str):
    return page.evaluate(f"window.ablateExplorer.views.{name}")


def _diff(a, b) -> float:
    return (torch.as_tensor(a, dtype=torch.float64) - torch.as_tensor(b).double()).abs().max().item()


def _torch_trace(model, x):
    """PyTorch's intermediate values, by hooks on the model's public parts: every block's attention input,
    every LayerNorm's input and output (the attention sub-layer's, then the FFN's), the FFN's activations."""
    found, handles = {}, []
    for i, block in enumerate(blocks_of(model)):
        handles.append(block.attention.register_forward_pre_hook(lambda m, a, i=i: found.__setitem__(("attn", i), a[0])))
        for n, norm in enumerate(block.norms):
            handles.append(norm.register_forward_hook(
                lambda m, a, o, i=i, n=n: found.__setitem__(("norm", i, n), (a[0], o))))
        if block.feed_forward is not None:
            handles.append(block.feed_forward.act.register_forward_hook(
                lambda m, a, o, i=i: found.__setitem__(("ffn", i), o)))
        handles.append(block.register_forward_hook(lambda m, a, o, i=i: found.__setitem__(("out", i), o[0])))
    handles.append(blocks_of(model)[0].register_forward_pre_hook(lambda m, a: found.__setitem__("in", a[0])))
    try:
        with torch.no_grad():
            found["logits"] = model(x[None])[0]
    finally:
        for h in handles:
            h.remove()
    return found


def test_the_digit_is_drawn_by_keyboard_as_by_pointer(page):
    """Arrows move the pen, Space or Enter paints, Shift + an arrow paints as it moves: the same cells
    clicked with the mouse give the same pixels, and the blue pen is shown only while the canvas has focus."""
    pixels = "Array.from(window.ablateExplorer.state.pixels)"
    page.click("#clear")
    page.focus("#digit")
    page.keyboard.press("Space")  # the pen starts at row 14, column 14
    for _ in range(3):
        page.keyboard.press("Shift+ArrowRight")  # a stroke to column 17
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")  # moved without painting
    page.keyboard.press("Enter")  # row 12, column 17
    keyboard = page.evaluate(pixels)
    grid = [keyboard[r * 28:(r + 1) * 28] for r in range(28)]
    assert [grid[14][c] for c in range(13, 19)] == [160, 255, 255, 255, 255, 160]
    assert grid[12][17] == 255 and grid[13][17] == 160 and grid[11][17] == 160 and grid[12][15] == 0
    assert sum(v > 0 for v in keyboard) == 3 * 6 + 3 * 3 - 3  # the stroke's 3 x 6 cells, the dot's 3 x 3 (3 shared)
    assert page.input_value("#image") == "-1" and page.evaluate("window.ablateExplorer.last.input") != [0] * 784
    # the pen's outline at row 12, column 17 (x = column)
    pen = "Array.from(document.getElementById('digit').getContext('2d').getImageData(17 * 8 + 1, 12 * 8 + 1, 1, 1).data)"
    assert page.evaluate(pen)[:3] == [0x1F, 0x6F, 0xD1]  # the pen, drawn while the canvas has focus
    page.focus("#clear")
    assert page.evaluate(pen)[:3] != [0x1F, 0x6F, 0xD1]

    page.click("#clear")
    box = page.locator("#digit").bounding_box()
    scale = box["width"] / 224
    for r, c in ((14, 14), (14, 15), (14, 16), (14, 17), (12, 17)):
        page.mouse.click(box["x"] + (c * 8 + 4) * scale, box["y"] + (r * 8 + 4) * scale)
    assert page.evaluate(pixels) == keyboard


# ---- demo 1: spotlight ----

def test_spotlight_paints_the_hovered_querys_attention_onto_the_rows(page, built):
    cfg, model = built["runs"]["tutorial"]
    page.select_option("#image", "1")
    box = page.locator("#spot").bounding_box()
    scale = box["height"] / 204
    page.mouse.move(box["x"] + 100 * scale, box["y"] + (4 + 9.5 * 7) * scale)  # row 9 of the spotlight
    view = _view(page, "spotlight")
    assert view["query"] == 9 and view["layer"] == 0
    with torch.no_grad():
        _, maps = model(_x(built)[None], return_attention=True)
    assert _diff(view["weights"], maps[0][0, 0, 9]) < TOL  # head 0 of layer 0
    page.select_option("#s1 .ctl-head", "-1")  # the mean of the heads
    assert _diff(_view(page, "spotlight")["weights"], maps[0][0, :, 9].mean(0)) < TOL
    page.select_option("#s1 .ctl-layer", "1")
    assert _diff(_view(page, "spotlight")["weights"], maps[1][0, :, 9].mean(0)) < TOL
    # the paint follows the weights: the row with the largest weight is drawn darker than the lightest's
    w = _view(page, "spotlight")["weights"]
    hi, lo = w.index(max(w)), w.index(min(w))
    bar = page.evaluate("""([hi, lo]) => { const ctx = document.getElementById('spot').getContext('2d');
        const px = (r) => ctx.getImageData(20 + 28 * 7 + 4 + 2, 4 + r * 7 + 3, 1, 1).data; return [px(hi)[0], px(lo)[0]]; }""",
                        [hi, lo])
    assert bar[0] < bar[1]


def test_permuted_rows_are_drawn_permuted_and_drawing_is_kept(page, built):
    page.select_option("#image", "1")
    read_row = """(r) => Array.from(document.getElementById('digit').getContext('2d')
                    .getImageData(4, r * 8 + 4, 216, 1).data).filter((_, i) => i % 32 === 0)"""
    upright = [page.evaluate(read_row, r) for r in range(28)]
    page.click("#permute")
    perm = page.evaluate("window.ablateExplorer.state.perm")
    assert sorted(perm) == list(range(28)) and perm != list(range(28))
    assert [page.evaluate(read_row, r) for r in range(28)] == [upright[perm[r]] for r in range(28)]
    page.click("#order")
    # a drawing survives choosing an image and "(drawn)" again
    page.click("#clear")
    box = page.locator("#digit").bounding_box()
    page.mouse.move(box["x"] + 100, box["y"] + 40)
    page.mouse.down()
    page.mouse.move(box["x"] + 110, box["y"] + 180, steps=10)
    page.mouse.up()
    drawn = page.evaluate("window.ablateExplorer.last.input")
    page.select_option("#image", "0")
    assert page.evaluate("window.ablateExplorer.last.input") != drawn
    page.select_option("#image", "-1")
    assert page.evaluate("window.ablateExplorer.last.input") == drawn
    # a permutation does not carry over to another model
    page.click("#permute")
    page.select_option("#model", "1")
    assert "permute" not in page.evaluate("window.ablateExplorer.last.options")
    assert page.text_content("#permstate") == "rows in order"


# ---- demo 2: q, k, v and the scores ----

def test_qkv_and_scores_equal_pytorch_under_the_controls(page, built):
    cfg, model = built["runs"]["tutorial"]
    page.select_option("#image", "1")
    _query(page, 5)
    page.select_option("#s2 .ctl-layer", "1")
    page.select_option("#s2 .ctl-head", "2")
    x = _x(built)
    results = {}
    for tau in (1.0, 0.5):
        if tau != 1.0:
            page.focus("#tau")
            for _ in range(10):
                page.keyboard.press("ArrowLeft")
        view = _view(page, "qkv")
        assert (view["layer"], view["head"], view["query"]) == (1, 2, 5)
        twin = SequenceClassifier(C.build({"tracking": "none", "budget": "quick", "run.probes": "false",
                                           **C.parse_overrides(SHIPPED["tutorial"]), "model.temperature": tau},
                                          machine=False).encoder, 28, 10, cfg.pooling)
        twin.load_state_dict(model.state_dict())
        found = _torch_trace(twin.eval(), x)
        attn = blocks_of(twin)[1].attention
        with torch.no_grad():
            q, k, v = attn.project(found["attn", 1])
            scaled = attn.logits(q, k)
        q, k, v, scaled = q[0, 2], k[0, 2], v[0, 2], scaled[0, 2]
        assert view["scale"] == pytest.approx(attn.scale)
        results[tau] = {"q": _diff(view["q"], q[5]), "k": _diff(view["k"], k[5]), "v": _diff(view["v"], v[5]),
                        "raw": _diff(view["raw"], q[5] @ k.T), "scaled": _diff(view["scaled"], scaled[5]),
                        "softmax": _diff(view["softmax"], scaled[5].softmax(-1))}
    print("demo 2, page - PyTorch:", {tau: {k: f"{v:.1e}" for k, v in r.items()} for tau, r in results.items()})
    assert max(max(r.values()) for r in results.values()) < TOL, results
    # the query slider moves the view to another token
    _query(page, 6)
    assert _view(page, "qkv")["query"] == 6


def _slide(page, sel: str, value: float):
    page.evaluate(f"(v) => {{ const el = document.querySelector('{sel}'); el.value = v; "
                  "el.dispatchEvent(new Event('input', {bubbles: true})); }", value)


def test_demo2_scales_a_heads_wq_wk_wv_as_scaling_pytorchs_weights(page, built):
    """Issue 40: the tutorial's demo 2, 「调整 Wq/Wk/Wv 看三张卡如何变化」. Each slider multiplies the chosen head's
    projection (weights and bias) in the trained model: the page's cards, scores and prediction equal PyTorch's
    with those rows of W_Q, W_K, W_V multiplied; W_K at 0 makes the row uniform; the reset restores the model."""
    cfg, model = built["runs"]["tutorial"]
    page.select_option("#image", "1")
    _query(page, 5)
    page.select_option("#s2 .ctl-layer", "1")
    page.select_option("#s2 .ctl-head", "2")
    base = _view(page, "qkv")
    x = _x(built)
    for factors in ({"q": 2.0, "k": 1.0, "v": 1.0}, {"q": 1.0, "k": 0.0, "v": 0.5}):
        for w, f in factors.items():
            _slide(page, f"#w{w}", f)
        view, last = _view(page, "qkv"), page.evaluate("window.ablateExplorer.last")
        assert view["project"] == factors
        twin = copy.deepcopy(model).eval()
        attn = blocks_of(twin)[1].attention
        hs = attn.d_head
        with torch.no_grad():
            for w, f in factors.items():
                for param, rows in attn.projections()[f"w{w}"]:
                    part = param[rows]
                    part[2 * hs:3 * hs] *= f  # head 2's rows of this projection
                    param[rows] = part
            logits = twin.eval()(x[None])[0]
        assert _diff(last["logits"], logits) < TOL
        assert _diff(view["q"], [factors["q"] * a for a in base["q"]]) < TOL
        if factors["k"] == 0:
            allowed = [s for s in view["softmax"] if s > 0]
            assert len(allowed) == len(view["softmax"]) and max(allowed) - min(allowed) < 1e-12  # uniform
        else:
            assert _diff(view["raw"], [2 * r for r in base["raw"]]) < TOL
        shown = page.text_content("#wqval")
        assert shown == f"× {factors['q']:.1f}"
    page.click("#wreset")
    assert _view(page, "qkv")["project"] == {"q": 1, "k": 1, "v": 1}
    assert _diff(_view(page, "qkv")["raw"], base["raw"]) < TOL


# ---- demo 3: tau and entropy ----

def test_tau_sharpens_rows_and_lowers_their_entropy(page, built):
    cfg, model = built["runs"]["tutorial"]
    page.select_option("#image", "1")
    before = _view(page, "entropy")
    with torch.no_grad():
        _, maps = model(_x(built)[None], return_attention=True)
    p = maps[0][0, 0].double()
    torch_rows = -(p * p.clamp_min(1e-300).log2()).sum(-1)
    print(f"demo 3, row entropy: {_diff(before['rows'], torch_rows):.1e}")
    assert _diff(before["rows"], torch_rows) < TOL and before["max"] == pytest.approx(math.log2(28))
    page.focus("#tau")
    for _ in range(16):
        page.keyboard.press("ArrowLeft")  # 1.00 -> 0.20
    after = _view(page, "entropy")
    assert page.text_content("#tauval") == "0.20"
    assert after["mean"] < before["mean"] - 0.1
    page.uncheck("#sqrtdk")
    assert _view(page, "entropy")["mean"] < after["mean"]
    assert "bits" in page.text_content("#entropy")
    # every map has a legend with ticks: the colour bar is drawn (not blank) and 0.25 is not the darkest colour
    darkest = page.evaluate("""() => { const c = document.getElementById('taulegend').getContext('2d');
        const x = (v) => Math.round(8 + Math.sqrt(v) * (c.canvas.width - 17));
        return [c.getImageData(x(0.25), 8, 1, 1).data[0], c.getImageData(x(0.96), 8, 1, 1).data[0]]; }""")
    assert darkest[0] > darkest[1] + 40


# ---- demo 4: switch h, mask heads by keyboard ----

def test_head_count_switch_and_keyboard_masking(page, built):
    page.select_option("#image", "1")
    for h, name in ((1, "heads-1"), (2, "heads-2"), (4, "tutorial"), (8, "heads-8")):
        _pick(page, name, "#s4")
        cfg, model = built["runs"][name]
        assert page.locator("canvas.map").count() == 2 * h
        assert page.get_attribute(f"#s4 button[data-pick='{name}']", "aria-pressed") == "true"
        d_head = page.text_content("#config tr[data-key='cfg.d_head'] td:last-child")
        assert d_head == str(64 // h) and cfg.model.head_dim == 64 // h
        with torch.no_grad():
            logits, maps = model(_x(built)[None], return_attention=True)
        last = page.evaluate("window.ablateExplorer.last")
        assert _diff(last["logits"], logits[0]) < TOL
    assert "92.1 %" in page.text_content("#s4 button[data-pick='tutorial']")  # its accuracy, from summary.json
    # heads-8: focus layer 1 head 5 with the keyboard and press Enter: masked, the logits move, as PyTorch says
    base = page.evaluate("window.ablateExplorer.last.logits")
    page.focus("canvas.map[data-layer='1'][data-head='5']")
    page.keyboard.press("Enter")
    last = page.evaluate("window.ablateExplorer.last")
    assert last["options"]["headMask"] == [[1, 5]]
    assert page.get_attribute("canvas.map[data-layer='1'][data-head='5']", "aria-pressed") == "true"
    _, model = built["runs"]["heads-8"]
    with torch.no_grad(), masked_heads(model, [[1, 5]]):
        logits = model(_x(built)[None])
    assert _diff(last["logits"], logits[0]) < TOL and _diff(last["logits"], base) > 1e-4
    page.keyboard.press(" ")
    assert page.evaluate("window.ablateExplorer.last.options.headMask") == []


# ---- demo 5: positions ----

def test_waves_have_a_legend_and_pe_off_hides_the_table(page, built):
    _pick(page, "sinusoidal", "#s5")
    assert page.locator("#poslegend span").count() == 6
    assert page.locator("#poslegend span").first.text_content() == "sin · dim 0"
    assert page.is_visible("#posview") and not page.is_visible("#posoff")
    page.focus("#pos")
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    P = page.evaluate("window.ablateExplorer.positions")
    assert P["position"] == 3 and P["vector"][0] == pytest.approx(math.sin(3))
    page.uncheck("#pe")
    assert not page.is_visible("#posview") and page.is_visible("#posoff")
    assert page.evaluate("window.ablateExplorer.positions.vector") == []
    assert page.evaluate("window.ablateExplorer.last.options.posEnc") is False


# ---- demo 6: residual stream side by side ----

def test_residual_pair_side_by_side_equals_pytorch(page, built):
    page.select_option("#image", "1")
    view = _view(page, "residual")
    assert (view["a"]["name"], view["b"]["name"]) == ("residual-8", "no-residual-8")
    for side in ("a", "b"):
        _, model = built["runs"][view[side]["name"]]
        found = _torch_trace(model, _x(built))
        hidden = [found["in"]] + [found["out", i] for i in range(3)]
        norms = [h[0].norm(dim=-1).mean().item() for h in hidden]
        # the stream before each block's last LayerNorm (Post-LN: x + f(x)), which the bars draw
        blocks = blocks_of(model)
        stream = [found["in"]] + [found["norm", i, len(blocks[i].norms) - 1][0] for i in range(3)]
        stream = [h[0].norm(dim=-1).mean().item() for h in stream]
        print(f"demo 6, {view[side]['name']}: norms {_diff(view[side]['norms'], norms):.1e}, "
              f"stream {_diff(view[side]['stream'], stream):.1e}, "
              f"probabilities {_diff(view[side]['probabilities'], found['logits'].softmax(-1)):.1e}")
        assert _diff(view[side]["norms"], norms) < TOL and _diff(view[side]["stream"], stream) < TOL
        assert _diff(view[side]["probabilities"], found["logits"].softmax(-1)) < TOL
        shown = page.locator(f"#norms-{side} .bv").all_text_contents()
        assert shown == [f"{v:.2f}" for v in view[side]["stream"]]
        # after a Post-LN norm every layer reads about √d_model: what the old panel showed, and why it moved
        d_model = model.head.in_features if hasattr(model, "head") else None
        if d_model:
            assert all(abs(v - math.sqrt(d_model)) < 0.15 * math.sqrt(d_model) for v in view[side]["norms"][1:])
    page.select_option("#res-b", str(NAMES.index("tutorial")))
    assert _view(page, "residual")["b"]["name"] == "tutorial"


# ---- demo 7: LayerNorm, dragged ----

def test_layernorm_view_equals_pytorch_and_dragging_a_component(page, built):
    page.select_option("#image", "1")
    _query(page, 7)
    for name in ("tutorial", "pre-ln"):
        _pick(page, name, "#s7")
        _, model = built["runs"][name]
        found = _torch_trace(model, _x(built))
        page.select_option("#lnwhich", "1,ffn")
        view = _view(page, "ln")
        norm = blocks_of(model)[1].norms[1]
        inp, out = found["norm", 1, 1]
        assert view["token"] == 7 and not view["edited"]
        print(f"demo 7, {name}: LayerNorm input {_diff(view['input'], inp[0, 7]):.1e}, "
              f"output {_diff(view['output'], out[0, 7]):.1e}")
        assert _diff(view["input"], inp[0, 7]) < TOL and _diff(view["output"], out[0, 7]) < TOL, name
        assert view["normHat"] == pytest.approx(8.0, abs=1e-3)  # sqrt(d_model)
        # drag component 10 up with the mouse: the output is torch's LayerNorm of the edited vector
        box = page.locator("#lnin").bounding_box()
        s = box["width"] / 420
        cx = box["x"] + (36 + 10.5 * (420 - 40) / 64) * s
        page.mouse.move(cx, box["y"] + 60 * s)
        page.mouse.down()
        page.mouse.move(cx, box["y"] + 12 * s, steps=4)
        page.mouse.up()
        view = _view(page, "ln")
        assert view["edited"] and view["component"] == 10 and view["input"][10] > inp[0, 7, 10].item() + 0.5
        expected = F.layer_norm(torch.tensor(view["input"], dtype=torch.float64), (64,),
                                norm.weight.detach().double(), norm.bias.detach().double())
        print(f"demo 7, {name}: dragged LayerNorm output {_diff(view['output'], expected):.1e}")
        assert _diff(view["output"], expected) < TOL
        assert view["normHat"] == pytest.approx(8.0, abs=1e-3) and abs(sum(view["hat"])) < 1e-6
        # the keyboard: ArrowRight picks the next component, ArrowUp raises it by 0.25
        page.focus("#lnin")
        page.keyboard.press("ArrowRight")
        before = _view(page, "ln")["input"][11]
        page.keyboard.press("ArrowUp")
        assert _view(page, "ln")["input"][11] == pytest.approx(before + 0.25)
        page.click("#lnreset")
        assert not _view(page, "ln")["edited"]


# ---- demo 8: FFN activations ----

def test_ffn_activations_equal_pytorch_at_three_widths(page, built):
    page.select_option("#image", "1")
    _query(page, 12)
    worst = {}
    for name, width in (("ffn-1", 64), ("tutorial", 128), ("ffn-8", 512)):
        _pick(page, name, "#s8")
        page.select_option("#s8 .ctl-layer", "1")
        view = _view(page, "ffn")
        assert (view["layer"], view["token"], len(view["hidden"])) == (1, 12, width)
        _, model = built["runs"][name]
        found = _torch_trace(model, _x(built))
        worst[name] = _diff(view["hidden"], found["ffn", 1][0, 12])
        assert view["active"] == int((found["ffn", 1][0, 12] > 0).sum())
        assert page.text_content("#ffnstats").startswith(f"{view['active']} of {width} units active")
    print("demo 8, FFN activations, page - PyTorch:", worst)
    assert max(worst.values()) < TOL, worst


def test_demo8_folds_a_plane_as_pytorchs_ffn_does(page, built):
    """Issue 40: the tutorial's demo 8, the FFN folding space. A square of the layer's input plane goes through
    the trained FFN: the page's points equal PyTorch's FFN with and without its activation; without it the
    grid stays straight (one affine map), with it the grid bends at the units whose zero line crosses the
    square."""
    _, model = built["runs"]["tutorial"]
    _pick(page, "tutorial", "#s8")
    page.select_option("#image", "1")
    view = _view(page, "fold")
    ffn = blocks_of(model)[view["layer"]].feed_forward
    point = torch.tensor(view["probe"]["point"], dtype=torch.float32)
    with torch.no_grad():
        folded, _ = ffn.eval()(point[None, None])
        linear = ffn.fc2(ffn.fc1(point))
    print(f"demo 8, fold: {view['creases']} of {view['units']} units crease the square; page - PyTorch: "
          f"folded {_diff(view['probe']['folded'], folded[0, 0]):.1e}, linear {_diff(view['probe']['linear'], linear):.1e}; "
          f"bend: linear {view['bentLinear']:.1e}, folded {view['bentFolded']:.2f}")
    assert _diff(view["probe"]["folded"], folded[0, 0]) < TOL and _diff(view["probe"]["linear"], linear) < TOL
    assert view["bentLinear"] < 1e-9 * max(1.0, view["radius"]) and 0 < view["creases"] <= view["units"]
    assert view["bentFolded"] > 1e-3
    stats = page.text_content("#foldstats")
    assert str(view["creases"]) in stats and str(view["units"]) in stats


# ---- demo 9: per-layer readout ----

def test_per_layer_readout_equals_pytorch(page, built):
    page.select_option("#image", "1")
    worst = {}
    for name in ("tutorial", "pre-ln", "residual-8"):
        _pick(page, name, "#s9" if name == "residual-8" else "#s7")
        cfg, model = built["runs"][name]
        found = _torch_trace(model, _x(built))
        hidden = [found["in"]] + [found["out", i] for i in range(cfg.model.n_layers)]
        with torch.no_grad():
            lens = [model.head(model.pool(model.encoder.final_norm(h)))[0] for h in hidden]
        view = _view(page, "lens")
        assert len(view["probabilities"]) == cfg.model.n_layers + 1
        worst[name] = max(_diff(p, z.softmax(-1)) for p, z in zip(view["probabilities"], lens))
        assert _diff(lens[-1], found["logits"]) < 1e-5  # the last layer's readout is the model's answer
        items = page.locator("#lenslist li").all_text_contents()
        assert len(items) == len(lens) and items[-1].startswith(f"after layer {cfg.model.n_layers - 1}: predicts "
                                                                f"{int(lens[-1].argmax())}")
    print("demo 9, readout per layer, page - PyTorch:", worst)
    assert max(worst.values()) < TOL, worst


# ---- 中文 and English ----

def test_language_switch_changes_every_label(page):
    keys = page.evaluate("[Object.keys(I18N.en).sort(), Object.keys(I18N.zh).sort()]")
    assert keys[0] == keys[1]
    labelled = "Array.from(document.querySelectorAll('[data-i18n]'), (e) => e.textContent)"
    english = page.evaluate(labelled)
    config_en = page.locator("#config td:first-child").all_text_contents()
    page.click("#lang")
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    chinese = page.evaluate(labelled)
    assert len(english) == len(chinese) > 60
    unchanged = [e for e, z in zip(english, chinese) if e == z]
    assert unchanged == []
    han = re.compile(r"[\u4e00-\u9fff]")
    assert all(han.search(z) or z == "English" for z in chinese), [z for z in chinese if not han.search(z)]
    config_zh = page.locator("#config td:first-child").all_text_contents()
    assert all(a != b for a, b in zip(config_en, config_zh)) and "层归一化" in config_zh
    for word in ("多头注意力", "位置编码", "残差连接", "层归一化", "前馈网络", "温度 τ", "词元"):
        assert word in page.text_content("body"), word
    assert page.text_content("#pred").startswith("预测") and "实验结论" in page.text_content("#s1 a.findings")
    # each demo links its answer's section of the report's HTML index, and the header links the index
    assert page.get_attribute("#s1 a.findings", "href") == "build/index.zh.html#q1"
    assert page.get_attribute("#back", "href") == "build/index.zh.html"
    page.click("#lang")
    assert page.evaluate(labelled) == english


def test_no_placeholder_is_left_in_the_text_of_any_model(page):
    """Every model, in both languages: no `{name}` of a template is left in what the page shows (issue 40: a key
    defined twice in i18n.js showed RoPE's labels as `rotation angle pos·10000^(−2i/{hs}) ...`)."""
    left = {}
    for lang in ("en", "zh"):
        for i, name in enumerate(NAMES):
            page.select_option("#model", str(i))
            text = page.evaluate("document.body.innerText")
            if found := sorted(set(re.findall(r"\{[A-Za-z_]\w*\}", text))):
                left[lang, name] = found
        page.click("#lang")
    assert left == {}, left


def test_every_control_is_reachable_by_keyboard(page):
    found = page.evaluate("""() => Array.from(document.querySelectorAll('button, select, input, a[href], canvas.map, #lnin'))
        .filter((e) => !e.hidden && e.offsetParent !== null).map((e) => [e.id || e.className || e.tagName, e.tabIndex])""")
    assert len(found) > 40 and [f for f in found if f[1] < 0] == []
    # Tab walks into the demo sections: the maps are reached
    page.focus("#hbuttons button")
    for _ in range(8):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('map')"):
            break
    assert page.evaluate("document.activeElement.classList.contains('map')")


# ---- a phone: 390 px, touch ----

def _touch_drag(tab, points):
    cdp = tab.context.new_cdp_session(tab)
    (x0, y0), *rest = points
    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x0, "y": y0}]})
    for x, y in rest:
        cdp.send("Input.dispatchTouchEvent", {"type": "touchMove", "touchPoints": [{"x": x, "y": y}]})
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    cdp.detach()


def test_phone_390px_reflows_and_touch_draws_drags_and_masks(browser, built):
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True,
                                  device_scale_factor=2, locale="zh-CN")
    tab = open_tab(context, built["html"])
    try:
        assert tab.evaluate("document.documentElement.lang") == "zh-CN"  # the phone's language
        assert tab.evaluate("document.documentElement.scrollWidth") <= 390
        widest = tab.evaluate("""() => Math.max(...Array.from(document.querySelectorAll('section, aside, canvas'),
            (e) => e.getBoundingClientRect().right))""")
        assert widest <= 390
        assert tab.evaluate("document.querySelector('meta[name=viewport]').content") == \
            "width=device-width, initial-scale=1"
        # charts at the screen's resolution (issue 40): at devicePixelRatio 2 a canvas's bitmap has twice the pixels
        # of its CSS size, which is what its `width` reads and what it is shown at
        sizes = tab.evaluate("""() => { const c = document.getElementById('spot'),
            bitmap = Object.getOwnPropertyDescriptor(HTMLCanvasElement.prototype, 'width').get.call(c);
            return [c.width, bitmap, c.getBoundingClientRect().width]; }""")
        assert sizes[1] == 2 * sizes[0] and sizes[2] <= sizes[0]
        # a tap on the digit picks the row as the query and keeps the test image and its label (issue 40: a touch
        # used to paint and drop the label)
        tab.locator("#digit").scroll_into_view_if_needed()
        box = tab.locator("#digit").bounding_box()
        image, pixels = tab.input_value("#image"), tab.evaluate("window.ablateExplorer.last.input")
        tab.touchscreen.tap(box["x"] + box["width"] / 2, box["y"] + box["height"] * (3.5 / 28))
        assert tab.evaluate("window.ablateExplorer.state.query") == 3 + tab.evaluate(
            "MODELS[window.ablateExplorer.state.model].pooling === 'cls' ? 1 : 0")
        assert tab.input_value("#image") == image != "-1"
        assert tab.evaluate("window.ablateExplorer.last.input") == pixels
        # a finger draws on the digit
        tab.click("#clear")
        tab.locator("#digit").scroll_into_view_if_needed()
        box = tab.locator("#digit").bounding_box()
        _touch_drag(tab, [(box["x"] + 60, box["y"] + 30 + 10 * i) for i in range(15)])
        drawn = torch.tensor(tab.evaluate("window.ablateExplorer.last.input"))
        assert (drawn > 0).sum() > 20 and tab.input_value("#image") == "-1"
        # a finger drags a LayerNorm component
        tab.locator("#lnin").scroll_into_view_if_needed()
        box = tab.locator("#lnin").bounding_box()
        s = box["width"] / 420
        cx = box["x"] + (36 + 20.5 * (420 - 40) / 64) * s
        _touch_drag(tab, [(cx, box["y"] + 65 * s), (cx, box["y"] + 40 * s), (cx, box["y"] + 15 * s)])
        view = tab.evaluate("window.ablateExplorer.views.ln")
        assert view["edited"] and view["component"] == 20
        # a tap on the spotlight picks the tapped row as the query (issue 40: only dragging did)
        tab.locator("#spot").scroll_into_view_if_needed()
        box = tab.locator("#spot").bounding_box()
        before = tab.evaluate("window.ablateExplorer.state.query")
        row = 20 if before != 20 else 5  # a row (28 rows of 7 px from y = 4 of the canvas's 204) the query is not on
        tab.touchscreen.tap(box["x"] + box["width"] / 2, box["y"] + (4 + 7 * row + 3.5) * box["height"] / 204)
        assert tab.evaluate("window.ablateExplorer.state.query") - before != 0
        assert tab.evaluate("window.ablateExplorer.state.query") == row + tab.evaluate(
            "MODELS[window.ablateExplorer.state.model].pooling === 'cls' ? 1 : 0")
        # a tap masks a head
        tab.locator("canvas.map").first.scroll_into_view_if_needed()
        box = tab.locator("canvas.map").first.bounding_box()
        tab.touchscreen.tap(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        assert tab.evaluate("window.ablateExplorer.last.options.headMask") == [[0, 0]]
        assert tab.requests == [] and tab.errors == [], (tab.requests, tab.errors)
    finally:
        context.close()


def test_the_input_column_shows_the_query_and_the_digit_above_the_fold(browser, built):
    """Issue 40: at 1280 x 720 and 1440 x 900 the query slider sat below the fold of its column (under the
    config table); now the model, the image, the query and the digit come first, and the column stays in view
    (sticky) while the demos scroll."""
    for width, height in ((1280, 720), (1440, 900)):
        context = browser.new_context(viewport={"width": width, "height": height})
        tab = open_tab(context, built["html"])
        try:
            for element in ("#query", "#digit"):
                box = tab.locator(element).bounding_box()
                assert box["y"] >= 0 and box["y"] + box["height"] <= height, (width, element, box)
            tab.evaluate("window.scrollTo(0, document.body.scrollHeight / 2)")
            box = tab.locator("#query").bounding_box()
            assert 0 <= box["y"] and box["y"] + box["height"] <= height, (width, "scrolled", box)
        finally:
            context.close()
