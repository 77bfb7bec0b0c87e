"""A dashboard spec (ablate.dashboard.spec) as W&B's own UI objects (`wandb-workspaces`), and saving them.

`workspace(spec)` builds the saved view offline (pydantic objects); `save_workspace` and `save_report`
talk to W&B and are called only online. The runs' config is flat with dotted keys
("model.n_heads", ablate.config.flat), which W&B stores as {"model.n_heads": {"value": ...}}:
its backend path is `model.n_heads.value`, while wandb-workspaces writes `model.value.n_heads` for a
dotted `Config` name (a nested config). `flat_config_paths` rewrites the view to the flat form
(the library's own note on this: wandb_workspaces/expr.py, groupby_str_to_key).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

INSTALL = "pip install '.[dashboards]' in ablate's checkout (wandb-workspaces)"


def _modules():
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws

    return ws, wr


def _metric(wr, where: str, key: str):
    return wr.Config(key) if where == "config" else wr.SummaryMetric(key) if where == "summary" else key


def panel(wr, p: dict[str, Any]):
    kind = p["type"]
    if kind == "parallel_coordinates":
        return wr.ParallelCoordinatesPlot(title=p["title"], columns=[
            wr.ParallelCoordinatesPlotColumn(metric=_metric(wr, c["in"], c["key"])) for c in p["columns"]])
    if kind == "line":
        return wr.LinePlot(title=p["title"], x=p["x"], y=list(p["y"]))
    if kind == "bar":
        return wr.BarPlot(title=p["title"], metrics=list(p["metrics"]), orientation="v")
    if kind == "media":
        return wr.MediaBrowser(title=p["title"], media_keys=list(p["media"]))
    raise ValueError(f"unknown panel type {kind!r}")


def _filters(ws, spec: dict[str, Any]) -> list:
    out = []
    for f in spec["filters"]:
        metric = ws.Metric("Group") if (f["in"], f["key"]) == ("run", "group") else ws.Config(f["key"])
        out.append(metric == f["value"])
    return out


def workspace(spec: dict[str, Any]):
    """The saved view: runs filtered to the sweep and budget, grouped by its swept keys, its sections."""
    ws, wr = _modules()
    return ws.Workspace(
        entity=spec["entity"] or "",
        project=spec["project"],
        name=spec["name"],
        sections=[ws.Section(name=s["name"], is_open=True, panels=[panel(wr, p) for p in s["panels"]])
                  for s in spec["sections"]],
        runset_settings=ws.RunsetSettings(
            filters=_filters(ws, spec),
            groupby=[ws.Config(k) for k in spec["group_by"]],
        ),
    )


def flat_config_paths(model_json: str, keys: list[str]) -> str:
    """`a.value.b` (wandb-workspaces' path of a nested config key) -> `a.b.value` (a flat dotted key)."""
    for key in sorted(keys, key=len, reverse=True):
        head, _, rest = key.partition(".")
        if rest:
            model_json = model_json.replace(f"{head}.value.{rest}", f"{key}.value")
    return model_json


def config_keys(spec: dict[str, Any]) -> list[str]:
    from .spec import all_reads

    return [k for where, k in all_reads(spec) if where == "config"]


def view_model(spec: dict[str, Any]):
    """The backend view of the workspace (offline), with flat config paths."""
    from wandb_workspaces.workspaces import internal

    view = workspace(spec)._to_model()
    fixed = flat_config_paths(view.model_dump_json(by_alias=True), config_keys(spec))
    return internal.View.model_validate(json.loads(fixed))


def save_workspace(spec: dict[str, Any]) -> str:
    """Create the saved view on W&B; its URL."""
    from wandb_workspaces.workspaces import internal

    view = view_model(spec)
    view.name = internal._generate_view_name()
    resp = internal.upsert_view2(view)
    name = resp["upsertView"]["view"]["name"]
    ws = workspace(spec)
    ws._internal_name = name
    return ws.url


def upload_figures(spec: dict[str, Any], report: dict[str, Any]) -> str:
    """Log the question's figures as images of one run (job_type "report") so a report can show them;
    its run name."""
    import wandb

    from ..tracking import tag

    name = f"{spec['sweep']} figures"
    run = wandb.init(entity=spec["entity"], project=spec["project"], name=name, job_type="report",
                     group=f"{spec['sweep']}-figures", tags=[tag("sweep", spec["sweep"])])
    run.log({f"figures/{Path(f).stem}": wandb.Image(str(Path(report["reports"]) / f)) for f in report["figures"]})
    run.finish()
    return name


def report(spec: dict[str, Any], figures_run: str | None):
    """The W&B report (built offline, saved by save_report): the question, the plain answer, the
    verdict, the figures (images of the run `figures_run`) and the sweep's panels over its runs."""
    ws, wr = _modules()
    rep = spec["report"]
    blocks = [wr.H1(rep["title"]), wr.P(f"Question. {rep['question']}"), wr.P(rep["plain"])]
    if rep["verdict"]:
        blocks.append(wr.P(f"Verdict (from the primary tests): {rep['verdict']}."))
    if figures_run:
        blocks.append(wr.PanelGrid(
            runsets=[wr.Runset(entity=spec["entity"], project=spec["project"], name="figures",
                               filters=[ws.Metric("Name") == figures_run])],
            panels=[wr.MediaBrowser(title=Path(f).name, media_keys=[f"figures/{Path(f).stem}"])
                    for f in rep["figures"]]))
    blocks.append(wr.H2(f"The sweep: {spec['sweep']} ({spec['budget']})"))
    sweep_runs = wr.Runset(entity=spec["entity"], project=spec["project"], name=spec["name"],
                           filters=_filters(ws, spec), groupby=[f"config.{k}.value" for k in spec["group_by"]])
    blocks.append(wr.PanelGrid(runsets=[sweep_runs], panels=[panel(wr, p) for s in spec["sections"] for p in s["panels"]]))
    return wr.Report(entity=spec["entity"], project=spec["project"], title=f"{spec['sweep']}: {rep['title']}"[:128],
                     description=f"ablate dashboard {spec['sweep']} --report", blocks=blocks)


def save_report(spec: dict[str, Any]) -> str:
    """Upload the figures, save the report on W&B; its URL."""
    figures_run = upload_figures(spec, spec["report"]) if spec["report"]["figures"] else None
    saved = report(spec, figures_run)
    saved.save()
    return saved.url
