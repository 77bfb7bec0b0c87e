"""W&B without waiting: online only when asked, or when a key is configured and the host answers.

Measured here: `wandb.init` with a key but no network blocks for 100 s and then raises. So the
mode is decided before any W&B call: WANDB_MODE wins if set; otherwise online needs an API key
*and* a TCP connection to the W&B host within `timeout` seconds; everything else is offline
(`wandb sync <run dir>/wandb/offline-run-*` uploads it later).
"""

from __future__ import annotations

import hashlib
import math
import netrc
import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

DEFAULT_HOST = "https://api.wandb.ai"


def _api_key() -> str | None:
    if os.environ.get("WANDB_API_KEY"):
        return os.environ["WANDB_API_KEY"]
    host = urlparse(os.environ.get("WANDB_BASE_URL", DEFAULT_HOST)).hostname or ""
    try:
        auth = netrc.netrc(os.environ.get("NETRC", str(Path.home() / ".netrc"))).authenticators(host)
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return None
    return auth[2] if auth else None


def host_answers(url: str, timeout: float) -> bool:
    parsed = urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def wandb_mode(timeout: float = 3.0) -> str:
    """'online', 'offline' or 'disabled', decided without ever blocking longer than `timeout`."""
    forced = os.environ.get("WANDB_MODE", "").strip().lower()
    if forced in ("online", "offline", "disabled"):
        return forced
    if forced == "dryrun":
        return "offline"
    if not _api_key():
        return "offline"
    return "online" if host_answers(os.environ.get("WANDB_BASE_URL", DEFAULT_HOST), timeout) else "offline"


def online_problem(timeout: float = 3.0) -> str | None:
    """Where WANDB_MODE=online is asked and cannot work here, the one line saying why and what to do; else None.
    Asked before any work: without it, a run without a key failed after ~20 s, and without the network wandb
    waited ~100 s and then failed, each with a traceback (issue 41)."""
    if os.environ.get("WANDB_MODE", "").strip().lower() != "online":
        return None
    if not _api_key():
        return ("WANDB_MODE=online but no W&B API key is set (WANDB_API_KEY or ~/.netrc); run `wandb login`, or "
                "set WANDB_MODE=offline and upload later with `ablate sync`")
    host = os.environ.get("WANDB_BASE_URL", DEFAULT_HOST)
    if not host_answers(host, timeout):
        return (f"WANDB_MODE=online but {host} does not answer within {timeout:g} s; check the network, or set "
                "WANDB_MODE=offline and upload later with `ablate sync`")
    return None


def short(value: Any) -> str:
    """A config value as a run name shows it, exactly: floats in the shorter of decimal and scientific
    notation (0.0003 -> 3e-4, 0.01 stays 0.01; 3.0000001e-4 is not rounded to 3e-4), False, 512."""
    if isinstance(value, bool) or not isinstance(value, float):
        return str(value)
    if not math.isfinite(value) or value == 0:
        return repr(value)
    decimal = repr(value)
    digits = next(p for p in range(17) if float(f"{value:.{p}e}") == value)
    mantissa, _, exponent = f"{value:.{digits}e}".partition("e")
    scientific = f"{mantissa}e{int(exponent)}"
    return scientific if len(scientific) < len(decimal) else decimal


def derived_name(cfg) -> str:
    """A run's display name when run.name is empty: its model and optimiser keys that differ from the
    tutorial model's defaults, without their section, and the seed ("n_heads=8 lr=3e-4 s0"; "tutorial
    s0" when none differs), at most NAME_MAX characters (the keys that do not fit become "...")."""
    from .config import NAME_MAX, Config, flat

    defaults, values = flat(Config()), flat(cfg)
    parts = [f"{k.partition('.')[2]}={short(v)}" for k, v in values.items()
             if k.startswith(("model.", "optim.")) and v != defaults[k]]
    seed = f"s{cfg.seed}"
    if len(" ".join([*parts, seed])) > NAME_MAX:
        while parts and len(" ".join([*parts, "...", seed])) > NAME_MAX:
            parts.pop()
        parts.append("...")
    return " ".join([*(parts or ["tutorial"]), seed])


TAG_MAX = 64  # W&B refuses a longer tag: wandb.init fails, and with it every run of the sweep


def tag(kind: str, value: str) -> str:
    """`kind:value`, cut to W&B's TAG_MAX where longer, with a digest of the whole value at its end, so that two
    long names sharing their first 50 characters keep two tags."""
    text = f"{kind}:{value}"
    if len(text) <= TAG_MAX:
        return text
    digest = hashlib.sha256(value.encode()).hexdigest()[:8]
    return f"{text[:TAG_MAX - len(digest) - 1]}~{digest}"


def run_fields(cfg, wandb_id: str | None = None) -> dict[str, Any]:
    """What W&B shows of a run besides its metrics: id (`wandb_id`, this attempt's: attempt_id; the run id
    where none is given), name, group (the sweep and its budget: budgets never mix in a group), job_type,
    tags (the run id among them, `run:<id>`, which matches a W&B run to its run folder) and the flat config,
    once."""
    from .config import flat, run_id

    ours = run_id(cfg)
    return {
        "id": wandb_id or ours,
        "name": cfg.run.name or derived_name(cfg),
        "group": f"{cfg.run.group}-{cfg.budget}",
        "job_type": "train" if cfg.run.group == "train" else "sweep",
        "tags": [tag("budget", cfg.budget), tag("task", cfg.data.task), tag("sweep", cfg.run.group), tag(RUN_TAG, ours)],
        "config": flat(cfg),
    }


RUN_TAG = "run"  # the tag kind that holds a W&B run's ablate run id (`run:<id>`)
WANDB_ID = "wandb_id"  # in a run folder: the W&B run id its latest attempt logs to


def attempt_id(run_dir: Path, cfg, resume: bool, write: bool = True) -> str:
    """The W&B run id of this training of `cfg` in `run_dir`. A resume goes on in the W&B run the interrupted
    attempt logged to (run_dir/wandb_id; a folder of a run started before that file existed: the run id
    itself). Otherwise a new id, the run id and six random hex digits, written there (`write`: the process
    that owns the folder), so that a retrain, or a colleague training the same configuration in the same
    project, is a W&B run of its own instead of resuming another and overwriting it (W&B keeps the first
    values logged at a step). The run id stays in the tags (`run:<id>`), which is how runs are matched."""
    import re
    import secrets

    from .config import run_id
    from .fileio import atomic_write

    ours = run_id(cfg)
    path = run_dir / WANDB_ID
    if resume:
        try:
            found = path.read_text().strip()
        except OSError:
            found = ""
        if re.fullmatch(rf"{re.escape(ours)}-[0-9a-f]{{6}}", found):
            return found
        if not path.exists() and (run_dir / "wandb").is_dir():  # its W&B run has the run id as its id
            return ours
    new = f"{ours}-{secrets.token_hex(3)}"
    if write:
        atomic_write(path, new + "\n")
    return new


# Without a usable HOME: W&B's own folders, and the cache folder its core (Go's os.UserCacheDir) logs to.
WANDB_DIRS = {"WANDB_CACHE_DIR": "cache", "WANDB_CONFIG_DIR": "config", "WANDB_DATA_DIR": "data",
              "XDG_CACHE_HOME": "xdg-cache"}


def wandb_dirs_without_home() -> Path | None:
    """When HOME is unset or no writable folder (cron, containers), each of WANDB_DIRS not set already points
    into one private temp folder (`ablate-wandb-*`, made once per process; W&B's core starts once per
    process too); returns it. Measured: without them wandb-core wrote ~20 lines of its own logs, an ERROR
    among them, to stderr, and its cache to ./.wandb_cache. None when HOME serves (nothing set)."""
    home = os.environ.get("HOME", "")
    if home and os.path.isdir(home) and os.access(home, os.W_OK | os.X_OK):
        return None
    missing = [name for name in WANDB_DIRS if not os.environ.get(name)]
    if not missing:
        return None
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="ablate-wandb-"))  # 0700 under a fresh name: no other user's folder
    for name in missing:
        os.environ[name] = str(base / WANDB_DIRS[name])
    return base


def wandb_logger(run_dir: Path, cfg, resume: bool = False, write: bool = True):
    """Lightning's WandbLogger writing under `run_dir/wandb` with `run_fields(cfg)`; its id is this attempt's
    (attempt_id: a resumed run continues the same W&B run, the logger passes resume="allow"; a run trained
    afresh is a new W&B run, `write`: the process owning the folder records its id). run.sweep_id attaches
    the run to that W&B sweep (wandb.init's settings; the WANDB_SWEEP_ID variable would make wandb drop
    the run's id and project). The task's LightningModule keeps its hyperparameters out of the logger,
    so the config appears once."""
    import wandb
    from pytorch_lightning.loggers import WandbLogger

    mode = wandb_mode()
    os.environ.setdefault("WANDB_SILENT", "true")
    wandb_dirs_without_home()
    fields = run_fields(cfg, attempt_id(run_dir, cfg, resume, write))
    logger = WandbLogger(
        project=cfg.run.project,
        save_dir=str(run_dir),
        mode=mode,
        log_model=False,
        settings=wandb.Settings(sweep_id=cfg.run.sweep_id or None),
        **fields,
    )
    # Lightning passes anonymous=None to wandb.init unconditionally; wandb (0.31 here) warns "The anonymous
    # setting has no effect" for any value given, None included (wandb/wandb#10909). Not giving it is
    # what wandb asks for, and changes nothing else.
    logger._wandb_init.pop("anonymous", None)
    return logger
