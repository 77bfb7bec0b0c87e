"""The recurrent baseline (issue 17) through the rest of the harness: W&B probe curves, `ablate probe`,
the results table's parameter columns (local and W&B), the memory estimate, the explorer's refusal,
and the report export's attention maps."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .sweep_fixtures import train_arch_sweep

ROOT = Path(__file__).resolve().parents[1]


def offline_env(tmp: Path) -> dict[str, str]:
    """W&B offline, every W&B folder under tmp, a base URL where nothing answers (no network)."""
    return {**os.environ, "WANDB_MODE": "offline", "ABLATE_RUNS_DIR": str(tmp / "runs"), "WANDB_DIR": str(tmp),
            "WANDB_CONFIG_DIR": str(tmp / "wandb-config"), "WANDB_CACHE_DIR": str(tmp / "wandb-cache"),
            "WANDB_DATA_DIR": str(tmp / "wandb-data"), "HOME": str(tmp), "WANDB_SILENT": "true",
            "ABLATE_PROGRESS": "0", "WANDB_BASE_URL": "http://127.0.0.1:9"}


# --- 1. periodic probes of an RNN under W&B ---------------------------------------------------------

def test_gru_with_wandb_and_periodic_probes_completes(tmp_path):
    """W&B gets a heatmap of the attention maps at every probe step, for a model that has them; a GRU
    has none, and the run used to die there (NotApplicable). Now it completes, with its probe curve."""
    run_dir = tmp_path / "run"
    args = ["model.arch=gru", "data.task=copy", "budget=smoke", "run.probe_every=4", "tracking=wandb",
            "data.train_subset=128", "data.batch_size=16", "trainer.max_epochs=1", "trainer.threads=1", f"run.dir={run_dir}"]
    done = subprocess.run([sys.executable, "-m", "ablate.cli", "train", *args], cwd=ROOT, env=offline_env(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"
    curve = (run_dir / "probes.csv").read_text().splitlines()
    assert curve[0].startswith("step,") and "grad_l0" in curve[0] and "logit_std" not in curve[0]
    assert [int(line.split(",")[0]) for line in curve[1:]][:3] == [0, 4, 8]
    assert list(run_dir.glob("wandb/offline-run-*"))


# --- a sweep with an LSTM beside a Transformer (copy task: Q1's sentence fits it) ----------------------

VOCAB = 6
FIXED = {"data.task": "copy", "data.vocab": VOCAB, "data.length": 6, "data.n_train": 64, "data.n_val": 32,
         "data.n_test": 32, "data.batch_size": 32, "model.d_model": 16, "model.pos_enc": "none",
         "trainer.max_epochs": 1, "trainer.threads": 1, "tracking": "none", "run.probe_batch": 8,
         "run.expensive_probes": False}
SWEEP = "pos_enc"  # one of the export's SENTENCE sweeps: every run's attention on Q1's sentence


def quiet(_line: str) -> None:
    pass


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """sweeps/pos_enc.yaml with model.arch transformer and lstm (one seed), trained for real:
    (root, {arch: run directory})."""
    import yaml

    root = tmp_path_factory.mktemp("mixed")
    runs = train_arch_sweep(root, SWEEP, FIXED, ["transformer", "lstm"])
    dirs = {yaml.safe_load((d / "config.yaml").read_text())["model"]["arch"]: d for d in runs.iterdir()
            if (d / "config.yaml").is_file()}
    assert sorted(dirs) == ["lstm", "transformer"]
    return root, dirs


@pytest.fixture
def in_mixed(mixed, monkeypatch):
    root, _ = mixed
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(root / "runs"))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")
    monkeypatch.chdir(tmp_path_of(root))
    return mixed


def tmp_path_of(root: Path) -> Path:
    work = root / "cwd"
    work.mkdir(exist_ok=True)
    return work


# --- 2. `ablate probe` names what does not apply ------------------------------------------------------

def test_probe_command_names_the_probes_that_do_not_apply_to_an_lstm(in_mixed, capsys):
    from ablate import cli
    from ablate.probes import NOT_APPLICABLE_TO_RNN

    _, dirs = in_mixed
    assert cli.main(["probe", str(dirs["lstm"]), "--batch", "8", "--no-expensive"]) == 0
    out = capsys.readouterr().out
    section = out.split("\n\n")[-1].splitlines()
    assert section == ["[not applicable: the model has no attention]", *NOT_APPLICABLE_TO_RNN]
    assert "attention maps" in section and "[collapse]" in out
    assert cli.main(["probe", str(dirs["transformer"]), "--batch", "8", "--no-expensive"]) == 0
    assert "not applicable" not in capsys.readouterr().out


# --- 3. params/recurrent on both paths ------------------------------------------------------------------

def _lstm_recurrent() -> int:
    from ablate.models import EncoderConfig, matched_hidden, rnn_params

    return rnn_params("lstm", 16, matched_hidden(EncoderConfig(arch="lstm", d_model=16, pos_enc="none")), 2)


def _check_params(df) -> None:
    params = [c for c in df.columns if c.startswith("params/")]
    assert params == ["params/attention", "params/ffn", "params/recurrent", "params/embedding", "params/other",
                      "params/total"]
    rows = df.set_index("model.arch")
    lstm, tf = rows.loc["lstm"], rows.loc["transformer"]
    assert lstm["params/recurrent"] == _lstm_recurrent() and tf["params/recurrent"] == 0  # it has none: 0, not empty
    assert lstm["params/attention"] == lstm["params/ffn"] == 0 and tf["params/attention"] > 0 and tf["params/ffn"] > 0
    for row in (lstm, tf):
        assert row["params/total"] == sum(row[f"params/{p}"] for p in ("attention", "ffn", "recurrent", "embedding", "other"))


def test_recurrent_parameters_are_a_column_of_the_local_and_the_wandb_table(in_mixed):
    import json
    from types import SimpleNamespace as Run

    import yaml

    from ablate.config import flat, from_dict
    from ablate.results import load
    from ablate.results.wandb_runs import groups, load_wandb

    root, dirs = in_mixed
    local = load(SWEEP, root=root / "runs", sweeps=root / "sweeps")
    _check_params(local)

    runs = []
    for d in dirs.values():  # what W&B holds of each run: the flat config, the summary as train.py writes it
        summary = json.loads((d / "summary.json").read_text())
        config = flat(from_dict(yaml.safe_load((d / "config.yaml").read_text())))
        runs.append(Run(id=d.name, state="finished", config=config, commit=None,
                        summary={"status": "completed", "test/acc": summary["metrics"]["test/acc"],
                                 **{f"params/{k}": v for k, v in summary["params"].items()}}))

    class Api:
        def runs(self, path, filters=None):
            assert filters == {"group": {"$in": groups(SWEEP)}}
            return runs

    remote = load_wandb(SWEEP, "team/p", api=Api(), sweeps=str(root / "sweeps"))
    _check_params(remote)


def test_a_transformer_sweep_keeps_its_columns():
    """No run has recurrent parameters: no params/recurrent column (tables and CSVs exported before stay)."""
    from ablate.results.table import RunRecord, from_records

    record = RunRecord(run_id="a", config={"seed": 0}, status="completed",
                       params={"attention": 1, "ffn": 2, "embedding": 3, "other": 4, "total": 10})
    df = from_records([record], "t", "local")
    assert [c for c in df.columns if c.startswith("params/")] == [
        "params/attention", "params/ffn", "params/embedding", "params/other", "params/total"]


# --- 5. the explorer refuses an RNN -------------------------------------------------------------------

def test_explore_refuses_an_lstm_run_in_one_line_and_writes_nothing(in_mixed, tmp_path, capsys):
    from ablate import cli

    _, dirs = in_mixed
    data = tmp_path / "models.json"
    # the Transformer first: it exports (--json takes a copy-task model), and still nothing is written
    # when the next source is refused
    code = cli.main(["explore", str(dirs["transformer"]), str(dirs["lstm"]), "--json", str(data)])
    err = capsys.readouterr().err.splitlines()
    assert code == 2
    assert err == [f"ablate: {dirs['lstm']} is a model.arch=lstm run; the page's forward pass computes "
                   "model.arch=transformer only (ablate/explore/forward.js, SUPPORTS); give the run directory of "
                   "such a run"]
    assert list(tmp_path.iterdir()) == []
    assert cli.main(["explore", str(dirs["transformer"]), "--json", str(data)]) == 0 and data.is_file()


# --- 6. the report export's attention maps skip an RNN, and say so -------------------------------------

def test_report_export_skips_the_lstm_attention_maps_and_says_so(in_mixed, tmp_path):
    import numpy as np

    from ablate.results.export import export

    root, dirs = in_mixed
    said: list[str] = []
    export([SWEEP], runs=root / "runs", data=tmp_path / "data", sweeps=root / "sweeps", log=quiet, warn=said.append)
    lstm, tf = dirs["lstm"].name, dirs["transformer"].name
    assert said == [f"ablate report export: {SWEEP}: run {lstm}: no attention maps (model.arch=lstm has no "
                    "attention: not applicable)"]
    with np.load(tmp_path / "data" / f"{SWEEP}.npz") as f:
        names = set(f.files)
    assert {f"{tf}/final/sentence", f"{tf}/final/sentence_perm", f"{tf}/final/attention_perm"} <= names
    assert not [n for n in names if n.startswith(f"{lstm}/") and ("sentence" in n or "attention" in n)]
    assert {f"{lstm}/val_acc", f"{tf}/val_acc"} <= names  # its curves are exported as any run's


# --- 4. the memory estimate of a recurrent model --------------------------------------------------------

RNN_CONFIGS = [
    ("model.arch=lstm",),
    ("model.arch=gru", "pooling=cls"),
    ("model.arch=lstm", "model.rnn_hidden=100", "model.n_layers=3", "model.pos_enc=sinusoidal"),
    ("model.arch=gru", "data.task=copy", "data.vocab=13", "model.max_len=40"),
    ("model.arch=lstm", "data.task=copy", "model.pos_enc=none", "model.d_model=24", "model.n_layers=1"),
]


@pytest.mark.parametrize("items", RNN_CONFIGS)
def test_the_meta_count_of_an_rnn_equals_the_built_model(items):
    from ablate import config as C
    from ablate import limits
    from tests.test_limits import built_parameters

    cfg = C.build(C.parse_overrides(list(items)))
    assert limits.parameter_count(cfg) == built_parameters(cfg)


def test_the_solved_hidden_size_is_the_searched_one():
    """matched_hidden solves its rule (the size closest in parameters, the smaller on a tie) as a root: the
    size a search over every hidden size finds, whatever the width and depth."""
    import itertools

    from ablate import limits
    from ablate.models import EncoderConfig, matched_hidden, rnn_params
    from ablate.models.rnn import transformer_params

    for arch, d, n_layers in itertools.product(("lstm", "gru"), (1, 3, 16, 24, 64, 100, 256), (1, 2, 3, 6, 12)):
        m = EncoderConfig(arch=arch, d_model=d, n_layers=n_layers, pos_enc="none")
        target = transformer_params(m)
        searched = min(range(1, 4 * d + 8), key=lambda h: (abs(rnn_params(arch, d, h, n_layers) - target), h))
        assert matched_hidden(m) == limits.rnn_hidden(m) == searched, (arch, d, n_layers)
    assert limits.rnn_hidden(EncoderConfig(arch="lstm", rnn_hidden=7)) == 7


def saved_activation_bytes(cfg) -> int:
    """Bytes of the tensors autograd keeps for backward in one training forward of the model ablate.tasks
    builds for cfg (weights left out), on CPU: what the estimate's training half stands for."""
    import torch
    import torch.nn.functional as F

    from ablate import config as C
    from ablate.registry import spec
    from ablate.tasks import ClassifyRows, CopyTokens

    torch.manual_seed(0)
    B = cfg.data.batch_size
    if cfg.data.task == "mnist":
        model = ClassifyRows(C.to_dict(cfg), in_features=28, n_classes=10).model
        x, y = torch.randn(B, 28, 28), torch.randint(0, 10, (B,))
    else:
        model = CopyTokens(C.to_dict(cfg), n_tokens=cfg.data.vocab + 2, n_out=cfg.data.vocab).model
        T = spec("copy").seq_len(cfg.data)
        x, y = torch.randint(0, cfg.data.vocab + 2, (B, T)), torch.randint(0, cfg.data.vocab, (B, T))
    model.train()
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in weights:
            kept[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
        F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    return sum(kept.values())


@pytest.mark.parametrize("items", [
    ("model.arch=lstm", "data.task=copy"),
    ("model.arch=gru", "data.task=copy"),
    ("model.arch=lstm", "model.rnn_hidden=128"),
    ("model.arch=gru", "model.n_layers=3", "pooling=cls"),
    ("model.arch=lstm", "data.task=copy", "model.d_model=128", "model.n_layers=1", "data.length=24"),
])
def test_activation_estimate_of_an_rnn_is_within_tolerance_of_what_autograd_keeps(items):
    """A batch of EVAL_CHUNK examples, so the training half of the estimate is the one that counts."""
    from ablate import config as C
    from ablate import limits

    cfg = C.build(C.parse_overrides([*items, f"data.batch_size={limits.EVAL_CHUNK}"]))
    measured = saved_activation_bytes(cfg)
    ratio = limits.activation_bytes(cfg) / measured
    print(f"{' '.join(items)}: estimate / measured = {ratio:.3f}")
    low, high = limits.RNN_TOLERANCE
    assert low <= ratio <= high, ratio


def test_a_huge_rnn_is_refused_in_one_line_before_anything_is_built(tmp_path, monkeypatch, capsys):
    """The hidden size is solved, not searched on a built model: a billion layers is refused at once."""
    from ablate import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    assert cli.main(["train", "tracking=none", "model.arch=lstm", "model.n_layers=1e9"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("ablate: ") and "model.n_layers" in err[0], err
    assert list(tmp_path.iterdir()) == []
