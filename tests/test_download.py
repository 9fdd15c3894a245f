import hashlib
import io
import json
import os
import re
import time
import urllib.error

import numpy as np
import pytest

from fedavail.data import download, raw_digests
from fedavail.data.download import DATASETS, DatasetError, fetch
from fedavail.data.raw_digests import NOT_IN_PLACE, raw_sha256

from data_fixtures import md5_of, write_fashion_mnist, write_shakespeare_leaf

FASHION_FILES = [f.filename for f in DATASETS["fashion_mnist"].files]


@pytest.fixture
def no_network(monkeypatch):
    """Fail the test if anything tries to download."""

    def refuse(*args, **kwargs):
        raise AssertionError("the network was touched")

    monkeypatch.setattr(download, "download_file", refuse)
    monkeypatch.setattr(download.urllib.request, "urlopen", refuse)


class FakeResponse(io.BytesIO):
    def __init__(self, data: bytes, content_length: int | None = None):
        super().__init__(data)
        self.headers = {} if content_length is None else {"Content-Length": str(content_length)}


def serve(monkeypatch, data: bytes, content_length: int | None = None) -> list[str]:
    requested = []

    def urlopen(request, timeout):
        requested.append(request.full_url)
        return FakeResponse(data, content_length)

    monkeypatch.setattr(download.urllib.request, "urlopen", urlopen)
    return requested


def test_registry_describes_the_papers_datasets():
    assert set(DATASETS) == {"fashion_mnist", "cifar10", "svhn", "cinic10", "shakespeare_leaf"}
    for source in DATASETS.values():
        for f in source.files:
            assert f.urls and all(u.startswith(("http://", "https://")) for u in f.urls)
            assert f.md5 is None or re.fullmatch(r"[0-9a-f]{32}", f.md5)
    assert DATASETS["cinic10"].files[0].md5 == "6ee4d0c996905fe93221de577967a372"
    assert DATASETS["cifar10"].files[0].md5 == "c58f30108f718f92721af3b95e74349a"
    assert DATASETS["shakespeare_leaf"].files[0].md5 is None
    assert [f.filename for f in DATASETS["svhn"].files] == ["train_32x32.mat", "test_32x32.mat"]


def test_files_placed_by_hand_are_verified_without_network(tmp_path, no_network):
    write_fashion_mnist(tmp_path, np.random.default_rng(0))
    checksums = md5_of(*(tmp_path / f for f in FASHION_FILES))
    paths = fetch("fashion_mnist", tmp_path, allow_network=True, checksums=checksums)
    assert paths == [tmp_path / f for f in FASHION_FILES]


def test_zip_without_published_checksum_is_checked_by_its_own_crcs(tmp_path, no_network):
    archive = write_shakespeare_leaf(tmp_path)
    assert fetch("shakespeare_leaf", tmp_path) == [archive]
    archive.write_bytes(archive.read_bytes()[:-30])  # a truncated copy
    with pytest.raises(DatasetError, match="1994-01-100.zip is corrupt or a partial download"):
        fetch("shakespeare_leaf", tmp_path)
    assert not archive.exists()


def test_corrupt_file_is_rejected_and_removed(tmp_path, no_network):
    write_fashion_mnist(tmp_path, np.random.default_rng(0))
    checksums = md5_of(*(tmp_path / f for f in FASHION_FILES))
    bad = tmp_path / "train-images-idx3-ubyte.gz"
    bad.write_bytes(bad.read_bytes()[:-10])  # a truncated copy
    actual = md5_of(bad)[bad.name]
    with pytest.raises(DatasetError) as error:
        fetch("fashion_mnist", tmp_path, allow_network=False, checksums=checksums)
    message = str(error.value)
    assert str(bad) in message and checksums[bad.name] in message and actual in message
    assert not bad.exists()


def test_real_checksum_rejects_a_miniature(tmp_path, no_network):
    (tmp_path / "cifar-10-python.tar.gz").write_bytes(b"not the real archive")
    with pytest.raises(DatasetError, match="c58f30108f718f92721af3b95e74349a"):
        fetch("cifar10", tmp_path)
    assert not (tmp_path / "cifar-10-python.tar.gz").exists()


def test_missing_files_without_network_name_file_folder_and_source(tmp_path, no_network):
    write_fashion_mnist(tmp_path, np.random.default_rng(0))
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    (tmp_path / "train-labels-idx1-ubyte.gz").unlink()
    checksums = md5_of(tmp_path / "train-images-idx3-ubyte.gz", tmp_path / "t10k-images-idx3-ubyte.gz")
    with pytest.raises(DatasetError) as error:
        fetch("fashion_mnist", tmp_path, allow_network=False, checksums=checksums)
    message = str(error.value)
    for missing in ("t10k-labels-idx1-ubyte.gz", "train-labels-idx1-ubyte.gz"):
        line = next(line for line in message.splitlines() if missing in line)
        assert str(tmp_path) in line and f"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/{missing}" in line
    assert "train-images-idx3-ubyte.gz:" not in message


def test_unreachable_network_names_every_url_and_leaves_nothing(tmp_path, monkeypatch):
    def unreachable(request, timeout):
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(download.urllib.request, "urlopen", unreachable)
    with pytest.raises(DatasetError) as error:
        fetch("shakespeare_leaf", tmp_path)
    message = str(error.value)
    assert "1994-01-100.zip" in message and str(tmp_path) in message and "no route to host" in message
    for url in DATASETS["shakespeare_leaf"].files[0].urls:
        assert url in message
    assert list(tmp_path.iterdir()) == []


def test_download_lands_verified_file(tmp_path, monkeypatch):
    payload = b"\x1f\x8b miniature archive"
    requested = serve(monkeypatch, payload, len(payload))
    paths = fetch("cinic10", tmp_path / "raw", checksums={"CINIC-10.tar.gz": hashlib.md5(payload).hexdigest()})
    assert paths == [tmp_path / "raw" / "CINIC-10.tar.gz"] and paths[0].read_bytes() == payload
    assert requested == list(DATASETS["cinic10"].files[0].urls)
    assert sorted(p.name for p in (tmp_path / "raw").iterdir()) == ["CINIC-10.tar.gz"]


def test_download_with_wrong_checksum_leaves_nothing(tmp_path, monkeypatch):
    serve(monkeypatch, b"tampered")
    with pytest.raises(DatasetError, match="CINIC-10.tar.gz downloaded from .* is corrupt \\(checksum mismatch"):
        fetch("cinic10", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_partial_download_leaves_nothing(tmp_path, monkeypatch):
    serve(monkeypatch, b"half of it", content_length=1000)
    with pytest.raises(DatasetError, match="partial download of 1994-01-100.zip"):
        fetch("shakespeare_leaf", tmp_path)
    assert list(tmp_path.iterdir()) == []
    serve(monkeypatch, b"PK\x03\x04 a zip cut short")  # no Content-Length to tell; the zip's own structure does
    with pytest.raises(DatasetError, match="1994-01-100.zip downloaded from .* is corrupt \\(not a complete zip"):
        fetch("shakespeare_leaf", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_unknown_names_are_errors(tmp_path):
    with pytest.raises(DatasetError, match="unknown dataset 'mnist'"):
        fetch("mnist", tmp_path)
    with pytest.raises(DatasetError, match="does not have"):
        fetch("svhn", tmp_path, allow_network=False, checksums={"extra_32x32.mat": "0" * 32})


def test_raw_file_digests_are_cached_by_size_mtime_inode_and_ctime(tmp_path, monkeypatch):
    raw, cache = tmp_path / "raw", tmp_path / ".snakemake/fedavail/raw_sha256.json"
    assert raw_sha256("fashion_mnist", raw, cache) == NOT_IN_PLACE and not cache.exists()
    write_fashion_mnist(raw, np.random.default_rng(0))
    monkeypatch.setattr(raw_digests, "RACY_NS", 0)  # the files were just written; RACY_NS is tested below
    hashed = []
    sha256_of_file = raw_digests.file_sha256
    monkeypatch.setattr(raw_digests, "file_sha256", lambda path: hashed.append(path.name) or sha256_of_file(path))

    def digests():
        hashed.clear()
        return json.loads(raw_sha256("fashion_mnist", raw, cache))

    assert digests() == {f: hashlib.sha256((raw / f).read_bytes()).hexdigest() for f in FASHION_FILES}
    assert sorted(hashed) == sorted(FASHION_FILES)
    before = digests()
    assert hashed == []
    # Replaced by a file of the same size: its new modification time has it read again.
    replaced = raw / FASHION_FILES[0]
    stat = replaced.stat()
    replaced.write_bytes(bytes(stat.st_size))
    os.utime(replaced, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    after = digests()
    assert hashed == [replaced.name] and after[replaced.name] == hashlib.sha256(bytes(stat.st_size)).hexdigest()
    assert {f: d for f, d in after.items() if f != replaced.name} == {f: d for f, d in before.items()
                                                                      if f != replaced.name}
    # Replaced by other content of the same size and modification time (what `cp -p` or `rsync -a` of another file
    # gives): the inode's change time, which no copy keeps, has it read again.
    stat = replaced.stat()
    time.sleep(0.05)  # past the kernel's timestamp granularity, so that the change time ticks
    replaced.write_bytes(b"\x01" * stat.st_size)
    os.utime(replaced, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert replaced.stat().st_mtime_ns == stat.st_mtime_ns and replaced.stat().st_size == stat.st_size
    after = digests()
    assert hashed == [replaced.name] and after[replaced.name] == hashlib.sha256(b"\x01" * stat.st_size).hexdigest()
    cache.write_text("{not json")  # a damaged cache is only slower
    assert digests() == after and sorted(hashed) == sorted(FASHION_FILES)
    assert digests() == after and hashed == []
    assert [p.name for p in cache.parent.iterdir()] == [cache.name]


def test_a_file_changed_just_before_it_was_hashed_is_hashed_again(tmp_path):
    """Its change time may not have ticked yet when it changes again, so its digest is not cached."""
    path, cache = tmp_path / "record", tmp_path / "cache.json"
    path.write_bytes(b"first")
    assert raw_digests.cached_sha256([path], cache) == [hashlib.sha256(b"first").hexdigest()]
    stat = path.stat()
    path.write_bytes(b"other")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert raw_digests.cached_sha256([path], cache) == [hashlib.sha256(b"other").hexdigest()]
