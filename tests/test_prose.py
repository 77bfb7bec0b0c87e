"""An answer's prose as one template per language over its notebook's record (issue 39): every number a
template prints comes from the record, both languages read the same numbers, and the committed findings are
what the templates render from the committed records."""

import json
from pathlib import Path

import pandas as pd
import pytest

import ablate.report as R
from ablate.report import prose
from ablate.report import stats as S

ROOT = Path(__file__).resolve().parents[1]
PROSE = ROOT / "reports" / "prose"
RECORDS = json.loads((ROOT / "reports" / "findings" / "records.json").read_text())  # written by `make report`
KEYS = sorted(p.stem for p in (PROSE / "en").glob("*.md"))


def estimate(values, metric="test/acc"):
    df = pd.DataFrame({"seed": range(len(values)), "status": "completed", metric: values})
    return R.estimate(df, metric)


def write(folder: Path, key: str, en: str, zh: str) -> Path:
    for lang, text in (("en", en), ("zh", zh)):
        (folder / lang).mkdir(parents=True, exist_ok=True)
        (folder / lang / f"{key}.md").write_text(text, encoding="utf-8")
    return folder


def blocks(**texts: str) -> str:
    parts = {"plain": "", "mechanism": "", "outcome": "", "changes": "", **texts}
    return "".join(f"{{% block {name} %}}{text}{{% endblock %}}\n" for name, text in parts.items())


def test_every_question_with_templates_has_both_languages():
    assert KEYS, "no template under reports/prose/en"
    assert sorted(p.stem for p in (PROSE / "zh").glob("*.md")) == KEYS


@pytest.mark.parametrize("key", KEYS)
def test_every_number_a_template_prints_comes_from_the_record(key):
    values = RECORDS[key]
    for lang in prose.LANGS:
        for block, text in prose.render(key, values, lang, PROSE, mark=True).items():
            stray = prose.stray_numbers(text)
            assert stray == [], f"{lang}/{key}.md, block {block}: a number typed in the template: {stray}"


@pytest.mark.parametrize("key", KEYS)
def test_both_languages_write_the_same_blocks_from_the_same_record_names(key):
    en, zh = (prose.names_used(key, lang, PROSE) for lang in prose.LANGS)
    assert en.keys() == zh.keys()
    for block in en:
        assert en[block] == zh[block], f"{key}, block {block}: only en {en[block] - zh[block]}, only zh {zh[block] - en[block]}"


@pytest.mark.parametrize("key", KEYS)
def test_the_committed_findings_are_what_the_templates_render(key):
    """Edit a template, then `make report`: the findings' pages are regenerated from the records. Every
    rendered paragraph of the question's page stands in its committed page."""
    pages = {lang: (ROOT / "reports" / "findings" / f"{key}{'.zh' if lang == 'zh' else ''}.md").read_text()
             for lang in prose.LANGS}
    for lang in prose.LANGS:
        flat = " ".join(pages[lang].split()) if lang == "en" else "".join(pages[lang].split())
        for block, text in prose.render(key, RECORDS[key], lang, PROSE).items():
            said = " ".join(text.split()) if lang == "en" else "".join(text.split())
            if block not in ("brief", "short", "at_scale") and said:  # the parts a question's page prints
                assert said in flat, f"{lang}/{key}.md, block {block} changed since the last build"


def _edited(key: str, **changes) -> dict:
    """The committed record of `key` with fields replaced ("a.b": the field b of the mapping a)."""
    record = json.loads(json.dumps(RECORDS[key]))
    for path, value in changes.items():
        *parents, name = path.split(".")
        where = record
        for parent in parents:
            where = where[parent]
        where[name] = value
    return record


# Data the committed runs do not have: each template branch says what the record holds, with no number typed
BRANCHES = [
    ("claim-ffn", {"about": None, "share_standard": None}, "plain", "was not run", "Not two thirds"),
    ("claim-ffn", {"about_default": True}, "plain", "about two thirds too", "not two thirds,"),
    ("rnn-long-range", {"c64.lr": None}, "outcome", "64 tokens, 2 seeds", "n/a"),
    ("rnn-mnist", {"still_learning": True}, "changes", "still improving", "n/a"),
    ("rnn-mnist", {"parallel": True}, "plain", "on parallel hardware", "CPU"),
    ("rnn-compute", {"parallel": True, "device": "cuda"}, "plain", "measured on CUDA, parallel hardware", "needs a GPU"),
    ("claim-norm", {"deep": None, "grad_holds": False}, "short", "At initialisation Post-LN", "none"),
]


@pytest.mark.parametrize("key,changes,block,says,never", BRANCHES)
def test_a_branch_the_committed_data_does_not_reach_renders_what_its_record_says(key, changes, block, says, never):
    record = _edited(key, **changes)
    for lang in prose.LANGS:
        for name, text in prose.render(key, record, lang, PROSE, mark=True).items():
            assert prose.stray_numbers(text) == [], f"{lang}/{key}.md, block {name}"
    text = prose.render(key, record, "en", PROSE)[block]
    assert says in text and never not in text, text


def test_a_number_typed_into_a_template_is_found(tmp_path):
    """The check above fails when a template prints a number the record does not hold."""
    folder = write(tmp_path, "k", blocks(plain="{{ acc }}, far above the level of 56 %."),
                   blocks(plain="{{ acc }}，远高于 56% 的水平。"))
    values = prose.record(acc=estimate([0.90, 0.92, 0.94]))
    for lang in prose.LANGS:
        text = prose.render("k", values, lang, folder, mark=True)["plain"]
        stray = prose.stray_numbers(text)
        assert len(stray) == 1 and "56" in stray[0], text
    clean = write(tmp_path / "clean", "k", blocks(plain="{{ acc }}, Q1, as Vaswani et al. 2017 wrote, at {{ level | pct }}."),
                  blocks(plain="{{ acc }}；{{ level | pct }}。"))
    values = prose.record(acc=estimate([0.9, 0.92, 0.94]), level=0.56)
    assert prose.stray_numbers(prose.render("k", values, "en", clean, mark=True)["plain"]) == []
    assert prose.render("k", values, "en", clean)["plain"] == \
        f"{values['acc']['text']['en']}, Q1, as Vaswani et al. 2017 wrote, at 56.0 %."


def test_a_record_keeps_each_interval_in_both_languages_and_refuses_what_it_cannot_print():
    acc = estimate([0.90, 0.92, 0.94])
    values = prose.record(acc=acc, n=3, words="ALiBi", arms={"a": 0.5, "b": [1, 2.5]})
    assert values["acc"]["text"] == {"en": acc.fmt("en"), "zh": acc.fmt("zh")}
    assert values["acc"]["mean"] == pytest.approx(0.92) and values["acc"]["type"] == "estimate"
    assert json.loads(json.dumps(values)) == values
    with pytest.raises(prose.RecordError, match=r"record field 'frame' is a DataFrame"):
        prose.record(frame=pd.DataFrame())
    with pytest.raises(prose.RecordError, match=r"record field \"arms\['b'\]\" is a object"):
        prose.record(arms={"b": object()})
    with pytest.raises(prose.RecordError, match=r"record field 'none' is a word jinja2 reads as its own"):
        prose.record(none=0.2)  # {{ none }} would print jinja2's None, not the field


def test_filters_print_the_same_digits_in_both_languages(tmp_path):
    body = "{{ x | pct }} {{ d | pts }} {{ n | count }} {{ r | times }} {{ y | num }} {{ y | fixed(2) }}"
    folder = write(tmp_path, "k", blocks(plain=body), blocks(plain=body))
    values = prose.record(x=0.912, d=-0.0012, n=71242, r=5.23, y=-0.01234)
    assert prose.render("k", values, "en", folder)["plain"] == "91.2 % −0.1 points 71,242 ×5.2 −0.0123 −0.01"
    assert prose.render("k", values, "zh", folder)["plain"] == "91.2% −0.1 个百分点 71,242 ×5.2 −0.0123 −0.01"


def test_line_breaks_join_chinese_without_a_space_and_everything_else_with_one():
    assert prose.join_lines("  在教程的\n  Post-LN 下，层归一化\n更好，准确率就到了\n91.0%，\n16 层。\nIt is\n  fine.  ") == \
        "在教程的 Post-LN 下，层归一化更好，准确率就到了 91.0%，16 层。It is fine."
    assert prose.join_lines("an answer\nin two lines") == "an answer in two lines"


def test_chinese_gets_a_space_beside_latin_and_digits_and_none_between_characters():
    assert prose.zh_spacing("ALiBi保持91.0%的准确率，换用 整形注意力") == "ALiBi 保持 91.0% 的准确率，换用整形注意力"
    assert prose.zh_spacing("在 d_k = 512 时，第一层") == "在 d_k = 512 时，第一层"


def test_an_unknown_block_or_a_name_the_record_lacks_is_refused_with_the_templates_path(tmp_path):
    folder = write(tmp_path, "k", "{% block plainn %}x{% endblock %}", blocks(plain="{{ nope }}"))
    with pytest.raises(ValueError, match=r"en/k\.md: unknown block\(s\) plainn \(blocks: brief, short, plain"):
        prose.render("k", {}, "en", folder)
    with pytest.raises(ValueError, match=r"zh/k\.md, block plain: 'nope' is undefined; the record has acc"):
        prose.render("k", {"acc": 1}, "zh", folder)


def test_an_answer_from_a_record_renders_both_languages_and_carries_the_record(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_REPORT_DATA", str(tmp_path / "data"))
    S.take_intervals()
    monkeypatch.setattr(prose, "prose_dir", lambda: tmp_path)
    write(tmp_path, "q9", blocks(plain="{% if verdict == 'agrees' %}Yes{% else %}Not shown{% endif %}: a at {{ a }}.",
                                 short="a at {{ a.mean | pct }}."),
          blocks(plain="{% if verdict == 'agrees' %}是{% else %}没有证明{% endif %}：a 为 {{ a }}。",
                 short="a 为 {{ a.mean | pct }}。"))
    anchor = R.Anchor("Someone 2020", "a beats b", "a 胜过 b")
    q = R.Question("q9", "Q9 · test", "Does a beat b?", "a 胜过 b 吗？", anchors=[anchor], title_zh="Q9 · 测试")
    a = estimate([0.90, 0.92, 0.94])
    df = pd.DataFrame({"v": ["a"] * 3 + ["b"] * 3, "seed": [0, 1, 2] * 2, "status": "completed",
                       "test/acc": [0.90, 0.92, 0.94, 0.50, 0.51, 0.52]})
    check = anchor.greater(R.compare(df, "test/acc", {"v": "a"}, {"v": "b"}), "a − b", primary=True, reason="r")
    data = q.answer(record={"a": a}, checks=[check])
    assert data["verdict"] == "agrees" and data["record"]["verdict"] == "agrees"
    assert data["plain"] == {"en": f"Yes: a at {a.fmt()}.", "zh": f"是：a 为 {a.fmt('zh')}。"}
    assert data["short"] == {"en": "a at 92.0 %.", "zh": "a 为 92.0%。"}
    with pytest.raises(TypeError, match=r"plain= given here and as a block of reports/prose/<lang>/q9\.md"):
        q.answer(record={"a": a}, plain=("x", "y"), checks=[check])
    pairs = {k: (f"{k} en", f"{k} 中") for k in ("mechanism", "outcome", "changes")}
    write(tmp_path, "q9", "{% block brief %}a at {{ a.mean | pct }}.{% endblock %}",
          "{% block brief %}a 为 {{ a.mean | pct }}。{% endblock %}")
    data = q.answer(record={"a": a}, plain=("p", "普"), checks=[check], **pairs)
    assert data["brief"] == {"en": "a at 92.0 %.", "zh": "a 为 92.0%。"} and data["plain"] == {"en": "p", "zh": "普"}
