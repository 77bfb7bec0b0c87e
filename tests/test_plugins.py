"""Plug-ins (issue 44): a component, a task and a whole model from a module outside ablate, named by the config,
and every tool working on them; a plug-in that cannot be used is one line, exit 2, before any work. Also the
Lightning trainer keys users expect: accumulate_grad_batches, callbacks by import path, gradient_clip_val."""

from __future__ import annotations

import csv
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import pytorch_lightning as pl

from ablate import config as C
from ablate import plugins as P
from ablate.models import size
from ablate.models.config import PLUGGED
from ablate.registry import TASKS

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


@pytest.fixture(autouse=True)
def _unload():
    """Every test starts and ends with no plug-in registered in this process (the registries are global)."""
    for name in list(P.LOADED):
        P.unload(name)
    sys.path.insert(0, str(EXAMPLES))
    yield
    sys.path.remove(str(EXAMPLES))
    for name in list(P.LOADED):
        P.unload(name)


def ablate(*args: str, cwd: Path, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "WANDB_MODE": "offline", **(env or {})}
    full.pop("WANDB_SWEEP_ID", None)
    return subprocess.run([sys.executable, "-m", "ablate", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=timeout)


def module(folder: Path, name: str, text: str) -> None:
    (folder / f"{name}.py").write_text(text)


def test_nothing_of_a_plugin_is_imported_unless_named():
    C.key_table()
    C.build({"model.norm_type": "rms"})
    assert "ablate_example" not in sys.modules or not P.LOADED
    assert "scalenorm" not in PLUGGED["norm_type"] and "sort" not in TASKS
    with pytest.raises(C.ConfigError) as err:
        C.build({"model.norm_type": "scalenorm"})
    assert str(err.value) == ("model.norm_type='scalenorm' is not allowed; expected one of layer, rms; if it comes from "
                              "a plug-in, name it with plugins=<module>")


def test_keys_lists_a_plugins_keys_and_values(capsys):
    from ablate import cli

    assert cli.main(["keys", "plugins=ablate_example"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "layer | rms | scalenorm" in rows["model.norm_type"]
    assert "transformer | lstm | gru | bow" in rows["model.arch"]
    assert "| facts | sort " in rows["data.task"]
    assert rows["scalenorm.g_init"].split()[1:9] == "null a finite number > 0 or null".split()  # its declared bound
    assert rows["bow.hidden"].split()[1] == "64" and rows["bow.layers"].split()[1] == "2"
    for name in list(P.LOADED):
        P.unload(name)
    assert cli.main(["keys"]) == 0
    plain = capsys.readouterr().out
    assert "scalenorm" not in plain and "bow" not in plain


SORT_ROW = ("| `sort` (plugins=ablate_example) | read data.length tokens, a separator, then blanks: emit the tokens in "
            "sorted order | `chance`, `order_blind` | `data.vocab`, `data.length`, `data.test_length`, `data.n_train`, "
            "`data.n_val`, `data.n_test` | `example_bow`, `example_norm` |")


def test_tasks_lists_a_plugins_tasks_with_their_plugin_when_named(capsys):
    done = ablate("tasks", "plugins=ablate_example", cwd=EXAMPLES)
    assert (done.returncode, done.stderr) == (0, "")
    rows = [line for line in done.stdout.splitlines() if line.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == [*TASKS, "sort"]  # ablate's tasks, then the plug-in's: one table
    assert rows[-1] == SORT_ROW
    plain = ablate("tasks", cwd=EXAMPLES)  # the example's sweeps train sort: without its plug-in, say which is missing
    assert (plain.returncode, plain.stderr) == (2, "ablate: sweep files name unknown tasks sort: example_bow, "
                                                   "example_norm; if it comes from a plug-in, name it with plugins=<module>\n")
    assert "`sort`" not in plain.stdout
    from ablate import cli

    assert cli.main(["tasks", "--sweeps-dir", str(EXAMPLES / "sweeps")]) == 2
    assert not P.LOADED and "sort" not in TASKS  # nothing of a plug-in imported unless named
    capsys.readouterr()
    assert cli.main(["tasks", "plugins=nosuch"]) == 2
    assert capsys.readouterr().err.startswith("ablate: plugins=nosuch: no module 'nosuch' on this Python's path")


HINT = "if it comes from a plug-in, name it with plugins=<module>"


@pytest.mark.parametrize("argv, line", [
    ("data.task=sort", "data.task='sort' is not allowed; expected one of mnist, copy, histogram, lookup, lookup1, "
                       f"poshist, recall, facts; {HINT}"),
    ("data.task=sort budget=smoke", "data.task='sort' is not allowed; expected one of mnist, copy, histogram, lookup, "
                                    f"lookup1, poshist, recall, facts; {HINT}"),  # read first for its budget
    ("model.norm_type=scalenorm", f"model.norm_type='scalenorm' is not allowed; expected one of layer, rms; {HINT}"),
    ("model.arch=bow", f"model.arch='bow' is not allowed; expected one of transformer, lstm, gru; {HINT}"),
    ("scalenorm.g_init=2", f"unknown key 'scalenorm.g_init'; run `ablate keys` for the list; {HINT}"),
    ("bow.layers=2", "unknown key 'bow.layers'; did you mean model.n_layers? If it comes from a plug-in, name it with "
                     "plugins=<module>"),
    ("model.norm=middle", "model.norm='middle' is not allowed; expected one of pre, post, none"),  # no plug-in adds one
    ("model.n_head=2", "unknown key 'model.n_head'; did you mean model.n_heads?"),  # ablate's own section
])
def test_a_plugins_value_or_key_without_plugins_hints_at_the_missing_plugin(tmp_path, argv, line):
    runs = tmp_path / "runs"
    done = ablate("train", *argv.split(), cwd=EXAMPLES, env={"ABLATE_RUNS_DIR": str(runs)})
    assert (done.returncode, done.stderr) == (2, f"ablate: {line}\n")
    assert not runs.exists()  # refused before any work


SWEEP_HINT = "if it comes from a plug-in, name it with the parameter plugins: {value: <module>}"


@pytest.mark.parametrize("parameter, line", [
    ("data.task: {value: sort}", "run 1 (data.task=sort) does not build: data.task='sort' is not allowed; expected one "
                                 f"of mnist, copy, histogram, lookup, lookup1, poshist, recall, facts; {SWEEP_HINT}"),
    ("scalenorm.g_init: {value: 2}", f"parameter 'scalenorm.g_init' is not an ablate train key; `ablate keys` lists "
                                     f"them all; {SWEEP_HINT}"),
    ("bow.layers: {value: 2}", "parameter 'bow.layers' is not an ablate train key; did you mean model.n_layers? If it "
                               "comes from a plug-in, name it with the parameter plugins: {value: <module>}"),
    ("plugins: {value: ablate_example}\n  scalenorm.g_int: {value: 2}",  # the plug-in named: no hint at it
     "parameter 'scalenorm.g_int' is not an ablate train key; did you mean scalenorm.g_init? (`ablate keys` lists "
     "them all)"),
    ("model.n_head: {value: 2}", "parameter 'model.n_head' is not an ablate train key; did you mean model.n_heads? "
                                 "(`ablate keys` lists them all)"),  # ablate's own section: no plug-in to name
])
def test_a_sweep_file_without_its_plugin_is_told_to_add_the_plugins_parameter(tmp_path, parameter, line):
    """In a sweep file a plug-in is named by a parameter, not by plugins= on a command line: the hint says so."""
    path = tmp_path / "hinted.yaml"
    path.write_text(f"program: ablate\nmethod: grid\nparameters:\n  {parameter}\n")
    runs = tmp_path / "runs"
    done = ablate("sweep", str(path), "--dry-run", cwd=EXAMPLES, env={"ABLATE_RUNS_DIR": str(runs)})
    assert (done.returncode, done.stderr) == (2, f"ablate: {path}: {line}\n")
    assert not runs.exists()


def test_a_component_is_a_typed_value_with_keys_of_its_own():
    cfg = C.build({"plugins": "ablate_example", "model.norm_type": "scalenorm", "model.norm": "pre",
                   "scalenorm.g_init": "2.5", "data.task": "copy"}, machine=False)
    assert C.flat(cfg)["scalenorm.g_init"] == 2.5 and C.to_dict(cfg)["bow"] == {"hidden": 64, "layers": 2}
    assert C.from_dict(C.to_dict(cfg)) == cfg
    assert C.run_id(pickle.loads(pickle.dumps(cfg))) == C.run_id(cfg)  # a sweep's worker gets it so
    from ablate.tasks import build_task

    class Sizes:
        kind, n_tokens, n_out = "tokens", 12, 10

    task = build_task(cfg, Sizes())
    norms = [m for block in task.model.encoder.blocks for m in block.norms]
    assert len(norms) == 4 and {type(m).__name__ for m in norms} == {"ScaleNorm"}
    assert all(m.g.item() == 2.5 for m in norms)
    assert type(task.model.encoder.final_norm).__name__ == "ScaleNorm"  # Pre-LN's last norm: make_norm too
    bad = [("scalenorm.g_init", "abc", "scalenorm.g_init='abc' is not allowed; expected a number"),
           ("scalenorm.g_init", "-1", "scalenorm.g_init=-1.0 is not allowed; expected a finite number > 0 or null"),
           ("scalenorm.g_init", "0", "scalenorm.g_init=0.0 is not allowed; expected a finite number > 0 or null"),
           ("bow.hidden", "0", "bow.hidden=0 is not allowed; expected an integer in [1, 4096]")]
    for key, value, message in bad:
        with pytest.raises(C.ConfigError) as err:
            C.build({"plugins": "ablate_example", key: value}, machine=False)
        assert str(err.value) == message
    with pytest.raises(C.ConfigError) as err:  # its __post_init__: a check across two keys
        C.build({"plugins": "ablate_example", "model.arch": "bow", "bow.hidden": 4096, "bow.layers": 8}, machine=False)
    assert str(err.value) == ("bow: hidden=4096 with layers=8 is 134,217,728 weights in the hidden layers, more than "
                              "67,108,864; lower one of them")
    with pytest.raises(C.ConfigError, match=r"^scalenorm.g_init=2.0 does not apply: model.norm_type is layer, not "
                                            r"scalenorm; leave it at its default or set model.norm_type=scalenorm$"):
        C.build({"plugins": "ablate_example", "scalenorm.g_init": "2"}, machine=False)
    with pytest.raises(C.ConfigError, match=r"^unknown key 'scalenorm.g_init'"):
        C.build({"scalenorm.g_init": "2"}, machine=False)  # the plug-in not named: its keys are not keys


def test_a_whole_model_refuses_the_encoders_keys():
    cfg = C.build({"plugins": "ablate_example", "model.arch": "bow", "bow.hidden": "16", "data.task": "sort"})
    assert cfg.encoder is cfg.model or cfg.encoder.max_len is None  # sized by itself, not by the encoder's table
    with pytest.raises(C.ConfigError, match=r"^model.d_model=32 does not apply to arch='bow' \(a plug-in's model, "
                                            r"configured by its own keys bow\.\*\)"):
        C.build({"plugins": "ablate_example", "model.arch": "bow", "model.d_model": "32"})


def test_the_run_id_names_the_plugin_and_its_version(monkeypatch):
    scale = {"plugins": "ablate_example", "data.task": "copy", "model.norm_type": "scalenorm", "model.norm": "pre"}
    named = C.build(scale, machine=False)
    import ablate_example

    before = C.run_id(named)
    assert C.run_id(C.build({**scale, "scalenorm.g_init": "2"}, machine=False)) != before  # its keys count
    monkeypatch.setattr(ablate_example, "__version__", "0.2.0")
    P.unload("ablate_example")
    assert C.run_id(C.build(scale, machine=False)) != before  # a new version of the plug-in computes anew
    record = P.provenance("ablate_example")["ablate_example"]
    assert record["module"] == "ablate_example" and record["version"] == "0.2.0" and len(record["sha256"]) == 64


def test_a_plugin_that_fails_to_import_is_one_line_and_exit_2(tmp_path):
    module(tmp_path, "needs_dep", "import not_installed_anywhere\n\ndef register(plugin):\n    pass\n")
    module(tmp_path, "syntax_bad", "def register(plugin)\n    pass\n")
    module(tmp_path, "no_register", "X = 1\n")
    module(tmp_path, "raises", "def register(plugin):\n    raise RuntimeError('boom')\n")
    expected = {
        "nosuch": "plugins=nosuch: no module 'nosuch' on this Python's path (nor in the current folder) and no entry "
                  "point 'nosuch' of ablate.plugins; install its package (pip install -e <its folder>) or run from "
                  "the folder that holds it",
        "needs_dep": "plugins=needs_dep: importing it failed (ModuleNotFoundError: No module named "
                     "'not_installed_anywhere'); fix the plug-in or what it imports",
        "syntax_bad": "plugins=syntax_bad: importing it failed (SyntaxError: expected ':' (syntax_bad.py, line 1)); "
                      "fix the plug-in",
        "no_register": "plugins=no_register: no_register defines no register(plugin) function; add one "
                       "(docs/plugins.md)",
        "raises": "plugins=raises: its register() failed (RuntimeError: boom); fix the plug-in",
        "a/b": "plugins=a/b: not a module name nor an entry point of ablate.plugins; name an importable module "
               "(e.g. my_package.ablate_plugin) or an installed entry point",
    }
    runs = tmp_path / "runs"
    for name, line in expected.items():
        done = ablate("train", f"plugins={name}", "data.task=copy", cwd=tmp_path, env={"ABLATE_RUNS_DIR": str(runs)})
        assert (done.returncode, done.stderr) == (2, f"ablate: {line}\n"), name
    assert not runs.exists()  # refused before any work


def test_an_options_bound_is_checked_when_the_plugin_loads(tmp_path, capsys):
    """A bound declared with an option must be its field's type and hold its default: refused at load, in one
    line, not when a run happens to use the value."""
    head = ("from dataclasses import dataclass\nfrom torch import nn\nfrom ablate.models.config import POSITIVE, "
            "at_least, option\n\n@dataclass(frozen=True)\nclass O:\n")
    tail = "\ndef register(plugin):\n    plugin.component('model.activation', 'bounded', nn.SiLU, options=O)\n"
    module(tmp_path, "bad_default", head + "    gain: float = option(-1.0, 'a gain', bound=POSITIVE)\n" + tail)
    module(tmp_path, "bad_kind", head + "    width: float = option(2.0, 'a width', bound=at_least(1))\n" + tail)
    from ablate import cli

    sys.path.insert(0, str(tmp_path))
    try:
        for name, line in {
            "bad_default": "option gain defaults to -1.0, outside its own bound (a finite number > 0); change the "
                           "default or the bound",
            "bad_kind": "option width has type <class 'float'> and a bound for int (an integer >= 1); give it a bound "
                        "of its own type",
        }.items():
            assert cli.main(["keys", f"plugins={name}"]) == 2
            err = capsys.readouterr().err
            assert err.startswith(f"ablate: plugins={name}: ") and err.endswith(f"{line}\n") and err.count("\n") == 1, err
            assert "bounded" not in PLUGGED["activation"]
            for loaded in list(P.LOADED):
                P.unload(loaded)
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("bad_default", "bad_kind"):
            sys.modules.pop(name, None)


def test_a_clashing_name_is_one_line_exit_2_and_registers_nothing(tmp_path, capsys):
    module(tmp_path, "clash_builtin", "from torch import nn\n\ndef register(plugin):\n"
                                      "    plugin.component('model.norm_type', 'layer', nn.LayerNorm)\n")
    first = "from torch import nn\n\ndef register(plugin):\n    plugin.component('model.activation', 'swish', nn.SiLU)\n"
    module(tmp_path, "first", first)
    module(tmp_path, "second", first.replace("register(plugin):\n",
                                             "register(plugin):\n    plugin.component('model.norm_type', 'mine', "
                                             "nn.LayerNorm)\n"))
    module(tmp_path, "section", "from dataclasses import dataclass\nfrom torch import nn\n\n@dataclass(frozen=True)\n"
                                "class O:\n    x: int = 1\n\ndef register(plugin):\n"
                                "    plugin.component('model.activation', 'trainer', nn.SiLU, options=O)\n")
    module(tmp_path, "task_clash", "import dataclasses\nfrom ablate.registry import COPY\n\ndef register(plugin):\n"
                                   "    plugin.task(dataclasses.replace(COPY, datamodule='x.y:Z'))\n")
    module(tmp_path, "bad_prepare", "import dataclasses\nfrom ablate.registry import COPY\n\ndef register(plugin):\n"
                                    "    plugin.task(dataclasses.replace(COPY, name='copy2', datamodule='x.y:Z', "
                                    "prepare='memory_enough'))\n")
    expected = {
        "clash_builtin": "plugins=clash_builtin: registers model.norm_type=layer, which is ablate's own; give it "
                         "another name",
        "first,second": "plugins=second: registers model.activation=swish, which plugins=first has registered "
                        "already; rename one of them",
        "section": "plugins=section: model.activation=trainer's options would be the config section 'trainer', "
                   "which ablate's config has already; rename it",
        "task_clash": "plugins=task_clash: registers data.task=copy, which is ablate's own; give it another name",
        "bad_prepare": "plugins=bad_prepare: data.task=copy2's prepare='memory_enough' is not "
                       "'package.module:function'; name a function, or leave it out",
    }
    from ablate import cli

    sys.path.insert(0, str(tmp_path))
    try:
        for names, line in expected.items():
            assert cli.main(["keys", f"plugins={names}"]) == 2
            assert capsys.readouterr().err == f"ablate: {line}\n", names
            for name in list(P.LOADED):
                P.unload(name)
        P.load("first")
        with pytest.raises(P.PluginError, match="registers model.activation=swish"):
            P.load("second")
        assert "mine" not in PLUGGED["norm_type"]  # its first, good, registration was not applied either
        assert PLUGGED["activation"]["swish"].plugin == "first"
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("clash_builtin", "first", "second", "section", "task_clash", "bad_prepare"):
            sys.modules.pop(name, None)


def test_an_installed_entry_point_is_named_by_its_name(tmp_path, monkeypatch):
    """An installed package's entry point (a dist-info on the path, as pip writes it): named, it loads; not
    named, its module is never imported."""
    site = tmp_path / "site"
    (site / "demo_pkg").mkdir(parents=True)
    (site / "demo_pkg" / "__init__.py").write_text(
        "from pathlib import Path\nPath('imported').write_text('yes')\nfrom torch import nn\n\n"
        "def register(plugin):\n    plugin.component('model.activation', 'swish', nn.SiLU)\n")
    info = site / "demo_pkg-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text("[ablate.plugins]\ndemo = demo_pkg\n")
    env = {"PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    plain = ablate("keys", "model", cwd=tmp_path, env=env)
    assert plain.returncode == 0 and "swish" not in plain.stdout and not (tmp_path / "imported").exists()
    named = ablate("keys", "model", "plugins=demo", cwd=tmp_path, env=env)
    assert named.returncode == 0, named.stderr
    assert "relu | gelu | identity | swish" in named.stdout and (tmp_path / "imported").read_text() == "yes"
    monkeypatch.chdir(tmp_path)  # its import writes a file where it runs
    sys.path.insert(0, str(site))
    try:
        assert P.versions("demo") == {"demo": "1.2.3"}  # the package's version, from its metadata
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("demo_pkg", None)


def _table(runs: Path, sweep: str) -> list[dict]:
    from ablate.results import load

    return load(sweep, runs, sweeps=EXAMPLES / "sweeps").to_dict("records")


def test_the_example_sweeps_train_resume_and_compare(tmp_path):
    """The worked example, as its README runs it: both sweeps at the smoke budget, once each (a second
    invocation runs nothing), the results table and `ablate compare` on each."""
    runs = tmp_path / "runs"
    env = {"ABLATE_RUNS_DIR": str(runs)}
    for sweep, tracking in (("example_norm", "none"), ("example_bow", "wandb")):  # W&B: its config read below
        done = ablate("sweep", f"sweeps/{sweep}.yaml", "--budget", "smoke", "--tracking", tracking, cwd=EXAMPLES,
                      env=env, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert json.loads(done.stdout.strip().splitlines()[-1])["completed"] == {"example_norm": 3, "example_bow": 2}[sweep]
    from ablate.sweep.spec import load

    for sweep in ("example_norm", "example_bow"):  # the ids this process computes are the folders the sweep made:
        expanded = {run.run_id for run in load(str(EXAMPLES / "sweeps" / f"{sweep}.yaml"), budget="smoke").runs}
        assert expanded == {p.name for p in (runs / sweep).iterdir() if p.is_dir()}  # run again, it finds them
    norm = {r["model.norm_type"]: r for r in _table(runs, "example_norm")}
    assert set(norm) == {"layer", "rms", "scalenorm"} and {r["status"] for r in norm.values()} == {"completed"}
    scale_dir = Path(norm["scalenorm"]["run_dir"])
    summary = json.loads((scale_dir / "summary.json").read_text())
    assert summary["provenance"]["plugins"]["ablate_example"]["version"] == "0.1.0"
    assert "probes" in summary  # the encoder with a plug-in's norm: every probe, the norms' among them
    bow = {r["model.arch"]: r for r in _table(runs, "example_bow")}
    bow_dir = Path(bow["bow"]["run_dir"])
    assert "ablate: probes are not available for this model (model.arch=bow" in (bow_dir / "train.log").read_text()
    with open(bow_dir / "metrics.csv") as f:
        assert any(row.get("val/acc") for row in csv.DictReader(f))  # its curves, as for any model
    from tests.wandb_records import offline_run_record

    record = offline_run_record(bow_dir)
    assert record["config"]["bow.hidden"] == 64 and record["config"]["plugins"] == "ablate_example"
    from ablate import cli

    for sweep, variant in (("example_norm", "model.norm_type=scalenorm"), ("example_bow", "model.arch=bow")):
        out = tmp_path / sweep  # in this process: its imports are paid already
        assert cli.main(["compare", str(EXAMPLES / "sweeps" / f"{sweep}.yaml"), "--runs", str(runs), "--out", str(out)]) == 0
        report = (out / "compare.md").read_text()
        assert f"| {variant} |" in report and "no test (1 and 1 completed runs" in report


def test_a_tuned_sweep_of_a_plugin_value_runs_both_stages_in_forked_workers(tmp_path):
    """A tuned sweep whose runs name a plug-in: two workers (each with the plug-in loaded), stage 1 on seed 0
    at each rate, stage 2 at each variant's chosen rate; the plug-in's runs carry its provenance. (The smoke budget
    keeps one seed, which has no stage 2: the sizes of its smoke profile are given instead.)"""
    (tmp_path / "tuned_plugin.yaml").write_text(
        "description: |\n  a plug-in's norm against LayerNorm, each at its own rate\n  tune optim.lr on seeds 0\n"
        "program: ablate\ncommand: [ablate, train, \"${args_no_hyphens}\"]\nmethod: grid\n"
        "metric: {name: val/acc_best, goal: maximize}\nparameters:\n  plugins: {value: ablate_example}\n"
        "  data.task: {value: sort}\n  model.norm_type: {values: [layer, scalenorm]}\n  trainer.max_epochs: {value: 1}\n"
        "  data.n_train: {value: 512}\n  data.n_val: {value: 128}\n  data.n_test: {value: 128}\n"
        "  optim.lr: {values: [0.0003, 0.001, 0.003, 0.01]}\n  seed: {values: [0, 1]}\n")
    runs = tmp_path / "runs"
    done = ablate("sweep", str(tmp_path / "tuned_plugin.yaml"), "--budget", "none", "--tracking", "none",
                  "--workers", "2", cwd=EXAMPLES, env={"ABLATE_RUNS_DIR": str(runs)}, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["completed"] == 10  # 2 variants x (4 rates + 1 seed)
    from ablate.results import load

    table = load("tuned_plugin", runs, sweeps=tmp_path)
    assert set(table["status"]) == {"completed"} and len(table) == 10
    for norm, rows in table.groupby("model.norm_type"):
        stage1 = rows[rows["seed"] == 0].set_index("optim.lr")["val/acc_best"]
        (second,) = rows[rows["seed"] == 1].to_dict("records")
        best = stage1[stage1 == stage1.max()].index.min()  # ties go to the smaller rate, as the runner's rule
        assert second["optim.lr"] == best == second["tuned.optim.lr"], norm  # the rate stage 1 chose
    for run_dir in table[table["model.norm_type"] == "scalenorm"]["run_dir"]:
        made = json.loads((Path(run_dir) / "summary.json").read_text())["provenance"]["plugins"]
        assert made["ablate_example"]["version"] == "0.1.0"


# ---- the trainer keys Lightning's users expect ----

class Marker(pl.Callback):
    """trainer.callbacks=tests.test_plugins:Marker: writes the steps it saw into the run's folder."""

    def __init__(self):
        self.steps = 0

    def on_train_batch_end(self, trainer, *args):
        self.steps += 1

    def on_train_end(self, trainer, pl_module):
        Path(trainer.default_root_dir, "marker.txt").write_text(f"{self.steps} {trainer.global_step}")


def test_gradient_clip_val_is_lightnings_name_for_optim_grad_clip():
    assert C.build({"trainer.gradient_clip_val": "0.5"}).optim.grad_clip == 0.5
    assert C.run_id(C.build({"trainer.gradient_clip_val": "0.5"})) == C.run_id(C.build({"optim.grad_clip": "0.5"}))
    with pytest.raises(C.ConfigError, match=r"^trainer.gradient_clip_val and optim.grad_clip are one setting"):
        C.build({"trainer.gradient_clip_val": "0.5", "optim.grad_clip": "1"})


def test_new_trainer_keys_keep_every_earlier_run_id():
    plain = C.run_id(C.Config())
    assert C.run_id(C.build({"trainer.accumulate_grad_batches": "1", "trainer.callbacks": ""})) == plain
    assert C.run_id(C.build({"trainer.accumulate_grad_batches": "2"})) != plain
    with pytest.raises(C.ConfigError, match=r"^trainer.ckpt_every_n_steps=5 is not allowed with "
                                            r"trainer.accumulate_grad_batches=2"):
        C.build({"trainer.accumulate_grad_batches": "2", "trainer.ckpt_every_n_steps": "5"})
    with pytest.raises(C.ConfigError, match=r"^trainer.callbacks=nowhere.at_all:Thing: importing it failed "
                                            r"\(ModuleNotFoundError: No module named 'nowhere'\)"):
        C.build({"trainer.callbacks": "nowhere.at_all:Thing"})


def test_accumulated_batches_and_a_callback_by_import_path(tmp_path):
    from ablate.train import train

    common = {"data.task": "copy", "budget": "smoke", "tracking": "none", "run.probes": "false",
              "trainer.callbacks": "tests.test_plugins:Marker"}
    one = train(C.build({**common, "run.dir": str(tmp_path / "one")}), log=lambda *_: None)
    two = train(C.build({**common, "run.dir": str(tmp_path / "two"), "trainer.accumulate_grad_batches": "2"}),
                log=lambda *_: None)
    assert one["status"] == two["status"] == "completed"
    assert (tmp_path / "one" / "marker.txt").read_text() == "8 8"  # 512 sequences, batches of 64
    assert (tmp_path / "two" / "marker.txt").read_text() == "8 4"  # the same batches, a step every two


# ---- every slot: a plug-in's copy of ablate's own part builds the same model ----

SLOTS = {"model.attention": ("mha", "mha_copy"), "model.ffn": ("mlp", "mlp_copy"),
         "model.block": ("sequential", "sequential_copy"), "model.pos_enc": ("sinusoidal", "sinusoidal_copy"),
         "model.activation": ("gelu", "gelu_copy")}


@pytest.mark.parametrize("key", SLOTS)
def test_a_plugged_copy_of_a_part_builds_the_same_model(key):
    import torch

    from ablate.tasks import build_task

    class Sizes:
        kind, n_tokens, n_out = "tokens", 12, 10

    built, plugged = SLOTS[key]
    models = []
    for value in (built, plugged):
        cfg = C.build({"plugins": "tests.plugin_parts", "data.task": "copy", key: value}, machine=False)
        torch.manual_seed(0)
        models.append(build_task(cfg, Sizes()).model.eval())
    a, b = (m.state_dict() for m in models)
    assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)
    x = torch.randint(0, 12, (3, 17))
    assert torch.equal(models[0](x), models[1](x))


def test_a_model_with_a_plugged_part_is_counted_afresh_never_kept(tmp_path, monkeypatch):
    """The counts kept on disk (ablate.models.size) depend on ablate's own model code only: a model with a
    plug-in's part is counted on the meta device each time, and nothing of it is kept."""
    from ablate import limits

    monkeypatch.setenv("ABLATE_CACHE_DIR", str(tmp_path))
    cfg = C.build({"plugins": "tests.plugin_parts", "data.task": "copy", "model.ffn": "mlp_copy"}, machine=False)
    same = C.build({"data.task": "copy"}, machine=False)
    assert limits.model_size(cfg) == limits.model_size(same)  # a copy of ablate's own FFN
    assert [p.name for p in (tmp_path / "model-sizes").glob("*/*.json")] == [  # the built-in one's alone
        size.cache_file(same.encoder, TASKS["copy"].model_sizes(same.data), same.pooling).name]


def test_a_plugged_part_the_probes_cannot_read_trains_with_its_gradient_norms(tmp_path):
    from ablate.train import train

    lines: list[str] = []
    summary = train(C.build({"plugins": "tests.plugin_parts", "data.task": "copy", "budget": "smoke",
                             "tracking": "none", "model.attention": "mha_copy", "trainer.log_every_n_steps": "2",
                             "run.dir": str(tmp_path / "run")}), log=lines.append)
    assert summary["status"] == "completed" and "probes" not in summary
    assert ("ablate: probes are not available for this model (model.attention=mha_copy, a plug-in's: the probes read "
            "ablate's attention and blocks); its loss and accuracy curves and its gradient norms per module are "
            "recorded") in lines
    with open(tmp_path / "run" / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["grad/encoder"]]
    assert [int(r["step"]) for r in rows] == [1, 3, 5, 7]  # with train/loss, every 2 steps
    assert all(float(r["grad/encoder"]) > 0 and float(r["grad/embed"]) > 0 for r in rows)


def test_a_whole_model_with_its_own_data_module(tmp_path):
    from ablate.train import train

    cfg = C.build({"plugins": "tests.plugin_parts", "model.arch": "copies", "copies.vocab": "4", "budget": "smoke",
                   "tracking": "none", "run.dir": str(tmp_path / "run")})
    summary = train(cfg, log=lambda *_: None)  # data.task stays mnist: its data are never read
    assert summary["status"] == "completed" and summary["metrics"]["ref/val/chance"] > 0.25 - 1e-9
    saved = C.from_dict(C.to_dict(cfg))
    assert saved.options("copies").vocab == 4 and C.run_id(saved) == summary["run_id"]


def test_a_plugin_model_paused_and_resumed_ends_as_if_never_stopped(tmp_path, monkeypatch):
    """Resume for a plug-in's whole model is Lightning's and ablate's as for the encoder: paused after its first
    epoch (as early termination pauses a run), trained again, it ends with the uninterrupted run's numbers."""
    from ablate.sweep.hyperband import PAUSE_ENV
    from ablate.train import train

    common = {"plugins": "ablate_example", "model.arch": "bow", "data.task": "sort", "budget": "smoke",
              "trainer.max_epochs": "2", "tracking": "none"}
    whole = train(C.build({**common, "run.dir": str(tmp_path / "whole")}), log=lambda *_: None)
    monkeypatch.setenv(PAUSE_ENV, "1")
    paused = train(C.build({**common, "run.dir": str(tmp_path / "split")}), log=lambda *_: None)
    assert paused["status"] == "paused"
    monkeypatch.delenv(PAUSE_ENV)
    resumed = train(C.build({**common, "run.dir": str(tmp_path / "split")}), log=lambda *_: None)
    assert resumed["status"] == "completed" and resumed["attempts"] == 2
    for key in ("val/acc", "val/loss", "test/acc", "val/acc_best"):
        assert resumed["metrics"][key] == whole["metrics"][key], key


def test_naming_a_plugin_alone_changes_no_run_id_and_unused_sections_do_not_count():
    plain = C.build({"data.task": "copy"}, machine=False)
    named = C.build({"plugins": "ablate_example", "data.task": "copy"}, machine=False)
    assert C.run_id(named) == C.run_id(plain)  # nothing of it used: the same computation, the same run
    assert C.plugged_in_use(named) == []
    scale = C.build({"plugins": "ablate_example", "data.task": "copy", "model.norm_type": "scalenorm"}, machine=False)
    assert C.plugged_in_use(scale) == ["model.norm_type=scalenorm"]
    sort = C.build({"plugins": "ablate_example", "data.task": "sort"}, machine=False)
    assert C.plugged_in_use(sort) == ["data.task=sort"] and C.run_id(sort) != C.run_id(plain)


def test_a_run_made_by_another_source_of_its_plugin_is_stale(tmp_path):
    """The plug-in's code is part of "already completed": a run whose recorded sha256 of the plug-in's source is
    not today's is said to be made by other code, and --retrain-stale trains it again (rundir.retrains)."""
    from ablate.rundir import retrains
    from ablate.train import train

    cfg = C.build({"plugins": "ablate_example", "model.arch": "bow", "data.task": "sort", "budget": "smoke",
                   "tracking": "none", "run.dir": str(tmp_path / "run")})
    first = train(cfg, log=lambda *_: None)
    assert first["status"] == "completed" and not retrains(first, "stale", set())
    path = tmp_path / "run" / "summary.json"
    summary = json.loads(path.read_text())
    summary["provenance"]["plugins"]["ablate_example"]["sha256"] = "0" * 64  # as an earlier edit of it wrote
    path.write_text(json.dumps(summary))
    lines: list[str] = []
    again = train(cfg, log=lines.append)
    assert again["status"] == "completed" and again["attempts"] == 1  # not trained again by itself
    assert lines == [f"ablate: {tmp_path / 'run'} already completed; not run again; it was made by other code of "
                     "plugins=ablate_example (its source's sha256 differs from the one recorded): rerun it with "
                     "--retrain"]
    assert retrains(summary, "stale", set())
    # a sweep's opening lines count it among the runs made by other code, naming the plug-in (provenance)
    from ablate.provenance import other_code_note

    assert other_code_note([summary, first]) == ("1 of them made by other code (plugins=ablate_example, whose source "
                                                 "has changed): kept, not rerun; --retrain-stale trains them again as "
                                                 "new attempts")
    assert other_code_note([first]) is None
