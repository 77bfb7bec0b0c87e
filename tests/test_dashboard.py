"""`ablate dashboard`: the spec of every sweep file, its keys against what a real offline run of that
sweep logs, the W&B view it builds (offline), the report's plain answer, and the offline line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ablate import config as C
from ablate.dashboard import NEEDS, dashboard_spec, main
from ablate.dashboard import spec as S
from ablate.dashboard.answers import FINDINGS, reports_dir
from ablate.sweep.spec import load
from tests.conftest import DATA_DIR, needs_mnist
from tests.wandb_records import offline_run_record

REPO = Path(__file__).resolve().parents[1]
SWEEPS = sorted(p.stem for p in (REPO / "sweeps").glob("*.yaml"))
# every sweep a study manifest reads (reports/*.yaml): (its question's title, the probes its dashboard shows)
QUESTIONS = {n: S.question_of(n) for n in SWEEPS if S.question_of(n)[0] is not None}
DATA = str(DATA_DIR)


def _real_data(name: str):
    """The sweep as a parameter, marked needs_mnist where the run it trains reads MNIST."""
    return pytest.param(name, marks=needs_mnist) if _chosen(name).cfg.data.task == "mnist" else name


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")


@pytest.mark.parametrize("name", SWEEPS)
def test_dry_run_every_sweep(name, tmp_path, capsys):
    """--dry-run --out PATH writes the spec (and nothing on stdout); the runs shown are the sweep's group at
    its budget, grouped by its swept keys but the seed, the parallel coordinates run over the swept keys
    to the sweep file's metric."""
    out = tmp_path / "spec.json"
    assert main([name, "--entity", "me", "--project", "proj", "--dry-run", "--out", str(out)]) == 0
    assert capsys.readouterr().out == ""
    spec = json.loads(out.read_text())
    sweep = load(name)
    budget = sweep.runs[0].cfg.budget
    assert spec["budget"] == budget and spec["entity"] == "me" and spec["project"] == "proj"
    assert {(f["in"], f["key"], f["value"]) for f in spec["filters"]} == {
        ("run", "group", f"{name}-{budget}"), ("config", "budget", budget)}
    assert sorted(spec["group_by"]) == sorted(k for k in sweep.varying if k != "seed")
    metric = sweep.spec.get("metric", {}).get("name", "val/acc_best")
    pc = [p for s in spec["sections"] for p in s["panels"] if p["type"] == "parallel_coordinates"]
    assert [c["key"] for c in pc[0]["columns"]] == [*sweep.varying, metric]
    if sweep.tune is not None:
        assert sweep.tune.key not in spec["compared"]
    # stdout form: the same spec
    assert main([name, "--entity", "me", "--project", "proj", "--dry-run"]) == 0
    assert json.loads(capsys.readouterr().out) == spec


def _chosen(name: str):
    """The run of the sweep the key check trains: its first Transformer configuration at budget smoke
    (where a sweep has one: the attention maps are drawn from those), else its first."""
    runs = load(name, budget="smoke", tracking="wandb").runs
    return next((r for r in runs if getattr(r.cfg.model, "arch", "transformer") == "transformer"), runs[0])


@pytest.fixture(scope="module")
def offline_record(tmp_path_factory):
    """One real smoke run per distinct configuration (tracking=wandb, WANDB_MODE=offline, 64 training
    examples), trained by ablate.train.train in this process one after the other (W&B's service started
    once: a process of its own per run spent two thirds of its time starting one), and read back with
    tests/wandb_records.py."""
    import torch

    from ablate.train import train

    root = tmp_path_factory.mktemp("dashboard_runs")
    records: dict[str, dict] = {}

    def record(name: str) -> dict:
        run = _chosen(name)
        key = (run.run_id, run.cfg.run.group)  # one configuration can be two sweeps' (baseline, temperature_inference)
        if key not in records:
            run_dir = root / f"{run.run_id}-{run.cfg.run.group}"
            cfg = C.build({"run.dir": str(run_dir), "data.train_subset": 64, "trainer.threads": 1}, base=run.cfg)
            threads = torch.get_num_threads()
            with pytest.MonkeyPatch.context() as mp:
                for k, v in {"WANDB_MODE": "offline", "ABLATE_DATA_DIR": DATA, "WANDB_SILENT": "true",
                             "HOME": str(root), "WANDB_DIR": str(run_dir)}.items():
                    mp.setenv(k, v)
                try:
                    assert train(cfg, log=lambda _: None)["status"] == "completed"
                finally:
                    torch.set_num_threads(threads)
            records[key] = offline_run_record(run_dir)
        return records[key]

    return record


@pytest.mark.slow
@pytest.mark.parametrize("name", [_real_data(name) for name in SWEEPS])
def test_every_panel_key_is_logged_by_a_real_run(name, offline_record):
    """Every key the dashboard names (filters, grouping, every panel) is one a real offline run of the
    sweep wrote: config keys in its config, summary keys in its summary, curves and images in its
    history; and the run is in the group the filter selects."""
    spec = dashboard_spec(name, "me", "proj", budget="smoke")
    rec = offline_record(name)
    logged = {"config": set(rec["config"]), "summary": set(rec["summary_keys"]), "history": set(rec["history_keys"])}
    missing = [(where, key) for where, key in S.all_reads(spec) if key not in logged[where]]
    assert not missing, f"{name}: keys the dashboard names that the run did not log: {missing}"
    assert rec["group"] == next(f["value"] for f in spec["filters"] if f["key"] == "group")
    assert rec["config"]["budget"] == "smoke"
    kinds = {p["type"] for s in spec["sections"] for p in s["panels"]}
    trains = any(r.cfg.trainer.max_steps != 0 for r in load(name, budget="smoke").runs)
    # an init-only sweep (trainer.max_steps=0) has no curves and no test accuracy to show
    assert {"parallel_coordinates", "bar"} | ({"line"} if trains else set()) <= kinds
    if name in QUESTIONS:  # the question's probe scalars are shown, each in the run's summary
        probes = [k for s in spec["sections"] for p in s["panels"] if p["type"] == "bar" for k in p["metrics"]
                  if k.startswith("probe/")]
        assert probes == list(dict.fromkeys(S.last_layer(k, load(name, budget="smoke")) for k in QUESTIONS[name][1]))


@pytest.mark.parametrize("name", ["scaling", "heads"])
def test_workspace_builds_offline_with_flat_config_paths(name):
    """The spec becomes a wandb-workspaces view offline; the runs' flat dotted config keys are addressed
    as W&B stores them (`model.qk_scale.value`), not as a nested config (`model.value.qk_scale`)."""
    from ablate.dashboard.wandb_ui import view_model, workspace

    spec = dashboard_spec(name, "me", "proj")
    ws = workspace(spec)
    assert [s.name for s in ws.sections] == [s["name"] for s in spec["sections"]]
    assert [len(s.panels) for s in ws.sections] == [len(s["panels"]) for s in spec["sections"]]
    text = view_model(spec).model_dump_json(by_alias=True)
    for key in spec["group_by"]:
        head, _, rest = key.partition(".")
        assert f"{key}.value" in text
        assert f"{head}.value.{rest}" not in text
    assert "heads-quick" in text or "scaling-quick" in text  # the group filter


def test_report_holds_the_question_plain_answer_and_figures():
    spec = dashboard_spec("heads", "me", "proj", report=True)
    rep = spec["report"]
    findings = (reports_dir() / FINDINGS).read_text(encoding="utf-8")
    assert rep["title"] == QUESTIONS["heads"][0] and f"## {rep['title']}" in findings
    assert rep["plain"] and (rep["plain"] in findings or rep["source"].endswith("answers.json"))
    assert rep["question"].startswith("Why does multi-head attention")
    assert rep["figures"] and all((reports_dir() / f).is_file() for f in rep["figures"])


def test_every_question_has_its_plain_answer():
    for title, _ in set(QUESTIONS.values()):
        found = dashboard_spec(next(n for n, q in QUESTIONS.items() if q[0] == title), report=True)["report"]
        assert found["plain"] and found["question"] and found["figures"], title


def test_report_of_a_sweep_without_a_question_is_refused(capsys):
    assert main(["baseline", "--report", "--dry-run"]) == 2
    err = capsys.readouterr()
    assert err.out == "" and len(err.err.strip().splitlines()) == 1 and "leave out --report" in err.err


def test_offline_says_what_it_needs_in_one_line(tmp_path, monkeypatch, capsys):
    """No WANDB_MODE, no API key (HOME and NETRC point to an empty folder): exit 2, one line, nothing written."""
    home = tmp_path / "home"
    home.mkdir()
    for var in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("NETRC", str(home / ".netrc"))
    monkeypatch.chdir(tmp_path)
    assert main(["heads", "--entity", "me", "--project", "proj", "--report"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err == NEEDS + "\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["home"]


def test_bad_input_is_one_line(capsys):
    assert main(["no_such_sweep", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ablate: no sweep file 'no_such_sweep'") and len(err.splitlines()) == 1
    assert main(["heads", "--budget", "huge", "--dry-run"]) == 2
    assert capsys.readouterr().err.startswith("ablate: argument --budget: invalid choice")


def test_dry_run_output_path_problems_are_one_line_and_write_nothing(tmp_path, capsys):
    """--out naming a folder, a missing folder, or --out without --dry-run: exit 2, one line, nothing
    written (before: a folder ended in IsADirectoryError's traceback, and a missing folder was created)."""
    for argv in (["scaling", "--dry-run", "--out", str(tmp_path)],
                 ["scaling", "--dry-run", "--out", str(tmp_path / "no" / "spec.json")],
                 ["scaling", "--out", str(tmp_path / "spec.json")]):
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        assert captured.out == "" and len(captured.err.splitlines()) == 1 and captured.err.startswith("ablate: ")
    assert list(tmp_path.iterdir()) == []


def test_report_builds_offline():
    """The report object (question, plain answer, figures' panel, the sweep's panels) is built offline;
    the sweep's runs are selected by the same filters and grouping as the workspace."""
    from ablate.dashboard.wandb_ui import report

    spec = dashboard_spec("scaling", "me", "proj", report=True)
    rep = report(spec, "scaling figures")
    texts = [b.text for b in rep.blocks if hasattr(b, "text")]
    assert spec["report"]["plain"] in texts and f"Question. {spec['report']['question']}" in texts
    figures, sweep = [b for b in rep.blocks if b.__class__.__name__ == "PanelGrid"]
    assert [p.media_keys[0] for p in figures.panels] == [f"figures/{Path(f).stem}" for f in spec["report"]["figures"]]
    assert "scaling-quick" in sweep.runsets[0].filters and "budget" in sweep.runsets[0].filters
    assert sweep.runsets[0].groupby == [f"config.{k}.value" for k in spec["group_by"]]
    assert len(sweep.panels) == sum(len(s["panels"]) for s in spec["sections"])


def test_the_probe_keys_shown_are_the_ones_the_notebooks_read():
    """The manifests name, per sweep, the probe scalars its question's notebook reads: each must appear in
    the notebooks' source (reports/*.py), so the dashboard cannot drift from what the report uses."""
    source = "\n".join(p.read_text() for p in (Path(__file__).parents[1] / "reports").glob("*.py"))
    for sweep, (_, keys) in QUESTIONS.items():
        for key in keys:  # the notebooks build some keys per point (f"probe/{point}/grad_wq_l0"): the scalar's name
            name = key.split("/", 2)[2]
            assert f"/{name}" in source, f"{sweep}: {key} is shown on the dashboard but no notebook reads it"
    assert "/entropy_l0" in source and "/no_such_probe" not in source
