"""The project's layers as data, and a checker that walks every import of every module.

    models  <-  data, tasks, probes  <-  train (rundir, callbacks, tracking, probing)  <-  sweep
            <-  results  <-  report  <-  notebooks
    (fileio, yamlfile, cliparse, csvcells, ctrlc, checkpoint, registry, browser, studies: leaf modules, importing nothing of ablate, usable by every layer;
     a name is imported from its home, never through a module that merely uses it)

Each rule names a layer (a module prefix) and the ablate modules it must never import. The checker
reads source with `ast`, so it sees every import statement wherever it stands — at the top, inside a
function, under `if TYPE_CHECKING` — and resolves relative imports (`from ..sweep import spec`) to
absolute names before matching.

Beyond the direct rules, `Graph.chains` walks transitively (issue 14: reports read tables only): from a
module it follows every ablate import, module by module (inside functions too, and through the package
`__init__`s an import runs and the names a package loads lazily, its LAZY dict), and names the chain to
any module of BELOW_REPORTS or library of HEAVY_LIBRARIES it reaches. An entry point (the report's CLI)
is followed at import time only: what its functions import runs when the user runs the command.
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
    Rule("ablate.cliparse", allowed=("ablate.cliparse",), why="a leaf utility: every command's argument parser"),
    Rule("ablate.csvcells", allowed=("ablate.csvcells",), why="a leaf utility: every CSV writer's formula guard"),
    Rule("ablate.ctrlc", allowed=("ablate.ctrlc",), why="a leaf utility: Ctrl-C while a command starts"),
    Rule("ablate.lazy", allowed=("ablate.lazy",), why="a leaf utility: a package's names loaded on first use"),
    Rule("ablate.runfiles", allowed=("ablate.runfiles", "ablate.yamlfile"),
         why="reading a run's files: one home for the trainer and the results table"),
    Rule("ablate.studies", allowed=("ablate.studies", "ablate.yamlfile", "ablate.cliparse", "ablate.registry"),
         why="the study manifests (reports/<notebook>.yaml): a leaf the build, export, dashboard and notebooks read"),
    Rule("ablate.registry", allowed=("ablate.registry",),
         why="the task registry: a leaf every layer may read (config, data, budgets, tables, reports)"),
    Rule("ablate.browser", allowed=("ablate.browser",),
         why="a leaf utility: headless Chromium, offline, for the explorer's and the report's screenshots"),
    Rule("ablate.plugins", allowed=("ablate.plugins", "ablate.registry", "ablate.models.config", "ablate.config",
                                    "ablate.checkpoint"),
         why="plug-ins: imported by the config, they write the registries the model and the data read; no torch"),
    Rule("ablate.checkpoint", allowed=("ablate.checkpoint",),
         why="a leaf utility: tasks below the run directory and everything above it load checkpoints"),
    Rule("ablate", forbidden=tuple(f"ablate.rundir.{name}" for name in HOMES),
         why=f"import these from their homes ({', '.join(f'{n}: {h}' for n, h in HOMES.items())})"),
    Rule("ablate.models", allowed=("ablate.models", "ablate.lazy", "ablate.fileio"),
         why="pure nn.Modules (and their sizes, kept with the leaf fileio): a notebook can use them alone"),
    Rule("ablate.probes", allowed=("ablate.probes", "ablate.models"),
         why="measurements on a model, pure torch"),
    Rule("ablate.data", forbidden=ABOVE_TASKS, why="datasets never know how they are run or reported"),
    Rule("ablate.tasks", forbidden=ABOVE_TASKS, why="LightningModules never know how they are run or reported"),
    Rule("ablate.sweep", forbidden=("ablate.models", "ablate.probes", "ablate.tasks", "ablate.results",
                                    "ablate.report"),
         why="sweep files -> runs: configurations and processes, nothing of model internals"),
    Rule("ablate.results", forbidden=("ablate.report",), why="tables are below the reports"),
    Rule("ablate.report", allowed=("ablate.report", "ablate.results", "ablate.fileio", "ablate.registry",
                                   "ablate.cliparse", "ablate.browser", "ablate.studies"),
         why="reports read tables only"),
    Rule("reports", allowed=("ablate.report", "ablate.results"), why="notebooks read tables only"),
    Rule("ablate.dashboard", allowed=("ablate.dashboard", "ablate.config", "ablate.budgets", "ablate.fileio", "ablate.cliparse",
                                      "ablate.tracking", "ablate.sweep.spec", "ablate.registry", "ablate.yamlfile",
                                      "ablate.studies"),
         why="a dashboard is built from a sweep file and the reports' text: never models, tasks, training, "
             "results or report notebooks"),
    Rule("ablate.explore", allowed=("ablate.explore", "ablate.cliparse", "ablate.config", "ablate.models", "ablate.checkpoint",
                                    "ablate.registry", "ablate.fileio", "ablate.limits", "ablate.browser"),
         why="the explorer reads a checkpoint and its config and runs the model; never training, sweeps, "
             "results or reports"),
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


# ------------------------------------------------------------------ the transitive walk

# What the reports must never reach, however indirectly (issue 14, "Layering"): training, tasks, data,
# models, sweeps, the config, run directories and probes, nor the libraries they need.
BELOW_REPORTS = ("ablate.config", "ablate.models", "ablate.tasks", "ablate.data", "ablate.train", "ablate.sweep",
                 "ablate.probing", "ablate.probes", "ablate.rundir")
HEAVY_LIBRARIES = ("torch", "torchvision", "torchmetrics", "lightning", "lightning_fabric", "pytorch_lightning", "wandb")
# Entry points: modules a user runs, which may reach the harness inside their functions (the report's
# CLI runs export); only their import-time edges (outside any function) are followed.
ENTRY_POINTS = ("ablate.report.cli", "ablate.report.compare_cli")
LAZY = "LAZY"  # a package's {name: ".module"} for the names its module __getattr__ imports (PEP 562)


def _deferred(tree: ast.AST) -> set[int]:
    """ids of the import nodes that stand inside a function (run when it is called, not at import)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(n) for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return inside


class Graph:
    """The modules under `root` (ablate/, reports/*.py) and their imports, for walks from module to module.

    An import of `a.b.c` runs the packages `a` and `a.b` first; `from a.b import name` where `name` is no
    module reaches what a.b's module `__getattr__` imports for it, which the package declares in a
    literal dict `LAZY = {name: ".module"}` (a package with a module `__getattr__` and no such dict
    cannot be walked: an error says so)."""

    def __init__(self, root: Path, packages: tuple[str, ...] = ("ablate",), scripts: tuple[str, ...] = ("reports",)):
        self.root = root
        self.paths: dict[str, Path] = {}
        for package in packages:
            for path in sorted((root / package).rglob("*.py")):
                self.paths[module_name(path, root)] = path
        for folder in scripts:
            for path in sorted((root / folder).glob("*.py")):
                self.paths[module_name(path, root)] = path
        self._edges: dict[str, list[tuple[Edge, bool]]] = {}
        self._lazy: dict[str, dict[str, str] | None] = {}

    def lazy(self, module: str) -> dict[str, str] | None:
        """The package's LAZY names as absolute module names; None when it has no module __getattr__."""
        if module not in self._lazy:
            tree = ast.parse(self.paths[module].read_text())
            top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
            top |= {t.id for n in tree.body if isinstance(n, ast.Assign) for target in n.targets  # lazy.exports
                    for t in (target.elts if isinstance(target, ast.Tuple) else [target]) if isinstance(t, ast.Name)}
            table = next((n.value for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                          and any(isinstance(t, ast.Name) and t.id == LAZY
                                  for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))), None)
            if "__getattr__" not in top:
                self._lazy[module] = None
            elif table is None:
                raise ValueError(f"{self.paths[module]}: a module __getattr__ without a literal {LAZY} dict; "
                                 f"declare the names it imports as {LAZY} = {{name: '.module'}}")
            else:
                names = ast.literal_eval(table)
                is_package = self.paths[module].name == "__init__.py"
                self._lazy[module] = {
                    n: _resolve(module, is_package, len(m) - len(m.lstrip(".")), m.lstrip(".") or None)
                    for n, m in names.items()}
        return self._lazy[module]

    def edges(self, module: str) -> list[tuple[Edge, bool]]:
        """(edge, deferred) for every import of `module` (deferred: inside a function)."""
        if module not in self._edges:
            path = self.paths[module]
            tree = ast.parse(path.read_text(), filename=str(path))
            deferred = _deferred(tree)
            lines = {}
            for node in ast.walk(tree):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    lines.setdefault(node.lineno, id(node) in deferred)
            self._edges[module] = [(e, lines[e.line]) for e in imports(path, self.root)]
        return self._edges[module]

    def targets(self, name: str) -> list[str]:
        """The modules an import of `name` runs: its packages, the module itself, and for a name that is
        no module the module its package's LAZY names; [] for a name outside the graph."""
        parts = name.split(".")
        out = [".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in self.paths]
        if name not in self.paths and len(parts) > 1 and ".".join(parts[:-1]) in self.paths:
            lazy = self.lazy(".".join(parts[:-1])) or {}
            if parts[-1] in lazy:
                out += self.targets(lazy[parts[-1]])
        return list(dict.fromkeys(out))

    def chains(self, start: str, forbidden: tuple[str, ...] = BELOW_REPORTS,
               libraries: tuple[str, ...] = HEAVY_LIBRARIES) -> list[str]:
        """One line per forbidden module or library reachable from `start` (breadth first: the shortest
        chain), naming each step and where it is written: 'a -> b (a.py:3) -> torch (b.py:9)'."""
        seen: dict[str, str] = {start: start}
        queue, found = [start], {}
        while queue:
            module = queue.pop(0)
            for edge, deferred in self.edges(module):
                if deferred and module in ENTRY_POINTS:
                    continue
                step = f"{seen[module]} -> {{}} ({edge.path.relative_to(self.root)}:{edge.line})"
                top = edge.imported.split(".")[0]
                if top in libraries:
                    found.setdefault(top, step.format(top))
                    continue
                for target in self.targets(edge.imported):
                    if target in seen:
                        continue
                    lazily = "" if _under(edge.imported, target) else f" for {edge.imported}"
                    seen[target] = step.format(target + lazily)
                    bad = next((f for f in forbidden if _under(target, f)), None)
                    if bad:
                        found.setdefault(bad, seen[target])
                    else:
                        queue.append(target)
        return sorted(found.values())
