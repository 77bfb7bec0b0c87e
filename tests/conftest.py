"""Shared test setup.

The tests use tiny tensors, for which intra-op threading only costs: on the 2-core CI/VM machines
a parallel softmax or LayerNorm on a (3, 7, 16) tensor was measured at ~8 ms with 2 threads and
~2 us with 1, which made the suite ~100x slower. One thread keeps the whole suite to seconds.

`needs_mnist` marks a test that trains on the real MNIST: where $ABLATE_DATA_DIR (else the repo's data/) holds
no MNIST/raw/ files it skips, saying so, unless ABLATE_REQUIRE_MNIST=1 (.ci/run sets it), where it runs and fails.
"""

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from ablate.registry import MNIST_FILES, data_dir
from tests.report_builds import built, committed_build, fixture_build  # noqa: F401  (shared fixtures)

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = REPO / data_dir()  # ./data from the checkout, wherever pytest runs from
MNIST_MISSING = [name for name in MNIST_FILES if not (DATA_DIR / "MNIST" / "raw" / name).is_file()]
needs_mnist = pytest.mark.skipif(
    bool(MNIST_MISSING) and os.environ.get("ABLATE_REQUIRE_MNIST") != "1",
    reason=f"no MNIST under {DATA_DIR} (MNIST/raw/{', '.join(MNIST_MISSING)}); set ABLATE_DATA_DIR to the folder "
           "that holds MNIST/raw/ (CI does)",
)


def pytest_configure(config):
    """The model sizes ablate.models.size keeps on disk: the suite keeps its own, empty as it starts and shared
    by its workers and their subprocesses, so that each model is counted on the meta device once per run of
    the suite and no count is read from another version of the code."""
    if not hasattr(config, "workerinput"):  # the controller or a serial run: the workers inherit it
        folder = tempfile.mkdtemp(prefix="ablate-cache-")
        os.environ["ABLATE_CACHE_DIR"] = folder
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


# ------------------------------------------------------------------ parallel runs (pytest-xdist, `make test`)
# `make test` runs the suite on every core (`-n auto`): a test goes to whichever worker is free, except that
# the tests sharing a costly fixture go to one worker together, so that the fixture is made once (a report
# build, a trained run, a SLURM cluster, a browser page). The groups are found from the fixtures each test
# uses, in the workers (which collect), and handed to the controller's scheduler (which does not) in a file
# beside the workers' temporary folders. The heaviest work is queued first, so that no long group starts last
# and leaves the other workers idle. (xdist's own `--dist loadgroup` marks a group in the test's id, which
# pytest 9.2 no longer lets it change: pytest-dev/pytest-xdist#1386.) A serial `pytest` ignores all this.
REPORT_BUILDS = ("fixture_build", "committed_build")
# Module fixtures each worker may as well make itself: cheap, or a cache of work each test asks for anyway.
PER_WORKER = {
    "forkserver": "a preloaded process for the sweep modules, started in a second",
    "offline_record": "the dashboard's smoke runs, one per sweep: they spread over the workers",
}
GROUPS_FILE = "xdist-groups.json"


def _group(item) -> str | None:
    """The group a test belongs to: the report build it reads (each is a session fixture of about a minute
    and a half), else its module when it uses a module-scoped fixture of the suite, else None."""
    param = getattr(getattr(item, "callspec", None), "params", {}).get("built")
    builds = [b for b in REPORT_BUILDS if b in item.fixturenames] + ([f"{param}_build"] if param else [])
    if builds:
        return builds[0]
    for name in item.fixturenames:
        if name in PER_WORKER:
            continue
        for definition in item._fixtureinfo.name2fixturedefs.get(name, ()):
            if definition.scope in ("module", "class", "package") and str(definition.baseid).startswith("tests"):
                return item.module.__name__
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return
    groups = {item.nodeid: _group(item) for item in items}
    sizes: dict[str, int] = {}
    for group in groups.values():
        if group is not None:
            sizes[group] = sizes.get(group, 0) + 1

    def rank(item) -> tuple:
        group = groups[item.nodeid]
        if group in REPORT_BUILDS:
            return (0, REPORT_BUILDS.index(group))
        if group is not None:
            return (1, -sizes[group])
        return (2 if item.get_closest_marker("slow") else 3, 0)

    items[:] = sorted(items, key=rank)  # stable: within a rank, the collection's order
    if workerinput["workerid"] == "gw0":  # every worker collects the same items
        from ablate.fileio import atomic_write

        atomic_write(Path(config.option.basetemp).parent / GROUPS_FILE,
                     json.dumps({k: v for k, v in groups.items() if v is not None}))


@pytest.hookimpl(optionalhook=True)  # a hook of xdist's: a serial run without it installed still works
def pytest_xdist_make_scheduler(config, log):
    """`-n N` (xdist's default `--dist load`): our groups, in the order the workers collected them."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):
        groups: dict[str, str] = {}

        def _split_scope(self, nodeid: str) -> str:
            return self.groups.get(nodeid, nodeid)

        def schedule(self) -> None:
            if self.collection is None:  # the first call: every worker has collected (and gw0 written)
                path = config._tmp_path_factory.getbasetemp() / GROUPS_FILE
                self.groups = json.loads(path.read_text()) if path.exists() else {}
            super().schedule()

    config.option.loadscopereorder = False
    return Grouped(config, log)


@pytest.fixture
def short_tmp():
    """A temporary folder with a short path, for a TMPDIR that multiprocessing's forkserver binds its Unix
    socket in: an AF_UNIX path holds at most 107 bytes, and under xdist a test's tmp_path
    (/tmp/pytest-of-root/pytest-104/popen-gw1/<test name>0/) can leave too few ("AF_UNIX path too long")."""
    folder = Path(tempfile.mkdtemp(prefix="ablate-t-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
