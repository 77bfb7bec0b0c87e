"""The report's figure helpers: one fixed colour and order per variant value whatever subset a figure
shows, reference lines at the levels the table records, a stamp naming task, budget and seeds, integer
ticks written out, and learning / probe curves drawn from the exported curves in those fixed colours."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from ablate import report as R  # noqa: E402
from ablate.report import figures as F  # noqa: E402

FIXTURE = Path(__file__).parent / "data" / "reports"


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_a_value_keeps_its_colour_whatever_else_the_figure_shows():
    full = F.palette("model.pos_enc")
    assert list(full) == ["none", "sinusoidal", "learned", "rope", "alibi"]  # the meaningful order
    assert len(set(full.values())) == 5
    some = F.palette("model.pos_enc", ["alibi", "learned", "learned"])
    assert some == {"learned": full["learned"], "alibi": full["alibi"]}
    assert list(some) == ["learned", "alibi"]
    # booleans as a CSV read back holds them (object column, numpy bools) map to the same colours
    column = pd.Series([np.True_, False, True], dtype=object)
    assert F.palette("model.qk_scale", column) == {True: F.BLUE, False: F.VERMILLION}
    assert F.palette("model.residual", [False]) == {False: F.VERMILLION}
    # the standard setting is blue and its ablation vermillion, for every on/off toggle
    for key in ("model.qk_scale", "model.residual"):
        assert F.palette(key)[True] == F.BLUE and F.palette(key)[False] == F.VERMILLION


def test_numbers_are_ordered_by_value_and_keep_their_colour_as_int_or_float():
    assert F.order("model.n_heads", [16, 1, 4, 2]) == [1, 2, 4, 16]
    assert F.order("model.n_heads", [16, 3, 1]) == [1, 3, 16]  # a value no table knows, in its place
    a = F.palette("model.d_head", [512, 8])
    b = F.palette("model.d_head", [8.0, 64, 512.0])
    assert a[512] == b[512.0] and a[8] == b[8.0]
    assert F.palette("model.d_head", [8])[8] != F.palette("model.d_head", [512])[512]


def test_labels_key_the_palette_by_the_names_a_column_holds():
    names = {False: "bidirectional", True: "causal"}
    assert F.palette("model.causal", [True, False], names) == {"bidirectional": F.BLUE, "causal": F.VERMILLION}
    assert F.order("model.causal", [True, False], names) == ["bidirectional", "causal"]
    assert F.label("model.pos_enc", "rope") == "RoPE" and F.label("model.pos_enc", "other") == "other"


def test_unknown_keys_and_values_get_spare_colours_in_sorted_order():
    assert F.palette("data.something", ["b", "a"]) == {"a": F.SPARE[0], "b": F.SPARE[1]}
    assert F.order("data.something", ["b", "a"]) == ["a", "b"]


def test_reference_lines_are_drawn_at_the_recorded_levels():
    df = pd.DataFrame({"ref/val/chance": [0.10, 0.12], "ref/val/order_blind": [0.30, 0.28],
                       "ref/test/chance": [0.5, 0.5], "ref/test/order_blind": [1.0, 1.0]})
    fig, ax = plt.subplots()
    drawn = F.reference_lines(ax, df, split="val")
    assert drawn == pytest.approx({"chance": 0.11, "order_blind": 0.29})
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert lines["chance"].get_ydata()[0] == pytest.approx(0.11) and lines["chance"].get_linestyle() == ":"
    assert lines["order-blind level"].get_ydata()[0] == pytest.approx(0.29)
    assert lines["order-blind level"].get_linestyle() == "--"
    # an order-blind level at 100 % (a count needs no order) is not a level a model could sit at
    fig, ax = plt.subplots()
    assert F.reference_lines(ax, df, split="test") == {"chance": 0.5}
    assert F.reference_lines(ax, pd.DataFrame({"x": [1]})) == {}


def test_the_stamp_names_task_budget_and_seeds():
    df = pd.DataFrame({"data.task": ["copy"] * 4, "budget": ["quick"] * 4, "seed": [0, 1, 2, 0]})
    assert F.stamp_text(df) == "copy task · quick budget · 3 seeds"
    other = pd.DataFrame({"data.task": ["mnist"], "budget": ["quick"], "seed": [0]})
    assert F.stamp_text(df, other, extra="layer 0") == "copy task, MNIST rows · quick budget · 1–3 seeds · layer 0"
    fig, _ = plt.subplots()
    text = F.stamp(fig, df)
    assert text.get_text() == "copy task · quick budget · 3 seeds" and text in fig.texts


def test_a_figure_of_single_runs_says_which_seed_instead_of_the_seed_count():
    df = pd.DataFrame({"data.task": ["copy"] * 4, "budget": ["quick"] * 4, "seed": [0, 1, 2, 0]})
    assert F.stamp_text(df, seeds="seed 0", extra="layer 0, head 0") == "copy task · quick budget · seed 0 · layer 0, head 0"
    fig, _ = plt.subplots()
    assert F.stamp(fig, df, seeds="seed 0").get_text() == "copy task · quick budget · seed 0"


def test_the_mask_is_a_line_style_so_colour_keeps_meaning_the_encoding():
    """Q1's curves: hue = positional encoding (its fixed colour), style = mask (solid bidirectional, dash-dotted
    causal); the legend names the masks, not the columns."""
    S = R.sweeps("pos_enc", "pos_enc_causal", data=FIXTURE)
    best = R.at_best_lr(S.df)
    fig, ax = plt.subplots()
    F.learning_curves(S, "val/acc", hue="model.pos_enc", style="model.causal", where={"model.pos_enc": "none"},
                      runs=best, ax=ax, errorbar=None)
    legend = {line.get_label(): line for line in ax.get_legend().get_lines()}
    assert {"no PE", "bidirectional", "causal"} <= set(legend)
    assert not {"model.pos_enc", "model.causal"} & {t.get_text() for t in ax.get_legend().get_texts()}
    def dashes(line):  # the on/off pattern (matplotlib names every custom pattern "--")
        return line._unscaled_dash_pattern[1]

    assert legend["bidirectional"].get_linestyle() == "-"
    assert dashes(legend["causal"]) == F.DASHES["model.causal"][True]  # dash-dotted ...
    assert dashes(legend["causal"]) != dashes(legend["order-blind level"])  # ... unlike the order-blind level
    grey = F.palette("model.pos_enc")["none"]
    drawn = [ln for ln in ax.get_lines() if ln.get_label().startswith("_child")]  # the curves (one step each at smoke)
    assert len(drawn) == 2 and {to_hex(ln.get_color()) for ln in drawn} == {grey}  # one colour: no PE
    assert sorted(str(dashes(ln)) for ln in drawn) == ["(5, 2, 1, 2)", "None"]


def test_integer_ticks_are_the_values_written_out_even_on_a_log_axis():
    fig, ax = plt.subplots()
    ax.plot([8, 64, 512], [1, 2, 3])
    ax.set_xscale("log")
    F.integer_ticks(ax, "x", [512, 8, 64])
    assert list(ax.get_xticks()) == [8, 64, 512]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "64", "512"]
    assert len(ax.xaxis.get_minorticklocs()) == 0
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [0, 1, 0])
    F.integer_ticks(ax, "x")
    assert all(float(t).is_integer() for t in ax.xaxis.get_major_locator().tick_values(1, 3))


def test_learning_curves_draw_the_chosen_runs_in_the_fixed_colours():
    S = R.sweeps("pos_enc", "pos_enc_causal", data=FIXTURE)  # as Q1 reads them: model.causal is swept
    best = R.at_best_lr(S.df)
    fig, ax = plt.subplots()
    F.learning_curves(S, "val/acc", hue="model.pos_enc", where={"model.causal": False}, runs=best, ax=ax,
                      errorbar=None)
    expected = {F.label("model.pos_enc", v): c for v, c in F.palette("model.pos_enc", best["model.pos_enc"]).items()}
    drawn = {line.get_label(): to_hex(line.get_color()) for line in ax.get_legend().get_lines()}
    assert {k: drawn[k] for k in expected} == expected
    assert drawn["chance"] and drawn["order-blind level"]  # the reference lines join the legend
    # each hue line is the mean over the chosen runs' curves, step by step
    curves = S.curves("val/acc")
    chosen = best[(best["model.pos_enc"] == "learned") & (best["model.causal"] == False)]  # noqa: E712
    mean = curves[curves["run_id"].isin(chosen["run_id"])].groupby("step")["val/acc"].mean()
    line = next(ln for ln in ax.get_lines() if ln.get_label() != "_nolegend_" and to_hex(ln.get_color()) ==
                expected["learned"] and len(ln.get_xdata()) == len(mean))
    assert np.allclose(line.get_ydata(), mean.to_numpy())


def test_probe_curve_reads_one_layer_of_the_periodic_probes():
    S = R.sweep("scaling", FIXTURE)
    best = R.at_best_lr(S.df)
    names = {True: "scaled", False: "unscaled"}
    fig, ax = plt.subplots()
    F.probe_curve(S, "onehot_frac", hue="model.qk_scale", where={"model.d_head": 512}, runs=best, ax=ax,
                  labels=names, errorbar=None)
    drawn = {line.get_label(): to_hex(line.get_color()) for line in ax.get_legend().get_lines()}
    assert drawn == {"scaled": F.BLUE, "unscaled": F.VERMILLION}
    curves = S.probe_curves()
    run = best[(best["model.d_head"] == 512) & (best["model.qk_scale"] == False)]["run_id"]  # noqa: E712
    expected = curves[curves["run_id"].isin(run) & (curves["layer"] == 0)].groupby("step")["onehot_frac"].mean()
    line = next(ln for ln in ax.get_lines() if to_hex(ln.get_color()) == F.VERMILLION and len(ln.get_xdata()))
    assert np.allclose(line.get_ydata(), expected.to_numpy())
    assert ax.get_ylabel() == "onehot_frac (layer 0)"


def test_heatmap_grid_labels_the_axes_with_the_words():
    words = ["the", "cat", "SEP"]
    fig = F.heatmap_grid({"no PE": [np.eye(3), np.eye(3)[::-1]]}, ["in order", "reordered"], ticks=[words, words[::-1]],
                         shared=True)
    axes = [ax for ax in fig.axes if ax.get_title() in ("in order", "reordered")]
    assert [t.get_text() for t in axes[0].get_xticklabels()] == words
    assert [t.get_text() for t in axes[1].get_yticklabels()] == words[::-1]


def test_heatmap_titles_do_not_collide():
    maps = [(f"after training, scores ÷ √d_k, panel {i}", np.random.default_rng(i).random((8, 8))) for i in range(4)]
    fig = F.heatmaps(maps)
    fig.canvas.draw()
    boxes = [ax.title.get_window_extent() for ax in fig.axes if ax.get_title()]
    assert len(boxes) == 4
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_setup_silences_warnings():
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        F.setup()
        warnings.warn("library chatter", RuntimeWarning, stacklevel=1)
    assert caught == []


def test_chinese_in_a_figure_is_drawn_with_a_cjk_font_not_empty_boxes():
    """Q1's sentence 猫坐在垫子上 in a title and tick labels: with a CJK font on the machine (Debian's
    fonts-noto-cjk, which .ci/run installs) setup() puts it behind DejaVu Sans and matplotlib finds a glyph
    for every character; without one this skips, saying what to install (in CI, ABLATE_REQUIRE_CJK=1, it
    fails instead)."""
    import os
    import warnings

    font = F.cjk_font()
    if font is None:
        line = "no CJK font (Noto Sans CJK SC or another of ablate.report.figures.CJK_FONTS): apt-get install fonts-noto-cjk"
        if os.environ.get("ABLATE_REQUIRE_CJK") == "1":
            pytest.fail(f"ABLATE_REQUIRE_CJK=1 but {line}", pytrace=False)
        pytest.skip(line)
    R.setup()
    assert matplotlib.rcParams["font.family"] == ["DejaVu Sans", font]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = F.heatmap_grid({"no PE": [np.eye(3)]}, ["A(x): “猫坐在垫子上”"], ticks=[["猫", "坐", "上"]])
        fig.canvas.draw()
    missing = [str(w.message) for w in caught if "missing from font" in str(w.message)]
    assert missing == []
    # the check can fail: the same figure with DejaVu Sans alone lacks the glyphs
    with matplotlib.rc_context({"font.family": ["DejaVu Sans"]}), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = F.heatmap_grid({"no PE": [np.eye(3)]}, ["“猫坐在垫子上”"])
        fig.canvas.draw()
    assert any("missing from font" in str(w.message) for w in caught)


def test_the_chinese_twin_leaves_the_english_figure_as_it_was(tmp_path, monkeypatch):
    """savefig writes <name>.png, then <name>.zh.png with the texts in Chinese, then puts every text, tick and
    view back: a second save is the same bytes in both languages, shared categorical axes (a facet grid) too;
    the Chinese twin's categorical ticks, title and Description are Chinese; a dotted config name stays."""
    import hashlib

    import seaborn as sns
    from PIL import Image

    monkeypatch.setenv("ABLATE_REPORT_FIGURES", str(tmp_path))
    F.setup()
    df = pd.DataFrame({"model": ["LSTM, learned", "Transformer, learned"] * 4, "accuracy": np.linspace(0.1, 0.9, 8),
                       "split": ["val"] * 4 + ["test"] * 4})
    grid = sns.catplot(df, x="model", y="accuracy", col="split", kind="bar", errorbar=None)
    grid.figure.suptitle("copy, 8 tokens, model.dropout=0.1")
    limits = [ax.get_xlim() for ax in grid.axes.flat]
    F.savefig(grid.figure, "first")
    assert [ax.get_xlim() for ax in grid.axes.flat] == limits
    F.savefig(grid.figure, "second")
    digest = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.glob("*.png")}
    assert digest["first.png"] == digest["second.png"] and digest["first.zh.png"] == digest["second.zh.png"]
    en = Image.open(tmp_path / "first.png").info["Description"].splitlines()
    zh = Image.open(tmp_path / "first.zh.png").info["Description"].splitlines()
    assert "LSTM, learned" in en and "LSTM，可学习 PE" in zh and "LSTM, learned" not in zh
    assert "复制，8 个词元，model.dropout=0.1" in zh and "准确率" in zh
    plt.close("all")
