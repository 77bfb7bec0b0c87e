"""`ablate report export` records what the reports would otherwise import the harness for (issue 14,
"Layering"): per sweep the swept keys, every config key's default and the full budget's cost, computed
by the live code; and Q1's literal example, the tutorial's 猫坐在垫子上 and 垫子在猫坐上 by character,
through every trained model of the Q1 sweeps, checked against the model's own attention."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
import yaml

from ablate import report as R
from ablate.config import Config, flat
from ablate.report.data import DataFileError
from ablate.results import load
from ablate.results.cost import GPU_STEPS_PER_S, sweep_cost
from ablate.results.export import export
from ablate.sweep import spec
from ablate.tasks import load_task
from ablate.train import train

VOCAB = 6  # SEP = 6, BLANK = 7
FIXED = {"data.task": "copy", "data.vocab": VOCAB, "data.length": 6, "data.n_train": 64, "data.n_val": 32,
         "data.n_test": 48, "data.batch_size": 32, "model.d_model": 16, "model.n_heads": 2, "trainer.max_epochs": 1,
         "trainer.threads": 1, "tracking": "none", "run.probe_batch": 8, "run.expensive_probes": False}
# the sentence as a copy input, written out by hand: 猫 坐 在 垫 子 上 SEP _ _ _ _ _ _
SENTENCE = [0, 1, 2, 3, 4, 5, 6, 7, 7, 7, 7, 7, 7]
REORDERED = [3, 4, 2, 0, 1, 5, 6, 7, 7, 7, 7, 7, 7]  # 垫 子 在 猫 坐 上 SEP _ _ _ _ _ _
# position i of the reordering holds the sentence's token at position WHERE[i] (six distinct characters:
# a permutation)
WHERE = [3, 4, 2, 0, 1, 5, *range(6, 13)]


def quiet(_line: str) -> None:
    pass


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """sweeps/pos_enc.yaml (no positions, learned positions; one seed) trained for real, then exported."""
    root = tmp_path_factory.mktemp("sentence")
    sweeps, runs, data = root / "sweeps", root / "runs", root / "data"
    sweeps.mkdir()
    sweep_file = {"program": "ablate", "command": ["ablate", "train", "${args_no_hyphens}"], "method": "grid",
                  "parameters": {"run.group": {"value": "pos_enc"}, "budget": {"value": "smoke"},
                                 **{k: {"value": v} for k, v in FIXED.items()},
                                 "model.pos_enc": {"values": ["none", "learned"]}, "seed": {"values": [0]}}}
    (sweeps / "pos_enc.yaml").write_text(yaml.safe_dump(sweep_file))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABLATE_RUNS_DIR", str(runs))
        mp.setenv("ABLATE_PROGRESS", "0")
        for run in spec.load(str(sweeps / "pos_enc.yaml"), budget="smoke").runs:
            assert train(run.cfg, log=quiet)["status"] == "completed"
        said: list[str] = []
        export(["pos_enc"], runs=runs, data=data, sweeps=sweeps, log=quiet, warn=said.append)
    assert said == []
    return root


def test_meta_records_what_the_reports_would_import_the_harness_for(exported):
    """swept_keys, config_defaults and cost_full equal what the harness computes now; the reports read
    them from meta.json (R.config_defaults, R.table's attrs) without importing it."""
    data, sweeps = exported / "data", exported / "sweeps"
    entry = json.loads((data / "meta.json").read_text())["sweeps"]["pos_enc"]
    assert entry["config_defaults"] == flat(Config()) and entry["config_defaults"]["model.ffn_mult"] == 2
    assert R.config_defaults(data) == flat(Config()) == R.config_defaults(data, sweep="pos_enc")
    assert entry["swept_keys"] == load("pos_enc", root=exported / "runs", sweeps=sweeps).attrs["swept_keys"]
    assert entry["swept_keys"] == ["model.pos_enc"]  # one seed: the seed does not vary
    df = R.table("pos_enc", data)
    assert df.attrs["swept_keys"] == entry["swept_keys"]
    assert df.attrs["config_keys"] == [c for c in df.columns if c in flat(Config())]
    cost = sweep_cost("pos_enc", df, sweeps)  # what the report computed before, from the exported table
    assert entry["cost_full"] == {**json.loads(json.dumps(dataclasses.asdict(cost))),  # tuples as lists
                                  "gpu_steps_per_s": list(GPU_STEPS_PER_S)}
    assert entry["cost_full"]["runs"] == 2 and entry["cost_full"]["budget"] == "full"
    assert entry["cost_full"]["cpu_hours"] > 0 and len(entry["cost_full"]["gpu_hours"]) == 2
    assert (df["eval/n_val"] == 32).all() and (df["eval/n_test"] == 48).all()


def test_a_folder_exported_before_the_defaults_were_recorded_says_so(exported, tmp_path):
    meta = json.loads((exported / "data" / "meta.json").read_text())
    del meta["sweeps"]["pos_enc"]["config_defaults"]
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DataFileError, match="records no config defaults .*export it again"):
        R.config_defaults(tmp_path)
    (tmp_path / "meta.json").write_text(json.dumps({"sweeps": {}}))
    assert R.config_defaults(tmp_path) == {}  # nothing exported yet: the notebooks show "not run yet"


def _attention(model, tokens: list[int]) -> np.ndarray:
    """The model's own first-layer attention weights (H, T, T) on one input, computed here."""
    model.eval()
    with torch.no_grad():
        _, maps = model(torch.tensor([tokens]), return_attention=True)  # L x (B, H, T, T)
    return maps[0][0].double().numpy()


def test_the_sentence_through_every_trained_model(exported):
    """Every run's first-layer maps on the sentence and its reordering are its model's own attention
    (uint8 x 255); without positions the reordering only permutes the map (the model cannot see order),
    with learned positions it does not."""
    data, runs = exported / "data", exported / "runs" / "pos_enc"
    meta = json.loads((data / "meta.json").read_text())
    assert meta["sentence"] == {
        "words": ["猫", "坐", "在", "垫", "子", "上"], "perm_words": ["垫", "子", "在", "猫", "坐", "上"],
        "tokens": [0, 1, 2, 3, 4, 5], "perm_tokens": [3, 4, 2, 0, 1, 5],
        "labels": ["猫", "坐", "在", "垫", "子", "上", "SEP", "_", "_", "_", "_", "_", "_"]}
    df, arrays = R.table("pos_enc", data), R.arrays("pos_enc", data)
    assert len(df) == 2 and R.sweep("pos_enc", data).sentence == meta["sentence"]
    for run_id, pos_enc in zip(df["run_id"], df["model.pos_enc"]):
        task, _ = load_task(runs / run_id / "last.ckpt")
        stored = {key: arrays[f"{run_id}/final/{key}"] for key in ("sentence", "sentence_perm")}
        for key, tokens in (("sentence", SENTENCE), ("sentence_perm", REORDERED)):
            assert stored[key].dtype == np.uint8 and stored[key].shape == (2, 13, 13), (pos_enc, key)
            own = _attention(task.model, tokens)
            assert np.abs(stored[key].astype(float) - own * 255).max() <= 0.5 + 1e-6, (pos_enc, key)
        shown = R.sweep("pos_enc", data).attention(run_id, "final/sentence")  # what a notebook reads
        assert shown.dtype == np.float32 and np.array_equal(shown, stored["sentence"] / np.float32(255))
        a, b = (stored[k].astype(int) for k in ("sentence", "sentence_perm"))
        moved = a[:, WHERE][:, :, WHERE]  # the sentence's map, rows and columns in the reordering's order
        if pos_enc == "none":
            assert np.abs(b - moved).max() <= 1  # equal up to the uint8 rounding
        else:
            assert np.abs(b - moved).max() > 1  # positions make the reordering a different input


def test_the_permuted_probe_example_reorders_the_tokens_and_keeps_sep_and_blanks(exported):
    """Q1's permuted maps (issue 26): the copy input's 6 tokens are reordered, SEP and the 6 blanks stay where
    they are, as in 猫坐在垫子上 -> 垫子在猫坐上; without positions the map is the original's, moved."""
    data = exported / "data"
    df, arrays = R.table("pos_enc", data), R.arrays("pos_enc", data)
    for run_id, pos_enc in zip(df["run_id"], df["model.pos_enc"]):
        perm = arrays[f"{run_id}/perm"].astype(int)
        assert sorted(perm[:6]) == list(range(6)) and list(perm[:6]) != list(range(6))
        assert list(perm[6:]) == list(range(6, 13))
        a = arrays[f"{run_id}/final/attention"][0, 0].astype(int)
        ap = arrays[f"{run_id}/final/attention_perm"][0, 0].astype(int)
        moved = a[perm][:, perm]
        if pos_enc == "none":
            assert np.abs(ap - moved).max() <= 1
        else:
            assert np.abs(ap - moved).max() > 1


def test_export_of_the_sentence_is_reproducible(exported, tmp_path):
    """A second export of the same runs writes the same bytes (the maps included)."""
    first = {p.name: p.read_bytes() for p in (exported / "data").iterdir()}
    export(["pos_enc"], runs=exported / "runs", data=tmp_path, sweeps=exported / "sweeps", log=quiet)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == first


def test_a_model_that_cannot_read_the_sentence_goes_without_and_says_so(tmp_path, monkeypatch):
    """Sequences of 4 tokens (9 positions, learned positions): the 13-position sentence does not fit. The
    run keeps its permuted maps, loses the sentence's, and one line says why; a checkpoint that cannot be
    loaded is named once, not once per map."""
    sweeps, runs, data = tmp_path / "sweeps", tmp_path / "runs", tmp_path / "data"
    sweeps.mkdir()
    short = {**FIXED, "data.length": 4, "model.pos_enc": "learned"}
    sweep_file = {"program": "ablate", "command": ["ablate", "train", "${args_no_hyphens}"], "method": "grid",
                  "parameters": {"run.group": {"value": "pos_enc"}, "budget": {"value": "smoke"},
                                 **{k: {"value": v} for k, v in short.items()}, "seed": {"values": [0]}}}
    (sweeps / "pos_enc.yaml").write_text(yaml.safe_dump(sweep_file))
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(runs))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")
    (run,) = spec.load(str(sweeps / "pos_enc.yaml"), budget="smoke").runs
    assert train(run.cfg, log=quiet)["status"] == "completed"
    said: list[str] = []
    export(["pos_enc"], runs=runs, data=data, sweeps=sweeps, log=quiet, warn=said.append)
    assert said == [f"ablate report export: pos_enc: run {run.run_id}: no sentence maps (the sentence needs 13 "
                    "positions; the model takes 9)"]
    kept = {k.split("/", 1)[1] for k in R.arrays("pos_enc", data)}
    assert {"final/attention", "final/attention_perm", "perm"} <= kept and not {k for k in kept if "sentence" in k}
    (runs / "pos_enc" / run.run_id / "last.ckpt").write_bytes(b"garbage")
    said.clear()
    export(["pos_enc"], runs=runs, data=tmp_path / "again", sweeps=sweeps, log=quiet, warn=said.append)
    assert len(said) == 1 and "no permuted attention maps or sentence maps (CheckpointError" in said[0], said
