"""The papers' raw dataset files: where they come from, their checksums, and fetching them safely.

Files placed by hand (an air-gapped cluster) are verified without touching the network. A file whose checksum does not
match is removed before the error is raised, and a download is renamed into place only once complete and verified."""

import hashlib
import http.client
import urllib.error
import urllib.request
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fedavail import __version__
from fedavail.io import atomic_path

DOWNLOAD_TIMEOUT_S = 60
_CHUNK = 1 << 20


class DatasetError(RuntimeError):
    pass


@contextmanager
def unreadable_as_error(path: Path, what: str, errors: tuple, advice: str = ""):
    """Any of `errors` raised while reading `path` becomes a DatasetError naming the file and the problem."""
    try:
        yield
    except errors as error:
        raise DatasetError(f"{path} is not a readable {what} ({error}){advice}") from error


@dataclass(frozen=True)
class RawFile:
    filename: str
    urls: tuple[str, ...]  # tried in order
    md5: str | None  # None: no published checksum exists


@dataclass(frozen=True)
class DatasetSource:
    files: tuple[RawFile, ...]
    homepage: str


_FASHION_MNIST_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
_SVHN_URL = "http://ufldl.stanford.edu/housenumbers/"
_CINIC_URL = "https://datashare.ed.ac.uk/bitstream/handle/10283/3192/CINIC-10.tar.gz"
_GUTENBERG_URL = "https://www.gutenberg.org/files/100/old/"


def _raw(url: str, md5: str) -> RawFile:
    return RawFile(url.rsplit("/", 1)[1], (url,), md5)


# Checksums of Fashion-MNIST, CIFAR-10 and SVHN are the ones torchvision's dataset classes verify against.
DATASETS: dict[str, DatasetSource] = {
    "fashion_mnist": DatasetSource((
        _raw(_FASHION_MNIST_URL + "train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
        _raw(_FASHION_MNIST_URL + "train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe"),
        _raw(_FASHION_MNIST_URL + "t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79"),
        _raw(_FASHION_MNIST_URL + "t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310"),
    ), "https://github.com/zalandoresearch/fashion-mnist"),
    "cifar10": DatasetSource((
        _raw("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a"),
    ), "https://www.cs.toronto.edu/~kriz/cifar.html"),
    "svhn": DatasetSource((
        _raw(_SVHN_URL + "train_32x32.mat", "e26dedcc434d2e4c54c9b2d4a06d8373"),
        _raw(_SVHN_URL + "test_32x32.mat", "eb5a983be6a315427106f1b164d9cef3"),
    ), _SVHN_URL),
    # The checksum published with the official archive on the Edinburgh DataShare record.
    "cinic10": DatasetSource((_raw(_CINIC_URL, "6ee4d0c996905fe93221de577967a372"),),
                             "https://github.com/BayesWatch/cinic-10"),
    # Project Gutenberg publishes no checksum for this file, so it cannot be verified; prepare records the sha256 of
    # the copy actually used in the prepared dataset's provenance instead. Gutenberg has since moved the old release
    # one folder down, the second URL.
    "shakespeare_leaf": DatasetSource((
        RawFile("1994-01-100.zip", (_GUTENBERG_URL + "1994-01-100.zip", _GUTENBERG_URL + "old/1994-01-100.zip"), None),
    ), "https://github.com/TalwalkarLab/leaf/tree/master/data/shakespeare"),
}


# LEAF's Shakespeare JSON output (fedavail.data.leaf): no published copy to fetch, files placed by hand.
PLACED_BY_HAND = "shakespeare_leaf_json"
LEAF_TRAIN_PATTERN, LEAF_TEST_PATTERN = "all_data_*_train_*.json", "all_data_*_test_*.json"


def source(name: str) -> DatasetSource:
    if name not in DATASETS:
        raise DatasetError(f"unknown dataset {name!r}; downloadable datasets: {sorted(DATASETS)}")
    return DATASETS[name]


def file_digests(path: Path) -> dict[str, str]:
    """md5 (what the published checksums use) and sha256 of a file, in one pass."""
    md5, sha256 = hashlib.md5(), hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            md5.update(chunk)
            sha256.update(chunk)
    return {"md5": md5.hexdigest(), "sha256": sha256.hexdigest()}


def provenance(source: str, paths: list[Path]) -> dict:
    """A prepared dataset's meta: where it comes from and the digests of the raw files read."""
    return {"source": source, "files": {p.name: file_digests(p) for p in paths}}


def _integrity_problem(path: Path, filename: str, md5: str | None) -> str | None:
    """Why the file at path (to be named filename) cannot be trusted, or None if it can. Without a published checksum
    a zip archive is still checked against the CRCs of its own members, which catches truncated downloads."""
    if md5 is not None:
        actual = file_digests(path)["md5"]
        return None if actual == md5 else f"checksum mismatch: md5 {actual}, expected {md5}"
    if filename.endswith(".zip"):
        try:
            with zipfile.ZipFile(path) as archive:
                bad_member = archive.testzip()
        except zipfile.BadZipFile as error:
            return f"not a complete zip archive: {error}"
        return None if bad_member is None else f"zip member {bad_member} fails its CRC check"
    return None


def _missing_files_error(name: str, raw_dir: Path, missing: list[RawFile], reason: str) -> DatasetError:
    lines = [f"dataset {name!r}: {len(missing)} raw file(s) missing from {raw_dir} and {reason}."]
    lines += [f"  {f.filename}: put it in {raw_dir}/ ; source: {' or '.join(f.urls)}" for f in missing]
    lines.append(f"  (dataset home page: {source(name).homepage})")
    return DatasetError("\n".join(lines))


def locate(name: str, raw_dir: Path) -> list[Path]:
    """The paths of a dataset's raw files, what the prepare step reads (LEAF's JSON files: locate_placed); DatasetError
    naming each missing one, its folder and its source."""
    raw_dir = Path(raw_dir)
    if name == PLACED_BY_HAND:
        return locate_placed(raw_dir)
    files = source(name).files
    if missing := [f for f in files if not (raw_dir / f.filename).is_file()]:
        raise _missing_files_error(name, raw_dir, missing, "the prepare step does not download; run the download step")
    return [raw_dir / f.filename for f in files]


def locate_placed(raw_dir: Path) -> list[Path]:
    """[train file, test file] under raw_dir; DatasetError naming the folder and the pattern when not exactly one."""
    raw_dir = Path(raw_dir)
    found = []
    for split, pattern in (("train", LEAF_TRAIN_PATTERN), ("test", LEAF_TEST_PATTERN)):
        matches = sorted(raw_dir.rglob(pattern)) if raw_dir.is_dir() else []
        if not matches:
            raise DatasetError(
                f"dataset {PLACED_BY_HAND!r}: no LEAF Shakespeare {split} file ({pattern}) under {raw_dir}/. Place "
                f"LEAF's own output there (its data/train/ and data/test/ JSON files, written by LEAF's "
                f"data/shakespeare/preprocess.sh; home page https://github.com/TalwalkarLab/leaf)")
        if len(matches) > 1:
            raise DatasetError(f"dataset {PLACED_BY_HAND!r}: {len(matches)} {split} files match {pattern} under "
                               f"{raw_dir}/ ({', '.join(str(m) for m in matches)}); keep one")
        found.append(matches[0])
    return found


def verify(name: str, raw_dir: Path, checksums: dict[str, str] | None = None) -> list[Path]:
    """locate(), then check each file with a published checksum against it (`checksums` {filename: md5} overrides, as
    in fetch). The prepare step calls this itself: a manifest says a download once succeeded, not that the files now in
    the folder are the ones verified (and CIFAR-10's pickles must only be read from a verified archive)."""
    paths = locate(name, raw_dir)
    for raw, path in zip(source(name).files, paths):
        expected = (checksums or {}).get(raw.filename, raw.md5)
        if expected is not None and (problem := _integrity_problem(path, raw.filename, expected)):
            raise DatasetError(f"{path} does not match its published checksum ({problem}); nothing was read. Remove "
                               f"it and run the download step again, or place a good copy there.")
    return paths


def download_file(url: str, destination: Path, md5: str | None) -> None:
    """Download url to destination through a temporary file; a truncated or mismatching download never lands."""
    request = urllib.request.Request(url, headers={"User-Agent": f"fedavail/{__version__}"})
    with atomic_path(destination) as tmp:
        with urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT_S) as response, open(tmp, "wb") as out:
            expected_size = response.headers.get("Content-Length")
            while chunk := response.read(_CHUNK):
                out.write(chunk)
        size = tmp.stat().st_size
        if expected_size is not None and size != int(expected_size):
            raise DatasetError(f"partial download of {destination.name} from {url}: got {size} of {expected_size} "
                               f"bytes; nothing was kept, run the download again")
        if problem := _integrity_problem(tmp, destination.name, md5):
            raise DatasetError(f"{destination.name} downloaded from {url} is corrupt ({problem}); nothing was kept")


def fetch(name: str, raw_dir: Path, allow_network: bool = True, checksums: dict[str, str] | None = None) -> list[Path]:
    """Make dataset `name`'s raw files present and verified in raw_dir; return their paths. Files already there are
    verified, never downloaded again. `checksums` {filename: md5} overrides their md5 (tests: miniature files)."""
    if name == PLACED_BY_HAND:  # LEAF's own scripts write these files: nothing to download, only to find them
        return locate_placed(raw_dir)
    raw_dir = Path(raw_dir)
    files = source(name).files
    expected = {f.filename: (checksums or {}).get(f.filename, f.md5) for f in files}
    if unknown := set(checksums or {}) - set(expected):
        raise DatasetError(f"checksums given for files that {name!r} does not have: {sorted(unknown)}")
    missing = [f for f in files if not (raw_dir / f.filename).is_file()]
    for f in files:
        path = raw_dir / f.filename
        if f not in missing and (problem := _integrity_problem(path, f.filename, expected[f.filename])):
            path.unlink()
            raise DatasetError(f"{path} is corrupt or a partial download ({problem}). It has been removed; download it "
                               f"again or place a good copy there.")
    if missing and not allow_network:
        raise _missing_files_error(name, raw_dir, missing, "network access is disabled")
    for f in missing:
        errors = []
        for url in f.urls:
            try:
                download_file(url, raw_dir / f.filename, expected[f.filename])
                break
            except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
                errors.append(f"{url}: {error}")
        else:
            raise _missing_files_error(name, raw_dir, [f], "the download failed (" + "; ".join(errors) + ")")
    return [raw_dir / f.filename for f in files]
