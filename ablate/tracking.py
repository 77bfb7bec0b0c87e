"""W&B without waiting: online only when asked, or when a key is configured and the host answers.

Measured here: `wandb.init` with a key but no network blocks for 100 s and then raises. So the
mode is decided before any W&B call: WANDB_MODE wins if set; otherwise online needs an API key
*and* a TCP connection to the W&B host within `timeout` seconds; everything else is offline
(`wandb sync <run dir>/wandb/offline-run-*` uploads it later).
"""

from __future__ import annotations

import netrc
import os
import socket
from pathlib import Path
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


def wandb_logger(run_dir: Path, name: str, group: str, project: str, config: dict):
    """Lightning's WandbLogger writing under `run_dir/wandb`, config logged flat; id = name, so a
    resumed run continues the same W&B run (the logger passes resume="allow")."""
    from pytorch_lightning.loggers import WandbLogger

    mode = wandb_mode()
    os.environ.setdefault("WANDB_SILENT", "true")
    logger = WandbLogger(
        project=project,
        name=name,
        id=name,
        group=group,
        save_dir=str(run_dir),
        mode=mode,
        config=config,
        log_model=False,
    )
    # Lightning passes anonymous=None to wandb.init unconditionally; wandb (0.31 here) warns "The anonymous
    # setting has no effect" for any value given, None included (wandb/wandb#10909). Not giving it is
    # what wandb asks for, and changes nothing else.
    logger._wandb_init.pop("anonymous", None)
    return logger
