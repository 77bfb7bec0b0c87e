"""Demo 1's copy part (Q1, word order: 猫坐在垫子上 <-> 垫子在猫坐上) in a real browser (Playwright driving the
system's Chromium, network blocked), on the committed page's own trained copy models (float16, as shipped) beside
its tutorial MNIST model: the switch reorders the input, the learned-positions model copies the sentence at the
blanks, the painted attention follows the hovered (slider-, keyboard-, finger-chosen) query and equals PyTorch to
1e-4, the model without positions obeys A(Px) = P·A(x)·Pᵀ on the page's own numbers, the language switch changes
the part's labels, and at 390 px it does not scroll sideways.

Without Chromium (or Playwright) these tests skip, saying how to get it; with ABLATE_REQUIRE_BROWSER=1 that is a
failure instead."""

from __future__ import annotations

import re

import pytest
import torch

from ablate.data.copytask import CopyTask
from ablate.explore.page import build_page
from ablate.results.export import copy_input, sentence
from tests import browser_gate
from tests.browser_gate import browser_type_launch_args, gate, open_tab  # noqa: F401 (a fixture)
from tests.test_explore import COMMITTED, _page_config, _page_data, _torch_of_page_model

TOL = 1e-4
pytestmark = gate()
desk, page = browser_gate.desk, browser_gate.page  # the desktop tab on this module's `built` page, reloaded per test

WORDS = sentence()
PERM = [WORDS["words"].index(w) for w in WORDS["perm_words"]] + list(range(6, 13))  # position i reads x[PERM[i]]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A page of the committed page's tutorial model and its two copy models, and their PyTorch twins."""
    models, images = _page_data(COMMITTED.read_text())
    keep = [m for m in models if m["name"] in ("tutorial", "copy", "copy-no-pe")]
    html = tmp_path_factory.mktemp("tokens") / "explorer.html"
    html.write_text(build_page(keep, images["images"][:2], images["mean"], images["std"]))
    copies = {m["name"]: m for m in keep if m["kind"] == "tokens"}
    return {"html": html, "models": copies, "torch": {n: _torch_of_page_model(m) for n, m in copies.items()}}


def _q1(page):
    return page.evaluate("window.ablateExplorer.views.q1")


def _pick(page, name: str, built):
    i = list(built["models"]).index(name)
    page.click(f"#q1models button[data-q1model='{i}']")
    assert _q1(page)["model"] == name


def _cells(page, row: str) -> list[str]:
    """The characters a row of cells shows (without the small position and weight labels)."""
    return page.evaluate(f"""Array.from(document.querySelectorAll('#{row} .tok'), (c) =>
        Array.from(c.childNodes).filter((n) => n.nodeType === 3).map((n) => n.textContent).join(''))""")


def _torch_maps(built, name: str, tokens: list[int]):
    vocab = built["models"][name]["config"]["data.vocab"]
    with torch.no_grad():
        logits, maps = built["torch"][name](torch.tensor([copy_input(tokens, vocab)]), return_attention=True)
    return logits[0], [m[0] for m in maps]  # (T, vocab), per layer (H, T, T)


def test_switch_reorders_the_sentence_and_the_learned_model_copies_it(page, built):
    assert page.is_visible("#q1")
    view = _q1(page)
    assert view["model"] == "copy" and view["order"] == 0 and view["query"] == 7  # the first blank
    # the page's sentence and copy input are the report's (ablate.results.export) and the copy task's
    assert page.evaluate("window.ablateExplorer.sentence") == WORDS
    task = CopyTask(_page_config(built["models"]["copy"]).data)
    assert view["input"] == copy_input(WORDS["tokens"], task.sep) and view["input"][6:] == [task.sep] + [task.blank] * 6
    assert _cells(page, "q1in") == WORDS["labels"]
    assert view["predicted"] == WORDS["words"] and view["copied"] == 6
    assert _cells(page, "q1out")[7:] == WORDS["words"]
    page.click("#q1order button[data-order='1']")
    view = _q1(page)
    assert view["order"] == 1 and _cells(page, "q1in") == [*WORDS["perm_words"], "SEP", *"_" * 6]
    assert view["input"] == copy_input(WORDS["perm_tokens"], task.sep)
    assert view["predicted"] == WORDS["perm_words"] and view["copied"] == 6
    assert page.get_attribute("#q1order button[data-order='1']", "aria-pressed") == "true"
    assert "6" in page.text_content("#q1pred") and "垫子在猫坐上" in page.text_content("#q1pred")


@pytest.mark.parametrize("order", [0, 1])
def test_painted_attention_follows_the_hovered_query_and_equals_pytorch(page, built, order):
    page.click(f"#q1order button[data-order='{order}']")
    tokens = WORDS["perm_tokens"] if order else WORDS["tokens"]
    logits, maps = _torch_maps(built, "copy", tokens)
    view = _q1(page)
    got = torch.tensor(view["attention"], dtype=torch.float64)  # (L, H, T, T)
    d_maps = max((got[i] - maps[i].double()).abs().max().item() for i in range(len(maps)))
    d_logits = (torch.tensor(view["logits"], dtype=torch.float64) - logits.double()).abs().max().item()
    print(f"copy, order {order}: logits {d_logits:.2e}, attention {d_maps:.2e}")
    assert d_maps < TOL and d_logits < TOL
    for j in (2, 9, 12):  # a word, a blank, the last blank: hover its cell
        box = page.locator(f"#q1in .tok[data-pos='{j}']").bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        view = _q1(page)
        assert view["query"] == j and view["head"] == -1
        want = maps[view["layer"]][:, j].mean(0)  # the mean of the heads
        assert (torch.tensor(view["weights"]) - want).abs().max().item() < TOL
        # the paint is the weights: the darkest cell holds the largest weight, the query cell is outlined
        shades = page.evaluate("""Array.from(document.querySelectorAll('#q1in .tok'), (c) =>
            getComputedStyle(c).backgroundColor.match(/\\d+/g).map(Number)[0])""")
        w = view["weights"]
        assert shades.index(min(shades)) == w.index(max(w)) and shades[w.index(min(w))] == max(shades)
        assert page.evaluate("Array.from(document.querySelectorAll('#q1in .tok.q'), (c) => +c.dataset.pos)") == [j]
    # layer and head choices are what is painted
    page.select_option("#q1layer", "1")
    page.select_option("#q1head", "2")
    view = _q1(page)
    assert (torch.tensor(view["weights"]) - maps[1][2, 12]).abs().max().item() < TOL
    # keyboard on the strip and the slider choose the query too
    page.focus("#q1in")
    page.keyboard.press("ArrowRight")
    assert _q1(page)["query"] == 0  # wraps past the last position
    page.keyboard.press("ArrowLeft")
    assert _q1(page)["query"] == 12
    page.fill("#q1query", "4")
    page.dispatch_event("#q1query", "input")
    assert _q1(page)["query"] == 4


def test_without_positions_reordering_permutes_the_attention(page, built):
    _pick(page, "copy-no-pe", built)
    page.click("#q1order button[data-order='0']")
    a = torch.tensor(_q1(page)["attention"], dtype=torch.float64)
    page.click("#q1order button[data-order='1']")
    view = _q1(page)
    b = torch.tensor(view["attention"], dtype=torch.float64)
    d_perm = (b - a[:, :, PERM][:, :, :, PERM]).abs().max().item()
    print(f"copy-no-pe: max |A(Px) - P A(x) P^T| on the page's numbers {d_perm:.2e}")
    assert d_perm < 1e-9
    _, maps = _torch_maps(built, "copy-no-pe", WORDS["perm_tokens"])
    assert max((b[i] - maps[i].double()).abs().max().item() for i in range(len(maps))) < TOL
    # every blank reads the same bag of words, so every blank writes the same guess: no copy
    assert len(set(view["predicted"])) == 1 and view["copied"] <= 1
    # the painted row of a word follows the word: 猫's weights sit where 猫 now stands
    cat_before, cat_after = 0, WORDS["perm_words"].index("猫")
    page.click("#q1order button[data-order='0']")
    page.fill("#q1query", str(cat_before))
    page.dispatch_event("#q1query", "input")
    before = _q1(page)["weights"]
    page.click("#q1order button[data-order='1']")
    page.fill("#q1query", str(cat_after))
    page.dispatch_event("#q1query", "input")
    after = _q1(page)["weights"]
    assert max(abs(after[i] - before[PERM[i]]) for i in range(13)) < 1e-9


def test_language_switch_changes_the_parts_labels(page):
    labelled = "Array.from(document.querySelectorAll('#q1 [data-i18n], #q1models button, #q1pred'), (e) => e.textContent)"
    english = page.evaluate(labelled)
    page.click("#lang")
    chinese = page.evaluate(labelled)
    assert len(english) == len(chinese) >= 10
    assert [e for e, z in zip(english, chinese) if e == z] == []
    text = page.text_content("#q1")
    for word in ("词元", "注意力", "位置编码", "复制任务", "A(Px) = P·A(x)·Pᵀ"):
        assert word in text, word
    assert re.search(r"[\u4e00-\u9fff]", page.text_content("#q1models"))
    assert page.get_attribute("#s1 a.findings", "href") == "build/index.zh.html#q1"
    page.click("#lang")
    assert page.evaluate(labelled) == english and "A(Px) = P·A(x)·Pᵀ" in page.text_content("#q1")


def test_phone_390px_does_not_scroll_sideways_and_a_tap_picks_the_query(browser, built):
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True,
                                  device_scale_factor=2, locale="zh-CN")
    tab = open_tab(context, built["html"])
    try:
        assert tab.evaluate("document.documentElement.scrollWidth") <= 390
        tab.locator("#q1in").scroll_into_view_if_needed()
        right = tab.evaluate("""Math.max(...Array.from(document.querySelectorAll('#q1, #q1 *'),
            (e) => e.getBoundingClientRect().right))""")
        assert right <= 390
        box = tab.locator("#q1in .tok[data-pos='10']").bounding_box()
        assert box["width"] >= 18  # a finger can hit a cell
        tab.touchscreen.tap(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        assert tab.evaluate("window.ablateExplorer.views.q1.query") == 10
        assert tab.requests == [] and tab.errors == [], (tab.requests, tab.errors)
    finally:
        context.close()
