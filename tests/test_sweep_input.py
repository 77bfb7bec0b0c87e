"""`ablate sweep` on malformed sweep files (each refused with one line, exit 2, before any run and
without a runs folder), random spaces smaller than run_cap, grids too big to run, and the progress
output on a terminal and in a log."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
import yaml

from ablate import cli
from ablate.sweep import spec
from ablate.sweep.progress import Progress

HEADER = {"program": "ablate", "command": ["ablate", "train", "${args_no_hyphens}"]}


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)


def random_file(parameters: dict, run_cap: int = 3) -> dict:
    return {**HEADER, "method": "random", "run_cap": run_cap, "parameters": parameters}


def lr(**p) -> dict:
    return random_file({"optim.lr": p})


# content (a dict dumped as YAML, or raw bytes/text), and a piece of the one line expected
MALFORMED = {
    # every W&B distribution whose bounds are checked, with the bound that breaks it
    "log_uniform_values min 0": (lr(distribution="log_uniform_values", min=0, max=0.1), "min must be > 0"),
    "q_log_uniform_values min < 0": (lr(distribution="q_log_uniform_values", min=-1.0, max=0.1, q=0.01),
                                     "min must be > 0"),
    "inv_log_uniform_values min 0": (lr(distribution="inv_log_uniform_values", min=0, max=10), "min must be > 0"),
    "uniform min > max": (lr(distribution="uniform", min=0.1, max=0.01), "min=0.1 is greater than max=0.01"),
    "inferred uniform min > max": (lr(min=0.5, max=0.1), "is greater than max"),
    "int_uniform min > max": (random_file({"seed": {"min": 5, "max": 1}}), "min=5 is greater than max=1"),
    "int_uniform float bound": (random_file({"seed": {"distribution": "int_uniform", "min": 0, "max": 2.5}}),
                                "max=2.5 is not an integer"),
    "q_uniform min > max": (lr(distribution="q_uniform", min=1.0, max=0.5, q=0.1), "greater than max"),
    "q_uniform q 0": (lr(distribution="q_uniform", min=0.1, max=0.5, q=0), "q=0 must be > 0"),
    "log_uniform min > max": (lr(distribution="log_uniform", min=-2, max=-5), "greater than max"),
    "log_uniform overflows": (lr(distribution="log_uniform", min=0, max=1000), "exp(1000) overflows"),
    "q_log_uniform overflows": (lr(distribution="q_log_uniform", min=-800, max=1, q=1), "overflows"),
    "inv_log_uniform overflows": (lr(distribution="inv_log_uniform", min=-900, max=0), "overflows"),
    "log_uniform_values min > max": (lr(distribution="log_uniform_values", min=0.1, max=0.001), "greater than max"),
    "normal negative sigma": (lr(distribution="normal", mu=0.001, sigma=-1), "sigma=-1 must be >= 0"),
    "q_normal q negative": (lr(distribution="q_normal", mu=0.01, sigma=0.001, q=-0.1), "q=-0.1 must be > 0"),
    "log_normal text mu": (lr(distribution="log_normal", mu="big", sigma=1), "mu='big' is not a finite number"),
    "log_normal overflows": (lr(distribution="log_normal", mu=700, sigma=100), "a draw from log_normal failed"),
    "q_log_normal negative sigma": (lr(distribution="q_log_normal", mu=0, sigma=-0.5, q=1), "must be >= 0"),
    "text bound": (lr(distribution="uniform", min="1e-4", max=0.1),
                   "min='1e-4' is not a finite number (YAML reads 1e-4 as text; write 0.0001)"),
    "text bound, raw YAML": (b"program: ablate\nmethod: random\nrun_cap: 2\nparameters:\n"
                             b"  optim.lr: {distribution: log_uniform_values, min: 1e-5, max: 1e-2}\n",
                             "min='1e-5' is not a finite number"),
    "infinite bound": (b"program: ablate\nmethod: random\nrun_cap: 2\nparameters:\n"
                       b"  optim.lr: {distribution: uniform, min: 0.0, max: .inf}\n", "max=inf is not a finite number"),
    "boolean bound": (lr(distribution="uniform", min=False, max=0.1), "min=False is not a finite number"),
    "missing max": (lr(distribution="uniform", min=0.1), "distribution uniform needs max"),
    "key of another distribution": (lr(distribution="uniform", min=0.001, max=0.1, mu=0.5),
                                    "'mu' has no meaning for distribution uniform"),
    "unhashable distribution": (lr(distribution=["uniform"], min=0.001, max=0.1), "is not supported"),
    "beta (W&B's only)": (lr(distribution="beta", a=1, b=2), "is not supported by the local runner"),
    "probabilities all zero": (random_file({"model.norm": {"values": ["pre", "post"], "probabilities": [0, 0]}}),
                               "probabilities sum to 0, not 1"),
    "probabilities negative": (random_file({"model.norm": {"values": ["pre", "post"], "probabilities": [1.5, -0.5]}}),
                               "probabilities[1]=-0.5 is negative"),
    "probabilities not summing to 1": (random_file({"model.norm": {"values": ["pre", "post"],
                                                                   "probabilities": [0.5, 0.2]}}),
                                       "probabilities sum to 0.7, not 1"),
    "probabilities as text": (random_file({"model.norm": {"values": ["pre", "post"], "probabilities": ["a", 1]}}),
                              "probabilities[0]='a' is not a finite number"),
    "probabilities too short": (random_file({"model.norm": {"values": ["pre", "post"], "probabilities": [1.0]}}),
                                "probabilities must be a list as long as values (2)"),
    "run_cap over the limit": (random_file({"optim.lr": {"min": 0.001, "max": 0.1}}, run_cap=10**9),
                               "run_cap 1,000,000,000 is over the 100,000 runs"),
    "discrete space over the limit": (random_file({"seed": {"min": 0, "max": 999}, "data.n_train": {"min": 64, "max": 563}},
                                                  run_cap=10**9), "500,000 distinct configurations, over the 100,000"),
    "grid of 10^8 runs": ({**HEADER, "method": "grid", "parameters": {
        "seed": {"values": list(range(10_000))}, "optim.lr": {"values": [0.001 * (i + 1) for i in range(10_000)]}}},
        "the grid has 100,000,000 runs (10000 x 10000), over the 100,000 one sweep may run"),
    "binary file": (bytes(range(256)) * 4, "is not UTF-8 text"),
    "NUL bytes": (b"program: ablate\x00\x00\nmethod: grid\n", "contains NUL bytes"),
    "YAML bomb": (b"a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                  b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nmethod: grid\nparameters: {seed: {values: *c}}\n",
                  "uses a YAML alias"),
    "too big": (b"# " + b"x" * (1 << 20) + b"\n", "bytes, over the 1,048,576 allowed"),
    # no sweep nests past a few levels: refused from the parser's events, and past libyaml's own limit the same way
    "nested 70 deep": (b"method: grid\nparameters: {seed: {values: " + b"[" * 70 + b"0" + b"]" * 70 + b"}}\n",
                       "is nested too deeply (over 64 levels at line 2)"),
    "nested 2,000 deep": (b"method: grid\nparameters: {seed: {values: " + b"[" * 2000 + b"0" + b"]" * 2000 + b"}}\n",
                          "is nested too deeply (over 64 levels at line 2)"),
    "two documents": (b"program: ablate\nmethod: grid\n---\nparameters: {seed: {values: [*a]}}\n",
                      "is not valid YAML at line 3"),
    "not a mapping": (b"- grid\n- random\n", "must hold a mapping"),
    # a key given twice: YAML keeps the last alone, so another grid ran than the file shows (issue 41, item 5)
    "a swept parameter fixed again": (b"program: ablate\nmethod: grid\nparameters:\n  seed: {values: [0, 1]}\n"
                                      b"  model.n_heads: {values: [1, 2]}\n  seed: {value: 0}\n",
                                      "gives 'seed' twice, at lines 4 and 6"),
    "a second parameters block": (b"program: ablate\nmethod: grid\nparameters:\n  seed: {values: [0, 1]}\n"
                                  b"parameters:\n  model.n_heads: {values: [1, 2]}\n",
                                  "gives 'parameters' twice, at lines 3 and 5"),
    "value beside values": ({**HEADER, "method": "grid", "parameters": {"seed": {"values": [0, 1], "value": 0}}},
                            "gives both value and values"),
}


# Files a careless reader would expand in memory (or forever): refused in a child process whose
# timeout is the test of "no hang, no 10^8-point grid built", so such a regression fails, never stalls.
HUGE = ("run_cap over the limit", "discrete space over the limit", "grid of 10^8 runs", "YAML bomb", "too big")
# The child: `ablate sweep` on each file, (exit status, stderr) of each as JSON.
SWEEP_EACH = """
import contextlib, io, json, sys
from ablate import cli
results = []
for path in sys.argv[1:]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(["sweep", path])
    results.append([code, err.getvalue()])
print(json.dumps(results))
"""


def write_case(path, content) -> None:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(yaml.safe_dump(content))


def check_refused(code: int, err: str, expected: str, tmp_path) -> None:
    assert code == 2, err
    assert err.startswith("ablate: ") and err.count("\n") == 1 and "; " in err, err
    assert expected in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("case", [c for c in MALFORMED if c not in HUGE])
def test_a_malformed_sweep_file_exits_2_with_one_line_and_no_runs_folder(case, tmp_path, capsys):
    content, expected = MALFORMED[case]
    path = tmp_path / "bad.yaml"
    write_case(path, content)
    code = cli.main(["sweep", str(path)])
    check_refused(code, capsys.readouterr().err, expected, tmp_path)


def test_a_huge_sweep_file_is_refused_before_it_is_expanded(tmp_path):
    paths = []
    for i, case in enumerate(HUGE):
        paths.append(tmp_path / f"huge{i}.yaml")
        write_case(paths[-1], MALFORMED[case][0])
    # generous for a loaded machine (the whole child takes seconds); a grid built point by point takes hours
    done = subprocess.run([sys.executable, "-c", SWEEP_EACH, *map(str, paths)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    for case, (code, err) in zip(HUGE, json.loads(done.stdout.strip().splitlines()[-1]), strict=True):
        check_refused(code, err, MALFORMED[case][1], tmp_path)


def test_dry_run_refuses_the_same_files(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(MALFORMED["log_uniform_values min 0"][0]))
    assert cli.main(["sweep", str(path), "--dry-run"]) == 2
    assert capsys.readouterr().err.startswith("ablate: ")


def test_run_cap_over_a_small_discrete_space_runs_each_configuration_once_and_says_so(tmp_path):
    params = {"model.norm": {"values": ["pre", "post"]}, "seed": {"min": 0, "max": 2},
              "optim.lr": {"distribution": "q_uniform", "min": 0.001, "max": 0.002, "q": 0.001}}
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(random_file(params, run_cap=10**9)))
    # first in a child process whose timeout catches a runner that draws 10^9 times (or forever)
    done = subprocess.run([sys.executable, "-m", "ablate", "sweep", str(path), "--dry-run"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "note: " in done.stderr and "12 distinct configurations" in done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith("12 runs in")
    sweep = spec.load(str(path))
    combos = sorted((r.cfg.model.norm, r.cfg.seed, round(r.cfg.optim.lr, 6)) for r in sweep.runs)
    assert combos == sorted((n, s, lr) for n in ("pre", "post") for s in (0, 1, 2) for lr in (0.001, 0.002))
    assert len(sweep.notes) == 1 and "run_cap 1,000,000,000 is more than the 12 distinct" in sweep.notes[0]
    # a value with probability 0 is never drawn, and not counted in the space
    zero = tmp_path / "zero.yaml"
    zero.write_text(yaml.safe_dump(random_file({"model.norm": {"values": ["pre", "post", "none"],
                                                               "probabilities": [0.5, 0.5, 0.0]}}, run_cap=5)))
    assert sorted(r.cfg.model.norm for r in spec.load(str(zero)).runs) == ["post", "pre"]


def test_a_space_larger_than_run_cap_is_drawn_without_repeats():
    params = {"seed": {"min": 0, "max": 9}, "model.norm": {"values": ["pre", "post"]}}  # 20 configurations
    path = spec.Path("draw.yaml")
    path.write_text(yaml.safe_dump(random_file(params, run_cap=19)))
    sweep = spec.load(str(path))
    pairs = {(r.cfg.seed, r.cfg.model.norm) for r in sweep.runs}
    assert len(sweep.runs) == len(pairs) == 19 and sweep.notes == ()


def test_the_grid_is_counted_before_it_is_expanded(monkeypatch):
    """A grid over the limit is refused without building one configuration."""
    built = []
    monkeypatch.setattr(spec, "_build", lambda *a: built.append(a))
    params = {"seed": {"values": list(range(400))}, "optim.lr": {"values": [0.001 * (i + 1) for i in range(400)]}}
    path = spec.Path("big.yaml")
    path.write_text(yaml.safe_dump({**HEADER, "method": "grid", "parameters": params}))
    with pytest.raises(spec.SweepError, match="160,000 runs"):
        spec.load(str(path))
    assert built == []


# -- progress ----------------------------------------------------------------------------------

class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _play(stream) -> Progress:
    progress = Progress("demo", total=3, workers=2, stream=stream)
    progress.pending = 3
    progress.say("ablate sweep demo: 3 runs")
    progress.start("a", "a seed=0")
    progress.draw()  # the runner redraws every second while runs train
    progress.start("b", "b seed=1")
    for _ in range(5):
        progress.draw()
    progress.finish("a", "completed", "a seed=0")
    progress.wait("c", "c seed=2")
    progress.draw()
    progress.finish("b", "failed", "b seed=1: boom")
    progress.finish("c", "completed", "c seed=2 (by another process)")
    progress.close()
    return progress


def test_a_run_paused_at_a_band_counts_all_its_training_in_the_eta(monkeypatch):
    """A run held at an early-termination band and resumed: its duration is every stretch it trained, not the
    last one (with bands 1, 3, 9 of 10 epochs the ETA of what followed came out about 10x too small)."""
    from ablate.sweep import progress as P

    now = [0.0]
    monkeypatch.setattr(P.time, "monotonic", lambda: now[0])
    progress = Progress("demo", total=1, workers=1, stream=io.StringIO())
    progress.start("a")
    now[0] = 30.0
    progress.finish("a", "paused", "a: at its band")  # 30 s so far
    now[0] = 50.0
    progress.start("a")
    now[0] = 60.0
    progress.finish("a", "completed", "a")  # 10 s more
    assert progress.durations == [40.0]


def test_the_eta_counts_the_stage_2_runs_not_planned_yet(monkeypatch):
    """A tuned sweep's stage 2 is planned only when a variant's stage 1 has ended: its runs still count in the ETA
    (issue 43: it read 9:57 after a minute of a sweep with a stage 2 as long as its stage 1 still to come)."""
    from ablate.sweep import progress as P

    now = [0.0]
    monkeypatch.setattr(P.time, "monotonic", lambda: now[0])
    progress = Progress("demo", total=6, workers=2, stream=io.StringIO())
    progress.pending, progress.unplanned = 4, 2  # 4 stage-1 runs (2 start now), 2 of stage 2 to come
    progress.start("a")
    progress.start("b")
    now[0] = 10.0
    progress.finish("a", "completed", "a")
    progress.finish("b", "completed", "b")
    assert progress.eta() == (2 + 2) * 10.0 / 2
    progress.unplanned = 0  # planned: now pending
    progress.pending = 4
    assert progress.eta() == 4 * 10.0 / 2


def test_in_a_log_progress_is_one_plain_line_per_change_without_a_bar():
    log = io.StringIO()
    progress = _play(log)
    assert progress.tty is False
    text = log.getvalue()
    lines = text.splitlines()
    assert "\r" not in text and "\x1b" not in text and "#" not in text and "[---" not in text
    assert len(lines) == 1 + 2 + 1 + 1 + 2  # the header, 2 starts, 3 ends, 1 wait: the 7 redraws print nothing
    assert lines[1].startswith("started   a seed=0 | 0/3 done | 1 running |")
    assert lines[3].startswith("[1/3] completed a seed=0") and "1/3 done | 1 running" in lines[3]
    assert lines[4].startswith("waiting   c seed=2: another process is training it |")
    assert "1 waiting for another process" in lines[4]
    assert lines[5].startswith("[2/3] failed    b seed=1: boom") and "1 failed" in lines[5]
    assert lines[6].startswith("[3/3] completed c seed=2 (by another process)") and "2/3 done | 0 running" in lines[6]


def test_on_a_terminal_the_bar_is_redrawn_in_place():
    screen = FakeTerminal()
    _play(screen)
    text = screen.getvalue()
    assert text.count("\r\x1b[2K") >= 7  # every redraw clears the line it drew
    assert "demo [--------------------] 0/3 done | 1 running" in text
    assert "demo [######--------------] 1/3 done | 1 running | 1 waiting for another process" in text
    assert "demo [####################] 2/3 done | 0 running | 0 diverged | 1 failed" in text
    kept = [line.split("\r")[-1].removeprefix("\x1b[2K") for line in text.split("\n")]
    assert any(k.startswith("[1/3] completed a seed=0") for k in kept)
    assert "started   a seed=0" not in text  # a start shows in the bar, not as a line
    assert text.count("\n") == 4  # the header and the three ends stay; the bar never adds a line



@pytest.mark.parametrize(("stem", "words"), [
    (" lead", "no space at either end"),  # was run as group "lead": runs in lead/, `results ' lead'` found none
    ("猫坐在垫子上" * 13 + "猫坐在垫子", "200 bytes in UTF-8"),  # 83 characters, 249 bytes: `compare` could not
    # name its files ("file name too long")
], ids=["a leading space", "83 Chinese characters"])
def test_a_sweep_file_whose_name_cannot_be_its_group_is_refused_in_one_line(stem, words, tmp_path, capsys):
    path = tmp_path / f"{stem}.yaml"
    path.write_text(yaml.safe_dump({**HEADER, "method": "grid", "parameters": {"seed": {"values": [0]}}}))
    for dry in (["--dry-run"], []):
        assert cli.main(["sweep", str(path), *dry]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and words in err and "rename the file" in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", ["sweep", "results", "compare"])
def test_a_sweep_file_name_longer_than_the_file_system_allows_is_one_line(command, tmp_path, capsys):
    """A sweep named by 84 Chinese characters (252 bytes, and '.yaml': over 255) cannot exist; `ablate sweep`
    printed a 30-line OSError ("File name too long") and `compare` blamed the output folder."""
    path = tmp_path / ("猫坐在垫子上" * 14 + ".yaml")
    assert cli.main([command, str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no sweep file" in err and "File name too long" in err, err
