"""What a reader of the findings sees (issue 26): the answers table's numbers are the payload's, each
figure has a Chinese twin whose every word is Chinese (or a name that stays, such as LSTM or d_k), and the
Chinese pages and index.zh.html show the Chinese figures, the English ones the English. On the report
builds of tests/report_builds.py (the smoke fixture and the committed data)."""

from __future__ import annotations

import copy
import re

import pytest
from PIL import Image

from ablate.report.build import EXPLORER_SHOT, INDEX, TEXT, page_name
from ablate.report.figure_zh import leftover

pytestmark = pytest.mark.slow  # the builds start Jupyter kernels

NUMBER = re.compile(r"(?<![\w.^])[−-]?\d[\d,]*(?:\.\d+)?(?:e-?\d+)?")
CJK = re.compile(r"[\u4e00-\u9fff]")


def _value(s: str) -> float:
    return float(s.replace("−", "-").replace(",", ""))


def _decimals(s: str) -> int:
    m = re.search(r"\.(\d+)", s)
    return len(m.group(1)) if m and "e" not in s else 0


def _texts(o, skip=("short",)):
    if isinstance(o, dict):
        for k, v in o.items():
            if k not in skip:
                yield from _texts(v, ())
    elif isinstance(o, list):
        for v in o:
            yield from _texts(v, ())
    elif isinstance(o, str):
        yield o


def numbers_not_in_payload(a: dict) -> list[tuple[str, str]]:
    """The numbers of an answer's short answer (English and Chinese) that are none of its payload's: not a
    number its checks, mechanism, outcome or plain answer state, and no interval's mean or bound (as a
    fraction or in percent) at the shown precision."""
    stated = {_value(m) for t in _texts({k: a.get(k) for k in ("checks", "mechanism", "outcome", "plain")})
              for m in NUMBER.findall(t)}
    bounds = [x * s for i in a.get("intervals") or [] for x in (i["mean"], i["lo"], i["hi"]) if x is not None
              for s in (1, 100)]
    missing = []
    for lang in ("en", "zh"):
        for m in NUMBER.findall(a["short"][lang]):
            x, d = _value(m), _decimals(m)
            if x not in stated and not any(abs(p - x) <= 0.5 * 10 ** -d + 1e-9 for p in bounds if d or abs(p) >= 1):
                missing.append((lang, m))
    return missing


def _answers(results):
    return [a for b in results for a in b.answers]


def test_every_number_of_the_answers_table_is_a_number_of_its_payload(built):
    """Each row of the answers table (FINDINGS.md, FINDINGS.zh.md) is the payload's short answer, its numbers
    are numbers of the same payload, the same in both languages; and the check can fail: a number moved by a
    few units of its last digit is caught in most rows."""
    out, results, _ = built
    answers = _answers(results)
    for lang, name in (("en", "FINDINGS.md"), ("zh", "FINDINGS.zh.md")):
        text = (out / name).read_text()
        summary = text.split(f"## {TEXT['summary'][0 if lang == 'en' else 1]}", 1)[1].split("\n## ", 1)[0]
        rows = [re.split(r"(?<!\\) \| ", line[2:-2]) for line in summary.splitlines() if line.startswith("| [")]
        assert [r[1] for r in rows] == [a["short"][lang].replace("|", "\\|") for a in answers], name
    for a in answers:
        assert numbers_not_in_payload(a) == [], a["key"]
        en, zh = (sorted(_value(m) for m in NUMBER.findall(a["short"][lang])) for lang in ("en", "zh"))
        assert en == zh, a["key"]
    caught = tried = 0
    for a in answers:
        for m in set(NUMBER.findall(a["short"]["en"])):
            b, x, d = copy.deepcopy(a), _value(m), _decimals(m)
            b["short"]["en"] = b["short"]["en"].replace(m, f"{x + 3 * 10 ** -d:.{d}f}" if d else str(int(x) + 7))
            tried, caught = tried + 1, caught + bool(numbers_not_in_payload(b))
    assert tried >= len(answers) and caught >= 0.6 * tried, (caught, tried)


def _description(path) -> str:
    return Image.open(path).info.get("Description", "")


def test_every_figure_has_a_chinese_twin_in_chinese_words(built):
    """Each figure is saved in English and in Chinese (<name>.zh.png): the same image size class, its drawn
    texts (the PNG's Description) Chinese in the twin, every English word translated or a name that stays."""
    out, _, _ = built
    figures = out / "figures"
    english = sorted(p for p in figures.glob("*.png") if not p.name.endswith(".zh.png"))
    assert english and sorted(p.name for p in figures.glob("*.zh.png")) == sorted(
        p.name[:-4] + ".zh.png" for p in english)
    untranslated = {}
    for png in english:
        en, zh = _description(png), _description(png.with_name(png.name[:-4] + ".zh.png"))
        assert en and zh and CJK.search(zh), png.name
        words = sorted({w for line in zh.splitlines() for w in leftover(line)})
        if words:
            untranslated[png.name] = words
    assert untranslated == {}


def test_chinese_pages_show_the_chinese_figures_and_english_pages_the_english(built):
    out, results, _ = built
    pages = {"en": [out / "FINDINGS.md", out / "build" / INDEX["en"]],
             "zh": [out / "FINDINGS.zh.md", out / "build" / INDEX["zh"]]}
    for a in _answers(results):
        pages["en"].append(out / "findings" / page_name(a, "en"))
        pages["zh"].append(out / "findings" / page_name(a, "zh"))
    for lang, paths in pages.items():
        for path in paths:
            text = path.read_text()
            links = [n for n in re.findall(r"\(([^)\s]+\.png)\)", text) + re.findall(r'alt="([^"]+\.png)"', text)
                     if not n.endswith(EXPLORER_SHOT)]  # the explorer's screenshot has one language
            assert links, path.name
            assert all(link.endswith(".zh.png") == (lang == "zh") for link in links), (path.name, links)
    index_zh = (out / "build" / INDEX["zh"]).read_text()
    assert '<html lang="zh-Hans">' in index_zh and f'href="{INDEX["en"]}"' in index_zh
    assert TEXT["summary"][1] in index_zh and TEXT["glossary"][1] in index_zh
    for a in _answers(results):
        assert a["short"]["zh"].replace('"', "&quot;") in index_zh or a["short"]["zh"] in index_zh.replace(
            "&quot;", '"').replace("&#x27;", "'"), a["key"]


ENGLISH = re.compile(r"(?:\b[A-Za-z][A-Za-z'’-]*\b[ ,;:]+){4,}[A-Za-z][A-Za-z'’-]*")  # five English words in a row
PARTS = ("brief", "short", "plain", "mechanism", "outcome", "changes", "details", "at_scale", "multiplicity")


def english_in(text: str) -> list[str]:
    """Runs of five or more English words in a Chinese text, code spans left out (`val/acc_best` and the like)."""
    return ENGLISH.findall(re.sub(r"`[^`]*`", " ", text))


def test_the_chinese_answers_hold_no_english_sentence(built):
    """Every part of every answer in Chinese (issue 39: the details paragraphs too) is Chinese: no run of five
    English words; names such as LSTM, Pre-LN or val/acc_best stay. The check can fail: an English sentence
    put into a Chinese part is found."""
    _, results, _ = built
    for a in _answers(results):
        for part in PARTS:
            text = (a.get(part) or {}).get("zh", "")
            assert english_in(text) == [], (a["key"], part)
        for c in a["checks"]:
            assert english_in(c["evidence_zh"]) == [] and english_in(c["reason_zh"]) == [], (a["key"], c["evidence_zh"])
    assert english_in("学习率：each variant at its own learning rate。") == ["each variant at its own learning rate"]
