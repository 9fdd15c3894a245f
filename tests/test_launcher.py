"""`fedavail train` runs with malloc settings that keep freed memory (set before the process starts)."""

import os
import subprocess
import sys

import pytest

from fedavail import cli, launcher
from fedavail.launcher import MALLOC_SETTINGS


def test_a_process_without_the_settings_reexecutes_itself_with_them():
    env = {k: v for k, v in os.environ.items() if k not in MALLOC_SETTINGS}
    show = "import os; print(os.environ['MALLOC_TRIM_THRESHOLD_'], os.environ['MALLOC_MMAP_THRESHOLD_'])"
    code = (f"import sys; from fedavail.launcher import ensure_malloc_settings; "
            f"ensure_malloc_settings([sys.executable, '-c', {show!r}]); print('not re-executed')")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.split() == [MALLOC_SETTINGS["MALLOC_TRIM_THRESHOLD_"],
                                     MALLOC_SETTINGS["MALLOC_MMAP_THRESHOLD_"]]


def test_the_train_stage_asks_for_the_settings_before_it_starts(monkeypatch, tmp_path):
    commands = []
    monkeypatch.setattr(launcher, "ensure_malloc_settings", commands.append)
    monkeypatch.setattr(sys, "argv", ["fedavail", "train", "--prepared", str(tmp_path / "missing.pt"), "--partition",
                                      "p", "--trace", "t", "--out-dir", str(tmp_path), "--spec", "{}"])
    with pytest.raises(KeyError):
        cli.main()
    assert commands == [[sys.executable, "-m", "fedavail", *sys.argv[1:]]]
