"""LEAF's own Shakespeare JSON files: a miniature written here parses into one client per user with LEAF's split and
80-character alphabet, stored compactly; missing or malformed files fail naming the file and the user; replaced files
rerun the workflow's prepare step."""

import hashlib
import json

import numpy as np
import pytest
import torch
from tiny_run import copy_workflow_files, planned_jobs, snakemake

from fedavail.cli import main
from fedavail.data import leaf
from fedavail.data.download import DatasetError, fetch
from fedavail.data.prepare import prepare
from fedavail.data.prepared import load_prepared, save_prepared, text_windows
from fedavail.data.shakespeare import ALL_LETTERS
from fedavail.partitions.partition import make_partition
from fedavail.plan.errors import shorten

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
    files = json.loads((tmp_path / "m.json").read_text())["files"]
    train_file = tmp_path / "raw/train/all_data_niid_2_keep_0_train_9.json"
    assert set(files) == {train_file.name, "all_data_niid_2_keep_0_test_9.json"}
    assert files[train_file.name] == {"size": train_file.stat().st_size,
                                      "sha256": hashlib.sha256(train_file.read_bytes()).hexdigest()}


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


def _set(user: str, key: str, value):
    return lambda d: d["user_data"][user].__setitem__(key, value)


def _set_sample(user: str, key: str, index: int, value):
    return lambda d: d["user_data"][user][key].__setitem__(index, value)


def _drop_last_target(d):
    d["user_data"]["HAMLET_OPHELIA"]["y"].pop()


def _drop_target_list(d):
    d["user_data"]["HAMLET_HAMLET"].pop("y")


def _unlist_user(d):
    d["users"].remove("HAMLET_OPHELIA")
    d["num_samples"].pop()


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.pop("user_data"), "'users', 'num_samples' and 'user_data'"),
    (lambda d: d["num_samples"].pop(), r"'num_samples' must hold one sample count per user \(2\)"),
    (lambda d: d["num_samples"].__setitem__(0, "many"), r"'num_samples' must hold one sample count per user \(2\)"),
    (lambda d: d.__setitem__("user_data", []), "'user_data' must be a JSON object"),
])
def test_malformed_files_fail_naming_the_file(tmp_path, edit, message):
    path = _broken(tmp_path, edit)
    with pytest.raises(DatasetError, match=message) as error:
        prepare(leaf.NAME, tmp_path, {})
    assert str(path) in str(error.value)


@pytest.mark.parametrize("edit, user, message", [
    (_set("HAMLET_HAMLET", "x", ""), "HAMLET_HAMLET", r"'x' must be a list of strings, got ''"),
    (_set("HAMLET_OPHELIA", "y", "abc"), "HAMLET_OPHELIA", r"'y' must be a list of strings, got 'abc'"),
    # The first train sample sets the window length: an empty one made every later window fail with an IndexError.
    (_set("HAMLET_HAMLET", "x", [""] * 119), "HAMLET_HAMLET", "sample 0: x must be a non-empty string"),
    (_set_sample("HAMLET_OPHELIA", "x", 2, 7), "HAMLET_OPHELIA",
     r"sample 2: x must be a 80-character string \(.*\), got 7"),
    (_set_sample("HAMLET_HAMLET", "x", 2, "short"), "HAMLET_HAMLET", "sample 2: x must be a 80-character string"),
    (_set_sample("HAMLET_HAMLET", "y", 1, "ab"), "HAMLET_HAMLET", "sample 1: y must be one character, got 'ab'"),
    (_set_sample("HAMLET_HAMLET", "y", 4, "|"), "HAMLET_HAMLET", r"characters \['\|'\] are outside"),
    (_drop_last_target, "HAMLET_OPHELIA", r"has 98 samples in 'x' but 97 targets in 'y'"),
    (lambda d: d["num_samples"].__setitem__(0, 3), "HAMLET_HAMLET", "has 119 samples but 'num_samples' records 3"),
    (lambda d: d["user_data"].pop("HAMLET_OPHELIA"), "HAMLET_OPHELIA", "listed in 'users' but has no entry"),
    (_unlist_user, "HAMLET_OPHELIA", "'user_data' holds user 'HAMLET_OPHELIA', which 'users' does not list"),
    (_drop_target_list, "HAMLET_HAMLET", "its 'user_data' entry must be a JSON object with 'x' and 'y'"),
])
def test_each_user_is_checked_naming_the_file_and_the_user(tmp_path, edit, user, message):
    path = _broken(tmp_path, edit)
    with pytest.raises(DatasetError, match=message) as error:
        prepare(leaf.NAME, tmp_path, {})
    assert str(path) in str(error.value) and f"user {user!r}" in str(error.value)


def test_values_quoted_in_errors_are_shortened(tmp_path):
    assert shorten("abc") == "'abc'"
    assert shorten("a" * 1000) == "'" + "a" * 199 + "… (1,002 characters)"
    # A whole field's string where a list belongs, and one huge target inside the list.
    for edit in (_set("HAMLET_HAMLET", "y", "e" * 20_000_000), _set_sample("HAMLET_HAMLET", "y", 0, "e" * 20_000_000)):
        path = _broken(tmp_path, edit)
        with pytest.raises(DatasetError) as error:
            prepare(leaf.NAME, tmp_path, {})
        message = str(error.value)
        assert str(path) in message and "'HAMLET_HAMLET'" in message and "(20,000,002 characters)" in message
        assert len(message) < len(str(path)) + 400


@pytest.mark.parametrize("replace, message", [
    # A user twice in 'user_data' (json.load would keep the second entry).
    (('"HAMLET_OPHELIA": {', '"HAMLET_HAMLET": {'), "'user_data' lists user 'HAMLET_HAMLET' twice"),
    (('"users": ["HAMLET_HAMLET", "HAMLET_OPHELIA"]', '"users": ["HAMLET_HAMLET", "HAMLET_HAMLET"]'),
     "'users' lists user 'HAMLET_HAMLET' twice"),
    (('{"x": [', '{"y": [], "x": ['), "the 'user_data' entry of user 'HAMLET_HAMLET' lists key 'y' twice"),
    (('"num_samples"', '"users": [], "num_samples"'), "the top-level object lists key 'users' twice"),
])
def test_a_user_or_key_given_twice_is_refused(tmp_path, replace, message):
    write_leaf(tmp_path)
    path = tmp_path / "train" / "all_data_niid_2_keep_0_train_9.json"
    text = path.read_text()
    assert replace[0] in text
    path.write_text(text.replace(replace[0], replace[1], 1))
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


LEAF_CONFIG = """
seeds: [0]
execution: {train_threads: 1}
partitions:
  leaf_users: {dataset: shakespeare_leaf_json, scheme: natural}
traces:
  uniform: {model: fast, distribution: uniform, fraction: 0.5, num_clients: 2, rounds: 1}
algorithms:
  fedavg: {algorithm: fedavg, weighting: active, lr: 0.5}
experiments:
  leaf_tiny:
    partition: leaf_users
    trace: uniform
    algorithms: [fedavg]
    training: {model: fast_char_lstm, rounds: 1, local: {steps: 1, batch_size: 4}, eval_every: 1, last_n: 1,
               train_eval_samples: 10}
"""


def test_replaced_raw_files_rerun_prepare_and_what_reads_it(tmp_path):
    """Raw files are compared by content. The download rule places them from a staging folder here (a download's
    stand-in), so the first DAG is built before they exist."""
    workdir = copy_workflow_files(tmp_path / "workflow")
    (workdir / "config/leaf_tiny.yaml").write_text(LEAF_CONFIG)
    write_leaf(workdir / "staged")
    rules = workdir / "workflow/rules/data.smk"
    download = '"fedavail download '
    assert download in rules.read_text()
    rules.write_text(rules.read_text().replace(download, f'"cp -R staged/. data/raw/{{wildcards.dataset:q}}/ && '
                                                         f'{download[1:]}'))
    config = ("--configfile", "config/leaf_tiny.yaml")
    snakemake(workdir, "--cores", "2", *config)
    assert planned_jobs(workdir, *config) == set()
    raw = workdir / "data/raw/shakespeare_leaf_json"
    write_leaf(raw)  # the same content written again: newer files, nothing to redo
    assert planned_jobs(workdir, *config) == set()
    write_leaf(raw, train={u: _samples(t, 0, 60) for u, t in SPEECH.items()})
    assert {job.split("[")[0] for job in planned_jobs(workdir, *config)} == {
        "prepare_paper_dataset", "partition", "train", "report_experiment", "report_runs", "all"}
    snakemake(workdir, "--cores", "2", *config)
    assert planned_jobs(workdir, *config) == set()
    assert load_prepared(workdir / "data/prepared/shakespeare_leaf_json.pt")["train_x"].shape == (120,)
