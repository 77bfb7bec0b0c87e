"""The explorer's forward pass (ablate/explore/forward.js, run under node) computes what PyTorch computes:
logits and every attention map of exported models, random and trained, to 1e-4, for every option a
model can be built with and for the inference overrides (tau, sqrt(d_k), head masks, no PE, permuted
rows); and `ablate explore` refuses bad input with one line and exit 2, writing nothing."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ablate import config as C
from ablate.cli import main as cli
from ablate.explore import FORWARD_JS, ExploreError, export_model
from ablate.models import SequenceClassifier, TokenModel
from ablate.probes import mean_token_cosine, sublayer_outputs
from ablate.probes.heads import masked_heads
from ablate.registry import spec as task_spec
from tests.conftest import needs_mnist

NODE = shutil.which("node") or ("/usr/bin/node" if Path("/usr/bin/node").exists() else None)
needs_node = pytest.mark.skipif(
    NODE is None, reason="node (Node.js >= 18) is not installed: `apt-get install nodejs` runs forward.js here")
TOL = 1e-4
ROWS, CLASSES, TOKENS = 28, 10, 8

DRIVER = """
const F = require(process.argv[2]);
const req = JSON.parse(require("fs").readFileSync(0, "utf8"));
const model = F.load(req.model);
const out = req.cases.map((c) => F.forward(model, c.input, c.options));
process.stdout.write(JSON.stringify(out));
"""


def run_node(tmp_path: Path, exported: dict, cases: list[dict]) -> list[dict]:
    driver = tmp_path / "driver.js"
    driver.write_text(DRIVER)
    done = subprocess.run([NODE, str(driver), str(FORWARD_JS)], input=json.dumps({"model": exported, "cases": cases}),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _config(overrides: dict) -> C.Config:
    return C.build({"model.d_model": 16, "model.n_heads": 2, "tracking": "none", **overrides}, machine=False)


def _model(cfg: C.Config) -> torch.nn.Module:
    if task_spec(cfg.data.task).kind == "classify":
        return SequenceClassifier(cfg.encoder, ROWS, CLASSES, cfg.pooling)
    return TokenModel(cfg.encoder, TOKENS, TOKENS)


def _sizes(model: torch.nn.Module) -> dict[str, int]:
    if isinstance(model, SequenceClassifier):
        return {"in_features": ROWS, "n_classes": CLASSES}
    return {"n_tokens": TOKENS, "n_out": TOKENS}


def _save(path: Path, cfg: C.Config, model: torch.nn.Module) -> Path:
    """A checkpoint as `ablate train` writes one: the config as a plain dict, the model under `model.`."""
    torch.save({"state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}, "global_step": 0,
                "hyper_parameters": {"config": C.to_dict(cfg), **_sizes(model)}}, path)
    return path


def random_model(tmp_path: Path, overrides: dict, seed: int = 0) -> tuple[C.Config, torch.nn.Module, Path]:
    """A random-init model whose every parameter (LayerNorm gains and biases too) is moved off its init."""
    cfg = _config(overrides)
    torch.manual_seed(seed)
    model = _model(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return cfg, model.eval(), _save(tmp_path / "last.ckpt", cfg, model)


def torch_run(model: torch.nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    with torch.no_grad():
        logits, maps = model.eval()(x, return_attention=True)
    return logits, maps


def diff(js: list[dict], logits: torch.Tensor, maps: list[torch.Tensor]) -> tuple[float, float]:
    """Max abs difference of the logits and of the attention maps, over a batch of node results."""
    got = torch.tensor([r["logits"] for r in js], dtype=torch.float64)
    got_maps = [torch.tensor([r["attention"][layer] for r in js], dtype=torch.float64) for layer in range(len(maps))]
    assert got.shape == logits.shape and all(g.shape == m.shape for g, m in zip(got_maps, maps))
    return ((got - logits.double()).abs().max().item(),
            max((g - m.double()).abs().max().item() for g, m in zip(got_maps, maps)))


def inputs(cfg: C.Config, batch: int = 3, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if task_spec(cfg.data.task).kind == "classify":
        return torch.randn(batch, ROWS, ROWS, generator=g)
    return torch.randint(0, TOKENS, (batch, 12), generator=g)


COPY = {"data.task": "copy", "data.vocab": TOKENS - 2, "data.length": 6}  # 13 positions: the page's sentence
CONFIGS = {
    "tutorial": {},  # learned positions, Post-LN, ReLU, 2 layers, mean pooling
    "none-pre-gelu-1layer": {"model.pos_enc": "none", "model.norm": "pre", "model.activation": "gelu",
                             "model.n_layers": 1},
    "sinusoidal-unscaled-tau-3layers": {"model.pos_enc": "sinusoidal", "model.qk_scale": False,
                                        "model.temperature": 2.5, "model.n_layers": 3, "model.n_heads": 4},
    "rope-causal-nonorm": {"model.pos_enc": "rope", "model.causal": True, "model.norm": "none"},
    "alibi-3heads-noresidual-pre": {"model.pos_enc": "alibi", "model.d_model": 12, "model.n_heads": 3,
                                    "model.residual": False, "model.norm": "pre"},
    "alibi-causal-tau": {"model.pos_enc": "alibi", "model.causal": True, "model.temperature": 0.5,
                         "model.n_heads": 4},
    "learned-cls-noffn-dhead": {"pooling": "cls", "model.ffn_mult": 0, "model.d_head": 5, "model.n_heads": 3},
    "post-noresidual-gelu": {"model.residual": False, "model.activation": "gelu", "model.n_layers": 3},
    "linear-ffn": {"model.activation": "identity", "model.ffn_mult": 4},
    "copy-learned": {**COPY},
    "copy-rope-causal-pre": {**COPY, "model.pos_enc": "rope", "model.causal": True, "model.norm": "pre"},
}


@needs_node
@pytest.mark.parametrize("name", CONFIGS)
def test_forward_js_equals_pytorch(tmp_path, name):
    cfg, model, ckpt = random_model(tmp_path, CONFIGS[name])
    exported = export_model(ckpt)
    x = inputs(cfg)
    js = run_node(tmp_path, exported, [{"input": row.tolist()} for row in x])
    logits, maps = torch_run(model, x)
    d_logits, d_maps = diff(js, logits, maps)
    print(f"{name}: logits {d_logits:.2e}, attention {d_maps:.2e}")
    assert d_logits < TOL and d_maps < TOL, (d_logits, d_maps)
    assert logits.std() > 0.05  # a model that says something: the comparison can fail
    # residual-stream norms: n_layers + 1 entries of one norm per token (the CLS token included)
    tokens = x.shape[1] + (1 if cfg.pooling == "cls" else 0)
    assert [len(n) for n in js[0]["residualNorms"]] == [tokens] * (cfg.model.n_layers + 1)
    # the hidden state after every block (what the page's token cosine reads) is PyTorch's
    blocks = [ffn for _, ffn in sublayer_outputs(model, x)]
    d_hidden = max((torch.tensor([r["hiddenStates"][i + 1] for r in js], dtype=torch.float64) - h.double()).abs().max().item()
                   for i, h in enumerate(blocks))
    assert d_hidden < TOL, d_hidden


def _every_model_value() -> list[tuple[str, object]]:
    from tests.test_limits import _model_values

    return _model_values()


@needs_node
@pytest.mark.parametrize(("key", "value"), _every_model_value(), ids=lambda v: str(v))
def test_the_page_computes_every_value_of_every_model_key_or_refuses_it(tmp_path, key, value):
    """Every value of every model key (read from the config's own types: a new value joins by itself): a
    model built with it, exported, run by forward.js, equals PyTorch; or the export refuses it in one line
    because forward.js's SUPPORTS says the page does not compute it. A value the page computes wrong, or
    one it does not know and does not declare, fails here naming the value."""
    from ablate.explore.export import unsupported
    from tests.test_limits import COMPANIONS

    overrides = {key: value, **COMPANIONS.get((key, value), {})}
    if overrides.get("model.arch", "transformer") != "transformer":
        overrides["model.n_heads"] = C.Config().model.n_heads  # an RNN keeps the attention keys at their defaults
    cfg, model, ckpt = random_model(tmp_path, overrides)
    if problem := unsupported(cfg):
        with pytest.raises(ExploreError, match=f"is a model.{problem[0]}={problem[1]} run; the page's forward pass"):
            export_model(ckpt)
        assert f"model.{problem[0]}" in (key, *(k for k in overrides))
        return
    x = inputs(cfg)
    js = run_node(tmp_path, export_model(ckpt), [{"input": row.tolist()} for row in x])
    logits, maps = torch_run(model, x)
    d_logits, d_maps = diff(js, logits, maps)
    assert d_logits < TOL and d_maps < TOL, f"{key}={value}: forward.js differs from PyTorch by {d_logits:.1e} " \
        f"(logits), {d_maps:.1e} (attention); make forward.js compute it, or list the values it does in SUPPORTS"


def test_no_i18n_key_is_defined_twice():
    """A key written twice in one language of i18n.js is silently the later one (issue 40: `pe.rope` was the
    config table's name of RoPE and demo 5's angle caption, so the table showed the caption's placeholders)."""
    import re

    source = (FORWARD_JS.parent / "i18n.js").read_text(encoding="utf-8")
    en, zh = source.split("\n  en: {", 1)[1].split("\n  zh: {", 1)
    for lang, block in (("en", en), ("zh", zh)):
        keys = re.findall(r'(?:^|[{,]\s*)(?:"([\w.]+)"|([A-Za-z_]\w*))\s*:\s*["\'`]', block, re.M)
        names = [a or b for a, b in keys]
        assert len(names) > 100 and not [k for k in set(names) if names.count(k) > 1], lang


def test_supports_names_keys_and_values_the_config_has():
    """forward.js's SUPPORTS block: every key a model key, every listed value one of that key's values."""
    from dataclasses import fields

    from ablate.explore.export import _spelled, supports

    values: dict[str, set[str]] = {f.name: set() for f in fields(C.SECTIONS["model"])}
    for key, value in _every_model_value():
        values[key.removeprefix("model.")].add(_spelled(value))
    assert set(supports()) <= set(values), set(supports()) - set(values)
    assert all(v == "any" or set(v) <= values[k] for k, v in supports().items()), supports()


@needs_node
def test_mean_token_cosine_is_the_probes():
    """forward.js's meanTokenCosine is ablate.probes' `cosine` (mean over distinct pairs; a zero row counts 0)."""
    g = torch.Generator().manual_seed(3)
    cases = [torch.randn(28, 16, generator=g), torch.randn(29, 64, generator=g) + 3.0, torch.randn(5, 8, generator=g),
             torch.randn(1, 4, generator=g)]
    cases[2][1] = 0.0  # a zero token
    script = (f"const F = require({json.dumps(str(FORWARD_JS))});"
              f"console.log(JSON.stringify({json.dumps([c.tolist() for c in cases])}.map(F.meanTokenCosine)))")
    done = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    expected = [mean_token_cosine(c[None]) for c in cases]
    assert got[-1] is None and math.isnan(expected[-1])  # one token: no pair (JSON writes NaN as null)
    assert max(abs(a - b) for a, b in zip(got[:-1], expected[:-1])) < 1e-12
    assert expected[1] > 0.8 > abs(expected[0])  # the cases differ: the comparison can fail


def _variant(model: torch.nn.Module, cfg: C.Config, strict: bool = True, **fields) -> torch.nn.Module:
    """The same weights in a model whose encoder config has `fields` changed."""
    twin = _model(dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, **fields)))
    twin.load_state_dict(model.state_dict(), strict=strict)
    return twin.eval()


@needs_node
@pytest.mark.parametrize("name", ["tutorial", "rope-causal-nonorm", "alibi-3heads-noresidual-pre"])
def test_inference_overrides_equal_pytorch(tmp_path, name):
    cfg, model, ckpt = random_model(tmp_path, {**CONFIGS[name], "model.n_layers": 2})
    x = inputs(cfg)
    perm = torch.randperm(x.shape[1], generator=torch.Generator().manual_seed(3))
    mask = [[0, 1], [1, 0]]
    overrides = {  # option -> what PyTorch computes for it
        "tau": ({"temperature": 0.3}, lambda: torch_run(_variant(model, cfg, temperature=0.3), x)),
        "no-sqrt-dk": ({"qkScale": not cfg.model.qk_scale},
                       lambda: torch_run(_variant(model, cfg, qk_scale=not cfg.model.qk_scale), x)),
        "no-pe": ({"posEnc": False}, lambda: torch_run(_variant(model, cfg, strict=False, pos_enc="none"), x)),
        "permuted": ({"permute": perm.tolist()}, lambda: torch_run(model, x[:, perm])),
        "head-mask": ({"headMask": mask}, None),
        "all-at-once": ({"temperature": 2.0, "qkScale": False, "posEnc": False, "permute": perm.tolist(),
                         "headMask": mask}, None),
    }
    base, _ = torch_run(model, x)
    exported = export_model(ckpt)
    for what, (options, reference) in overrides.items():
        if what == "head-mask":
            with masked_heads(model, mask):
                want = torch_run(model, x)
        elif what == "all-at-once":
            twin = _variant(model, cfg, strict=False, temperature=2.0, qk_scale=False, pos_enc="none")
            with masked_heads(twin, mask):
                want = torch_run(twin, x[:, perm])
        else:
            want = reference()
        js = run_node(tmp_path, exported, [{"input": row.tolist(), "options": options} for row in x])
        d_logits, d_maps = diff(js, *want)
        print(f"{name} {what}: logits {d_logits:.2e}, attention {d_maps:.2e}")
        assert d_logits < TOL and d_maps < TOL, (what, d_logits, d_maps)
        if not (what == "no-pe" and cfg.model.pos_enc == "none"):
            assert (want[0] - base).abs().max() > 1e-3, what  # the override changes what the model says


@needs_node
def test_erf_matches_python():
    import math

    points = [i / 8 for i in range(-48, 49)] + [7.5, -9.0, 1e-9]
    done = subprocess.run([NODE, "-e", f"const F = require({json.dumps(str(FORWARD_JS))});"
                           f"console.log(JSON.stringify({json.dumps(points)}.map(F.erf)))"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert max(abs(g - math.erf(p)) for g, p in zip(got, points)) < 1e-12


def test_export_holds_the_config_and_every_weight_as_float32(tmp_path):
    cfg, model, ckpt = random_model(tmp_path, CONFIGS["tutorial"])
    for source in (ckpt, tmp_path):  # the checkpoint, or the run directory holding it
        exported = export_model(source)
        assert exported["config"] == C.flat(cfg) and exported["kind"] == "classify"
        assert exported["sizes"] == {"in_features": ROWS, "n_classes": CLASSES}
        state = model.state_dict()
        assert list(exported["weights"]) == list(state)
        import base64

        import numpy as np

        for name, tensor in state.items():
            w = exported["weights"][name]
            array = np.frombuffer(base64.b64decode(w["b64"]), dtype="<f4").reshape(w["shape"])
            assert np.array_equal(array, tensor.numpy()), name
        assert exported["params"] == sum(p.numel() for p in model.parameters())
        json.dumps(exported)  # plain JSON


@needs_node
def test_float16_weights_decode_exactly_and_cost_little(tmp_path):
    """The page's float16 weights: forward.js decodes each to the float16 number itself (equal to PyTorch run
    on the same rounded weights to 1e-4), and against the float32 model the logits move by little."""
    cfg, model, ckpt = random_model(tmp_path, CONFIGS["tutorial"])
    exported = export_model(ckpt, "float16")
    assert {w["dtype"] for w in exported["weights"].values()} == {"float16"}
    rounded = _model(cfg).eval()
    rounded.load_state_dict({k: v.half().float() for k, v in model.state_dict().items()})
    x = inputs(cfg, batch=4)
    js = run_node(tmp_path, exported, [{"input": row.tolist()} for row in x])
    d_logits, d_maps = diff(js, *torch_run(rounded, x))
    drift, _ = diff(js, *torch_run(model, x))
    print(f"float16 page: against PyTorch on the rounded weights logits {d_logits:.2e}, attention {d_maps:.2e}; "
          f"against the float32 model logits {drift:.2e}")
    assert d_logits < TOL and d_maps < TOL, (d_logits, d_maps)
    assert 0 < drift < 0.05
    with pytest.raises(ExploreError, match="precision 'int4' is not one of float32, float16"):
        export_model(ckpt, "int4")


# ---- bad input: exit 2, one line `ablate: problem; fix`, nothing written ----

class Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/ablate-explore-pwned",))


def _bad_sources(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    cfg, model, _ = random_model(tmp_path, {})
    (tmp_path / "empty-run").mkdir()
    garbage = tmp_path / "garbage.ckpt"
    garbage.write_bytes(b"not a checkpoint at all" * 10)
    foreign = tmp_path / "foreign.ckpt"
    torch.save({"weights": torch.zeros(3)}, foreign)
    evil = tmp_path / "evil.ckpt"
    evil.write_bytes(pickle.dumps({"state_dict": Evil(), "global_step": 0, "hyper_parameters": {}}))
    misfit = tmp_path / "misfit.ckpt"
    state = {f"model.{k}": v for k, v in model.state_dict().items() if "blocks.1." not in k}
    torch.save({"state_dict": state, "global_step": 0,
                "hyper_parameters": {"config": C.to_dict(cfg), "in_features": ROWS, "n_classes": CLASSES}}, misfit)
    badcfg = tmp_path / "badcfg.ckpt"
    broken = C.to_dict(cfg)
    broken["model"]["pos_enc"] = "wobbly"
    torch.save({"state_dict": state, "global_step": 0,
                "hyper_parameters": {"config": broken, "in_features": ROWS, "n_classes": CLASSES}}, badcfg)
    # a run stopped part way (issue 41: its half-trained model reached the page): its summary says so
    half = tmp_path / "half-trained"
    half.mkdir()
    shutil.copy(tmp_path / "last.ckpt", half / "last.ckpt")
    (half / "summary.json").write_text(json.dumps({"status": "interrupted", "global_step": 16}))
    return {
        "missing": (tmp_path / "no-such-run", "does not exist"),
        "an interrupted run": (half, "is a run that is interrupted, not completed"),
        "no checkpoint": (tmp_path / "empty-run", "holds no last.ckpt"),
        "garbage": (garbage, "truncated"),
        "not ablate's": (foreign, "not a checkpoint of an ablate run"),
        "crafted pickle": (evil, "refused"),
        "weights do not fit": (misfit, "does not fit the model its config builds"),
        "config it cannot build": (badcfg, "pos_enc='wobbly' is not allowed"),
    }


def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys):
    for what, (source, words) in _bad_sources(tmp_path).items():
        out = tmp_path / "models.json"
        with pytest.raises(ExploreError, match=words.replace("(", r"\(")):
            export_model(source)
        code = cli(["explore", str(tmp_path / "last.ckpt"), str(source), "--json", str(out)])
        err = capsys.readouterr().err.strip()
        assert code == 2, what
        assert len(err.splitlines()) == 1 and err.startswith("ablate: ") and "; " in err and words in err, (what, err)
        assert not out.exists(), what
    assert not Path("/tmp/ablate-explore-pwned").exists()


# ---- a trained model: `ablate train` on MNIST rows, exported by `ablate explore` ----

@needs_node
@needs_mnist
def test_trained_mnist_model_in_js_equals_pytorch(tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "ABLATE_RUNS_DIR": str(tmp_path / "runs"), "ABLATE_PROGRESS": "0", "WANDB_MODE": "offline"}
    done = subprocess.run([sys.executable, "-m", "ablate", "train", "budget=smoke", "data.train_subset=256",
                           "data.test_subset=64", "tracking=none", "trainer.threads=1", "run.probes=false",
                           f"run.dir={run}"], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    out = tmp_path / "models.json"
    done = subprocess.run([sys.executable, "-m", "ablate", "explore", str(run), "--json", str(out)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    [exported] = json.loads(out.read_text())
    assert exported["global_step"] > 0 and exported["source"] == str(run)

    from ablate.tasks import load_task

    task, datamodule = load_task(run / "last.ckpt")
    datamodule.setup("test")
    x, y = next(iter(datamodule.test_dataloader()))
    x = x[:4]
    logits, maps = torch_run(task.model, x)
    js = run_node(tmp_path, exported, [{"input": row.tolist()} for row in x])
    d_logits, d_maps = diff(js, logits, maps)
    print(f"trained MNIST: logits {d_logits:.2e}, attention {d_maps:.2e}")
    assert d_logits < TOL and d_maps < TOL, (d_logits, d_maps)
    assert [r["logits"].index(max(r["logits"])) for r in js] == logits.argmax(-1).tolist()


# ---- the page: `ablate explore SOURCE... --out PAGE.html` ----

def _idx(root: Path, labels: list[int]) -> None:
    """A small pair of MNIST test IDX files: image i is filled with the value 3 * i."""
    import struct

    root.mkdir(parents=True)
    n = len(labels)
    (root / "t10k-images-idx3-ubyte").write_bytes(struct.pack(">4I", 2051, n, 28, 28)
                                                  + b"".join(bytes([3 * i]) * 784 for i in range(n)))
    (root / "t10k-labels-idx1-ubyte").write_bytes(struct.pack(">2I", 2049, n) + bytes(labels))


def _page_data(html: str) -> tuple[list[dict], dict]:
    import re

    def block(name):
        return json.loads(re.search(f'<script type="application/json" id="{name}">(.*?)</script>', html, re.S)
                          .group(1).replace("<\\/", "</"))

    return block("models"), block("images")


def test_normalisation_is_the_data_modules(tmp_path):
    from ablate.data.mnist import MEAN, STD
    from ablate.explore.images import normalisation

    assert normalisation() == (MEAN, STD)


def test_page_is_one_self_contained_file(tmp_path, monkeypatch, capsys):
    _idx(tmp_path / "data" / "MNIST" / "raw", [7, 2, 1, 0, 4, 1, 4, 9, 5, 9, 0, 6, 9, 0, 1, 5, 9, 7, 3, 4, 9, 6, 6, 5, 4, 0, 7, 4, 0, 1, 3, 1, 3, 4, 7, 2, 7, 1, 2, 1, 1, 7, 4, 2, 3, 5, 1, 2, 4, 4, 6, 3, 5, 5, 6, 0, 4, 1, 9, 5, 7, 8, 9, 3])
    monkeypatch.setenv("ABLATE_DATA_DIR", str(tmp_path / "data"))
    run = tmp_path / "my-run"
    run.mkdir()
    random_model(run, {})
    out = tmp_path / "page.html"
    assert cli(["explore", str(run), str(run / "last.ckpt"), "--out", str(out)]) == 0, capsys.readouterr().err
    html = out.read_text()
    assert "http" not in html.replace("http://www.w3.org", "") and " src=" not in html and "<link rel=\"stylesheet\"" not in html
    assert str(tmp_path) not in html  # no absolute path travels with the page
    models, images = _page_data(html)
    assert [m["name"] for m in models] == ["my-run", "my-run-2"]
    assert all("run.dir" not in m["config"] and "source" not in m for m in models)
    assert models[0]["weights"] == export_model(run, "float16")["weights"]  # the page carries float16
    from ablate.data.mnist import MEAN, STD

    assert (images["mean"], images["std"]) == (MEAN, STD)
    # one image of each digit, the first of each in file order, as raw pixels
    assert [im["label"] for im in images["images"]] == list(range(10))
    assert [im["index"] for im in images["images"]] == [3, 2, 1, 18, 4, 8, 11, 0, 61, 7]
    assert all(im["pixels"] == [3 * im["index"]] * 784 for im in images["images"])
    assert FORWARD_JS.read_text() in html


def test_page_bad_input_exits_2_and_writes_nothing(tmp_path, monkeypatch, capsys):
    _, _, ckpt = random_model(tmp_path, {})
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    random_model(tokens, {**COPY, "data.vocab": 4})
    out = tmp_path / "page.html"
    monkeypatch.setenv("ABLATE_DATA_DIR", str(tmp_path / "nowhere"))
    cases = {
        "nothing to write": ([str(ckpt)], "give --out PAGE.html and/or --json PATH"),
        "no MNIST": ([str(ckpt), "--out", str(out)], "MNIST test files"),
        "a copy model of too few tokens": ([str(ckpt), str(tokens), "--out", str(out), "--json", str(tmp_path / "m.json")],
                                           "give one with data.vocab >= 6"),
    }
    for name, overrides, words in (
            ("histogram", {"data.task": "histogram", "data.vocab": 6, "data.length": 4}, "copy models only"),
            ("reversed", {**COPY, "data.vocab": 6, "data.reverse": True}, "in-order copy models only"),
            ("short", {**COPY, "data.vocab": 6, "data.length": 4}, "needs 13 positions"),
            ("copy-alone", {**COPY, "data.vocab": 6}, "at least one MNIST-row model")):
        (tmp_path / name).mkdir()
        random_model(tmp_path / name, overrides)
        sources = [str(tmp_path / name)] if name == "copy-alone" else [str(ckpt), str(tmp_path / name)]
        cases[name] = ([*sources, "--out", str(out)], words)
    for what, (argv, words) in cases.items():
        assert cli(["explore", *argv]) == 2, what
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("ablate: ") and "; " in err and words in err, (what, err)
        assert not out.exists() and not (tmp_path / "m.json").exists(), what
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "t10k-images-idx3-ubyte").write_bytes(b"\0\0\x08\x03" + b"\0" * 20)
    (tmp_path / "raw" / "t10k-labels-idx1-ubyte").write_bytes(b"\0\0\x08\x01" + b"\0" * 8)
    from ablate.explore.images import mnist_test_images

    with pytest.raises(ExploreError, match="is not a whole IDX file"):
        mnist_test_images(tmp_path / "raw")


# ---- the committed page: reports/explorer.html, so that the report's link works on a fresh clone ----

COMMITTED = Path(__file__).resolve().parents[1] / "reports" / "explorer.html"


def test_committed_page_holds_every_shipped_model_and_is_built_by_this_code():
    """reports/explorer.html is committed (built by `make explore`): it must hold the shipped models, trained
    (float16, with their test accuracy), stay under 8 MB, and equal what this version's page builder makes
    of its own data, so a change to page.js, page.css, page.html, i18n.js or forward.js without a rebuild fails."""
    from ablate.explore.page import build_page
    from ablate.explore.shipped import SHIPPED

    html = COMMITTED.read_text()
    assert COMMITTED.stat().st_size < 8_000_000
    models, images = _page_data(html)
    assert [m["name"] for m in models] == list(SHIPPED)
    for m in models:
        assert {w["dtype"] for w in m["weights"].values()} == {"float16"}, m["name"]
        assert m["global_step"] > 0 and 0.1 < m["metrics"]["test/acc"] <= 1, m["name"]
    assert [im["label"] for im in images["images"]] == list(range(10))
    assert build_page(models, images["images"], images["mean"], images["std"]) == html, \
        "reports/explorer.html is stale: run `make explore` (it keeps the trained runs) and commit it"


# ---- the committed page's copy models (demo 1's Q1 part): the tutorial's sentence, in order and reordered ----

def _torch_of_page_model(m: dict) -> TokenModel:
    """The PyTorch model of a page model: its config, its (float16) weights as float32."""
    import base64

    import numpy as np

    from ablate.explore.export import PRECISIONS

    cfg = _page_config(m)
    model = TokenModel(cfg.encoder, m["sizes"]["n_tokens"], m["sizes"]["n_out"])
    model.load_state_dict({name: torch.from_numpy(np.frombuffer(base64.b64decode(w["b64"]), PRECISIONS[w["dtype"]])
                                                  .astype(np.float32).reshape(w["shape"]))
                           for name, w in m["weights"].items()})
    return model.eval()


def _page_config(m: dict) -> C.Config:
    return C.build({k: v for k, v in m["config"].items() if not k.startswith("run.") and k != "budget"}, machine=False)


@needs_node
def test_committed_copy_models_in_js_equal_pytorch_on_the_sentence(tmp_path):
    """The page's two copy models on 猫坐在垫子上 and 垫子在猫坐上 (the report's copy inputs): node's forward.js equals
    PyTorch on the page's own float16 weights to 1e-4; the learned-PE model copies both orders; the model without
    positions obeys A(Px) = P·A(x)·Pᵀ on the page's numbers (every layer and head), and its prediction at the
    blanks does not depend on the order."""
    from ablate.data.copytask import CopyTask
    from ablate.results.export import SENTENCE_PERM_WORDS, SENTENCE_WORDS, copy_input, sentence

    models, _ = _page_data(COMMITTED.read_text())
    copies = {m["name"]: m for m in models if m["kind"] == "tokens"}
    assert set(copies) == {"copy", "copy-no-pe"}
    words = sentence()
    assert (list(SENTENCE_WORDS), list(SENTENCE_PERM_WORDS)) == (words["words"], words["perm_words"])
    perm = [SENTENCE_WORDS.index(w) for w in SENTENCE_PERM_WORDS] + list(range(6, 13))  # P: position i reads x[perm[i]]
    for name, m in copies.items():
        task = CopyTask(_page_config(m).data)
        vocab = m["config"]["data.vocab"]
        assert (task.sep, task.blank) == (vocab, vocab + 1) and m["config"]["data.length"] == 6
        xs = [copy_input(words["tokens"], vocab), copy_input(words["perm_tokens"], vocab)]
        assert xs[1] == [xs[0][i] for i in perm]
        model = _torch_of_page_model(m)
        js = run_node(tmp_path, m, [{"input": x} for x in xs])
        logits, maps = torch_run(model, torch.tensor(xs))
        d_logits, d_maps = diff(js, logits, maps)
        predicted = logits[:, 7:].argmax(-1).tolist()
        print(f"{name}: logits {d_logits:.2e}, attention {d_maps:.2e}; test/acc {m['metrics']['test/acc']:.4f}; "
              f"predicted {predicted}")
        assert d_logits < TOL and d_maps < TOL, (name, d_logits, d_maps)
        if name == "copy":
            assert predicted == [words["tokens"], words["perm_tokens"]]
            assert m["metrics"]["test/acc"] > 0.99
        else:
            A, B = (torch.tensor(r["attention"], dtype=torch.float64) for r in js)  # (L, H, T, T)
            d_perm = (B - A[:, :, perm][:, :, :, perm]).abs().max().item()
            print(f"{name}: max |A(Px) - P A(x) P^T| {d_perm:.2e}")
            assert d_perm < 1e-9
            assert predicted[0] == predicted[1] and len(set(predicted[0])) == 1  # every blank alike, either order
            assert 0.2 < m["metrics"]["test/acc"] < 0.45  # the order-blind level (~30 %), not a copy


def test_the_pages_text_sizes_follow_the_readers_font_size():
    """Issue 40: the page's fonts were fixed in px, so a reader's larger default font did not reach them; every
    font size in page.css is in rem (relative to the browser's root size), none in px."""
    css = (Path(__file__).resolve().parents[1] / "ablate" / "explore" / "page.css").read_text()
    sizes = re.findall(r"font(?:-size)?:\s*([\d.]+)(px|rem|em)", css)
    assert sizes and all(unit == "rem" for _, unit in sizes), sizes
