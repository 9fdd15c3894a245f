"""LEAF's own Shakespeare output: the JSON files the FAST authors trained on, and FL-bench, Flower and FedML read.

LEAF's preprocessing writes one train and one test file (`all_data_<options>_train_<n>.json`, `..._test_<n>.json`,
in its data/train/ and data/test/ folders), each

    {"users": [user, ...], "num_samples": [n, ...],
     "user_data": {user: {"x": [80-character strings], "y": [the character after each]}}}

Dataset `shakespeare_leaf_json` reads them from data/raw/shakespeare_leaf_json/ (any depth below it): one client per
LEAF user (the natural partition), in the order of the train file's `users`, with LEAF's train/test split as it is;
token ids are positions in LEAF's 80-character alphabet, so the Char-LSTM has LEAF's 80 classes."""

import json
from pathlib import Path

import numpy as np

from fedavail.data import download
from fedavail.data.download import DatasetError, provenance, unreadable_as_error
from fedavail.data.prepared import text_dataset
from fedavail.data.shakespeare import ALL_LETTERS, encode
from fedavail.plan.errors import shorten

NAME = download.PLACED_BY_HAND


def _as_dict(path: Path, value, lists: str) -> dict | None:
    """The dict of a JSON object read as a tuple of its (key, value) pairs (None if value is not one); a repeated key
    is refused, "<lists> <key> twice": json.load would keep only the last (a user listed twice in 'user_data')."""
    if not isinstance(value, tuple):
        return None
    result = {}
    for key, item in value:
        if key in result:
            raise DatasetError(f"{path}: {lists} {shorten(key)} twice; a JSON reader keeps only the last, so the file "
                               f"is refused")
        result[key] = item
    return result


def read_split(path: Path) -> tuple[list[str], dict[str, tuple[list[str], list[str]]]]:
    """(users in file order, {user: (x strings, y characters)}) of one LEAF JSON file, checked per user (the
    samples themselves are checked in _compact)."""
    errors = (OSError, UnicodeDecodeError, json.JSONDecodeError)
    with unreadable_as_error(path, "JSON file", errors), open(path, encoding="utf-8") as f:
        data = _as_dict(path, json.load(f, object_pairs_hook=tuple), "the top-level object lists key")
    if data is None or not {"users", "num_samples", "user_data"} <= set(data):
        raise DatasetError(f"{path}: a LEAF file is a JSON object with 'users', 'num_samples' and 'user_data'")
    users, counts = data["users"], data["num_samples"]
    user_data = _as_dict(path, data["user_data"], "'user_data' lists user")
    if not isinstance(users, list) or not users or not all(isinstance(u, str) for u in users):
        raise DatasetError(f"{path}: 'users' must be a non-empty list of user names")
    if len(listed := set(users)) < len(users):
        twice = next(user for i, user in enumerate(users) if user in users[:i])
        raise DatasetError(f"{path}: 'users' lists user {shorten(twice)} twice")
    if not isinstance(counts, list) or len(counts) != len(users) or not all(type(c) is int and c >= 0 for c in counts):
        raise DatasetError(f"{path}: 'num_samples' must hold one sample count per user ({len(users)})")
    if user_data is None:
        raise DatasetError(f"{path}: 'user_data' must be a JSON object holding each user's samples")
    if unlisted := next((u for u in user_data if u not in listed), None):
        raise DatasetError(f"{path}: 'user_data' holds user {shorten(unlisted)}, which 'users' does not list")
    samples = {}
    for user, count in zip(users, counts):
        who = f"{path}: user {shorten(user)}"
        if user not in user_data:
            raise DatasetError(f"{who} is listed in 'users' but has no entry in 'user_data'")
        entry = _as_dict(path, user_data[user], f"the 'user_data' entry of user {shorten(user)} lists key")
        if entry is None or not {"x", "y"} <= set(entry):
            raise DatasetError(f"{who}: its 'user_data' entry must be a JSON object with 'x' and 'y'")
        if not_list := next((key for key in ("x", "y") if not isinstance(entry[key], list)), None):
            raise DatasetError(f"{who}: {not_list!r} must be a list of strings, got {shorten(entry[not_list])}")
        xs, ys = entry["x"], entry["y"]
        if len(xs) != len(ys):
            raise DatasetError(f"{who} has {len(xs)} samples in 'x' but {len(ys)} targets in 'y'")
        if len(xs) != count:
            raise DatasetError(f"{who} has {len(xs)} samples but 'num_samples' records {count}")
        samples[user] = (xs, ys)
    return users, samples


def _compact(path: Path, user: str, xs: list[str], ys: list[str], seq_length: int) -> tuple[str, list[int], str]:
    """(token text, window starts, targets) of one user's checked samples. The text always ends with the last window,
    so a window that extends the previous one by a character appends that character only."""
    chunks, starts, length, who = [], [], 0, f"{path}: user {shorten(user)}"
    for index, (x, y) in enumerate(zip(xs, ys)):
        if not isinstance(x, str) or len(x) != seq_length:
            raise DatasetError(f"{who} sample {index}: x must be a {seq_length}-character string (the length of the "
                               f"first train sample), got {shorten(x)}")
        if not isinstance(y, str) or len(y) != 1:
            raise DatasetError(f"{who} sample {index}: y must be one character, got {shorten(y)}")
        if unknown := sorted(set(x + y) - set(ALL_LETTERS)):
            raise DatasetError(f"{who} sample {index}: characters {shorten(unknown)} are outside LEAF's 80-character "
                               f"alphabet")
        chunk = x[-1] if index and x[:-1] == xs[index - 1][1:] else x
        chunks.append(chunk)
        length += len(chunk)
        starts.append(length - seq_length)
    return "".join(chunks), starts, "".join(ys)


def prepare(raw_dir: Path, options: dict) -> dict:
    """The prepared dict (fedavail.data.prepared) of LEAF's Shakespeare JSON files under raw_dir."""
    if options:
        raise DatasetError(f"dataset {NAME!r} takes no preparation options (LEAF's files fix the users and the "
                           f"split), got {sorted(options)}; keep fewer clients with the natural partition's "
                           f"num_clients")
    train_path, test_path = download.locate_placed(raw_dir)
    (users, train), (test_users, test) = read_split(train_path), read_split(test_path)
    if set(users) != set(test_users):
        only_train, only_test = sorted(set(users) - set(test_users)), sorted(set(test_users) - set(users))
        raise DatasetError(f"{train_path} and {test_path} must hold the same LEAF users (only in train: "
                           f"{shorten(only_train)}; only in test: {shorten(only_test)})")
    first_user = next((user for user in users if train[user][0]), None)
    if first_user is None:
        raise DatasetError(f"{train_path}: no user has a train sample")
    first = train[first_user][0][0]
    if not isinstance(first, str) or not first:
        raise DatasetError(f"{train_path}: user {shorten(first_user)} sample 0: x must be a non-empty string (its "
                           f"length is the window length), got {shorten(first)}")
    seq_length = len(first)
    texts, parts, offset = [], {f"{split}_{key}": [] for split in ("train", "test") for key in ("x", "y", "groups")}, 0
    for group, user in enumerate(users):
        for split, path, samples in (("train", train_path, train), ("test", test_path, test)):
            text, starts, targets = _compact(path, user, *samples[user], seq_length)
            parts[f"{split}_x"].append(offset + np.asarray(starts, dtype=np.int64))
            parts[f"{split}_y"].append(encode(targets))
            parts[f"{split}_groups"].append(np.full(len(starts), group, dtype=np.int64))
            texts.append(text)
            offset += len(text)
    meta = {**provenance(f"LEAF's Shakespeare JSON ({train_path.name}, {test_path.name})", [train_path, test_path]),
            "seq_length": seq_length, "num_clients": len(users)}
    return text_dataset(NAME, ALL_LETTERS, seq_length, parts, encode("".join(texts)).astype(np.uint8), users, meta)
