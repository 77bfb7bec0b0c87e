"""A real single-node SLURM cluster for the tests: munged, slurmctld and slurmd from Debian's `slurm-wlm` and
`munge`, configured by a slurm.conf in a temporary folder, started here and stopped by their own pids.

Everything the daemons write (state, spool, logs, pids, munge's socket and key) stays in that folder; the
commands (sbatch, squeue, scancel, srun) find the cluster through SLURM_CONF, which `Cluster.env` holds.
`problem()` says in one line why a cluster cannot start here (packages missing, not root), else None.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
SBIN = Path("/usr/sbin")
HOW = "apt-get install slurm-wlm munge (as root; .ci/run does it)"
CPUS = 4  # more than this machine's 2 cores (config_overrides): jobs that mostly wait still run side by side


def problem() -> str | None:
    missing = [d for d in DAEMONS if not (SBIN / d).is_file()] + [c for c in ("sbatch", "srun") if not shutil.which(c)]
    if missing:
        return f"no {', '.join(missing)} on this machine"
    if os.geteuid() != 0:
        return "the test cluster's daemons run as root, and this is not root"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, folder: Path):
        self.folder = folder
        self.conf = folder / "slurm.conf"
        self.pids: dict[str, int] = {}
        self.env = {"SLURM_CONF": str(self.conf)}
        self.node = socket.gethostname().split(".")[0]

    def _write(self) -> None:
        f = self.folder
        for sub in ("state", "spool", "munge"):
            (f / sub).mkdir(mode=0o700, exist_ok=True)
        key = f / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        self.conf.write_text(f"""\
ClusterName=ablatetest
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={f / 'munge' / 'munge.socket'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SlurmctldPidFile={f / 'slurmctld.pid'}
SlurmdPidFile={f / 'slurmd.pid'}
SlurmdSpoolDir={f / 'spool'}
StateSaveLocation={f / 'state'}
SlurmctldLogFile={f / 'slurmctld.log'}
SlurmdLogFile={f / 'slurmd.log'}
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
KillWait=10
MinJobAge=5
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={CPUS} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
PartitionName=short Nodes=ALL MaxTime=1 State=UP
""")

    def start(self, timeout: float = 60) -> None:
        self._write()
        f = self.folder
        env = {**os.environ, **self.env}
        commands = {
            "munged": [SBIN / "munged", "--force", f"--socket={f / 'munge' / 'munge.socket'}",
                       f"--key-file={f / 'munge' / 'munge.key'}", f"--pid-file={f / 'munge' / 'munged.pid'}",
                       f"--log-file={f / 'munge' / 'munged.log'}", f"--seed-file={f / 'munge' / 'munged.seed'}",
                       "--foreground"],
            "slurmctld": [SBIN / "slurmctld", "-D", "-i", "-f", self.conf],
            "slurmd": [SBIN / "slurmd", "-D", "-f", self.conf, "-N", self.node],
        }
        for name, command in commands.items():
            log = open(f / f"{name}.out", "wb")
            self.pids[name] = subprocess.Popen([str(c) for c in command], stdout=log, stderr=subprocess.STDOUT,
                                               env=env, start_new_session=True).pid
            log.close()
            if name == "munged":
                self._wait(lambda: (f / "munge" / "munge.socket").exists(), 10, "munged's socket")
        self._wait(self._idle, timeout, "the node to be idle")

    def _idle(self) -> bool:
        out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env={**os.environ, **self.env})
        return out.returncode == 0 and out.stdout.strip() in ("idle", "mix", "alloc")

    def _wait(self, ok, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ok():
            dead = [n for n, pid in self.pids.items() if _exited(pid)]
            if dead or time.monotonic() > deadline:
                logs = "; ".join(f"{p.name}: {p.read_text(errors='replace')[-400:]}"
                                 for p in sorted(self.folder.glob("*.out")) + sorted(self.folder.glob("*.log")))
                raise RuntimeError(f"test SLURM cluster: waited for {what}; {'exited: ' + ', '.join(dead) if dead else 'timed out'}"
                                   f" ({logs})")
            time.sleep(0.2)

    def stop(self) -> None:
        """Each daemon by its own pid: SIGTERM, then SIGKILL after 10 s."""
        for name in reversed(list(self.pids)):
            pid = self.pids[name]
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 10
            while not _exited(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if not _exited(pid):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        self.pids.clear()


def _exited(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid
