"""Every third-party import of ablate/ is declared in pyproject.toml, in the core dependencies or in the extra
of the package that imports it; private APIs are bounded; CI installs from a constraints file that pins them."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / ".ci" / "constraints.txt"
# import name -> distribution, where they differ beyond case and '_'/'-'
DISTRIBUTION = {"yaml": "pyyaml", "PIL": "pillow", "IPython": "ipython", "pytorch_lightning": "pytorch-lightning",
                "lightning_fabric": "pytorch-lightning",  # the pytorch-lightning wheel ships lightning_fabric
                "wandb_workspaces": "wandb-workspaces"}
# the modules that need an extra, and which (everything else needs the core dependencies only)
EXTRA_OF = {"ablate.report": "reports", "ablate.dashboard": "dashboards", "ablate.explore.screenshot": "explore",
            "ablate.explore.bench": "explore",
            "ablate.browser": "explore", "ablate.sweep.executor": "slurm"}
# declared though never imported by name: what needs them
NOT_IMPORTED = {"pyarrow": "pandas' Parquet engine (the results table)",
                "ipykernel": "the kernel the report notebooks run in"}
# distributions whose private functions ablate calls: bounded to the release series it was tested with
PRIVATE_APIS = {"wandb-workspaces": ("0.4.13", "0.5"), "submitit": ("1.5", "1.6")}


def _name(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _requirements(specs: list[str]) -> dict[str, Requirement]:
    reqs = [Requirement(s) for s in specs]
    return {_name(r.name): r for r in reqs if _name(r.name) != "ablate"}


def _imports() -> dict[str, set[str]]:
    """{distribution: the ablate modules importing it}, from every import statement (in functions too)."""
    out: dict[str, set[str]] = {}
    for path in sorted((ROOT / "ablate").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "ablate" and top not in sys.stdlib_module_names:
                    out.setdefault(_name(DISTRIBUTION.get(top, top)), set()).add(module)
    return out


def _extra(module: str) -> str | None:
    return next((extra for prefix, extra in EXTRA_OF.items() if module == prefix or module.startswith(prefix + ".")),
                None)


def test_every_import_is_declared_where_it_is_used():
    project = _project()
    core = _requirements(project["dependencies"])
    extras = {name: _requirements(specs) for name, specs in project["optional-dependencies"].items()}
    problems = []
    for dist, modules in sorted(_imports().items()):
        for module in sorted(modules):
            extra = _extra(module)
            if dist not in core and (extra is None or dist not in extras[extra]):
                where = "the core dependencies" if extra is None else f"the core dependencies or the {extra} extra"
                problems.append(f"{module} imports {dist}, which is not in {where}")
    assert problems == []


def test_every_declared_dependency_is_imported_by_its_users():
    """A core dependency is imported outside the extras' packages (seaborn, used by the reports only, is not
    core); an extra's dependency is imported by its package; NOT_IMPORTED names the rest and why."""
    project = _project()
    imports = _imports()
    problems = []
    for dist in _requirements(project["dependencies"]):
        if dist not in NOT_IMPORTED and not any(_extra(m) is None for m in imports.get(dist, ())):
            problems.append(f"{dist} is a core dependency, but only {sorted(imports.get(dist, ())) or 'nothing'} "
                            "imports it")
    for extra in EXTRA_OF.values():
        for dist in _requirements(project["optional-dependencies"][extra]):
            if dist not in NOT_IMPORTED and not any(_extra(m) == extra for m in imports.get(dist, ())):
                problems.append(f"{dist} is in the {extra} extra, but no module of it imports {dist}")
    assert problems == []


def test_every_dependency_has_an_upper_bound_and_private_apis_their_series():
    project = _project()
    reqs = {**_requirements(project["dependencies"])}
    for extra, specs in project["optional-dependencies"].items():
        reqs.update({f"{extra}:{k}": v for k, v in _requirements(specs).items()})
    unbounded = [str(r) for r in reqs.values() if not any(s.operator in ("<", "<=", "==", "~=") for s in r.specifier)]
    assert unbounded == []
    every = {_name(r.name): r for r in reqs.values()}
    for dist, (low, high) in PRIVATE_APIS.items():
        spec = every[dist].specifier
        assert Version(low) in spec and Version(high) not in spec, (dist, str(spec))
        below = Version(low).release[:-1] + (Version(low).release[-1] - 1,)
        assert Version(".".join(map(str, below))) not in spec, (dist, str(spec))


def test_constraints_pin_every_dependency_within_its_bounds():
    """.ci/constraints.txt pins exactly (name==version) every distribution pyproject declares (torch and torchvision
    excepted: the Makefile's TORCH_SPEC pins those), and each pin satisfies pyproject's range."""
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            req = Requirement(line)
            ops = [(s.operator, s.version) for s in req.specifier]
            assert len(ops) == 1 and ops[0][0] == "==", line
            pins[_name(req.name)] = Version(ops[0][1])
    assert "torch" not in pins and "torchvision" not in pins and "ablate" not in pins
    project = _project()
    declared = dict(_requirements(project["dependencies"]))
    for specs in project["optional-dependencies"].values():
        declared.update(_requirements(specs))
    for dist, req in declared.items():
        if dist in ("torch", "torchvision"):
            continue
        assert dist in pins, f"{dist} is not pinned in {CONSTRAINTS.name}"
        assert pins[dist] in req.specifier, f"{dist}=={pins[dist]} is outside pyproject's {req}"


def test_make_venv_and_ci_install_with_the_constraints():
    makefile = (ROOT / "Makefile").read_text()
    installs = [line for line in makefile.splitlines() if "pip install" in line and "-e " in line]
    assert installs and all("-c $(CONSTRAINTS)" in line for line in installs), installs
    assert re.search(r"^CONSTRAINTS \?= \.ci/constraints\.txt$", makefile, re.M)
    assert re.search(r"^\$\(VENV\)/\.installed: pyproject\.toml \$\(CONSTRAINTS\)$", makefile, re.M)
