"""Reading a YAML file a user hands us: one clear error for every way it can be bad.

Override files and sweep files are small mappings of plain scalars. Anything else is refused with
a `YamlFileError` naming the file and the fix, before it can cost memory or a traceback: a file
that is not there, is too big, is not UTF-8 text (a binary file), has a syntax error, gives a key twice in
one mapping, uses aliases (`*name`, the "billion laughs" expansion: 700 bytes of nested aliases expand to gigabytes
when the result is walked), is nested deeper than any such file needs, or holds several documents.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MAX_BYTES = 1 << 20  # 1 MiB: the largest sweep file here is under 2 KB


class YamlFileError(ValueError):
    """A YAML file that cannot be used; the message names the file, the problem and the fix."""


class _Duplicate(yaml.constructor.ConstructorError):
    def __init__(self, key: Any, first: int, again: int):
        super().__init__(None, None, "duplicate key")
        self.key, self.first, self.again = key, first, again


# libyaml's parser where PyYAML was built with it (its wheels are): several times faster than the pure-Python one,
# for every sweep expansion and report. It also takes a few tab separators the pure-Python scanner refuses.
_Parser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_DEPTH = 64  # a policy, not libyaml's limit (1,000): no sweep or override file nests past a few levels


class _Checked(_Parser):
    """A SafeLoader that refuses a key given twice in one mapping (YAML keeps the last silently: a swept
    parameter fixed again further down, or a second `parameters:` block, ran another grid than the file shows).
    Aliases and deep nesting are refused before, from the parser's events (_refuse_aliases_and_depth)."""

    def construct_mapping(self, node, deep=False):  # type: ignore[override]
        lines: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in lines:
                    raise _Duplicate(key, lines[key], line)
                lines[key] = line
            except TypeError:  # an unhashable key: the base class says so
                break
        return super().construct_mapping(node, deep)


def _refuse_aliases_and_depth(name: str, text: str) -> None:
    """YamlFileError for an alias (`*name`: anchors are harmless alone, an alias is what expands) or nesting past
    MAX_DEPTH, read from the parser's events before anything is composed. The scan stops at a second document,
    which yaml.load then refuses as it always did."""
    depth = documents = 0
    for event in yaml.parse(text, Loader=_Parser):
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                return
        elif isinstance(event, yaml.AliasEvent):
            raise YamlFileError(f"{name} uses a YAML alias (*name) at line {event.start_mark.line + 1}; "
                                "write the values out instead of anchors and aliases")
        elif isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlFileError(_too_deep(name, event.start_mark.line + 1))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _too_deep(name: str, line: int) -> str:
    return f"{name} is nested too deeply (over {MAX_DEPTH} levels at line {line}); give a flat mapping of key: value"


def read_yaml(path: str | Path, what: str = "file") -> Any:
    """The parsed contents of `path` (None for an empty file), or YamlFileError."""
    path = Path(path)
    name = f"{what} {str(path)!r}"
    if not path.is_file():
        raise YamlFileError(f"{name} does not exist or is not a file; give an existing .yaml file")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise YamlFileError(f"{name} is {size:,} bytes, over the {MAX_BYTES:,} allowed; give a small YAML file")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise YamlFileError(f"{name} is not UTF-8 text (a binary file?); give a YAML text file") from None
    if "\x00" in text:
        raise YamlFileError(f"{name} contains NUL bytes (a binary file?); give a YAML text file")
    try:
        _refuse_aliases_and_depth(name, text)
        return yaml.load(text, Loader=_Checked)  # noqa: S506 - a SafeLoader (or CSafeLoader) subclass
    except _Duplicate as err:
        raise YamlFileError(f"{name} gives {err.key!r} twice, at lines {err.first} and {err.again} (YAML would keep "
                            "the second alone); keep one") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        if "nesting depth" in str(getattr(err, "problem", "")) and mark is not None:  # libyaml's own limit, met
            raise YamlFileError(_too_deep(name, mark.line + 1)) from None  # while its scanner reads ahead
        raise YamlFileError(_syntax(name, err)) from None


def _syntax(name: str, err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}" if mark is not None else ""
    return f"{name} is not valid YAML{where}; fix its syntax"
