"""The train labels of a prepared dataset (fedavail.data.prepared), read without torch: they are all a partition job
needs, and importing torch would take most of its time. A prepared file is torch.save's zip archive: `data.pkl`, a
pickle whose tensors name their storages, and one raw little-endian record per storage under `data/`. The unpickler
accepts only the globals a prepared dataset holds (as torch.load's weights_only does), so a shared file cannot run
code; only the storages asked for are read."""

import collections
import io
import os
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedavail.io import reading

# torch's storage classes as data.pkl names them -> the little-endian dtype of their records
_STORAGE_DTYPES = {
    "BoolStorage": "?", "ByteStorage": "<u1", "CharStorage": "<i1", "ShortStorage": "<i2", "IntStorage": "<i4",
    "LongStorage": "<i8", "HalfStorage": "<f2", "FloatStorage": "<f4", "DoubleStorage": "<f8",
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):  # a tensor, its storage not read yet
            return lambda storage, offset, shape, stride, *_grad_hooks_metadata: (storage, offset, shape, stride)
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module == "torch" and name in _STORAGE_DTYPES:
            return np.dtype(_STORAGE_DTYPES[name])
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a prepared dataset; refused")

    def persistent_load(self, pid) -> tuple[np.dtype, str, int]:
        """A storage, not read yet: (dtype, its record under data/, numel)."""
        kind, dtype, key, _location, numel = pid
        if kind != "storage" or not isinstance(dtype, np.dtype):
            raise pickle.UnpicklingError(f"unexpected persistent id {pid!r}")
        return dtype, str(key), int(numel)


def _array(archive: zipfile.ZipFile, prefix: str, tensor: tuple) -> np.ndarray:
    (dtype, key, numel), offset, shape, stride = tensor
    storage = np.frombuffer(archive.read(f"{prefix}data/{key}"), dtype, numel)
    strides = [s * dtype.itemsize for s in stride]
    view = np.lib.stride_tricks.as_strided(storage[offset:], shape, strides, writeable=False)
    return view.astype(dtype.newbyteorder("="))  # a native-order copy


@dataclass
class TrainLabels:
    num_classes: int
    train_y: np.ndarray  # int64 [N]
    train_groups: np.ndarray | None  # int64 [N]: natural client ids, where the dataset has them


def load_train_labels(path: str | os.PathLike) -> TrainLabels:
    """num_classes, train_y and train_groups of the prepared dataset at `path`, as numpy arrays."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"prepared dataset {path} does not exist; run the prepare stage first")
    with reading(path, "prepared dataset"), zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        pickled = next((n for n in names if n.endswith("/data.pkl")), None)
        if pickled is None:
            raise ValueError("it is not a torch.save archive (no data.pkl)")
        prefix = pickled.removesuffix("data.pkl")
        # torch reads an archive without a byteorder record as little-endian too
        if f"{prefix}byteorder" in names and archive.read(f"{prefix}byteorder") != b"little":
            raise ValueError("its tensors are not little-endian")
        data = _Unpickler(io.BytesIO(archive.read(pickled))).load()
        num_classes, y = int(data["num_classes"]), _array(archive, prefix, data["train_y"])
        groups = None if data.get("train_groups") is None else _array(archive, prefix, data["train_groups"])
        if y.dtype != np.int64 or y.ndim != 1:
            raise ValueError(f"train_y must be int64 [N], got {y.dtype} {list(y.shape)}")
        if len(y) and (y.min() < 0 or y.max() >= num_classes):
            raise ValueError(f"train_y has labels outside [0, {num_classes})")
        if groups is not None and groups.shape != y.shape:
            raise ValueError(f"train_groups has shape {list(groups.shape)}, train_y {list(y.shape)}")
    return TrainLabels(num_classes, y, groups)
