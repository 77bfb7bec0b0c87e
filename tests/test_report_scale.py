"""The answers table says at what scale each answer was measured, and which answers may move at a larger one
(issue 37, point 9): from the tables' provenance (budget, machine) and the answer's own `at_scale`."""

from __future__ import annotations

import pytest

from ablate import report as R
from ablate.report.build import scale_note, scale_of

CPU = "cpu (x86_64), 1 thread(s) per run, torch 2.14.1"
META = {"sweeps": {
    "a": {"budget": "quick", "machine": CPU},
    "b": {"budget": "full", "machine": "cuda (NVIDIA H200), 1 thread(s) per run, torch 2.14.1"},
    "cost": {"budget": "n = 32 … 2048", "machine": "cpu, 2 thread(s), torch 2.14.1"},
}}


@pytest.mark.parametrize("sweeps, en, zh", [
    (["a"], "quick budget, CPU", "快速预算，CPU"),
    (["a", "b"], "full, quick budget, CPU, CUDA", "完整、快速预算，CPU、CUDA"),
    (["cost"], "benchmark, CPU", "基准测试，CPU"),
    (["missing"], "—", "—"),
])
def test_the_scale_comes_from_the_tables_provenance(sweeps, en, zh):
    answer = {"sweeps": sweeps, "at_scale": {"en": "", "zh": ""}}
    assert (scale_of(answer, META, "en"), scale_of(answer, META, "zh")) == (en, zh)


def test_an_answer_that_may_move_is_marked_and_said_once_under_the_table():
    q = R.Question("qs", "Qs · scale", "Does it hold at scale?", "规模更大时还成立吗？", sweeps=["a"], title_zh="Qs · 规模")
    pairs = {k: (f"{k} en", f"{k} 中") for k in ("plain", "mechanism", "outcome", "changes")}
    moving = q.answer(**pairs, at_scale=("more steps may close the gap", "更多步数可能缩小差距"))
    still = q.answer(**pairs)
    assert scale_of(moving, META, "en") == "quick budget, CPU †" and scale_of(still, META, "en") == "quick budget, CPU"
    assert scale_note([moving, still], "en") == ("† Expected to move at a larger scale (more steps, width or length, or "
                                                 "parallel hardware): Qs · scale: more steps may close the gap")
    assert scale_note([moving, still], "zh").endswith("Qs · 规模：更多步数可能缩小差距")
    assert scale_note([still], "en") == ""


def test_the_provenance_table_counts_runs_and_names_only_what_did_not_complete():
    from ablate.report.build import provenance_rows

    meta = {"sweeps": {"all": {"runs": 40, "status": {"completed": 40}, "budget": "quick", "commit": "a" * 40},
                       "some": {"runs": 40, "status": {"completed": 38, "diverged": 2}, "budget": "quick",
                                "commit": "b" * 40, "dirty": True}}}
    rows = {r[0]: r for r in provenance_rows([], meta)}
    assert rows["all"][1:4] == ["40", "quick", "a" * 12]
    assert rows["some"][1] == "40 (38 completed, 2 diverged)" and rows["some"][3].startswith("b" * 12 + " ")
    assert provenance_rows([], meta, "zh")[1][1] == "40（38 完成，2 发散）"
