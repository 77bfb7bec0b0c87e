"""`ablate report build`: execute every report notebook on the exported data and write the report.

    reports/<notebook>.py        the sources (jupytext percent format, no outputs), converted in memory,
    reports/<notebook>.yaml      run in their manifests' order (ablate.studies); each must answer exactly
                                 its manifest's questions
    <out>/build/<notebook>.html  each executed notebook, self-contained (figures inline, no scripts
                                 fetched from the network): its heading, then its Answer, then the
                                 rest; each cell's code below its outputs in a closed <details>, no stderr
                                 (warnings), DataFrames without their row index
    <out>/build/index.html       the answers table, then every question's plain answer, verdict and key
    <out>/build/index.zh.html    figure, the evidence folded, links below; English and Chinese (with the
                                 Chinese figures); relative paths only
    <out>/build/answers.json     the same Answers as data
    <out>/figures/*.png          every figure the notebooks save (notebook qN_x saves qN_*.png), each
                                 also as *.zh.png with its texts in Chinese (figure_zh)
    <out>/FINDINGS.md            per question: the plain answer first, then mechanism, outcome, the
    <out>/FINDINGS.zh.md         anchors (primary tests, supporting evidence), multiplicity, what would
                                 change the answer; English and Chinese, same structure; only on a
                                 full build

Each notebook runs in a fresh Jupyter kernel (nbclient) with ABLATE_REPORT_DATA and
ABLATE_REPORT_FIGURES pointing at the data and figure folders, and PYTHONHASHSEED fixed. The
Answers are read from the outputs of the cells tagged `answer` (ANSWER_MIME). The findings files
hold no timestamp and no absolute path, only the data's own dates, so the same data gives the same
files, byte for byte. Every fixed sentence of them is in TEXT, English and Chinese side by side.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..fileio import atomic_write
from ..studies import STUDIES_ENV
from .answers import ANSWER_MIME, VERDICT_ZH
from .data import (
    DATA_ENV,
    FIGURES_ENV,
    NOT_RUN_LINE,
    SHOW_SAVED_ENV,
    DataFileError,
    check_folder,
    figure_file,
    make_target,
    read_meta,
)
from .prose import BUDGET_ZH


def notebooks(source: Path | str = "reports") -> list[str]:
    """The notebooks of `source` in their studies' order, each from its manifest (ablate.studies); BuildError
    naming the fix for a bad manifest or a notebook without one."""
    from ..studies import StudyError, load, orphans

    try:
        studies = load(source)
    except StudyError as err:
        raise BuildError(str(err)) from None
    alone = orphans(source)
    if alone:
        raise BuildError(f"{Path(source) / (alone[0] + '.py')} has no manifest {alone[0]}.yaml beside it; write one "
                         "(its questions, their sweeps; see ablate/studies.py) or move the file out of the folder")
    return [s.notebook for s in studies]


def expected_keys(source: Path, name: str) -> list[str]:
    """The keys of the questions the manifest of notebook `name` says it answers, in order."""
    from ..studies import read_study

    return [q.key for q in read_study(source / f"{name}.yaml").questions]

KERNEL = "python3"
LANGS = ("en", "zh")
FINDINGS = {"en": "FINDINGS.md", "zh": "FINDINGS.zh.md"}

# The Chinese file's glossary: each term as every Chinese sentence of the findings writes it, the English it
# stands for, and what it means here (FINDINGS.zh.md shows it under the answers table; a test checks each term
# is the one the Chinese text uses).
GLOSSARY: tuple[tuple[str, str, str], ...] = (
    ("词元", "token", "模型读入的最小单位；教程把例句「猫坐在垫子上」切成「猫」「坐」「在」「垫子」「上」五个词元，"
                    "把例句送进这里的复制模型时则按字输入，「垫」「子」各算一个词元，共六个"),
    ("词袋", "bag of tokens", "只记每个词元出现几次、不记顺序的表示；没有位置编码的双向 Transformer 看到的就是词袋"),
    ("词袋基线", "order-blind level", "看不到词序的模型（只知道序列的词袋和当前位置上的词元）所能期望达到的准确率，在每个任务的评估集上精确算出"),
    ("随机水平", "chance", "始终猜最常见的答案所能得到的准确率"),
    ("位置编码", "positional encoding", "告诉模型每个词元在第几位的信号（教程比作「座位牌」）：正弦、可学习、RoPE、ALiBi"),
    ("缩放", "scaling by √d_k", "注意力分数 QKᵀ 除以 √d_k，使分数的标准差与 d_k 无关"),
    ("多头注意力", "multi-head attention", "几个小注意力头并行，各自决定看哪里（教程比作几盏「聚光灯」）"),
    ("残差连接", "residual (skip) connection", "把子层的输入直接加到输出上：x + f(x)（教程比作「便利贴」和「梯度高速公路」）"),
    ("普通堆叠", "plain stack", "没有残差连接的层堆叠（无残差堆叠）；Q4 拿它和有残差连接的同一堆叠比较"),
    ("整形注意力", "shaped attention", "一种初始化时让每个词元主要关注自己的注意力（Noci 等人 2023），用来检验「词元坍缩」的解释"),
    ("层归一化", "LayerNorm", "对每个词元的向量做归一化；Pre-LN 放在子层之前（残差分支内），Post-LN 放在残差相加之后"),
    ("前馈网络（FFN）", "feed-forward network", "每个词元各自经过的两层全连接网络（教程比作「折纸」和「键值记忆」）；"
                                            "这里检验它能否存下只能记在权重里的事实"),
    ("温度 τ", "temperature", "softmax 之前先把分数除以 τ：τ 越大，注意力分布越平均；越小越集中"),
    ("学习率预热", "warm-up", "训练开始的一段步数内，学习率从 0 线性升到设定值；预热比例指这段步数占总步数的比例"),
    ("复制任务", "copy task", "读入一串词元、一个分隔符和同样多的空位，在空位上依次输出读过的词元"),
    ("直方图任务", "histogram task", "Q2 用的任务：序列中每个词元都要报出自己在整个序列里出现了几次；注意力要均匀地分给所有相同的词元"),
    ("查找任务", "lookup task", "Q3 用的任务：从第三个位置起，报出它前面两个词元组成的有序对；要同时做两次查找"),
    ("位置与计数任务", "poshist task", "Q3 的主任务：从第三个位置起，报出往前数第二个词元（位置关系），以及自己是否再次出现"
                                   "（内容关系）；两种关系要同时用到"),
    ("回忆任务", "lag-recall task", "读入 n 个词元和一个查询符，在查询符处输出第一个词元；n 是间隔"),
    ("间隔", "lag", "要回忆的词元之后又读入的词元数"),
    ("键值事实", "key→value facts", "一张固定的随机表：每对键 (a, b) 对应一个值，无法从输入推出，只能记在权重里"),
    ("发散", "diverged", "训练中损失变成非有限值的运行；计算准确率时记为随机水平"),
    ("MNIST 按行输入", "MNIST rows", "每张 28×28 的手写数字图按行读入：每行 28 个像素是一个词元，共 28 个词元；教程最后的模型就这样读图"),
    ("独热", "one-hot", "一个分量为 1、其余为 0 的向量；softmax 的一行把 99% 以上的权重放在一个词元上时，这里就说它「几乎独热」"),
    ("快速预算 / 完整预算", "quick / full budget", "这里的实验都在快速预算下跑：较少的训练步数，两核 CPU 上几分钟一个扫描；"
                                                 "完整预算训练得更久，需要 GPU（见附录中的开销）"),
    ("探针", "probe", "训练之外、不改动模型地读出模型内部的量（注意力分数、梯度、词元之间的余弦相似度等）"),
    ("因果 / 双向", "causal / bidirectional", "因果模型的每个词元只能看见它前面的词元（加了因果掩码）；双向模型能看见整个序列"),
    ("主要检验", "primary test", "每条论断中唯一决定判定结果的检验，事先写定（各笔记本注明写定的时间和事后的改动）"),
)

# Every fixed sentence of FINDINGS.md with its twin in FINDINGS.zh.md ({...} are filled in).
TEXT: dict[str, tuple[str, str]] = {
    "title": ("Findings", "实验结论"),
    "generated": (
        "Generated by `make report` (`ablate report build`) from the tables in `{data}/`; do not edit by hand.",
        "由 `make report`（`ablate report build`）根据 `{data}/` 中的表格生成，请勿手工编辑。",
    ),
    "method": (
        "Every number below is computed by a notebook from those tables. Accuracies carry 95 % bootstrap "
        "intervals over seeds and evaluation examples (they never leave 0–100 %), ratios of gradients "
        "intervals on the log scale, other quantities Student-t intervals over seeds; each variant of a tuned "
        "sweep is read at the learning rate its stage 1 chose on validation. Each published claim has one "
        "primary test, written in its notebook with its reason (for Q1–Q4 and the claims written after an "
        "earlier build of these findings had been read, for the RNN table before its runs, as each notebook "
        "says; a deviation made after reading an outcome is marked); "
        "other comparisons are supporting evidence and do not move the verdict. Every p-value is two-sided, "
        "also for a test registered in one direction (a above b): its verdict asks the 95 % interval to lie "
        "wholly on the predicted side, a one-sided test at 2.5 %, stricter than the 5 % registered. "
        "A claim of sameness agrees "
        "only inside an equivalence margin stated with its test (TOST); two arms that both stayed at the "
        "task's reference level (chance, or the order-blind level), or both solved it (≥ 99 %), make a claim "
        "not testable: runs that learned nothing, or that have no room to differ, are no evidence either way.",
        "以下每个数字都由笔记本根据这些表格计算得出。准确率给出对随机种子和评估样本的 95% bootstrap 区间"
        "（对种子和样本反复重抽样估出的区间，不会超出 0–100%），梯度之比在对数尺度上给出区间，其他量给出对随机种子的 Student-t 区间；"
        "调参的扫描中，每个变体取其第一阶段在验证集上选出的学习率。每条已发表的论断只有一个主要检验，"
        "连同理由写在笔记本中（如各笔记本所述，Q1–Q4 和各论断的检验是在读过此前一版结论之后写定的，RNN 对照表的检验"
        "写于其运行之前；读到结果之后所做的改动都有标注）；"
        "其他比较只是辅助证据，不影响判定。所有 p 值都是双侧的，预先登记为单侧（a 高于 b）的检验也不例外："
        "判定要求 95% 区间完全落在预测的一侧，相当于 2.5% 水平的单侧检验，比登记的 5% 更严。"
        "「两者相同」类的论断只有在差异落入与检验一同声明的等价界限之内（TOST，即双单侧检验：分别检验差异"
        "不低于下界、不高于上界）时"
        "才算成立；两个变体都停留在任务的参考水平（随机水平或词袋基线），或都已解决任务（≥ 99%）时，"
        "该论断无法在此检验：什么都没学到、或没有差异空间的模型无法为任何一方提供证据。",
    ),
    "other": ("中文版：[FINDINGS.zh.md](FINDINGS.zh.md)", "English: [FINDINGS.md](FINDINGS.md)"),
    "summary": ("Answers at a glance", "答案一览"),
    "briefs": ("The four questions, answered", "四道思考题的答案"),
    "brief_item": ("**[{title}](#{anchor})** {text} *The tutorial's claim: {verdict}.*",
                   "**[{title}](#{anchor})** {text}*对教程论断的判定：{verdict}。*"),
    "legend": ("Verdict words, on the tutorial's claim: **agrees**, the runs support it; **disagrees**, they "
               "contradict it; **partly**, some of its tests do and the rest do not or cannot decide; "
               "**inconclusive**, the runs cannot tell; **not testable**, this setting cannot test it (both "
               "arms learned nothing, both solved the task, or the claim's premise does not hold here).",
               "判定用语（针对教程的说法）：**成立**，实验支持它；**不成立**，实验与它相反；**部分成立 / 部分不成立**，"
               "一部分检验如此，其余的相反或还分不出；**证据不足**，这批实验分不出；**无法在此检验**，这里的设置检验不了它"
               "（两组都什么也没学到，或都已完全解决任务，或论断的前提在这里不成立）。"),
    "method_head": ("How the numbers were computed", "数字是怎样算出来的"),
    "glossary": ("", "术语表"),
    "glossary_head": ("", "术语 | 英文 | 含义"),
    "summary_head": ("question or claim | the answer | verdict on the tutorial's claim | measured at | "
                     "published side anchors (each its own verdict)",
                     "问题或论断 | 答案 | 对教程论断的判定 | 测量规模 | 其他已发表的论断（各自判定）"),
    "scale_runs": ("{budgets} budget, {devices}", "{budgets}预算，{devices}"),
    "scale_bench": ("benchmark, {devices}", "基准测试，{devices}"),
    "scale_mark": (" †", " †"),
    "scale_sep": (", ", "、"),
    "scale_note": ("† Expected to move at a larger scale (more steps, width or length, or parallel hardware): {items}",
                   "† 在更大规模（更多步数、更宽的模型、更长的序列或并行硬件）下预计会变化：{items}"),
    "scale_item": ("{title}: {text}", "{title}：{text}"),
    "side_none": ("—", "—"),
    "side_item": ("{cite}: {verdict}", "{cite}：{verdict}"),
    "side_sep": ("; ", "；"),
    "question": ("**Question.** {text}", "**问题。** {text}"),
    "mechanism": ("**Mechanism** (what the probes show). {text}", "**机制**（探针所见）。{text}"),
    "outcome": ("**Outcome** (what training shows). {text}", "**结果**（训练所见）。{text}"),
    "anchors": ("**Published anchors** — the tutorial's claim: **{verdict}**{side}",
                "**已发表的论断** — 教程的论断：**{verdict}**{side}"),
    "anchors_side": ("; side anchors, each judged on its own: {items}", "；其他论断（各自判定）：{items}"),
    "anchors_head": ("claim | primary test | verdict | evidence", "论断 | 主要检验 | 判定 | 证据"),
    "supporting": ("**Supporting evidence** (does not move the verdict)", "**辅助证据**（不影响判定）"),
    "supporting_head": ("claim | verdict | evidence", "论断 | 判定 | 证据"),
    "paper_says": ("the paper: {text}", "论文原文：{text}"),
    "multiplicity": ("**Multiplicity.** {text}", "**多重比较。** {text}"),
    "changes": ("**What would change the answer.** {text}", "**答案在什么情况下会变。** {text}"),
    "details": ("**Details.** {text}", "**细节。**{text}"),
    "notebook": ("Notebook: [`{name}.py`]({path})", "笔记本：[`{name}.py`]({path})"),
    "page_link": ("The tutorial's claim: **{verdict}**. The tests, the evidence and every figure: [{path}]({path}).",
                  "对教程论断的判定：**{verdict}**。检验、证据和所有图：[{path}]({path})。"),
    "page_back": ("[All the answers]({findings}) · 中文：[{other}]({other})",
                  "[全部答案]({findings}) · English: [{other}]({other})"),
    "failed": ("The notebook failed: `{error}`", "笔记本运行失败：`{error}`"),
    "failed_row": ("notebook failed: {error}", "笔记本运行失败：{error}"),
    "settle": (
        "**At budget {budgets}, {n} of {total} primary tests {what}.** Whether longer training changes "
        "{them} is for the full budget to show: {costs}.",
        "**在{budgets}预算下，{total} 个主要检验中有 {n} 个{what}。** 更长的训练是否会改变结论，"
        "要由完整预算来回答：{costs}。",
    ),
    "settle_inconclusive": ("{are} inconclusive", "证据不足"),
    "settle_disagrees": ("{disagree} with {its} anchor", "与论断不符"),
    "settle_or": (" or ", "或"),
    "settle_cost": (
        "`make sweep-{sweep} BUDGET=full`, {runs} runs (epochs: {epochs}), {msteps} M optimiser steps, "
        "{gpu} GPU hours at the assumed rate",
        "`make sweep-{sweep} BUDGET=full`，{runs} 个运行（轮数：{epochs}），{msteps} M 个优化步，"
        "按假定速率约 {gpu} GPU 小时",
    ),
    "full": ("What the full budget would take", "完整预算需要多少计算"),
    "full_text": (
        "Every sweep the answers use that is not at the full budget yet, at the full budget "
        "(`ablate/budgets.py`: every run on the whole training set for many epochs), as estimated when its "
        "table was exported (meta.json, `cost_full`). Where a primary test is inconclusive or disagrees, "
        "the budget these tables were made at may be too small to show the effect. Optimiser steps come from "
        "the sweep files; CPU hours multiply them by the seconds per step each variant measured (one worker "
        "thread); GPU hours assume {lo}–{hi} steps per second per run, which is not measured here.",
        "答案用到的、尚未以完整预算运行的每个扫描，在完整预算下（`ablate/budgets.py`：每个运行使用全部训练集，"
        "训练多个轮次）的开销，取自导出表格时的估计（meta.json 中的 `cost_full`）。主要检验证据不足或不成立时，"
        "这些表格所用的预算可能太小，不足以显示效应。优化步数来自扫描文件；CPU 小时等于步数乘以每个变体实测的"
        "每步秒数（单个工作线程）；GPU 小时假定每个运行每秒 {lo}–{hi} 步，这一速率并未在此实测。",
    ),
    "full_head": (
        "sweep | runs | epochs | optimiser steps | CPU thread-hours (measured rate) | GPU hours at {lo}–{hi} steps/s (assumed)",
        "扫描 | 运行数 | 轮数 | 优化步数 | CPU 线程小时（实测速率） | GPU 小时（假定 {lo}–{hi} 步/秒）",
    ),
    "full_link": ("Per sweep: [{path}]({path}).", "每个扫描的明细：[{path}]({path})。"),
    "full_total": (
        "All of them: about {lo}–{hi} GPU hours, one run per GPU at a time.",
        "合计：约 {lo}–{hi} GPU 小时，每块 GPU 同时运行一个。",
    ),
    "provenance": ("Where the data came from", "数据来源"),
    "provenance_head": ("table | runs (all completed unless said) | budget | commit | wall time | primary runs: median last-epoch gain, solved | date",
                        "表格 | 运行数（未注明即全部完成） | 预算 | 提交 | 耗时 | 主要检验的运行：最后一个轮次提升的中位数，已解决比例 | 日期"),
    "provenance_machine": ("Every table ran on: {machines}.", "所有表格的运行环境：{machines}。"),
    "provenance_link": (
        "{tables} tables from {commits} commits{dirty}; per table its runs, budget, commit, wall time and date: "
        "[{path}]({path}).",
        "{tables} 个表格，来自 {commits} 个提交{dirty}；每个表格的运行数、预算、提交、耗时和日期：[{path}]({path})。",
    ),
    "provenance_dirty": (", {n} of them with uncommitted changes", "，其中 {n} 个含未提交的修改"),
    "primary_cell": ("{runs}: {gain}, {solved} solved", "{runs} 个运行：{gain}，{solved} 已解决"),
    "not_run": (f"{NOT_RUN_LINE[0]} `make {{target}}`", f"{NOT_RUN_LINE[1]} `make {{target}}`"),
    "uncommitted": (" (uncommitted changes)", "（含未提交的修改）"),
    "mismatch": (", {n} run(s) at other commits", "，另有 {n} 个运行来自其他提交"),
    "completed": ("completed", "完成"),
    "diverged": ("diverged", "发散"),
    "list_sep": (", ", "，"),
    "runs_status": ("{runs} ({status})", "{runs}（{status}）"),
    "aside": (" ({text})", "（{text}）"),
    # index.html and index.zh.html
    "html_title": ("ablate — findings", "ablate — 实验结论"),
    "html_h1": ("ablate — what the experiments say", "ablate — 实验给出的答案"),
    "html_intro": ("Every answer is computed by its notebook from the tables in {data}. First the four questions "
                   "answered for a student, then the answers table; under each question its plain answer and the "
                   "figure that shows it, the evidence folded.",
                   "每个答案都由对应的笔记本根据 {data} 中的表格计算得出。先是四道思考题的简明答案，再是答案一览；"
                   "每个问题下先给出直白的答案和说明它的图，证据折叠在后面。"),
    "html_other": ("中文版", "English"),
    "html_explorer_top": ("the trained models in your browser: the explorer", "在浏览器里动手试训练好的模型：交互演示页"),
    "html_more": ("mechanism, outcome, anchors", "机制、结果与已发表的论断"),
    "html_notebook": ("notebook: {name}", "笔记本：{name}"),
    "html_failed": ("{name}: the notebook failed", "{name}：笔记本运行失败"),
    "html_failed_mark": (" — failed", " — 运行失败"),
    "html_partial": ("the partial notebook", "未运行完的笔记本"),
    "html_notebooks": ("Notebooks", "笔记本"),
    "html_explorer": ("Explorer", "交互演示"),
    "html_explorer_text": (
        "The tutorial's nine interactive demos on real trained models, in the browser: "
        '<a href="../explorer.html?lang=en">reports/explorer.html</a>, one page that opens offline (committed; '
        "<code>make explore</code> rebuilds it).",
        "教程的九个交互演示，跑在真正训练过的模型上，直接在浏览器中打开："
        '<a href="../explorer.html?lang=zh">reports/explorer.html</a>，一个离线即可打开的页面'
        "（已随仓库提交；<code>make explore</code> 会重新生成）。"),
}


def say(key: str, lang: str, **values: Any) -> str:
    """TEXT[key] in `lang`, filled in."""
    return TEXT[key][LANGS.index(lang)].format(**values)


def verdict_word(verdict: str, lang: str) -> str:
    return VERDICT_ZH.get(verdict, verdict) if lang == "zh" else verdict


class BuildError(RuntimeError):
    """A notebook that cannot be found or read, or a data file that cannot be read: one line."""


@dataclass
class Built:
    """One notebook after execution."""

    name: str
    answers: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    html: Path | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.answers)


def figure_prefix(name: str) -> str:
    """q2_scaling -> 'q2_', claims -> 'claims_': the names its figures start with."""
    return name.split("_")[0] + "_"


def read_notebook(path: Path):
    import jupytext

    try:
        nb = jupytext.read(path, fmt="py:percent")
    except FileNotFoundError:
        raise BuildError(f"no notebook source {path}") from None
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": "Python 3", "language": "python"}
    return nb


def _error_text(err: BaseException) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(err)).strip()  # the kernel's traceback is coloured
    lines = [line for line in text.splitlines() if line.strip()]
    # CellExecutionError: the last line is "ErrorName: message"; keep it and the cell's first line
    return lines[-1] if lines else type(err).__name__


# The cell the build runs before a notebook's own (and removes afterwards): DataFrames shown without
# their row index however a notebook displays them (ablate.report.display.hide_index).
SETUP_ID = "ablate-build-setup"
SETUP_SOURCE = "from ablate.report.display import hide_index as _hide_index\n_hide_index()\ndel _hide_index"


def execute(nb, cwd: Path, env: dict[str, str], timeout: int) -> str | None:
    """Run every cell in a fresh kernel; None on success, else one line naming the error. Afterwards
    `nb` holds the notebook's own cells with their outputs, stderr streams (warnings) removed."""
    import tempfile

    import nbformat
    from nbclient import NotebookClient
    from traitlets.config import Config

    setup = nbformat.v4.new_code_cell(SETUP_SOURCE, id=SETUP_ID)
    nb.cells.insert(0, setup)
    # IPC sockets in a private temporary folder: no TCP ports, no files left behind. The client
    # creates (and so shuts down) the kernel manager itself.
    try:
        with tempfile.TemporaryDirectory(prefix="ablate-kernel-") as sockets:
            config = Config({"KernelManager": {"transport": "ipc", "ip": str(Path(sockets) / "kernel")}})
            client = NotebookClient(nb, timeout=timeout, kernel_name=KERNEL, allow_errors=False, config=config,
                                    resources={"metadata": {"path": str(cwd)}})
            try:
                client.execute(env=env)
            except Exception as err:  # CellExecutionError, a timeout, a dead kernel
                return f"{type(err).__name__}: {_error_text(err)}"
    finally:
        nb.cells = [c for c in nb.cells if c.get("id") != SETUP_ID]
        drop_stderr(nb)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                return f"{output.get('ename')}: {output.get('evalue')}"
    return None


def drop_stderr(nb) -> None:
    """Remove every stderr stream (warnings, progress bars, library chatter) from the outputs; an
    exception stays (it is an `error` output, not a stream)."""
    for cell in nb.cells:
        if "outputs" in cell:
            cell.outputs = [o for o in cell.outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]


def answers_of(nb) -> tuple[list[dict[str, Any]], str | None]:
    """The Answer payloads of the cells tagged `answer`; an error when one appears elsewhere."""
    found, stray = [], 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tagged = is_answer(cell)
        for output in cell.get("outputs", []):
            payload = output.get("data", {}).get(ANSWER_MIME)
            if payload is None:
                continue
            if tagged:
                found.append(dict(payload))
            else:
                stray += 1
    if stray:
        return found, f"{stray} Answer(s) in cells not tagged `answer`"
    return found, None


def is_answer(cell) -> bool:
    return cell.cell_type == "code" and "answer" in cell.metadata.get("tags", [])


# ------------------------------------------------------------------ notebook HTML

SCRIPT_SRC = re.compile(r"<script[^>]*\bsrc=\"https?://[^\"]*\"[^>]*>\s*</script>\s*", re.I)

# JupyterLab's template with its CDN scripts (require.js, MathJax, mermaid) left out (the reports use
# no JavaScript or LaTeX), every code cell's source moved below its outputs into a closed <details>, and a
# saved figure's alt text its PNG's Description (figures.show_saved; nbconvert's own is "No description has
# been provided for this image").
TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block extra_css %}<style>
details.ablate-code { margin: 0.1rem 0 0.6rem 0; }
details.ablate-code > summary { cursor: pointer; color: #777; font-size: 0.8rem; }
</style>{% endblock extra_css %}
{% block input_group -%}{%- endblock input_group %}
{% block data_png scoped %}
{%- set alt = output | get_metadata('alt', 'image/png') -%}
{%- if alt is not none %}
<div class="jp-RenderedImage jp-OutputArea-output {{ extra_class }}">
<img src="data:image/png;base64,{{ output.data['image/png'] | escape_html }}" alt="{{ alt | escape_html }}">
</div>
{%- else %}{{ super() }}{%- endif %}
{% endblock data_png %}
{% block codecell %}
{{ super() }}
{%- if cell.source.strip() %}
<details class="ablate-code"><summary>code</summary>
<div class="jp-Cell-inputWrapper"><div class="jp-InputArea jp-Cell-inputArea">
<div class="jp-CodeMirrorEditor jp-Editor jp-InputArea-editor" data-type="inline"><div class="cm-editor cm-s-jupyter">
{{ cell.source | highlight_code(metadata=cell.metadata) | clean_html }}
</div></div></div></div>
</details>
{%- endif %}
{% endblock codecell %}
"""


def presented(nb):
    """The executed notebook in reading order: its heading (the first line of the first Markdown
    cell, when that is a `# ` heading), the Answer cells, then everything else in order."""
    import copy

    import nbformat

    nb = copy.deepcopy(nb)
    answers = [c for c in nb.cells if is_answer(c)]
    rest = [c for c in nb.cells if not is_answer(c)]
    head: list = []
    if rest and rest[0].cell_type == "markdown" and rest[0].source.startswith("# "):
        title, _, body = rest[0].source.partition("\n")
        head = [nbformat.v4.new_markdown_cell(title, id="ablate-title")]
        if body.strip():
            rest[0].source = body.strip("\n")
        else:
            rest = rest[1:]
    nb.cells = head + answers + rest
    return nb


def to_html(nb, title: str) -> str:
    """The executed notebook as one HTML file (see `presented` and TEMPLATE): outputs (figures as
    data: URIs) inline, no script fetched from the network."""
    import jinja2
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(embed_images=True, template_name="lab", exclude_input_prompt=True,
                            exclude_output_prompt=True,
                            extra_loaders=[jinja2.DictLoader({"ablate.html.j2": TEMPLATE})],
                            template_file="ablate.html.j2")
    body, _ = exporter.from_notebook_node(presented(nb), resources={"metadata": {"name": title}})
    return SCRIPT_SRC.sub("", body)


def build_one(name: str, source: Path, env: dict[str, str], html_dir: Path, figures: Path, timeout: int) -> Built:
    """Execute notebook `name` and write its page. Its figures are saved into a folder beside `figures` and
    moved in (replacing the notebook's old ones) only once its page is written: a build stopped part way (a
    full disk, Ctrl-C) leaves the old page with its old figures, never new figures without their page."""
    started = time.monotonic()
    nb = read_notebook(source / f"{name}.py")
    staging = figures.parent / f".{figures.name}-{name}.partial"
    shutil.rmtree(staging, ignore_errors=True)  # what a build stopped part way left behind
    staging.mkdir()
    try:
        error = execute(nb, source, {**env, FIGURES_ENV: str(staging)}, timeout)
        answers, stray = answers_of(nb)
        if error is None and stray:
            error = stray
        if error is None and not answers:
            error = "no Answer: no cell tagged `answer` showed one"
        if error is None and [a.get("key") for a in answers] != (want := expected_keys(source, name)):
            error = (f"its Answers are {', '.join(str(a.get('key')) for a in answers)}, its manifest {name}.yaml "
                     f"lists {', '.join(want)}: answer each of the manifest's questions once, in its order")
        page = html_dir / f"{name}.html"
        atomic_write(page, to_html(nb, name))
        for stale in figures.glob(f"{figure_prefix(name)}*.png"):
            stale.unlink()
        for new in sorted(staging.iterdir()):
            os.replace(new, figures / new.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for a in answers:
        a["notebook"] = name
    return Built(name, answers, error, page, time.monotonic() - started)


def build(
    source: Path | str = "reports",
    data: Path | str = "reports/data",
    out: Path | str = "reports",
    only: Sequence[str] | None = None,
    timeout: int = 900,
    log: Callable[[str], None] = print,
) -> list[Built]:
    """Execute the notebooks (all, or `only`), write their HTML, the index and answers.json, and on a
    full build FINDINGS.md and FINDINGS.zh.md. Returns one Built per notebook; failures are in
    Built.error."""
    source, data, out = Path(source), Path(data).resolve(), Path(out)
    every = notebooks(source)
    names = list(only) if only else every
    unknown = [n for n in names if n not in every]
    if unknown:
        raise BuildError(f"no notebook {', '.join(unknown)} in {source}; choose from {', '.join(every)}")
    try:
        check_folder(data)  # a damaged table or meta.json: one line now, not a traceback in a notebook
    except DataFileError as err:
        raise BuildError(str(err)) from None
    html_dir, figures = out / "build", (out / "figures").resolve()
    html_dir.mkdir(parents=True, exist_ok=True)
    figures.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, DATA_ENV: str(data), FIGURES_ENV: str(figures), SHOW_SAVED_ENV: "1", "PYTHONHASHSEED": "0",
           "ABLATE_PROGRESS": "0", STUDIES_ENV: str(source.resolve())}
    built = []
    for name in names:
        b = build_one(name, source.resolve(), env, html_dir, figures, timeout)
        state = "ok" if b.ok else f"FAILED ({b.error})"
        log(f"ablate report build: {name}: {state}, {len(b.answers)} answer(s), {b.seconds:.0f} s -> {b.html}")
        built.append(b)
    meta = read_meta_all(data)
    answers = [a for b in built for a in b.answers]
    atomic_write(html_dir / "answers.json", json.dumps(answers, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    for lang in LANGS:
        atomic_write(html_dir / INDEX[lang], index_html(built, meta, data, figures, html_dir, lang))
    log(f"ablate report build: {html_dir / INDEX['en']}, {INDEX['zh']}")
    if not only:
        pages = out / PAGES
        pages.mkdir(parents=True, exist_ok=True)
        written = set()
        for lang in LANGS:
            findings = out / FINDINGS[lang]
            for b in built:
                for a in b.answers:
                    page = pages / page_name(a, lang)
                    atomic_write(page, question_md(b, a, meta, figures, source, pages, findings, lang=lang))
                    written.add(page.name)
            atomic_write(findings, findings_md(built, meta, data, figures, source, findings.parent, lang=lang))
            atomic_write(pages / PROVENANCE_PAGE[lang], provenance_page(built, meta, lang))
            written.add(PROVENANCE_PAGE[lang])
            costs = full_costs(built, meta)
            if costs:
                atomic_write(pages / FULL_PAGE[lang], full_budget_page(costs, lang))
                written.add(FULL_PAGE[lang])
            log(f"ablate report build: {findings} (and {pages}/)")
        # every answer's record (the numbers its prose templates print), committed beside the pages: what
        # tests/test_prose.py renders the templates from (reports/build/ is not committed)
        records = {a["key"]: a["record"] for b in built for a in b.answers if "record" in a}
        atomic_write(pages / RECORDS, json.dumps(records, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
        for stale in pages.glob("*.md"):  # a page of an answer that no longer exists
            if stale.name not in written:
                stale.unlink()
    return built


# ------------------------------------------------------------------ payloads


def text_of(answer: dict[str, Any], key: str, lang: str) -> str:
    """An answer's `key` ("plain", "mechanism", ...) in `lang`: a payload of the older shape (one
    English `answer` only) gives that sentence as its plain answer in both languages."""
    value = answer.get(key)
    if isinstance(value, dict):
        return str(value.get(lang) or value.get("en") or "").strip()
    if isinstance(value, str):
        return value.strip()
    return str(answer.get("answer") or "").strip() if key == "plain" else ""


def title_of(answer: dict[str, Any], lang: str) -> str:
    return str(answer.get("title_zh") or answer["title"]) if lang == "zh" else str(answer["title"])


def question_of(answer: dict[str, Any], lang: str) -> str:
    return str(answer.get("question_zh") or answer["question"]) if lang == "zh" else str(answer["question"])


def figures_of(answer: dict[str, Any]) -> list[str]:
    """The key figure, then the others, each once."""
    names = [answer.get("figure"), *(answer.get("figures") or [])]
    return list(dict.fromkeys(n for n in names if n))


def primary(check: dict[str, Any]) -> bool:
    """A check of the older shape (no `primary` field) counted towards the verdict: primary."""
    return bool(check.get("primary", True))


# ------------------------------------------------------------------ provenance


BENCHES = ("attention_cost", "rnn_cost")  # the benchmarks' CSVs a notebook reads (`ablate bench attention`, `... rnn`)


def read_meta_all(data: Path) -> dict[str, Any]:
    """meta.json, plus an entry for each benchmark (BENCHES) read from its CSV."""
    import csv

    meta = read_meta(data)
    sweeps = dict(meta.get("sweeps", {}))
    for name in BENCHES:
        bench = data / f"{name}.csv"
        if not bench.is_file():
            continue
        with open(bench, newline="") as f:
            rows = list(csv.DictReader(f))
        if rows:
            r = rows[0]
            sweeps[name] = {
                "runs": len(rows),
                "budget": f"n = {min(int(x['n']) for x in rows)} … {max(int(x['n']) for x in rows)}",
                "machine": f"{r.get('device')}, {r.get('threads')} thread(s), torch {r.get('torch')}",
                "commit": r.get("commit") or None,  # written by `ablate bench` since issue 37
                "dirty": r.get("dirty") == "True",
                "date": None,
            }
    return {**meta, "sweeps": sweeps}


def tables_used(built: list[Built]) -> list[str]:
    seen: dict[str, None] = {}
    for b in built:
        for a in b.answers:
            seen.update(dict.fromkeys(a.get("sweeps") or []))
    return list(seen)


def provenance_rows(built: list[Built], meta: dict[str, Any], lang: str = "en") -> list[list[str]]:
    rows = []
    used = tables_used(built)
    for name in used + [n for n in meta["sweeps"] if n not in used]:
        m = meta["sweeps"].get(name)
        if not m:
            rows.append([name, say("not_run", lang, target=make_target(name)), "", "", "", "", ""])
            continue
        status = say("list_sep", lang).join(f"{v} {say(k, lang) if k in ('completed', 'diverged') else k}"
                                            for k, v in (m.get("status") or {}).items())
        every = (m.get("status") or {}) in ({}, {"completed": m.get("runs")})  # all completed: the count says it
        runs = f"{m.get('runs')}" if every else say("runs_status", lang, runs=m.get("runs"), status=status)
        commit = (m.get("commit") or "")[:12] or "—"
        if m.get("dirty"):
            commit += say("uncommitted", lang)
        if m.get("commit_mismatch"):
            commit += say("mismatch", lang, n=m["commit_mismatch"])
        wall = f"{m['wall_s']:,} s" if isinstance(m.get("wall_s"), int) else "—"  # first start to last end (export)
        p = m.get("primary") or {}
        primary = "—" if p.get("median_gain") is None or p.get("solved") is None else say(
            "primary_cell", lang, runs=p["runs"], gain=f"{100 * p['median_gain']:+.2f} pt",
            solved=f"{100 * p['solved']:.0f} %")
        rows.append([name, runs, str(m.get("budget") or "—"), commit, wall, primary, str(m.get("date") or "—")])
    return rows


def machines_line(meta: dict[str, Any], lang: str = "en") -> str:
    """The machines the tables ran on, said once under the provenance table (one per table would repeat it)."""
    machines = sorted({str(m.get("machine")) for m in meta["sweeps"].values() if m and m.get("machine")})
    if lang == "zh":  # "cpu (x86_64), 1 thread(s) per run, torch 2.14.1" in Chinese words, the same facts
        machines = [machine_zh(m) for m in machines]
    return say("provenance_machine", lang, machines=say("list_sep", lang).join(machines) or "—")


def machine_zh(machine: str) -> str:
    """A table's machine (export's "cpu (x86_64), 1 thread(s) per run, torch 2.14.1") in Chinese; a shape it
    does not know is kept as it is."""
    m = re.fullmatch(r"(\w+) \(([^)]*)\), (\d+) thread\(s\) per run, torch (\S+)", machine)
    if m:
        device, arch, threads, torch = m.groups()
        return f"{device.upper()}（{arch}），每个运行 {threads} 个线程，torch {torch}"
    m = re.fullmatch(r"(\w+), (\d+) thread\(s\), torch (\S+)", machine)  # a benchmark's table (cost tables)
    if m:
        device, threads, torch = m.groups()
        return f"{device.upper()}，{threads} 个线程，torch {torch}"
    return machine


def shown_path(path: Path, where: Path) -> str:
    """`path` as a relative path a reader can follow from `where`, never an absolute one: relative to
    `where` when inside it, else relative to the working directory when inside that, else its name."""
    path = Path(path).resolve()
    for base in (Path(where).resolve(), Path.cwd().resolve()):
        if path.is_relative_to(base):
            return path.relative_to(base).as_posix() or "."
    return path.name


# ------------------------------------------------------------------ FINDINGS.md, FINDINGS.zh.md


def _md_table(header: str | list[str], rows: list[list[str]]) -> list[str]:
    def cell(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    head = header.split(" | ") if isinstance(header, str) else header
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return lines


def full_costs(built: list[Built], meta: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The full budget's cost (meta.json `cost_full`, written at export) of every sweep an answer
    used that is not at full already; a sweep exported without it is left out."""
    out = {}
    for name in tables_used(built):
        m = meta["sweeps"].get(name) or {}
        cost = m.get("cost_full")
        if m.get("budget") in (None, "full") or not isinstance(cost, dict) or not cost.get("steps"):
            continue
        out[name] = {"sweep": name, **cost}
    return out


def _hours(h: float) -> str:
    return f"{h:.2g}" if h < 10 else f"{h:,.0f}"


def gpu_rate(costs: dict[str, dict[str, Any]]) -> tuple[int, int]:
    """The assumed GPU steps per second (low, high) the costs were computed at: recorded as
    `gpu_steps_per_s`, else recovered from steps / GPU hours (gpu_hours is (at high, at low))."""
    for c in costs.values():
        if c.get("gpu_steps_per_s"):
            lo, hi = c["gpu_steps_per_s"]
            return int(lo), int(hi)
    c = next(iter(costs.values()))
    fast, slow = c["gpu_hours"]
    return round(c["steps"] / (slow * 3600)), round(c["steps"] / (fast * 3600))


FULL_PAGE = {"en": "full_budget.md", "zh": "full_budget.zh.md"}  # the per-sweep cost table, beside the answers' pages
PROVENANCE_PAGE = {"en": "provenance.md", "zh": "provenance.zh.md"}  # the per-table provenance, likewise


def full_budget_section(costs: dict[str, dict[str, Any]], lang: str) -> list[str]:
    """FINDINGS.md's section: what it all would take, and a link to the table per sweep (full_budget_page)."""
    total = (sum(c["gpu_hours"][0] for c in costs.values()), sum(c["gpu_hours"][1] for c in costs.values()))
    return [
        f"## {say('full', lang)}",
        "",
        say("full_total", lang, lo=_hours(total[0]), hi=_hours(total[1])) + ("" if lang == "zh" else " ")
        + say("full_link", lang, path=f"{PAGES}/{FULL_PAGE[lang]}"),
        "",
    ]


def full_budget_page(costs: dict[str, dict[str, Any]], lang: str) -> str:
    """findings/full_budget.md (.zh.md): every sweep at the full budget, its runs, steps and hours."""
    lo, hi = gpu_rate(costs)
    rows = [[f"`make sweep-{c['sweep']} BUDGET=full`", str(c["runs"]), str(c["epochs"]), f"{c['steps']:,}",
             "—" if c.get("cpu_hours") is None else _hours(c["cpu_hours"]),
             f"{_hours(c['gpu_hours'][0])}–{_hours(c['gpu_hours'][1])}"] for c in costs.values()]
    total = (sum(c["gpu_hours"][0] for c in costs.values()), sum(c["gpu_hours"][1] for c in costs.values()))
    lines = [f"# {say('full', lang)}", "", say("full_text", lang, lo=lo, hi=hi), "",
             *_md_table(say("full_head", lang, lo=lo, hi=hi), rows), "",
             say("full_total", lang, lo=_hours(total[0]), hi=_hours(total[1])), ""]
    return "\n".join(lines).rstrip() + "\n"


def settle_line(unsettled: list[dict], n_primary: int, costs: list[dict], meta: dict[str, Any], lang: str) -> str:
    """What the full budget would take to settle a question whose primary tests are inconclusive or
    disagree."""
    budgets = sorted({str((meta["sweeps"].get(c["sweep"]) or {}).get("budget")) for c in costs})
    verdicts = {c["verdict"] for c in unsettled}
    one = len(unsettled) == 1
    what = [say("settle_inconclusive", lang, are="is" if one else "are") if "inconclusive" in verdicts else "",
            say("settle_disagrees", lang, disagree="disagrees" if one else "disagree", its="its" if one else "their")
            if "disagrees" in verdicts else ""]
    parts = [say("settle_cost", lang, sweep=c["sweep"], runs=c["runs"], epochs=c["epochs"],
                 msteps=f"{c['steps'] / 1e6:.1f}", gpu=f"{_hours(c['gpu_hours'][0])}–{_hours(c['gpu_hours'][1])}")
             for c in costs]
    if lang == "zh":
        budgets = [BUDGET_ZH.get(b, b) for b in budgets]
    return say("settle", lang, budgets=say("scale_sep", lang).join(budgets), n=len(unsettled), total=n_primary,
               what=say("settle_or", lang).join(w for w in what if w), them="it" if one else "them",
               costs="; ".join(parts))


def _check_text(c: dict[str, Any], key: str, lang: str) -> str:
    return str((lang == "zh" and c.get(f"{key}_zh")) or c.get(key) or "")


def anchor_key(c: dict[str, Any]) -> tuple[str, str]:
    return str(c["cite"]), str(c.get("claim") or "")


def anchor_statement(c: dict[str, Any], lang: str, aid: str = "") -> str:
    """An anchor stated in full: '**A1** *cite* — claim (the paper: its own wording, where it differs)'."""
    claim = _check_text(c, "claim", lang)
    if c.get("wording"):
        claim += say("aside", lang, text=say("paper_says", lang, text=c["wording"]))
    return f"{f'**{aid}** ' if aid else ''}*{_check_text(c, 'cite', lang)}* — {claim}"


def anchor_ids(checks: Sequence[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """Each distinct anchor of a page's checks, (cite, claim) -> "A1", "A2", … in the order they come."""
    ids: dict[tuple[str, str], str] = {}
    for c in checks:
        ids.setdefault(anchor_key(c), f"A{len(ids) + 1}")
    return ids


def check_row(c: dict[str, Any], lang: str, reason: bool, ids: dict[tuple[str, str], str] | None = None) -> list[str]:
    """A check as a table row: claim, the primary test's reason (primary checks only), verdict, evidence; in
    Chinese the check's `claim_zh`, `reason_zh` and `evidence_zh` where it has them (a check without them
    shows its English text). With `ids` (the page's anchors, anchor_ids), the claim is named by its id and
    cite only: the page states each anchor once, above its tables (answer_body)."""
    evidence = "" if c["verdict"] == "not run yet" else _check_text(c, "evidence", lang)
    why = [_check_text(c, "reason", lang)] if reason else []
    cell = f"**{ids[anchor_key(c)]}** *{_check_text(c, 'cite', lang)}*" if ids is not None else anchor_statement(c, lang)
    return [cell, *why, f"**{verdict_word(c['verdict'], lang)}**", evidence]


def side_text(a: dict[str, Any], lang: str) -> str:
    """The side anchors' own verdicts, one clause each ("Vaswani et al. 2017, Table 3 (B): not testable")."""
    items = [say("side_item", lang, cite=_check_text(s, "cite", lang), verdict=verdict_word(s["verdict"], lang))
             for s in a.get("side") or []]
    return say("side_sep", lang).join(items)


def slug(title: str) -> str:
    """The anchor GitHub (and the HTML index) gives a heading: lower case, every character that is not a letter,
    digit, space, hyphen or underscore dropped, spaces as hyphens ('Q1 · Word order' -> 'q1--word-order')."""
    kept = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def short_of(a: dict[str, Any], lang: str) -> str:
    """The answer in one sentence (Q.answer's `short`; a payload without one: its plain answer's first sentence)."""
    from .answers import first_sentence

    short = a.get("short") or {}
    return short.get(lang) or first_sentence(text_of(a, "plain", lang), lang)


def answer_body(a: dict[str, Any], lang: str) -> list[str]:
    """Markdown lines after an answer's plain text (which follows its question): mechanism, outcome, the
    anchors (the primary tests, then the supporting evidence), multiplicity, what would change the answer,
    details. Shared by the findings files and index.html."""
    lines: list[str] = []
    for key in ("mechanism", "outcome"):
        if text := text_of(a, key, lang):
            lines += [say(key, lang, text=text), ""]
    checks = a.get("checks") or []
    main, supporting = [c for c in checks if primary(c)], [c for c in checks if not primary(c)]
    ids = anchor_ids([*main, *supporting])  # each anchor stated once on the page, then named by its id
    stated = {}
    for c in (*main, *supporting):
        stated.setdefault(ids[anchor_key(c)], anchor_statement(c, lang, ids[anchor_key(c)]))
    if main:
        side = side_text(a, lang)
        side = say("anchors_side", lang, items=side) if side else ""
        lines += [say("anchors", lang, verdict=verdict_word(a["verdict"], lang), side=side), ""]
    if stated:
        lines += [*(f"- {s}" for s in stated.values()), ""]
    if main:
        lines += [*_md_table(say("anchors_head", lang), [check_row(c, lang, True, ids) for c in main]), ""]
    if supporting:
        lines += [say("supporting", lang), "",
                  *_md_table(say("supporting_head", lang), [check_row(c, lang, False, ids) for c in supporting]), ""]
    for key in ("multiplicity", "changes"):
        if text := text_of(a, key, lang):
            lines += [say(key, lang, text=text), ""]
    if details := (a.get("details") or {}).get(lang, ""):
        lines += [say("details", lang, text=details), ""]
    return lines


PAGES = "findings"  # the per-question pages, beside FINDINGS.md: findings/<key>.md and findings/<key>.zh.md


def page_name(a: dict[str, Any], lang: str) -> str:
    """The file of an answer's own page: 'q1.md', 'q1.zh.md' (its key, made safe for a file name)."""
    key = re.sub(r"[^A-Za-z0-9_-]+", "-", str(a.get("key") or "answer")).strip("-") or "answer"
    return f"{key}{'.zh' if lang == 'zh' else ''}.md"


def relative(path: Path, where: Path) -> str:
    """`path` as a link from a file in `where` (never absolute): relative when both are under one root."""
    path, where = Path(path).resolve(), Path(where).resolve()
    try:
        link = Path(os.path.relpath(path, where)).as_posix()
    except ValueError:  # another drive
        return path.name
    # at most one level up (findings/ -> figures/, the notebooks): else the file's name, never a machine's tree
    return link if not link.startswith("../../") else path.name


WIDTH = 110  # the findings files' English paragraphs are wrapped at this width (tables and headings are not)


def wrap_md(text: str, lang: str) -> str:
    """English paragraphs and list items wrapped at WIDTH (soft line breaks: Markdown renders them as spaces),
    so no prose line runs to thousands of characters; tables, headings, images and Chinese text (which has
    no spaces to break at, and where a soft break would render as a stray space) stay as they are."""
    if lang != "en":
        return text
    import textwrap

    out = []
    for line in text.split("\n"):
        if len(line) <= WIDTH or line.startswith(("|", "#", "!", "    ", "```")):
            out.append(line)
            continue
        bullet = line.startswith("- ")
        pieces: list[str] = []
        for piece in textwrap.wrap(line, WIDTH, subsequent_indent="  " if bullet else "", break_long_words=False,
                                   break_on_hyphens=False):
            if pieces and _STARTS_BLOCK.match(piece.lstrip()):  # would open a list, quote, heading or table
                pieces[-1] += " " + piece.lstrip()
            else:
                pieces.append(piece)
        out += pieces
    return "\n".join(out)


_STARTS_BLOCK = re.compile(r"(\d+[.)]\s|[-+*>]\s|#|\||=+\s*$|-+\s*$)")


RECORDS = "records.json"  # findings/records.json: each answer's record, by key


def scale_of(a: dict[str, Any], meta: dict[str, Any], lang: str) -> str:
    """At what scale an answer was measured, from its tables' provenance: the budgets of its sweeps and the
    devices they ran on ("quick budget, CPU"), or a benchmark's; a † when the answer says what may move."""
    tables = [meta["sweeps"][s] for s in a.get("sweeps") or [] if meta["sweeps"].get(s)]
    sep = say("scale_sep", lang)
    devices = sep.join(sorted({str(m.get("machine") or "").split(" ")[0].rstrip(",").upper()
                               for m in tables if m.get("machine")})) or "—"
    runs = sorted({str(m["budget"]) for m in tables if m.get("budget") and not str(m["budget"]).startswith("n =")})
    if lang == "zh":  # one name per budget in Chinese (issue 39): 快速预算, 完整预算
        runs = [BUDGET_ZH.get(r, r) for r in runs]
    text = (say("scale_runs", lang, budgets=sep.join(runs), devices=devices) if runs
            else say("scale_bench", lang, devices=devices) if tables else "—")
    return text + (say("scale_mark", lang) if (a.get("at_scale") or {}).get(lang) else "")


def scale_note(answers: list[dict[str, Any]], lang: str) -> str:
    """The line under the answers table: each answer marked † and what of it may move at a larger scale."""
    items = [say("scale_item", lang, title=title_of(a, lang), text=a["at_scale"][lang])
             for a in answers if (a.get("at_scale") or {}).get(lang)]
    return say("scale_note", lang, items=say("side_sep", lang).join(items)) if items else ""


def findings_md(built: list[Built], meta: dict[str, Any], data: Path, figures: Path, source: Path, where: Path,
                lang: str = "en") -> str:
    """FINDINGS.md (lang "en") or FINDINGS.zh.md ("zh"), the page a reader takes in at a glance: the four
    questions answered for a student (each answer's `brief`, from its prose template), the answers table with
    a legend of its verdict words, then per question the question, its plain answer, its key figure and a link to its own page
    (question_md: the tests, the evidence, every figure); then an appendix: how the numbers were computed,
    the glossary (Chinese), the full budget's cost and where the data came from. Every fixed sentence from
    TEXT, every number from the payloads."""
    answers = [(b, a) for b in built for a in b.answers]
    summary = [[f"[{title_of(a, lang)}](#{slug(title_of(a, lang))})", short_of(a, lang), verdict_word(a["verdict"], lang),
                scale_of(a, meta, lang), side_text(a, lang) or say("side_none", lang)] for _, a in answers]
    summary += [[b.name, say("failed_row", lang, error=b.error), "", "", ""] for b in built if b.error]
    note = scale_note([a for _, a in answers], lang)
    lines = [  # the notice for editors as a comment: a reader's first screen holds the answers (issue 39)
        f"<!-- {say('generated', lang, data=shown_path(data, where))} -->",
        f"# {say('title', lang)}",
        "",
        say("other", lang),
        "",
    ]
    briefs = [a for _, a in answers if text_of(a, "brief", lang)]
    if briefs:  # the first screen: the four questions answered for a student (issue 39)
        lines += [f"## {say('briefs', lang)}", ""]
        for a in briefs:
            lines += [say("brief_item", lang, title=title_of(a, lang), anchor=slug(title_of(a, lang)),
                          text=text_of(a, "brief", lang), verdict=verdict_word(a["verdict"], lang)), ""]
    lines += [
        f"## {say('summary', lang)}",
        "",
        say("legend", lang),
        "",
        *_md_table(say("summary_head", lang), summary),
        "",
        *([note, ""] if note else []),
    ]
    costs = full_costs(built, meta)
    for b in built:
        for a in b.answers:  # the question first, then its answer (issue 39)
            lines += [f"## {title_of(a, lang)}", "", say("question", lang, text=question_of(a, lang)), "",
                      text_of(a, "plain", lang), ""]
            if a.get("figure"):
                lines += [f"![{title_of(a, lang)}]({relative(figures / figure_file(a['figure'], lang), where)})", ""]
            lines += [say("page_link", lang, verdict=verdict_word(a["verdict"], lang),
                          path=f"{PAGES}/{page_name(a, lang)}"), ""]
        if b.error:
            lines += [f"## {b.name}", "", say("failed", lang, error=b.error), ""]
    # the appendix, after the answers: how the numbers were computed, the terms, the cost, the provenance
    lines += [f"## {say('method_head', lang)}", "", say("method", lang), ""]
    if lang == "zh":  # the terms every Chinese sentence uses, once, for readers of the tutorial
        lines += [f"## {say('glossary', lang)}", "", *_md_table(say("glossary_head", lang), [list(g) for g in GLOSSARY]), ""]
    if costs:
        lines += full_budget_section(costs, lang)
    lines += provenance_section(meta, lang)
    text = "\n".join(lines)
    return wrap_md(re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n", lang)


def provenance_section(meta: dict[str, Any], lang: str) -> list[str]:
    """FINDINGS.md's section: how many tables from how many commits, the machines, and a link to the table per
    table (provenance_page): the answers are read at a glance, the provenance looked up."""
    done = [m for m in meta["sweeps"].values() if m and m.get("commit")]
    dirty = sum(bool(m.get("dirty")) for m in done)
    return [f"## {say('provenance', lang)}", "",
            say("provenance_link", lang, tables=len(done), commits=len({m["commit"] for m in done}),
                dirty=say("provenance_dirty", lang, n=dirty) if dirty else "",
                path=f"{PAGES}/{PROVENANCE_PAGE[lang]}") + ("" if lang == "zh" else " ") + machines_line(meta, lang), ""]


def provenance_page(built: list[Built], meta: dict[str, Any], lang: str) -> str:
    """findings/provenance.md (.zh.md): every table's runs, budget, commit, wall time, primary runs and date."""
    lines = [f"# {say('provenance', lang)}", "", *_md_table(say("provenance_head", lang), provenance_rows(built, meta, lang)),
             "", machines_line(meta, lang), ""]
    return wrap_md("\n".join(lines).rstrip() + "\n", lang)


def question_md(b: Built, a: dict[str, Any], meta: dict[str, Any], figures: Path, source: Path, where: Path,
                findings: Path, lang: str = "en") -> str:
    """One answer's own page (findings/<key>.md, .zh.md): the question, then its plain answer, mechanism,
    outcome, the published anchors with their primary tests and evidence, the supporting evidence,
    multiplicity, what would change the answer, details, what would settle an open test, every figure and
    the notebook; a link back to the findings and to the page in the other language."""
    other = "zh" if lang == "en" else "en"
    lines = [f"# {title_of(a, lang)}", "",
             say("page_back", lang, findings=relative(findings, where), other=page_name(a, other)), "",
             say("question", lang, text=question_of(a, lang)), "", text_of(a, "plain", lang), ""]
    lines += answer_body(a, lang)
    costs = full_costs([b], meta)
    main = [c for c in a.get("checks") or [] if primary(c)]
    unsettled = [c for c in main if c["verdict"] in ("inconclusive", "disagrees")]
    mine = [costs[n] for n in a.get("sweeps") or [] if n in costs]
    if unsettled and mine:
        lines += [settle_line(unsettled, len(main), mine, meta, lang), ""]
    lines += [f"![{title_of(a, lang)}]({relative(figures / figure_file(name, lang), where)})" for name in figures_of(a)]
    lines += ["", say("notebook", lang, name=b.name, path=relative(source / f"{b.name}.py", where)), ""]
    text = "\n".join(lines)
    return wrap_md(re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n", lang)


# ------------------------------------------------------------------ index.html

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 60rem; margin: 2rem auto;
       padding: 0 1rem; line-height: 1.5; color: #222; }
table { border-collapse: collapse; font-size: 0.9rem; } td, th { border: 1px solid #ccc; padding: 0.2rem 0.5rem; }
section { border-top: 1px solid #ddd; margin-top: 1.5rem; }
.verdict { font-weight: 600; padding: 0.1rem 0.4rem; border-radius: 0.3rem; background: #eee; }
.agrees { background: #d7f0d7; } .disagrees, .partly-disagrees, .disagrees-in-part-the-rest-inconclusive { background: #f6d5d5; }
.not-run-yet { background: #f3ecc9; } .not-testable { background: #e4e4f4; }
.plain { font-size: 1.05rem; } details.zh > summary, details.more > summary { cursor: pointer; color: #555; }
img { max-width: 100%; } code { background: #f4f4f4; padding: 0 0.2rem; }
table, pre { display: block; max-width: 100%; overflow-x: auto; }  /* a wide table scrolls, the page does not */
@media (max-width: 40rem) { body { margin: 1rem auto; } }
"""


def _md(text: str) -> str:
    import mistune

    return mistune.html(text)


def _img(path: Path) -> str:
    try:
        data = base64.b64encode(path.read_bytes()).decode()
    except FileNotFoundError:
        return ""
    return f'<img alt="{html.escape(path.name)}" src="data:image/png;base64,{data}">'


EXPLORER_SHOT = "explorer.png"  # the explorer's screenshot in reports/figures (`make explore`)


INDEX = {"en": "index.html", "zh": "index.zh.html"}  # the HTML index in each language, in <out>/build


def index_html(built: list[Built], meta: dict[str, Any], data: Path, figures: Path, where: Path,
               lang: str = "en") -> str:
    """index.html (lang "en") or index.zh.html ("zh"): the answers table first, then every question: its
    title and verdict, its question, the plain answer, its key figure in the page's language, the rest of the
    answer folded; the glossary (Chinese), the provenance and the notebooks below; a link to the other language at the top. Every fixed
    sentence from TEXT, relative paths only."""
    e = html.escape
    other = "zh" if lang == "en" else "en"
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="{"zh-Hans" if lang == "zh" else "en"}"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(say('html_title', lang))}</title>",
        f"<style>{STYLE}</style></head><body>",
        f'<p class="other"><a href="{INDEX[other]}">{e(say("html_other", lang))}</a> · '
        f'<a href="../explorer.html?lang={lang}">{e(say("html_explorer_top", lang))}</a></p>',
        f"<h1>{e(say('html_h1', lang))}</h1>",
        f"<p>{e(say('html_intro', lang, data=shown_path(data, where)))}</p>",
    ]
    answers = [a for b in built for a in b.answers]
    briefs = [a for a in answers if text_of(a, "brief", lang)]
    if briefs:  # the four questions answered for a student, before anything else (issue 39)
        parts += [f"<section><h2>{e(say('briefs', lang))}</h2>"]
        parts += [_md(say("brief_item", lang, title=title_of(a, lang), anchor=a["key"],
                          text=text_of(a, "brief", lang), verdict=verdict_word(a["verdict"], lang))) for a in briefs]
        parts += ["</section>"]
    if answers:  # the answers at a glance: every question and claim, its answer in a sentence, its verdict
        head = say("summary_head", lang).split(" | ")[:4]
        parts += [f"<section><h2>{e(say('summary', lang))}</h2>{_md(say('legend', lang))}<table>",
                  "<tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>"]
        parts += [f'<tr><td><a href="#{e(a["key"])}">{e(title_of(a, lang))}</a></td>'
                  f'<td>{e(short_of(a, lang))}</td><td>{e(verdict_word(a["verdict"], lang))}</td>'
                  f'<td>{e(scale_of(a, meta, lang))}</td></tr>' for a in answers]
        note = scale_note(answers, lang)
        parts += ["</table>" + (f"<p>{e(note)}</p>" if note else "") + "</section>"]
    for b in built:
        for a in b.answers:
            verdict = a["verdict"]
            css = verdict.replace(" ", "-").replace(",", "")
            parts += [
                f'<section id="{e(a["key"])}">',  # the question's key: the explorer links here
                f"<h2>{e(title_of(a, lang))} <span class=\"verdict {css}\">{e(verdict_word(verdict, lang))}</span></h2>",
                _md(say("question", lang, text=question_of(a, lang))),  # the question first, not folded away
                f'<div class="plain">{_md(text_of(a, "plain", lang))}</div>',
                _img(figures / figure_file(a["figure"], lang)) if a.get("figure") else "",  # the key figure
                f'<details class="more"><summary>{e(say("html_more", lang))}</summary>',
                _md("\n".join(answer_body(a, lang))),
                "</details>",
                f'<p><a href="{e(b.html.name)}">{e(say("html_notebook", lang, name=b.name))}</a></p>' if b.html else "",
                "</section>",
            ]
        if b.error:
            parts += ["<section>", f"<h2>{e(say('html_failed', lang, name=b.name))}</h2>",
                      f"<pre>{e(b.error)}</pre>",
                      f'<p><a href="{e(b.html.name)}">{e(say("html_partial", lang))}</a></p>' if b.html else "",
                      "</section>"]
    if lang == "zh":  # the terms every Chinese sentence uses: after the answers, before the provenance (issue 39)
        parts += [f"<section><h2>{e(say('glossary', lang))}</h2><table>",
                  "<tr>" + "".join(f"<th>{e(h)}</th>" for h in say("glossary_head", lang).split(" | ")) + "</tr>"]
        parts += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in g) + "</tr>" for g in GLOSSARY]
        parts += ["</table></section>"]
    rows = provenance_rows(built, meta, lang)
    parts += [f"<section><h2>{e(say('provenance', lang))}</h2><table>",
              "<tr>" + "".join(f"<th>{e(h)}</th>" for h in say("provenance_head", lang).split(" | ")) + "</tr>"]
    parts += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows]
    parts += [f"</table><p>{e(machines_line(meta, lang))}</p></section>",
              f"<section><h2>{e(say('html_notebooks', lang))}</h2><ul>"]
    parts += [f'<li><a href="{e(b.html.name)}">{e(b.name)}</a>'
              f'{e(say("html_failed_mark", lang)) if b.error else ""}</li>' for b in built if b.html]
    parts += ["</ul></section>"]
    explorer = figures / EXPLORER_SHOT
    if explorer.exists():  # made by `make explore`, not by a notebook
        parts += [f"<section><h2>{e(say('html_explorer', lang))}</h2>",
                  f"<p>{say('html_explorer_text', lang)}</p>", _img(explorer), "</section>"]
    parts += ["</body></html>", ""]
    return "\n".join(p for p in parts if p)
