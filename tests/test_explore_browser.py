"""The explorer page in a real browser (Playwright driving the system's Chromium), loaded from a file with the
network blocked: its logits and attention equal PyTorch's to 1e-4 for every shipped model's config (as is, tau,
a masked head, no PE, permuted rows; the copy models on the tutorial's sentence in both orders), and for the tutorial's model under every
control (tau slider, sqrt(d_k), a masked head, positional encoding off, permuted rows, a second model); the
controls change the drawn attention as PyTorch says; the per-layer token cosine equals ablate.probes' and the
position view shows the model's own sinusoidal table, RoPE angles or learned table; no request leaves the
file; no console error; a 1400 x 900 screenshot.

Without Chromium (or Playwright) these tests skip, saying how to get it; with ABLATE_REQUIRE_BROWSER=1
(.ci/run sets it where it could install Chromium) that is a failure instead."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ablate import config as C
from ablate.explore.export import export_model
from ablate.explore.images import normalisation
from ablate.explore.page import build_page, page_model
from ablate.explore.screenshot import VIEWPORT
from ablate.explore.shipped import SHIPPED
from ablate.models import SequenceClassifier, TokenModel
from ablate.models.positional import rope_angles, sinusoidal_table
from ablate.probes import mean_token_cosine, sublayer_outputs
from ablate.probes.common import blocks_of
from ablate.probes.heads import masked_heads
from tests.browser_gate import browser_type_launch_args, gate  # noqa: F401 (a fixture)

TOL = 1e-4
pytestmark = gate()


@pytest.fixture(scope="session")
def browser_context_args():
    return {"viewport": VIEWPORT}


def _model(tmp_path: Path, name: str, overrides: dict, seed: int):
    """A random-init MNIST-rows model (every parameter moved off its init) saved as `ablate train` saves one; a
    copy-task config gives the copy task's TokenModel (data.vocab + 2 token ids in, data.vocab out)."""
    cfg = C.build({"tracking": "none", **overrides}, machine=False)
    torch.manual_seed(seed)
    if cfg.data.task == "copy":
        sizes = {"n_tokens": cfg.data.vocab + 2, "n_out": cfg.data.vocab}
        model = TokenModel(cfg.encoder, sizes["n_tokens"], sizes["n_out"])
    else:
        sizes = {"in_features": 28, "n_classes": 10}
        model = SequenceClassifier(cfg.encoder, 28, 10, cfg.pooling)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    run = tmp_path / name
    run.mkdir()
    torch.save({"state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}, "global_step": 7,
                "hyper_parameters": {"config": C.to_dict(cfg), **sizes}}, run / "last.ckpt")
    return cfg, model.eval(), run


def _variant(model, cfg, **fields):
    import dataclasses

    twin = SequenceClassifier(dataclasses.replace(cfg.encoder, **fields), 28, 10, cfg.pooling)
    twin.load_state_dict(model.state_dict(), strict=False)  # pos_enc=none has no table
    return twin.eval()


@pytest.fixture
def explorer(tmp_path, page):
    """The page of two models (the tutorial's; no PE + Pre-LN + [CLS]) and three images, opened offline."""
    tutorial = _model(tmp_path, "tutorial", {}, seed=0)
    other = _model(tmp_path, "nope-preln", {"model.pos_enc": "none", "model.norm": "pre", "pooling": "cls",
                                            "model.n_layers": 3}, seed=1)
    yield from _opened(page, tmp_path, (tutorial, other))


@pytest.fixture
def positional(tmp_path, page):
    """The page of four models, one per position view: sinusoidal; RoPE with [CLS] (29 positions); the
    tutorial's learned table; no residuals at depth 4 with no PE."""
    models = (_model(tmp_path, "sinusoidal", {"model.pos_enc": "sinusoidal"}, seed=2),
              _model(tmp_path, "rope-cls", {"model.pos_enc": "rope", "pooling": "cls"}, seed=3),
              _model(tmp_path, "learned", {}, seed=4),
              _model(tmp_path, "no-residual", {"model.pos_enc": "none", "model.residual": False,
                                               "model.n_layers": 4}, seed=5))
    yield from _opened(page, tmp_path, models)


@pytest.fixture
def shipped(tmp_path, page):
    """The page of every shipped model (ablate.explore.shipped: what `make explore` trains), each built from
    the exact config `ablate train budget=quick ... <its overrides>` builds, random-init, opened offline."""
    runs = tuple(_model(tmp_path, name, {"budget": "quick", "run.probes": "false", **C.parse_overrides(overrides)},
                        seed=10 + i) for i, (name, overrides) in enumerate(SHIPPED.items()))
    yield from _opened(page, tmp_path, runs)


def _opened(page, tmp_path: Path, runs):
    """Build the page of `runs` (as _model returns them) and three images, open it with the network blocked;
    after the test: no request left the file, no console error, no absolute path in the page."""
    g = torch.Generator().manual_seed(5)
    images = [{"index": i, "label": i, "pixels": (torch.rand(784, generator=g) ** 4 * 255).round().int().tolist()}
              for i in range(3)]
    mean, std = normalisation()
    models = [page_model(dict(export_model(run), source=str(run)), run.name) for _, _, run in runs]
    html = tmp_path / "explorer.html"
    html.write_text(build_page(models, images, mean, std))
    requests, errors = [], []

    def route(r):
        if r.request.url.startswith(("file:", "data:")):
            return r.continue_()
        requests.append(r.request.url)
        return r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(html.as_uri())
    yield {"page": page, "models": runs, "images": images, "mean": mean, "std": std, "html": html,
           "tmp": tmp_path}
    assert requests == [], requests
    assert errors == [], errors
    assert str(tmp_path) not in html.read_text()  # no absolute path travels with the page


def _last(page):
    return page.evaluate("window.ablateExplorer.last")


def _compare(last, model, x, mask=()):
    """Max abs difference of the page's logits and attention maps from PyTorch's for input x (28, 28)."""
    with torch.no_grad(), masked_heads(model, list(mask)):
        logits, maps = model(x[None], return_attention=True)
    d_logits = (torch.tensor(last["logits"], dtype=torch.float64) - logits[0].double()).abs().max().item()
    d_maps = max((torch.tensor(last["attention"][i], dtype=torch.float64) - m[0].double()).abs().max().item()
                 for i, m in enumerate(maps))
    return d_logits, d_maps, maps


def _no_pe_and_permuted(page, model, cfg, x):
    """Turn positional encoding off (compared with the same weights built without it; a no-PE model's switch
    is disabled instead), then permute the rows with the page's button (compared with PyTorch on the input
    rows in the page's order). Returns ({"no PE": (d_logits, d_maps), "rows permuted": (...)}, the
    permuted input's PyTorch maps, the permutation)."""
    out = {}
    if cfg.model.pos_enc == "none":
        assert page.is_disabled("#pe")
    else:
        page.uncheck("#pe")
        d_logits, d_maps, _ = _compare(_last(page), _variant(model, cfg, pos_enc="none"), x)
        out["no PE"] = (d_logits, d_maps)
        page.check("#pe")
    page.click("#permute")
    last = _last(page)
    perm = last["options"]["permute"]
    assert sorted(perm) == list(range(28)) and perm != list(range(28))
    d_logits, d_maps, maps = _compare(last, model, x[perm])
    out["rows permuted"] = (d_logits, d_maps)
    return out, maps, perm


def test_page_equals_pytorch_under_every_control(explorer):
    page, (tutorial, other), images = explorer["page"], explorer["models"], explorer["images"]
    cfg, model, _ = tutorial
    page.select_option("#image", "1")
    last = _last(page)
    x = (torch.tensor(images[1]["pixels"], dtype=torch.float32).reshape(28, 28) / 255 - explorer["mean"]) / explorer["std"]
    assert torch.tensor(last["input"]).sub(x.double()).abs().max() < 1e-6  # normalised as training did
    results = {}

    d_logits, d_maps, base_maps = _compare(last, model, x)
    results["tutorial"] = (d_logits, d_maps)

    # tau: the slider moved with the keyboard from the model's 1.00 to 0.30
    page.focus("#tau")
    for _ in range(14):
        page.keyboard.press("ArrowLeft")
    last = _last(page)
    assert last["options"]["temperature"] == pytest.approx(0.3)
    d_logits, d_maps, maps = _compare(last, _variant(model, cfg, temperature=0.3), x)
    results["tau=0.3"] = (d_logits, d_maps)
    assert (maps[0] - base_maps[0]).abs().max() > 1e-2  # a sharper softmax, drawn
    page.focus("#tau")
    for _ in range(14):
        page.keyboard.press("ArrowRight")
    assert _last(page)["options"]["temperature"] == pytest.approx(1.0)

    # sqrt(d_k) off
    page.uncheck("#sqrtdk")
    d_logits, d_maps, _ = _compare(_last(page), _variant(model, cfg, qk_scale=False), x)
    results["no sqrt(d_k)"] = (d_logits, d_maps)
    page.check("#sqrtdk")

    # a head masked by clicking its map: layer 1's maps change (its input changed), layer 0's do not
    page.click("canvas.map[data-layer='0'][data-head='1']")
    last = _last(page)
    assert last["options"]["headMask"] == [[0, 1]]
    d_logits, d_maps, maps = _compare(last, model, x, mask=[[0, 1]])
    results["head L0H1 masked"] = (d_logits, d_maps)
    assert (maps[1] - base_maps[1]).abs().max() > 1e-3 and torch.equal(maps[0], base_maps[0])
    page.click("canvas.map[data-layer='0'][data-head='1']")
    assert _last(page)["options"]["headMask"] == []

    # positional encoding off; rows permuted: the page's permutation applied to the input rows
    found, maps, perm = _no_pe_and_permuted(page, model, cfg, x)  # the rows stay permuted below
    results.update(found)
    assert (maps[0] - base_maps[0]).abs().max() > 1e-2

    # all at once
    page.click("canvas.map[data-layer='1'][data-head='3']")
    page.uncheck("#sqrtdk")
    last = _last(page)
    d_logits, d_maps, _ = _compare(last, _variant(model, cfg, qk_scale=False), x[perm], mask=[[1, 3]])
    results["permuted + L1H3 masked + no sqrt(d_k)"] = (d_logits, d_maps)

    # the second model: toggles start from its own config, 3 layers of maps over 29 tokens ([CLS])
    page.click("#order")
    page.select_option("#model", "1")
    ocfg, omodel, _ = other
    assert page.is_disabled("#pe") and page.is_checked("#sqrtdk")
    assert page.locator("canvas.map").count() == 3 * ocfg.model.n_heads
    last = _last(page)
    assert last["options"] == {"temperature": 1, "qkScale": True, "headMask": []}
    d_logits, d_maps, _ = _compare(last, omodel, x)
    results["no PE, Pre-LN, [CLS] model"] = (d_logits, d_maps)

    # a drawn digit: the page's input is the canvas, and the model's answer to it
    page.click("#clear")
    box = page.locator("#digit").bounding_box()
    page.mouse.move(box["x"] + 100, box["y"] + 40)
    page.mouse.down()
    page.mouse.move(box["x"] + 110, box["y"] + 180, steps=12)
    page.mouse.up()
    last = _last(page)
    drawn = torch.tensor(last["input"], dtype=torch.float32)
    assert (drawn > 0).sum() > 20 and page.input_value("#image") == "-1"
    d_logits, d_maps, _ = _compare(last, omodel, drawn)
    results["drawn digit"] = (d_logits, d_maps)

    for what, (d_logits, d_maps) in results.items():
        print(f"{what}: logits {d_logits:.2e}, attention {d_maps:.2e}")
    worst = {what: max(d) for what, d in results.items() if max(d) >= TOL}
    assert worst == {}, worst


def test_page_equals_pytorch_for_every_shipped_model(shipped):
    page, runs, images = shipped["page"], shipped["models"], shipped["images"]
    assert [run.name for _, _, run in runs] == list(SHIPPED)
    page.select_option("#image", "2")
    x = (torch.tensor(images[2]["pixels"], dtype=torch.float32).reshape(28, 28) / 255 - shipped["mean"]) / shipped["std"]
    results = {}
    rows = [run for run in runs if run[0].data.task == "mnist"]  # the input column's models; the copy ones: Q1
    for i, (cfg, model, run) in enumerate(rows):
        page.select_option("#model", str(i))
        assert page.locator("canvas.map").count() == cfg.model.n_layers * cfg.model.n_heads, run.name
        last = _last(page)
        assert last["options"]["qkScale"] == cfg.model.qk_scale and "permute" not in last["options"]
        d_logits, d_maps, base_maps = _compare(last, model, x)
        base_logits = last["logits"]
        results[run.name, "as is"] = (d_logits, d_maps)

        page.fill("#tau", "0.4")  # tau from the model's 1.00 down to 0.40 (the slider's input event, once)
        last = _last(page)
        assert last["options"]["temperature"] == pytest.approx(0.4)
        d_logits, d_maps, maps = _compare(last, _variant(model, cfg, temperature=0.4), x)
        results[run.name, "tau=0.4"] = (d_logits, d_maps)
        assert (maps[0] - base_maps[0]).abs().max() > 1e-3, run.name
        page.fill("#tau", "1")

        head = [cfg.model.n_layers - 1, cfg.model.n_heads - 1]  # the last layer's last head
        page.click(f"canvas.map[data-layer='{head[0]}'][data-head='{head[1]}']")
        last = _last(page)
        assert last["options"]["headMask"] == [head]
        d_logits, d_maps, _ = _compare(last, model, x, mask=[head])
        results[run.name, f"L{head[0]}H{head[1]} masked"] = (d_logits, d_maps)
        assert (torch.tensor(last["logits"]) - torch.tensor(base_logits)).abs().max() > 1e-4, run.name  # it counts
        page.click(f"canvas.map[data-layer='{head[0]}'][data-head='{head[1]}']")
        assert _last(page)["options"]["headMask"] == []

        # the model as is was the no-PE case for `no-pe`: its switch is off
        found, maps, perm = _no_pe_and_permuted(page, model, cfg, x)
        results.update({(run.name, k): v for k, v in found.items()})
        assert (maps[0] - base_maps[0]).abs().max() > 1e-3, run.name
        page.click("#order")

    # the copy models: demo 1's Q1 part, the tutorial's sentence in both orders
    from ablate.results.export import copy_input, sentence

    words = sentence()
    for i, (cfg, model, run) in enumerate(run for run in runs if run[0].data.task == "copy"):
        page.click(f"#q1models button[data-q1model='{i}']")
        for order, tokens in enumerate((words["tokens"], words["perm_tokens"])):
            page.click(f"#q1order button[data-order='{order}']")
            view = page.evaluate("window.ablateExplorer.views.q1")
            assert view["model"] == run.name and view["input"] == copy_input(tokens, cfg.data.vocab)
            with torch.no_grad():
                logits, maps = model(torch.tensor([view["input"]]), return_attention=True)
            results[run.name, f"sentence order {order}"] = (
                (torch.tensor(view["logits"], dtype=torch.float64) - logits[0].double()).abs().max().item(),
                max((torch.tensor(view["attention"][j], dtype=torch.float64) - m[0].double()).abs().max().item()
                    for j, m in enumerate(maps)))

    for (name, what), (d_logits, d_maps) in results.items():
        print(f"{name}, {what}: logits {d_logits:.2e}, attention {d_maps:.2e}")
    assert {name for name, _ in results} == set(SHIPPED)
    worst = {key: max(d) for key, d in results.items() if max(d) >= TOL}
    assert worst == {}, worst


def test_hover_highlights_the_query_row_and_the_screenshot(explorer, tmp_path):
    page = explorer["page"]
    page.locator("canvas.map").first.scroll_into_view_if_needed()  # demo 4, below the fold
    box = page.locator("canvas.map").first.bounding_box()
    side = page.evaluate("document.querySelector('canvas.map').width")  # 14 px of ticks above 28 rows of 5 px
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + (14 + 10.5 * 5) * box["height"] / side)
    assert page.evaluate("window.ablateExplorer.state.query") == 10
    png = tmp_path / "shot.png"
    page.screenshot(path=str(png))
    width, height = struct.unpack(">II", png.read_bytes()[16:24])  # the PNG's IHDR
    assert (width, height) == (VIEWPORT["width"], VIEWPORT["height"])


def test_screenshot_tool_sees_no_network(explorer, tmp_path):
    # `make explore` runs it; a process of its own (Playwright's sync API cannot nest in the page fixture's)
    png = tmp_path / "tool.png"
    done = subprocess.run([sys.executable, "-m", "ablate.explore.screenshot", str(explorer["html"]), str(png)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert struct.unpack(">II", png.read_bytes()[16:24]) == (VIEWPORT["width"], VIEWPORT["height"])


def _hidden(model, x):
    """PyTorch's hidden states as the page lists them: the first block's input, then every block's output."""
    found = []
    handle = blocks_of(model)[0].register_forward_pre_hook(lambda module, args: found.append(args[0]))
    try:
        outputs = sublayer_outputs(model, x[None])
    finally:
        handle.remove()
    return [found[0]] + [ffn for _, ffn in outputs]


def test_token_cosine_per_layer_equals_the_probe(positional):
    page, images = positional["page"], positional["images"]
    x = (torch.tensor(images[2]["pixels"], dtype=torch.float32).reshape(28, 28) / 255 - positional["mean"]) / positional["std"]
    page.select_option("#image", "2")
    worst = {}
    for i, (cfg, model, run) in enumerate(positional["models"]):
        page.select_option("#model", str(i))
        last = _last(page)
        hidden = _hidden(model, x)
        assert len(last["tokenCosine"]) == len(hidden) == cfg.model.n_layers + 1
        torch_cos = [mean_token_cosine(h) for h in hidden]
        page_cos = last["tokenCosine"]
        worst[run.name] = max(abs(a - b) for a, b in zip(page_cos, torch_cos))
        d_hidden = max((torch.tensor(last["hiddenStates"][k], dtype=torch.float64) - h[0].double()).abs().max().item()
                       for k, h in enumerate(hidden))
        assert d_hidden < TOL, (run.name, d_hidden)
        # the bars show those numbers, one per layer
        shown = page.locator("#cosine .bv").all_text_contents()
        assert shown == [f"{v:.3f}" for v in page_cos]
        if run.name == "no-residual":
            print("no residuals, token cosine per layer:", [round(v, 3) for v in page_cos])
    print("token cosine, page - probe:", {k: f"{v:.1e}" for k, v in worst.items()})
    assert max(worst.values()) < TOL, worst


def test_position_view_is_the_models_own(positional):
    page = positional["page"]
    (_, _, _), (rcfg, _, _), (_, lmodel, _), _ = positional["models"]
    expected = {
        "sinusoidal": sinusoidal_table(28, 64).double(),
        "rope": torch.arange(29, dtype=torch.float64)[:, None]
                * 10000.0 ** (-torch.arange(0, rcfg.model.head_dim, 2, dtype=torch.float64) / rcfg.model.head_dim),
        "learned": lmodel.encoder.pos_enc.weight[:28].detach().double(),
    }
    cos, sin = rope_angles(29, rcfg.model.head_dim)  # the model's own (float32) rotation
    assert (expected["rope"].cos() - cos.double()).abs().max() < TOL
    assert (expected["rope"].sin() - sin.double()).abs().max() < TOL
    for i, kind in enumerate(["sinusoidal", "rope", "learned", "none"]):
        page.select_option("#model", str(i))
        P = page.evaluate("window.ablateExplorer.positions")
        assert P["kind"] == kind
        if kind == "none":
            assert P["table"] == [] and P["vector"] == []
            continue
        table = torch.tensor(P["table"], dtype=torch.float64)
        assert table.shape == expected[kind].shape, kind
        assert (table - expected[kind]).abs().max() < TOL, kind
        # the slider selects a position: its vector is that row of the table
        page.focus("#pos")
        page.keyboard.press("Home")
        for _ in range(17):
            page.keyboard.press("ArrowRight")
        P = page.evaluate("window.ablateExplorer.positions")
        assert P["position"] == 17 and page.text_content("#posval") == "position 17"
        assert (torch.tensor(P["vector"], dtype=torch.float64) - expected[kind][17]).abs().max() < TOL
    page.select_option("#model", "1")  # RoPE with [CLS]: the slider reaches position 28
    assert page.get_attribute("#pos", "max") == "28"
