"""The bundled datasets, on the real data the packages ship."""

import numpy as np
import pytest
import torch

from fedavail.data import bundled
from fedavail.data import shakespeare as shk
from fedavail.data.prepare import prepare
from fedavail.data.prepared import text_windows, validate


def class_counts(labels: torch.Tensor) -> list[int]:
    return torch.bincount(labels, minlength=10).tolist()


def test_mnist5k():
    data = validate(prepare("mnist5k", None, {}))
    assert data["train_x"].shape == (4000, 1, 28, 28) and data["test_x"].shape == (1000, 1, 28, 28)
    assert data["train_x"].dtype == torch.uint8 and int(data["train_x"].max()) == 255
    assert class_counts(data["train_y"]) == [400] * 10 and class_counts(data["test_y"]) == [100] * 10


def test_digits():
    data = validate(prepare("digits", None, {}))
    assert data["train_x"].shape[1:] == (1, 8, 8) and len(data["train_x"]) + len(data["test_x"]) == 1797
    assert data["train_x"].dtype == torch.uint8 and int(data["train_x"].max()) == 255
    from sklearn.datasets import load_digits

    per_class = np.bincount(load_digits().target)
    assert class_counts(data["test_y"]) == [int(round(0.2 * n)) for n in per_class]  # stratified
    again = bundled.digits()
    assert torch.equal(again["test_x"], data["test_x"]) and torch.equal(again["train_y"], data["train_y"])


@pytest.fixture(scope="module")
def package_roles():
    roles = {}
    for path in bundled.shakespeare_texts():
        roles.update(shk.parse_play(path.read_text(encoding="utf-8", errors="replace"))[1])
    return roles


def test_shakespeare_package_roles_and_cut_off(package_roles):
    # 37 plays of the package (the sonnets and four other poems have no roles).
    plays = {cid.rsplit("_", 1)[0] for cid in package_roles}
    assert len(plays) >= 37
    kept = shk.select_roles(package_roles)  # LEAF filters, min_samples=64
    samples = {cid: sum(len(shk.normalize_line(line)) + 1 for line in package_roles[cid]) for cid in kept}
    assert len(package_roles) == 1367 and len(kept) == 858 and sum(samples.values()) == 4_173_740
    fast = shk.select_roles(package_roles, num_clients=139)
    assert len(fast) == 139 and min(samples[c] for c in fast) == 9247
    assert "HAMLET__PRINCE_OF_DENMARK_HAM" in fast


def test_shakespeare_prepared(package_roles):
    data = validate(prepare("shakespeare", None, {"num_clients": 3}))
    assert data["kind"] == "text" and data["vocab"] == shk.VOCAB and data["num_classes"] == 81
    assert len(data["group_names"]) == 3 and data["seq_length"] == 80
    assert data["train_groups"].shape == data["train_y"].shape and data["test_groups"].shape == data["test_y"].shape
    for group, cid in enumerate(data["group_names"]):
        text = "".join(shk.normalize_line(line) + "\n" for line in package_roles[cid])
        train_targets = shk.decode(data["train_y"][data["train_groups"] == group])
        assert text.startswith(train_targets) and len(train_targets) == int(0.8 * len(text))
    # Within a line the window slides by one: the next window is this one shifted left, plus this target.
    windows, targets = text_windows(data["text"], data["train_x"][:2000], 80), data["train_y"][:2000]
    within_line = targets[:-1] != shk.ALL_LETTERS.index("\n")
    shifted = torch.cat([windows[:-1, 1:], targets[:-1, None]], dim=1)
    assert torch.equal(shifted[within_line], windows[1:][within_line])
    assert (windows[1:][~within_line] == shk.SPACE_ID).all()  # after a newline the window is blank again
    assert data["meta"]["source"].startswith("shakespeare 0.6 package")
