#!/usr/bin/env python3
"""A throwaway single-node SLURM cluster on localhost, everything in one folder: munge, MariaDB, slurmdbd (so `sacct`
works), slurmctld and slurmd, each started by this script and stopped by its PID.

    scripts/slurm_cluster.py start DIR     configure and start; prints the environment to use it (SLURM_CONF=...)
    scripts/slurm_cluster.py env DIR       print that environment again (eval "$(scripts/slurm_cluster.py env DIR)")
    scripts/slurm_cluster.py status DIR    sinfo, squeue
    scripts/slurm_cluster.py stop DIR      cancel the cluster's jobs, then stop the daemons by their recorded PIDs

Needs root and Debian's slurm-wlm, munge, slurmdbd and mariadb-server (`apt-get install -y --no-install-recommends
slurm-wlm munge slurmdbd mariadb-server`; their postinst scripts start nothing). Nothing under /etc is touched: the
daemons and client commands find the cluster through SLURM_CONF=DIR/etc/slurm.conf; all ports are picked free at
start. Outside DIR there are only munged's socket (/run/munge, the one SLURM's clients use; a munged already
answering there is reused) and slurmd's configless cache link /run/slurm/conf (for srun inside jobs, which runs
without SLURM_CONF), removed at stop. One such cluster per machine at a time.
Partitions: `debug` (the default), `fedavail`, and `urgent`, whose jobs preempt (requeue) the others';
accounting knows the account `fedavail-test`.
"""

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

CLUSTER = "fedavail"
ACCOUNT = "fedavail-test"
PARTITIONS = ("debug", "fedavail", "urgent")
DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd")  # start order; stopped in reverse
MUNGE_SOCKET = Path("/run/munge/munge.socket.2")
NEEDED = ("munged", "munge", "unmunge", "mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "slurmctld",
          "slurmd", "sbatch", "srun", "sacct", "sacctmgr", "sinfo", "squeue", "scancel")


class ClusterError(RuntimeError):
    pass


def missing_programs() -> list[str]:
    paths = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin" + os.pathsep + "/sbin"
    return [name for name in NEEDED if shutil.which(name, path=paths) is None]


def _which(name: str) -> str:
    found = shutil.which(name, path=os.environ.get("PATH", "") + os.pathsep + "/usr/sbin" + os.pathsep + "/sbin")
    if found is None:
        raise ClusterError(f"{name} not found: apt-get install -y slurm-wlm munge slurmdbd mariadb-server")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self.etc = self.root / "etc"
        self.logs = self.root / "log"
        self.pids = self.root / "pid"
        self.state_file = self.root / "cluster.json"

    # --- environment -------------------------------------------------------------------------------------------
    @property
    def conf(self) -> Path:
        return self.etc / "slurm.conf"

    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def client_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.env())
        return env

    def run(self, *command: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(list(command), env=self.client_env(), capture_output=True, text=True,
                                timeout=timeout)
        if check and result.returncode != 0:
            raise ClusterError(f"{' '.join(command)} failed ({result.returncode}): {result.stdout}{result.stderr}")
        return result

    # --- start -------------------------------------------------------------------------------------------------
    def start(self, timeout: float = 90) -> dict:
        if os.geteuid() != 0:
            raise ClusterError("starting the cluster needs root (daemons run as root, SlurmUser=root)")
        if self.state_file.exists() and any(self._alive(name) for name in DAEMONS):
            raise ClusterError(f"a cluster is already running in {self.root}; stop it first")
        deadline = time.monotonic() + timeout
        for folder in (self.etc, self.logs, self.pids, self.root / "munge", self.root / "state",
                       self.root / "spool", self.root / "mysql"):
            folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)  # munged and mariadbd refuse group/other-writable paths; jobs need to read logs
        host = socket.gethostname().split(".")[0]
        ports = {"slurmctld": _free_port(), "slurmd": _free_port(), "slurmdbd": _free_port(), "mysql": _free_port()}
        state = {"host": host, "ports": ports, "cluster": CLUSTER, "account": ACCOUNT, "partitions": PARTITIONS,
                 "slurm_conf": str(self.conf)}
        self.state_file.write_text(json.dumps(state, indent=2))
        try:
            self._start_munge()
            self._start_mariadb(ports["mysql"], deadline)
            self._write_configs(host, ports)
            self._start_slurmdbd(deadline)
            self._start("slurmctld", [_which("slurmctld"), "-D", "-f", str(self.conf)])
            # slurmd runs "configless": it fetches slurm.conf from slurmctld and caches it in /run/slurm/conf, where
            # SLURM's commands look when SLURM_CONF is unset (the executor plugin's jobstep strips SLURM_* variables
            # before calling srun inside a job, so srun can only find the cluster there).
            self._start("slurmd", [_which("slurmd"), "-D", "--conf-server", f"127.0.0.1:{ports['slurmctld']}",
                                   "-N", host])
            self._wait_idle(host, deadline)
        except BaseException:
            self.stop()
            raise
        return state

    def _start(self, name: str, command: list[str]) -> int:
        log = open(self.logs / f"{name}.out", "ab")
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   env=self.client_env(), start_new_session=True, cwd=self.root)
        (self.pids / f"{name}.pid").write_text(str(process.pid))
        return process.pid

    def _munge_answers(self) -> bool:
        encoded = subprocess.run(["munge", "-n", "-S", str(MUNGE_SOCKET)], capture_output=True)
        if encoded.returncode != 0:
            return False
        return subprocess.run(["unmunge", "-S", str(MUNGE_SOCKET)], input=encoded.stdout,
                              capture_output=True).returncode == 0

    def _start_munge(self) -> None:
        # SLURM's clients (sacctmgr's connection to slurmdbd among them) talk to munged on its default socket, so
        # that is where it must run: reuse a munged that already answers there, else start our own with a fresh key.
        if self._munge_answers():
            return
        key = self.root / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        os.chmod(key, 0o400)
        os.chmod(self.root / "munge", 0o700)
        MUNGE_SOCKET.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(MUNGE_SOCKET.parent, 0o755)
        self._start("munged", [_which("munged"), "--foreground", "--force", f"--socket={MUNGE_SOCKET}",
                               f"--key-file={key}", f"--pid-file={self.root / 'munge' / 'munged.pid'}",
                               f"--log-file={self.logs / 'munged.log'}", f"--seed-file={self.root / 'munge' / 'seed'}"])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self._munge_answers():
                return
            self._check_alive("munged", self.logs / "munged.log")
            time.sleep(0.2)
        raise ClusterError(f"munged did not answer; see {self.logs / 'munged.log'}")

    @property
    def mysql_socket(self) -> Path:
        return self.root / "mysql" / "mysqld.sock"

    def _start_mariadb(self, port: int, deadline: float) -> None:
        datadir = self.root / "mysql" / "data"
        subprocess.run([_which("mariadb-install-db"), "--no-defaults", f"--datadir={datadir}", "--user=root",
                        "--auth-root-authentication-method=socket", "--skip-test-db"],
                       check=True, capture_output=True, timeout=max(5.0, deadline - time.monotonic()))
        self._start("mariadbd", [_which("mariadbd"), "--no-defaults", f"--datadir={datadir}", "--user=root",
                                 f"--socket={self.mysql_socket}", f"--pid-file={self.root / 'mysql' / 'mysqld.pid'}",
                                 f"--port={port}", "--bind-address=127.0.0.1", "--skip-name-resolve",
                                 "--innodb-buffer-pool-size=64M", "--skip-log-bin",
                                 f"--log-error={self.logs / 'mariadb.log'}"])
        while True:
            ping = subprocess.run([_which("mariadb"), "--no-defaults", "-S", str(self.mysql_socket), "-u", "root",
                                   "-e", "SELECT 1"], capture_output=True)
            if ping.returncode == 0:
                break
            self._check_alive("mariadbd", self.logs / "mariadb.log")
            if time.monotonic() > deadline:
                raise ClusterError(f"MariaDB did not start; see {self.logs / 'mariadb.log'}")
            time.sleep(0.3)
        self.db_password = secrets.token_hex(12)
        sql = ("CREATE DATABASE IF NOT EXISTS slurm_acct_db; "
               f"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{self.db_password}'; "
               "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;")
        subprocess.run([_which("mariadb"), "--no-defaults", "-S", str(self.mysql_socket), "-u", "root", "-e", sql],
                       check=True, capture_output=True)

    def _write_configs(self, host: str, ports: dict) -> None:
        cpus = os.cpu_count() or 1
        memory_mb = int(_available_memory_mb() * 0.8)
        slurm_conf = f"""\
# Written by scripts/slurm_cluster.py: a single-node cluster on localhost; everything lives in {self.root}.
ClusterName={CLUSTER}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ports['slurmctld']}
SlurmdPort={ports['slurmd']}
SlurmUser=root
SlurmdUser=root
SlurmctldParameters=enable_configless
AuthType=auth/munge
# A requeued (e.g. preempted) job may start again after cred_expire seconds (default 120).
AuthInfo=cred_expire=10
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MailProg=/bin/true
StateSaveLocation={self.root / 'state'}
SlurmdSpoolDir={self.root / 'spool'}
SlurmctldPidFile={self.pids / 'slurmctld.daemon.pid'}
SlurmdPidFile={self.pids / 'slurmd.daemon.pid'}
SlurmctldLogFile={self.logs / 'slurmctld.log'}
SlurmdLogFile={self.logs / 'slurmd.log'}
SlurmctldDebug=info
SlurmdDebug=info
JobCompType=jobcomp/filetxt
JobCompLoc={self.logs / 'jobcomp.txt'}
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={ports['slurmdbd']}
# sacct shows Snakemake's per-job comment (rule and wildcards).
AccountingStoreFlags=job_comment
# Finished jobs stay visible to squeue for 5 minutes (the executor plugin's squeue fallback needs that).
MinJobAge=300
KillWait=30
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
# Jobs in `urgent` preempt jobs in the other partitions: a preempted job gets SIGTERM (SIGKILL KillWait seconds
# later) and goes back to the queue if it was submitted with --requeue (profiles/slurm does that).
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP DefMemPerCPU=1000 PriorityTier=1
PartitionName=fedavail Nodes=ALL Default=NO MaxTime=INFINITE State=UP DefMemPerCPU=1000 PriorityTier=1
PartitionName=urgent Nodes=ALL Default=NO MaxTime=INFINITE State=UP DefMemPerCPU=1000 PriorityTier=10
"""
        self.conf.write_text(slurm_conf)
        dbd_conf = self.etc / "slurmdbd.conf"
        dbd_conf.write_text(f"""\
AuthType=auth/munge
DbdHost={host}
DbdAddr=127.0.0.1
DbdPort={ports['slurmdbd']}
SlurmUser=root
PidFile={self.pids / 'slurmdbd.daemon.pid'}
LogFile={self.logs / 'slurmdbd.log'}
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={ports['mysql']}
StorageUser=slurm
StoragePass={self.db_password}
StorageLoc=slurm_acct_db
""")
        os.chmod(dbd_conf, 0o600)

    def _start_slurmdbd(self, deadline: float) -> None:
        self._start("slurmdbd", [_which("slurmdbd"), "-D"])  # reads slurmdbd.conf next to $SLURM_CONF
        while True:
            probe = self.run("sacctmgr", "-n", "-P", "show", "cluster", check=False, timeout=10)
            if probe.returncode == 0:
                break
            self._check_alive("slurmdbd", self.logs / "slurmdbd.log")
            if time.monotonic() > deadline:
                raise ClusterError(f"slurmdbd did not answer: {probe.stderr}")
            time.sleep(0.3)
        # The cluster and an account must exist in the database before slurmctld registers.
        self.run("sacctmgr", "-i", "add", "cluster", CLUSTER)
        self.run("sacctmgr", "-i", "add", "account", ACCOUNT, f"cluster={CLUSTER}", "description=tests",
                 "organization=fedavail")
        user = os.environ.get("USER") or "root"
        self.run("sacctmgr", "-i", "add", "user", user, f"account={ACCOUNT}", f"cluster={CLUSTER}", check=False)

    def _wait_idle(self, host: str, deadline: float) -> None:
        while True:
            info = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False, timeout=10)
            states = dict(line.split()[:2] for line in info.stdout.splitlines() if len(line.split()) >= 2)
            if states.get(host, "").rstrip("*") in ("idle", "mix", "alloc"):
                return
            self._check_alive("slurmctld", self.logs / "slurmctld.log")
            self._check_alive("slurmd", self.logs / "slurmd.log")
            if time.monotonic() > deadline:
                raise ClusterError(f"node {host} not idle in time (sinfo: {info.stdout}{info.stderr})")
            time.sleep(0.3)

    # --- processes ---------------------------------------------------------------------------------------------
    def _pid(self, name: str) -> int | None:
        path = self.pids / f"{name}.pid"
        try:
            return int(path.read_text().strip())
        except (OSError, ValueError):
            return None

    def _alive(self, name: str) -> bool:
        pid = self._pid(name)
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        # A zombie (our own exited child) counts as dead.
        try:
            return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
        except OSError:
            return False

    def _check_alive(self, name: str, log: Path | None = None) -> None:
        if not self._alive(name):
            tail = ""
            for path in (log, self.logs / f"{name}.out"):
                if path is not None and path.exists():
                    tail += f"\n--- {path} ---\n" + "\n".join(path.read_text(errors="replace").splitlines()[-20:])
            raise ClusterError(f"{name} exited during start-up{tail}")

    def stop(self, timeout: float = 30) -> None:
        """Cancel this cluster's jobs, then stop the daemons we started, newest first, by their PIDs."""
        if self._alive("slurmctld"):
            jobs = self.run("squeue", "-h", "-o", "%i", check=False, timeout=10).stdout.split()
            if jobs:
                self.run("scancel", *jobs, check=False, timeout=10)
                end = time.monotonic() + 10
                while time.monotonic() < end and self.run("squeue", "-h", "-o", "%i", check=False,
                                                          timeout=10).stdout.split():
                    time.sleep(0.5)
        for name in reversed(DAEMONS):
            pid = self._pid(name)
            if pid is None or not self._alive(name):
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            end = time.monotonic() + timeout / len(DAEMONS)
            while time.monotonic() < end and self._alive(name):
                time.sleep(0.1)
            if self._alive(name):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            (self.pids / f"{name}.pid").unlink(missing_ok=True)
        # slurmd's configless cache link, if it is ours.
        link = Path("/run/slurm/conf")
        if link.is_symlink() and str(os.readlink(link)).startswith(str(self.root)):
            link.unlink()

    def status(self) -> str:
        alive = {name: self._alive(name) for name in DAEMONS}
        text = "daemons: " + ", ".join(f"{n}={'up' if up else 'down'}" for n, up in alive.items()) + "\n"
        if alive["slurmctld"]:
            text += self.run("sinfo", check=False).stdout + self.run("squeue", check=False).stdout
        return text


def _available_memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return 2048


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop", "status", "env"])
    parser.add_argument("dir", type=Path, help="folder for configs, state, logs, PIDs (created)")
    parser.add_argument("--timeout", type=float, default=90, help="seconds for start-up (default 90)")
    args = parser.parse_args(argv)
    cluster = Cluster(args.dir)
    try:
        if args.action == "start":
            state = cluster.start(args.timeout)
            print(f"# SLURM cluster {state['cluster']} up on {state['host']}; partitions {', '.join(PARTITIONS)}; "
                  f"account {ACCOUNT}", file=sys.stderr)
            print(f"export SLURM_CONF={cluster.conf}")
        elif args.action == "env":
            print(f"export SLURM_CONF={cluster.conf}")
        elif args.action == "status":
            print(cluster.status(), end="")
        else:
            cluster.stop()
    except ClusterError as error:
        print(f"slurm_cluster: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
