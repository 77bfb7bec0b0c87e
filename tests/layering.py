"""The project's layers as data, and a checker that walks every import of every module.

    models  <-  data, tasks, probes  <-  train (rundir, callbacks, tracking, probing)  <-  sweep
            <-  results  <-  report  <-  notebooks
    (fileio, yamlfile, checkpoint, registry: leaf modules, importing nothing of ablate, usable by every layer;
     a name is imported from its home, never through a module that merely uses it)

Each rule names a layer (a module prefix) and the ablate modules it must never import. The checker
reads source with `ast`, so it sees every import statement wherever it stands — at the top, inside a
function, under `if TYPE_CHECKING` — and resolves relative imports (`from ..sweep import spec`) to
absolute names before matching.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Rule:
    layer: str  # a module prefix: 'ablate.models' covers ablate.models and ablate.models.*
    allowed: tuple[str, ...] | None = None  # if set: the only ablate modules it may import
    forbidden: tuple[str, ...] = ()  # modules it must never import
    why: str = ""


ABOVE_TASKS = ("ablate.train", "ablate.rundir", "ablate.callbacks", "ablate.tracking", "ablate.probing",
               "ablate.sweep", "ablate.results", "ablate.report", "ablate.bench", "ablate.cli")
# names whose home is a leaf module; rundir imports some of them for its own use, and importing them
# through it would tie the importer to the run directory's layer
HOMES = {"atomic_write": "ablate.fileio", "load_checkpoint": "ablate.checkpoint", "CheckpointError": "ablate.checkpoint"}

RULES = (
    Rule("ablate.fileio", allowed=("ablate.fileio",), why="a leaf utility every layer may use"),
    Rule("ablate.yamlfile", allowed=("ablate.yamlfile",), why="a leaf utility every layer may use"),
    Rule("ablate.runfiles", allowed=("ablate.runfiles", "ablate.yamlfile"),
         why="reading a run's files: one home for the trainer and the results table"),
    Rule("ablate.registry", allowed=("ablate.registry",),
         why="the task registry: a leaf every layer may read (config, data, budgets, tables, reports)"),
    Rule("ablate.checkpoint", allowed=("ablate.checkpoint",),
         why="a leaf utility: tasks below the run directory and everything above it load checkpoints"),
    Rule("ablate", forbidden=tuple(f"ablate.rundir.{name}" for name in HOMES),
         why=f"import these from their homes ({', '.join(f'{n}: {h}' for n, h in HOMES.items())})"),
    Rule("ablate.models", allowed=("ablate.models",),
         why="pure nn.Modules: a notebook can use them alone"),
    Rule("ablate.probes", allowed=("ablate.probes", "ablate.models"),
         why="measurements on a model, pure torch"),
    Rule("ablate.data", forbidden=ABOVE_TASKS, why="datasets never know how they are run or reported"),
    Rule("ablate.tasks", forbidden=ABOVE_TASKS, why="LightningModules never know how they are run or reported"),
    Rule("ablate.sweep", forbidden=("ablate.models", "ablate.probes", "ablate.tasks", "ablate.results",
                                    "ablate.report"),
         why="sweep files -> runs: configurations and processes, nothing of model internals"),
    Rule("ablate.results", forbidden=("ablate.report",), why="tables are below the reports"),
    Rule("ablate.report", allowed=("ablate.report", "ablate.results", "ablate.fileio", "ablate.registry"),
         why="reports read tables only"),
    Rule("reports", allowed=("ablate.report", "ablate.results"), why="notebooks read tables only"),
)


@dataclass(frozen=True)
class Edge:
    module: str  # the importing module
    imported: str  # the absolute name imported
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.module} imports {self.imported}"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def imports(path: Path, root: Path) -> list[Edge]:
    """Every import in the file at `path` (module named relative to `root`), as absolute names.
    `from x import y` yields x.y too, so importing a submodule by name is caught."""
    module = module_name(path, root)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    out: list[Edge] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [Edge(module, a.name, path, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, is_package, node.level, node.module) if node.level else node.module or ""
            out.append(Edge(module, source, path, node.lineno))
            out += [Edge(module, f"{source}.{a.name}", path, node.lineno) for a in node.names if a.name != "*"]
    return out


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def check(edges: list[Edge], rules: tuple[Rule, ...] = RULES, project: str = "ablate") -> list[str]:
    """One line per import statement that breaks a rule: where, what, and the rule's reason.
    (`from x import y` is one statement: reported once, as x when x itself is out of bounds.)"""
    problems: dict[tuple, str] = {}
    for edge in edges:
        if not _under(edge.imported, project) or edge.imported == project:
            continue  # `from ablate import x` is judged by its ablate.x edge
        for rule in rules:
            if not _under(edge.module, rule.layer):
                continue
            where = (str(edge.path), edge.line, rule.layer)
            if rule.allowed is not None and not any(_under(edge.imported, a) for a in rule.allowed):
                reason = f"{rule.layer} may import only {', '.join(rule.allowed)} ({rule.why})"
            elif any(_under(edge.imported, f) for f in rule.forbidden):
                reason = f"{rule.layer} must not import it ({rule.why})"
            else:
                continue
            problems.setdefault(where, f"{edge} — {reason}")
    return sorted(problems.values())


def edges_of(root: Path, *packages: str) -> list[Edge]:
    """The imports of every .py file under root/<package> for each package (a folder of modules)."""
    out: list[Edge] = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            out += imports(path, root)
    return out
