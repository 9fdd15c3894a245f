"""LEAF's own Shakespeare JSON files: a miniature written here parses into one client per user with LEAF's split and
80-character alphabet, stored compactly; missing or malformed files fail naming the file."""

import json

import numpy as np
import pytest
import torch

from fedavail.cli import main
from fedavail.data import leaf
from fedavail.data.download import DatasetError, fetch
from fedavail.data.partition import make_partition
from fedavail.data.prepare import prepare
from fedavail.data.prepared import load_prepared, save_prepared, text_windows
from fedavail.data.shakespeare import ALL_LETTERS

SEQ = 80
SPEECH = {"HAMLET_HAMLET": "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer "
                           "The slings and arrows of outrageous fortune, Or to take arms against a sea of troubles",
          "HAMLET_OPHELIA": "O, what a noble mind is here o'erthrown! The courtier's, soldier's, scholar's, eye, "
                            "tongue, sword; Th' expectancy and rose of the fair state"}


def _samples(text: str, start: int, stop: int) -> tuple[list[str], list[str]]:
    """LEAF's windows: x = the 80 characters before position j, y = the character at j."""
    padded = " " * SEQ + text
    return [padded[j:j + SEQ] for j in range(start, stop)], [padded[j + SEQ] for j in range(start, stop)]


def _leaf_file(path, users: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"users": list(users), "num_samples": [len(x) for x, _ in users.values()],
            "user_data": {u: {"x": x, "y": y} for u, (x, y) in users.items()}}
    path.write_text(json.dumps(data))


def write_leaf(raw_dir, train=None, test=None):
    """A LEAF-style train/test pair: each user's first 70% of positions train, the rest test."""
    split = {u: int(0.7 * len(t)) for u, t in SPEECH.items()}
    train = train or {u: _samples(t, 0, split[u]) for u, t in SPEECH.items()}
    # The test file lists the users in another order, and its second user's samples skip one position.
    test = test or {"HAMLET_OPHELIA": _samples(SPEECH["HAMLET_OPHELIA"], split["HAMLET_OPHELIA"],
                                               len(SPEECH["HAMLET_OPHELIA"])),
                    "HAMLET_HAMLET": _skip_one(_samples(SPEECH["HAMLET_HAMLET"], split["HAMLET_HAMLET"],
                                                        len(SPEECH["HAMLET_HAMLET"])))}
    _leaf_file(raw_dir / "train" / "all_data_niid_2_keep_0_train_9.json", train)
    _leaf_file(raw_dir / "test" / "all_data_niid_2_keep_0_test_9.json", test)
    return train, test


def _skip_one(samples):
    x, y = samples
    return x[:3] + x[4:], y[:3] + y[4:]


def test_leaf_json_miniature_parses_one_client_per_user(tmp_path):
    train, test = write_leaf(tmp_path)
    data = prepare(leaf.NAME, tmp_path, {})
    assert data["kind"] == "text" and data["num_classes"] == 80 and data["vocab"] == ALL_LETTERS
    assert data["seq_length"] == SEQ and data["group_names"] == ["HAMLET_HAMLET", "HAMLET_OPHELIA"]
    for split, samples in (("train", train), ("test", test)):
        windows = text_windows(data["text"], data[f"{split}_x"], SEQ)
        groups = data[f"{split}_groups"]
        for group, user in enumerate(data["group_names"]):
            xs, ys = samples[user]
            mine = groups == group
            decoded = ["".join(ALL_LETTERS[i] for i in row) for row in windows[mine].tolist()]
            assert decoded == xs
            assert "".join(ALL_LETTERS[i] for i in data[f"{split}_y"][mine].tolist()) == "".join(ys)
    # Overlapping windows share the stream: train holds one 80-character start per user plus one character a sample,
    # test as well except for the skipped position, which starts a new window.
    train_samples = sum(len(x) for x, _ in train.values())
    test_samples = sum(len(x) for x, _ in test.values())
    assert min(len(x) for x, _ in test.values()) > 10
    assert len(data["text"]) == (train_samples + 2 * (SEQ - 1)) + (test_samples + 3 * (SEQ - 1))
    save_prepared(tmp_path / "leaf.pt", data)
    loaded = load_prepared(tmp_path / "leaf.pt")
    partition = make_partition(loaded["train_y"].numpy(), 80, {"scheme": "natural"}, 0,
                               groups=loaded["train_groups"].numpy())
    assert np.diff(partition.offsets).tolist() == [len(train["HAMLET_HAMLET"][0]), len(train["HAMLET_OPHELIA"][0])]
    assert loaded["meta"]["files"]["all_data_niid_2_keep_0_train_9.json"]["md5"]


def test_download_step_finds_placed_files_and_writes_a_manifest(tmp_path):
    write_leaf(tmp_path / "raw")
    assert [p.name for p in fetch(leaf.NAME, tmp_path / "raw", allow_network=False)] == [
        "all_data_niid_2_keep_0_train_9.json", "all_data_niid_2_keep_0_test_9.json"]
    main(["download", leaf.NAME, "--raw-dir", str(tmp_path / "raw"), "--manifest", str(tmp_path / "m.json")])
    assert set(json.loads((tmp_path / "m.json").read_text())["files"]) == {"all_data_niid_2_keep_0_train_9.json",
                                                                           "all_data_niid_2_keep_0_test_9.json"}


def test_missing_or_duplicated_files_are_named(tmp_path):
    with pytest.raises(DatasetError, match=r"no LEAF Shakespeare train file \(all_data_\*_train_\*.json\)"):
        prepare(leaf.NAME, tmp_path, {})
    write_leaf(tmp_path)
    (tmp_path / "test" / "all_data_niid_2_keep_0_test_9.json").unlink()
    with pytest.raises(DatasetError, match="test file"):
        prepare(leaf.NAME, tmp_path, {})
    write_leaf(tmp_path)
    write_leaf(tmp_path / "copy")
    with pytest.raises(DatasetError, match="2 train files"):
        prepare(leaf.NAME, tmp_path, {})


def _broken(tmp_path, edit):
    write_leaf(tmp_path)
    path = tmp_path / "train" / "all_data_niid_2_keep_0_train_9.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data) if isinstance(data, dict) else data)
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.pop("user_data"), "'users', 'num_samples' and 'user_data'"),
    (lambda d: d["num_samples"].pop(), "one count per user"),
    (lambda d: d["num_samples"].__setitem__(0, 3), "num_samples = 3 entries"),
    (lambda d: d["user_data"].pop("HAMLET_OPHELIA"), "exactly the listed users"),
    (lambda d: d["user_data"]["HAMLET_HAMLET"]["x"].__setitem__(2, "short"), "sample 2: x must be a 80-character"),
    (lambda d: d["user_data"]["HAMLET_HAMLET"]["y"].__setitem__(1, "ab"), "sample 1: y must be one character"),
    (lambda d: d["user_data"]["HAMLET_HAMLET"]["y"].__setitem__(4, "|"), r"characters \['\|'\] are outside"),
])
def test_malformed_files_fail_naming_the_file(tmp_path, edit, message):
    path = _broken(tmp_path, edit)
    with pytest.raises(DatasetError, match=message) as error:
        prepare(leaf.NAME, tmp_path, {})
    assert str(path) in str(error.value)


def test_unreadable_json_and_mismatched_users_and_options_are_rejected(tmp_path):
    path = tmp_path / "train" / "all_data_niid_2_keep_0_train_9.json"
    write_leaf(tmp_path)
    path.write_text("{not json")
    with pytest.raises(DatasetError, match="is not a readable JSON file") as error:
        prepare(leaf.NAME, tmp_path, {})
    assert str(path) in str(error.value)
    write_leaf(tmp_path, test={"HAMLET_HAMLET": _samples(SPEECH["HAMLET_HAMLET"], 120, 130)})
    with pytest.raises(DatasetError, match="same LEAF users"):
        prepare(leaf.NAME, tmp_path, {})
    write_leaf(tmp_path)
    with pytest.raises(DatasetError, match="takes no preparation options"):
        prepare(leaf.NAME, tmp_path, {"num_clients": 1})
    assert torch.equal(prepare(leaf.NAME, tmp_path, {})["train_groups"].unique(), torch.tensor([0, 1]))
