"""Lock-file GPU slots without GPUs: concurrent processes get distinct devices, a slot frees when its holder exits,
crashes or is killed, and `fedavail train --gpu-slots` picks its device before torch is imported."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedavail import gpu_slots

from workflow_helpers import REPO

pytestmark = pytest.mark.timeout(120)

HOLDER = r"""
import os, sys, time
from pathlib import Path
from fedavail.gpu_slots import claim
slot = claim(sys.argv[1])
Path(sys.argv[2]).write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "") + " " + str(slot.level if slot else -1))
while not Path(sys.argv[3]).exists():
    time.sleep(0.02)
if sys.argv[4] == "crash":
    raise RuntimeError("a training job that crashes")
"""


class Holders:
    """Processes that each claim a slot, report it, and hold it until told to exit (normally or by crashing)."""

    def __init__(self, tmp_path: Path, devices: str):
        self.tmp_path, self.env = tmp_path, {**os.environ, "CUDA_VISIBLE_DEVICES": devices}
        self.slot_dir = tmp_path / "slots"
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self, name: str, how: str = "exit") -> str:
        report = self.tmp_path / f"{name}.report"
        self.processes[name] = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(self.slot_dir), str(report), str(self.tmp_path / f"{name}.go"), how],
            env=self.env, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while not report.exists() or not report.read_text():
            assert self.processes[name].poll() is None, self.processes[name].stderr.read()
            assert time.monotonic() < deadline, f"{name} never reported its slot"
            time.sleep(0.02)
        return report.read_text()

    def finish(self, name: str) -> int:
        (self.tmp_path / f"{name}.go").touch()
        return self.processes[name].wait(timeout=60)

    def kill(self, name: str) -> None:
        self.processes[name].send_signal(signal.SIGKILL)
        self.processes[name].wait(timeout=60)

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()
            process.stderr.close()


@pytest.fixture
def holders(tmp_path):
    made = []

    def make(devices):
        made.append(Holders(tmp_path, devices))
        return made[-1]

    yield make
    for h in made:
        h.close()


def test_concurrent_jobs_get_distinct_devices_then_share_evenly(holders):
    h = holders("0,1,2")
    assert [h.start(f"job{i}") for i in range(3)] == ["0 0", "1 0", "2 0"]
    # More jobs than devices: nobody waits, the next ones double up, again spread over the devices.
    assert h.start("job3") == "0 1"
    assert h.start("job4") == "1 1"


def test_slot_is_released_on_exit_on_crash_and_on_kill(holders):
    h = holders("3,5")
    assert h.start("a") == "3 0"
    assert h.start("b", how="crash") == "5 0"
    assert h.finish("a") == 0
    assert h.start("c") == "3 0"  # a's device again, on level 0
    assert h.finish("b") != 0  # b crashed with an exception ...
    assert h.start("d", how="crash") == "5 0"  # ... and its device is free
    h.kill("c")  # SIGKILL: no Python clean-up at all
    assert h.start("e") == "3 0"


def test_no_slot_when_there_is_nothing_to_choose(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")  # e.g. SLURM gave this job one GPU
    assert gpu_slots.claim(tmp_path) is None and os.environ["CUDA_VISIBLE_DEVICES"] == "7"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert gpu_slots.claim(tmp_path, "cpu") is None and gpu_slots.claim(tmp_path, "cuda:1") is None
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_slots.visible_devices() == []
    monkeypatch.setenv("FEDAVAIL_GPUS", "4")
    assert gpu_slots.gpu_count() == 4


def test_visible_devices_from_nvidia_smi(monkeypatch):
    listing = ("GPU 0: NVIDIA H100 (UUID: GPU-aaa)\n"
               "GPU 1: NVIDIA A100 (UUID: GPU-bbb)\n"
               "  MIG 3g.40gb     Device  0: (UUID: MIG-ccc)\n"
               "  MIG 3g.40gb     Device  1: (UUID: MIG-ddd)\n")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, listing, ""))
    assert gpu_slots.visible_devices() == ["0", "MIG-ccc", "MIG-ddd"]


def test_train_claims_its_slot_before_torch_is_imported(tmp_path):
    probe = r"""
import os, sys
import fedavail.gpu_slots as gpu_slots
from fedavail.cli import main
claim = gpu_slots.claim
def spy(*args, **kwargs):
    assert "torch" not in sys.modules, "torch imported before the GPU slot was claimed"
    slot = claim(*args, **kwargs)
    print("device", os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
    raise SystemExit(0)
gpu_slots.claim = spy
main(["train", "--prepared", "x", "--partition", "x", "--trace", "x", "--out-dir", sys.argv[1], "--spec", "{}",
      "--gpu-slots", sys.argv[1] + "/slots"])
"""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "4,6"}
    result = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "device 4"


def _profile(name: str) -> dict:
    from snakemake.profiles import ProfileConfigFileParser

    with open(REPO / "profiles" / name / "config.yaml") as stream:
        return ProfileConfigFileParser().parse(stream)


def test_local_gpu_profile_caps_training_jobs_at_the_number_of_gpus(monkeypatch):
    monkeypatch.setenv("FEDAVAIL_GPUS", "3")
    assert _profile("local-gpu")["resources"] == ["gpu=3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU at all: still one training job at a time can run
    monkeypatch.delenv("FEDAVAIL_GPUS")
    assert _profile("local-gpu")["resources"] == ["gpu=1"]

