"""An answer's prose, kept apart from its numbers (issue 39).

A notebook computes what its answer says into a *record*: a flat mapping of names to numbers, words
(verdicts, names of arms) and the interval types of stats.py (Estimate, Effect, Fraction). Each language
writes its prose as its own template per question, `reports/prose/<lang>/<key>.md` (jinja2), from that
record alone: the Chinese is written in Chinese, not shaped after an English sentence, and editing it
touches no Python. A template holds one block per part of the answer:

    {% block brief %}…{% endblock %}      for a student: the question answered in 2–3 sentences in the
                                          tutorial's own images, one number (the findings' first screen)
    {% block short %}…{% endblock %}      one sentence with its deciding number (the answers table)
    {% block plain %}…{% endblock %}      the answer, in plain words
    {% block mechanism %}…{% endblock %}  why
    {% block outcome %}…{% endblock %}    what was measured, the numbers
    {% block changes %}…{% endblock %}    what would change the answer
    {% block at_scale %}…{% endblock %}   optional: what may move at a larger scale

`{{ x }}` prints an interval in the template's language; the filters below print plain numbers (`pct`,
`pts`, `num`, `count`, `fixed`, `times`, `g`, `sci`), each the same digits in both languages, and `budget` a
budget's name (quick, 快速). A number typed into a
template is a number the record does not hold: tests/test_prose.py renders every template with its marks
on (`render(..., mark=True)`) and fails on any digit outside them. Line breaks inside a block join without
a space between Chinese characters and with one between Latin words, so a writer may wrap lines freely. A
block's own phrasings (a jinja2 macro) are defined inside the block that uses them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta

from .stats import Effect, Estimate, Fraction, _fixed, number

LANGS = ("en", "zh")
BUDGET_ZH = {"quick": "快速", "full": "完整", "smoke": "冒烟测试"}  # a budget's one name in Chinese (issue 39)
BLOCKS = ("brief", "short", "plain", "mechanism", "outcome", "changes", "at_scale")
MARK = ("\ue000", "\ue001")  # around every printed value when rendering with mark=True (tests)
_TYPES = {Estimate: "estimate", Effect: "effect", Fraction: "fraction"}


class RecordError(TypeError):
    """A record value the templates cannot print: its name and what it is."""


def prose_dir() -> Path:
    from ..studies import studies_dir

    return studies_dir() / "prose"


def template_path(key: str, lang: str, folder: Path | None = None) -> Path:
    return (folder or prose_dir()) / lang / f"{key}.md"


def has_prose(key: str, folder: Path | None = None) -> bool:
    return all(template_path(key, lang, folder).is_file() for lang in LANGS)


# ------------------------------------------------------------------ the record


def _interval(value: Estimate | Effect | Fraction) -> dict[str, Any]:
    def finite(x: float) -> float | None:
        return round(float(x), 10) if x is not None and math.isfinite(x) else None

    out: dict[str, Any] = {"type": _TYPES[type(value)]}
    if isinstance(value, Estimate):
        out.update(metric=value.metric, mean=finite(value.mean), lo=finite(value.lo), hi=finite(value.hi),
                   n=value.n, percent=value.percent)
    elif isinstance(value, Effect):
        out.update(metric=value.a.metric, diff=finite(value.diff), lo=finite(value.lo), hi=finite(value.hi),
                   p=finite(value.p), percent=value.a.percent, ratio=value.ratio, sign=value.sign)
    else:
        out.update(metric=value.metric, k=value.k, n=value.n, mean=finite(value.mean), lo=finite(value.lo),
                   hi=finite(value.hi))
    out["text"] = {lang: value.fmt(lang) for lang in LANGS}
    return out


def _value(name: str, value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return round(value, 10) if math.isfinite(value) else None
    if type(value) in _TYPES:
        return _interval(value)
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # a numpy scalar
        return _value(name, value.item())
    if isinstance(value, Mapping):
        return {str(k): _value(f"{name}[{k!r}]", v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_value(f"{name}[{i}]", v) for i, v in enumerate(value)]
    raise RecordError(f"record field {name!r} is a {type(value).__name__}; a record holds numbers, words, lists, "
                      "mappings and stats.py's Estimate, Effect and Fraction")


# names a template reads as jinja2's own (a record field `none` is the constant None there, not the field)
RESERVED = frozenset({"none", "None", "true", "True", "false", "False", "loop", "self", "super", "varargs", "kwargs",
                      "and", "or", "not", "in", "is", "if", "else"})


def record(**values: Any) -> dict[str, Any]:
    """The numbers an answer's prose may print, as JSON-ready values (intervals keep their numbers and
    their text in each language)."""
    if clash := sorted(set(values) & RESERVED):
        raise RecordError(f"record field {clash[0]!r} is a word jinja2 reads as its own; name it otherwise")
    return {name: _value(name, v) for name, v in values.items()}


# ------------------------------------------------------------------ rendering


class _Shown(dict):
    """An interval of the record: its fields by attribute (`e.mean`), its text in the template's language
    when printed."""

    def __init__(self, fields: dict[str, Any], lang: str):
        super().__init__(fields)
        self.lang = lang

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(name) from e

    def __str__(self) -> str:
        return self["text"][self.lang]


def _view(value: Any, lang: str) -> Any:
    if isinstance(value, dict):
        inner = {k: _view(v, lang) for k, v in value.items()}
        if value.get("type") in _TYPES.values() and "text" in value:
            return _Shown({**inner, "text": value["text"]}, lang)
        return inner
    if isinstance(value, list):
        return [_view(v, lang) for v in value]
    return value


def _filters(lang: str) -> dict[str, Any]:
    zh = lang == "zh"
    percent = "%" if zh else " %"

    def pct(x: float, decimals: int = 1) -> str:
        return f"{_fixed(100 * float(x), decimals)}{percent}"

    def pts(x: float, decimals: int = 1) -> str:
        text = _fixed(100 * float(x), decimals)
        sign = "+" if float(x) > 0 and text.strip("0.,") else ""
        return f"{sign}{text}" + (" 个百分点" if zh else " points")

    def num(x: float, digits: int = 3) -> str:
        return number(float(x), digits).replace("-", "−")

    def count(n: int) -> str:
        return f"{int(n):,}"

    def fixed(x: float, decimals: int = 1) -> str:
        return _fixed(float(x), decimals)

    def times(x: float, digits: int = 2) -> str:
        return f"×{number(float(x), digits)}"

    def g(x: float, digits: int = 6) -> str:  # a value as it was set (a factor, a learning rate): 0.3, 3, 1e-6
        text = re.sub(r"e([+-])0*(\d)", lambda m: "e" + m.group(1).replace("+", "") + m.group(2),
                      f"{float(x):.{digits}g}")
        return "−" + text[1:] if text.startswith("-") else text

    def sci(x: float, digits: int = 1) -> str:  # a learning rate as the sweeps write it: 3e-3, 1e-6, 4.4e-5
        mantissa, exponent = f"{float(x):.{digits - 1}e}".split("e")
        return f"{mantissa}e{int(exponent)}"

    def or_na(f):  # a value the notebook could not compute (None, from NaN) prints as "n/a", as an interval does
        return lambda x, *a: "n/a" if x is None else f(x, *a)

    filters = {"pct": pct, "pts": pts, "num": num, "count": count, "fixed": fixed, "times": times, "g": g, "sci": sci}
    return {**{name: or_na(f) for name, f in filters.items()},
            "budget": budget_name if zh else str}  # a budget's name: quick, 快速


def budget_name(name: str) -> str:
    """A budget's name in Chinese, or several a table mixes ("quick, smoke": 快速、冒烟测试)."""
    return "、".join(BUDGET_ZH.get(part.strip(), part.strip()) for part in str(name).split(","))


def environment(lang: str, folder: Path | None = None, *, mark: bool = False) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str((folder or prose_dir()) / lang)),
                             undefined=jinja2.StrictUndefined, autoescape=False, trim_blocks=False,
                             lstrip_blocks=True, keep_trailing_newline=False)
    env.filters.update(_filters(lang))
    if mark:
        env.finalize = lambda v: f"{MARK[0]}{v}{MARK[1]}"
    return env


_HAN = r"\u3400-\u9fff"  # Chinese characters
_CJK_PUNCT = r"\u3000-\u303f\uff00-\uffef"  # Chinese punctuation and full-width forms


def join_lines(text: str) -> str:
    """A block's text as one paragraph: a line break becomes nothing between two Chinese characters or
    beside Chinese punctuation, and one space elsewhere (between Latin words, and between Chinese and a
    number or a Latin word: 「准确率 91.0%」); runs of spaces become one."""
    def join(m: re.Match[str]) -> str:
        left, right = m.group(1), m.group(2)
        punct, han = re.compile(f"[{_CJK_PUNCT}]"), re.compile(f"[{_HAN}]")
        if punct.match(left) or punct.match(right) or (han.match(left) and han.match(right)):
            return left + right
        return left + " " + right

    text = re.sub(r"(\S)[ \t]*\n\s*(?=\S)(\S)", join, text.strip())
    return re.sub(r" {2,}", " ", text)


def zh_spacing(text: str) -> str:
    """Chinese typography (issue 39): a space between a Chinese character and a Latin letter, a digit or a
    percent sign (「ALiBi 保持」, 「准确率 91.0% 的」), none between two Chinese characters."""
    text = re.sub(f"(?<=[{_HAN}]) +(?=[{_HAN}])", "", text)
    text = re.sub(f"([{_HAN}])([A-Za-z0-9])", r"\1 \2", text)
    return re.sub(f"([A-Za-z0-9%])([{_HAN}])", r"\1 \2", text)


def blocks_of(key: str, lang: str, folder: Path | None = None) -> tuple[str, ...]:
    env = environment(lang, folder)
    return tuple(env.get_template(f"{key}.md").blocks)


def render(key: str, values: Mapping[str, Any], lang: str, folder: Path | None = None, *,
           mark: bool = False) -> dict[str, str]:
    """Each block of `key`'s template in `lang`, rendered from the record `values` (as `record()` returns
    it), one paragraph each. An unknown block or a name the record lacks is refused with its template's
    path."""
    path = template_path(key, lang, folder)
    env = environment(lang, folder, mark=mark)
    try:
        template = env.get_template(f"{key}.md")
    except jinja2.TemplateSyntaxError as e:
        raise ValueError(f"{path}:{e.lineno}: {e.message}") from e
    unknown = sorted(set(template.blocks) - set(BLOCKS))
    if unknown:
        raise ValueError(f"{path}: unknown block(s) {', '.join(unknown)} (blocks: {', '.join(BLOCKS)})")
    context = template.new_context({k: _view(v, lang) for k, v in values.items()})
    out = {}
    for name, block in template.blocks.items():
        try:
            out[name] = join_lines("".join(block(context)))
            if lang == "zh":
                out[name] = zh_spacing(out[name])
        except jinja2.UndefinedError as e:
            raise ValueError(f"{path}, block {name}: {e.message}; the record has {', '.join(sorted(values))}") from e
    return out


def names_used(key: str, lang: str, folder: Path | None = None) -> dict[str, set[str]]:
    """The record names each block of the template reads (jinja2's parse of it)."""
    env = environment(lang, folder)
    source = template_path(key, lang, folder).read_text(encoding="utf-8")
    tree = env.parse(source)
    out: dict[str, set[str]] = {}
    macros = {m.name for m in tree.find_all(jinja2.nodes.Macro)}  # a template's own phrasings, not the record's
    for node in tree.find_all(jinja2.nodes.Block):
        names = {n.name for n in node.find_all(jinja2.nodes.Name) if n.ctx == "load"}
        assigned = {n.name for n in node.find_all(jinja2.nodes.Name) if n.ctx in ("store", "param")}
        out[node.name] = names - assigned - macros - set(env.globals)
    return out


def stray_numbers(text: str) -> list[str]:
    """The digits of a marked rendering that no printed value brought: each with a little context.
    Years of a citation (1900–2099, after a name), a cited paper's table (Table 3 (B)) and the four questions'
    names (Q1–Q4) are words."""
    outside = re.sub(f"{MARK[0]}.*?{MARK[1]}", "\u2026", text, flags=re.S)
    outside = re.sub(r"\bQ[1-4]\b|(?:(?<=[A-Za-z.] )|(?<=等人 ))(?:19|20)\d\d[a-z]?\b|\bTable \d+(?: \([A-Z]\))?", "", outside)
    return [outside[max(0, m.start() - 20): m.end() + 20] for m in re.finditer(r"\d+", outside)]
