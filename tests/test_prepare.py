import gzip
import io
import pickle
import tarfile

import numpy as np
import pytest
import torch

from fedavail.data import shakespeare as shk
from fedavail.data.download import DATASETS, DatasetError, fetch
from fedavail.data.prepare import prepare
from fedavail.data.prepared import channel_stats, load_prepared, save_prepared, text_windows, validate
from fedavail.data.prepared_labels import load_train_labels
from fedavail.io import UnreadableFileError

from data_fixtures import (
    CIFAR_CLASSES,
    COMPLETE_WORKS,
    md5_of,
    write_cifar10,
    write_cinic10,
    write_fashion_mnist,
    write_idx_gz,
    write_shakespeare_leaf,
    write_svhn,
)


def fetch_offline(name, raw_dir):
    """The real verification path, with the checksums of the miniature files."""
    paths = [raw_dir / f.filename for f in DATASETS[name].files]
    return fetch(name, raw_dir, allow_network=False, checksums=md5_of(*paths))


def prepare_miniature(name, raw_dir, options):
    """prepare(), verifying the miniature raw files against their own checksums instead of the published ones."""
    present = [raw_dir / f.filename for f in DATASETS[name].files if (raw_dir / f.filename).is_file()]
    return prepare(name, raw_dir, options, checksums=md5_of(*present))


def check_image_dataset(data, name, channels, size, num_train, num_test):
    validate(data)
    assert data["name"] == name and data["kind"] == "image" and data["num_classes"] == 10
    assert data["train_x"].shape == (num_train, channels, size, size) and data["train_x"].dtype == torch.uint8
    assert data["test_x"].shape == (num_test, channels, size, size) and data["test_x"].dtype == torch.uint8
    assert data["train_y"].dtype == torch.int64 and data["test_y"].dtype == torch.int64
    for key in ("train_y", "test_y"):
        assert 0 <= int(data[key].min()) and int(data[key].max()) <= 9
    mean, std = channel_stats(data["train_x"])
    assert torch.equal(data["mean"], mean) and torch.equal(data["std"], std) and data["mean"].shape == (channels,)
    assert set(data["meta"]["files"]) == {f.filename for f in DATASETS[name].files}


def test_fashion_mnist(tmp_path):
    written = write_fashion_mnist(tmp_path, np.random.default_rng(1), n_train=12, n_test=5)
    fetch_offline("fashion_mnist", tmp_path)
    data = prepare_miniature("fashion_mnist", tmp_path, {})
    check_image_dataset(data, "fashion_mnist", 1, 28, 12, 5)
    assert np.array_equal(data["train_x"][:, 0].numpy(), written["train_x"])
    assert np.array_equal(data["test_y"].numpy(), written["test_y"])


def test_fashion_mnist_rejects_files_that_are_not_idx(tmp_path):
    write_fashion_mnist(tmp_path, np.random.default_rng(1))
    write_idx_gz(tmp_path / "train-images-idx3-ubyte.gz", np.zeros((3, 4), dtype=np.uint8))  # 2 dims, not 3
    with pytest.raises(DatasetError, match="train-images-idx3-ubyte.gz is not an idx-ubyte file"):
        prepare_miniature("fashion_mnist", tmp_path, {})
    write_fashion_mnist(tmp_path, np.random.default_rng(1))
    labels = tmp_path / "t10k-labels-idx1-ubyte.gz"
    labels.write_bytes(gzip.compress(gzip.decompress(labels.read_bytes())[:-2]))
    with pytest.raises(DatasetError, match="t10k-labels-idx1-ubyte.gz: header says shape .*truncated"):
        prepare_miniature("fashion_mnist", tmp_path, {})


def test_cifar10_reads_pickle_batches_from_the_archive(tmp_path):
    written = write_cifar10(tmp_path, np.random.default_rng(2), per_batch=4)
    fetch_offline("cifar10", tmp_path)
    data = prepare_miniature("cifar10", tmp_path, {})
    check_image_dataset(data, "cifar10", 3, 32, 20, 4)
    assert np.array_equal(data["train_x"].numpy(), written["train_x"])
    assert np.array_equal(data["test_y"].numpy(), written["test_y"])
    assert data["classes"] == CIFAR_CLASSES


def test_svhn_is_nchw_with_label_10_as_0(tmp_path):
    written = write_svhn(tmp_path, np.random.default_rng(3), n_train=7, n_test=4)
    fetch_offline("svhn", tmp_path)
    data = prepare_miniature("svhn", tmp_path, {})
    check_image_dataset(data, "svhn", 3, 32, 7, 4)
    assert data["train_y"][0] == 0 and data["train_y"][1] == 1  # the fixture writes labels 10 and 1 first
    assert np.array_equal(data["train_y"].numpy(), written["train_y"].reshape(-1) % 10)
    x = written["train_x"]  # [H, W, C, N]
    assert data["train_x"][5, 2, 7, 3] == x[7, 3, 2, 5]
    assert np.array_equal(data["test_x"].numpy(), written["test_x"].transpose(3, 2, 0, 1))


@pytest.mark.parametrize("top", ["", "./"])
def test_cinic10_image_folder_archive(tmp_path, top):
    written = write_cinic10(tmp_path, np.random.default_rng(4), classes=("cat", "airplane", "dog"), per_class=2,
                            top=top)
    fetch_offline("cinic10", tmp_path)
    data = prepare_miniature("cinic10", tmp_path, {})
    validate(data)
    assert data["classes"] == ["airplane", "cat", "dog"] and data["num_classes"] == 3
    assert data["train_x"].shape == (6, 3, 32, 32) and data["test_x"].shape == (6, 3, 32, 32)
    assert data["train_x"].dtype == torch.uint8
    for split in ("train", "test"):
        # ImageFolder order: sorted classes, then sorted file names; the valid split is not used.
        expected = sorted(written[split], key=lambda s: (data["classes"].index(s[0]), s[1]))
        assert data[f"{split}_y"].tolist() == [data["classes"].index(label) for label, _, _ in expected]
        for i, (_, _, rgb) in enumerate(expected):
            assert np.array_equal(data[f"{split}_x"][i].numpy(), rgb.transpose(2, 0, 1))


def test_corrupt_cinic10_archive_is_rejected_and_removed(tmp_path):
    write_cinic10(tmp_path, np.random.default_rng(4))
    checksums = md5_of(tmp_path / "CINIC-10.tar.gz")
    archive = tmp_path / "CINIC-10.tar.gz"
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(DatasetError, match="CINIC-10.tar.gz"):
        fetch("cinic10", tmp_path, allow_network=False, checksums=checksums)
    assert not archive.exists()


def test_shakespeare_leaf_from_the_complete_works_zip(tmp_path):
    write_shakespeare_leaf(tmp_path)
    fetch("shakespeare_leaf", tmp_path, allow_network=False)
    data = prepare("shakespeare_leaf", tmp_path, {})
    validate(data)
    assert data["kind"] == "text" and data["vocab"] == shk.VOCAB and data["num_classes"] == len(shk.VOCAB) == 81
    # Only ALPHA speaks enough for a test split after LEAF's 79-sample gap.
    assert data["group_names"] == ["THE_TRAGEDY_OF_TESTING_ALPHA"]
    assert data["seq_length"] == 80 and data["train_x"].dtype == torch.int64 and data["text"].dtype == torch.uint8
    windows = text_windows(data["text"], data["train_x"], 80)
    n = sum(len(line) + 1 for line in shk.parse_complete_works(COMPLETE_WORKS)["THE_TRAGEDY_OF_TESTING_ALPHA"])
    assert len(data["train_y"]) == int(0.8 * n) and len(data["test_y"]) == n - int(0.8 * n) - 79
    assert shk.decode(data["train_y"][:6]) == "To tes"
    assert shk.decode(windows[3]) == " " * 77 + "To "
    assert data["meta"]["files"]["1994-01-100.zip"]["sha256"]
    assert shk.decode(data["test_y"]).endswith("busy.\nAnd by a test to say we end the heart-ache.\n")
    roomier = prepare("shakespeare_leaf", tmp_path, {"seq_length": 10, "min_samples": 1})
    assert roomier["seq_length"] == 10
    assert roomier["group_names"] == sorted(["THE_TRAGEDY_OF_TESTING_ALPHA", "THE_TRAGEDY_OF_TESTING_BETA",
                                             "THE_COMEDY_OF_ERRORS_DUKE"])


def test_shakespeare_leaf_rejects_a_broken_zip_and_too_many_clients(tmp_path):
    write_shakespeare_leaf(tmp_path)
    with pytest.raises(ValueError, match="num_clients=2 but only 1 roles"):
        prepare("shakespeare_leaf", tmp_path, {"num_clients": 2})
    (tmp_path / "1994-01-100.zip").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(DatasetError, match="1994-01-100.zip is not a readable zip file"):
        prepare("shakespeare_leaf", tmp_path, {})


def test_prepare_names_missing_files(tmp_path):
    write_svhn(tmp_path, np.random.default_rng(3))
    (tmp_path / "test_32x32.mat").unlink()
    with pytest.raises(DatasetError) as error:
        prepare_miniature("svhn", tmp_path, {})
    assert "test_32x32.mat" in str(error.value) and "http://ufldl.stanford.edu/housenumbers/test_32x32.mat" in str(
        error.value)
    with pytest.raises(DatasetError, match="needs raw_dir"):
        prepare("svhn", None, {})
    with pytest.raises(DatasetError, match="unknown dataset"):
        prepare("imagenet", tmp_path, {})


def test_prepared_file_round_trip(tmp_path):
    write_svhn(tmp_path / "raw", np.random.default_rng(5))
    data = prepare_miniature("svhn", tmp_path / "raw", {})
    save_prepared(tmp_path / "svhn.pt", data)
    loaded = load_prepared(tmp_path / "svhn.pt")
    assert torch.equal(loaded["train_x"], data["train_x"]) and loaded["meta"]["files"] == data["meta"]["files"]


class _Payload:
    """A pickle that, when loaded, creates a file: proof that unpickling ran code."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_wrong_checksums_are_refused_even_with_a_manifest(tmp_path):
    write_fashion_mnist(tmp_path, np.random.default_rng(1))  # well-formed files, not the published ones
    (tmp_path / "manifest.json").write_text('{"dataset": "fashion_mnist", "files": {}}')
    with pytest.raises(DatasetError, match="train-images-idx3-ubyte.gz does not match its published checksum"):
        prepare("fashion_mnist", tmp_path, {})


def test_cifar10_pickles_are_read_only_from_a_verified_archive(tmp_path):
    marker = tmp_path / "pwned"
    with tarfile.open(tmp_path / "cifar-10-python.tar.gz", "w:gz") as tar:
        payload = pickle.dumps(_Payload(marker))
        for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]:
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    (tmp_path / "manifest.json").write_text('{"dataset": "cifar10", "files": {}}')
    with pytest.raises(DatasetError, match="does not match its published checksum"):
        prepare("cifar10", tmp_path, {})
    assert not marker.exists()


def test_a_pickled_prepared_file_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "pwned"
    torch.save({"name": _Payload(marker)}, tmp_path / "evil.pt")
    # A whole torch file: the rerun's check (fedavail.integrity) keeps it, so it has to be deleted by hand.
    with pytest.raises(UnreadableFileError, match="(?s)evil.pt is unreadable .* a rerun does not set it aside: "
                                                  "delete it"):
        load_prepared(tmp_path / "evil.pt")
    assert not marker.exists()


@pytest.mark.parametrize("load", [load_prepared, load_train_labels])
@pytest.mark.parametrize("size", [0, 500])
def test_a_truncated_prepared_file_is_named(tmp_path, size, load):
    write_svhn(tmp_path / "raw", np.random.default_rng(5))
    save_prepared(tmp_path / "svhn.pt", prepare_miniature("svhn", tmp_path / "raw", {}))
    with open(tmp_path / "svhn.pt", "r+b") as f:
        f.truncate(size)
    with pytest.raises(UnreadableFileError, match=r"svhn.pt is unreadable .* delete it and rerun"):
        load(tmp_path / "svhn.pt")


def test_train_labels_read_without_torch_are_torch_s(tmp_path):
    """The partition stage's reader of torch.save's format, on labels stored as views (an offset and a stride into
    a larger storage) and with natural groups, and on text data."""
    write_svhn(tmp_path / "raw", np.random.default_rng(5))
    data = prepare_miniature("svhn", tmp_path / "raw", {})
    count = len(data["train_y"])
    data["train_y"] = torch.repeat_interleave(data["train_y"], 2)[1::2]
    data["train_groups"] = torch.arange(count + 3)[3:] % 4
    save_prepared(tmp_path / "svhn.pt", data)
    roles = {"A": ["to be or not to be"] * 20, "B": ["that is the question"] * 20}
    save_prepared(tmp_path / "text.pt", shk.build_text_dataset("shakespeare", roles, {"seq_length": 5,
                                                                                      "min_samples": 2}, {}))
    for name in ("svhn.pt", "text.pt"):
        loaded, labels = load_prepared(tmp_path / name), load_train_labels(tmp_path / name)
        assert labels.num_classes == loaded["num_classes"] and labels.train_y.dtype == np.int64
        assert np.array_equal(labels.train_y, loaded["train_y"].numpy())
        assert np.array_equal(labels.train_groups, loaded["train_groups"].numpy())


def test_the_label_reader_refuses_a_pickled_prepared_file_without_running_it(tmp_path):
    marker = tmp_path / "pwned"
    torch.save({"num_classes": 2, "train_y": torch.zeros(3, dtype=torch.int64), "name": _Payload(marker)},
               tmp_path / "evil.pt")
    with pytest.raises(UnreadableFileError, match=r"evil.pt is unreadable \(io.open is not part of a prepared dataset"):
        load_train_labels(tmp_path / "evil.pt")
    assert not marker.exists()
    torch.save({"num_classes": 2, "train_y": torch.tensor([0, 2])}, tmp_path / "labels.pt")
    with pytest.raises(UnreadableFileError, match=r"labels.pt is unreadable \(train_y has labels outside \[0, 2\)"):
        load_train_labels(tmp_path / "labels.pt")


def test_prepared_files_are_byte_identical(tmp_path):
    write_svhn(tmp_path / "raw", np.random.default_rng(5))
    data = prepare_miniature("svhn", tmp_path / "raw", {})
    save_prepared(tmp_path / "a.pt", data)
    save_prepared(tmp_path / "b.pt", data)
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()
