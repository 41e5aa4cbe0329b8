"""A tiny stand-in for torch, for ncclwiz's tests on machines without GPUs.

It implements only what validate/collective.py and probe.py use, on plain
Python lists, so that the real script runs end to end: several real rank
processes (started by testdata/fake/torchrun) exchange data through files in
FAKE_TORCH_STORE (see torch/distributed). Knobs, all from the environment:

  FAKE_TORCH        "cpu" (no CUDA build), "nocuda" (no device visible)
  FAKE_GPUS         device count (default 8)
  FAKE_GPU_NAME     device name (default "NVIDIA H100 80GB HBM3")
"""

import os
import time
from types import SimpleNamespace

__version__ = "2.5.1+fake"

_mode = os.environ.get("FAKE_TORCH", "")


class _DType:
    def __init__(self, name, kind):
        self.name, self.kind = name, kind

    def __repr__(self):
        return "torch." + self.name


float32 = _DType("float32", float)
float64 = _DType("float64", float)
int64 = _DType("int64", int)
bool_ = _DType("bool", bool)


class device:  # noqa: N801 - mirrors torch.device
    def __init__(self, kind, index=0):
        self.type, self.index = kind, index


class Tensor:
    def __init__(self, data, dtype):
        self.data, self.dtype = list(data), dtype

    def _other(self, o):
        return o.data if isinstance(o, Tensor) else [o] * len(self.data)

    def _bin(self, o, fn, dtype=None):
        return Tensor([fn(a, b) for a, b in zip(self.data, self._other(o))], dtype or self.dtype)

    def __add__(self, o):
        return self._bin(o, lambda a, b: a + b)

    __radd__ = __add__

    def __mul__(self, o):
        return self._bin(o, lambda a, b: a * b)

    __rmul__ = __mul__

    def __mod__(self, o):
        return self._bin(o, lambda a, b: a % b)

    def __ne__(self, o):
        return self._bin(o, lambda a, b: a != b, bool_)

    def __eq__(self, o):
        return self._bin(o, lambda a, b: a == b, bool_)

    __hash__ = None

    def __len__(self):
        return len(self.data)

    def to(self, dtype):
        return Tensor([dtype.kind(x) for x in self.data], dtype)

    def sum(self):
        return Tensor([sum(self.data)], int64 if self.dtype is bool_ else self.dtype)

    def item(self):
        return self.data[0]


def _n(size):
    return size[0] if isinstance(size, (tuple, list)) else size


def arange(n, device=None, dtype=int64):
    return Tensor(range(n), dtype)


def zeros(n, dtype=float32, device=None):
    return Tensor([dtype.kind(0)] * _n(n), dtype)


def empty(n, dtype=float32, device=None):
    return zeros(n, dtype, device)


def tensor(values, dtype=float32, device=None):
    return Tensor([dtype.kind(v) for v in values], dtype)


def cat(tensors):
    out = []
    for t in tensors:
        out.extend(t.data)
    return Tensor(out, tensors[0].dtype)


version = SimpleNamespace(cuda=None if _mode == "cpu" else "12.4")


class _Event:
    def __init__(self, enable_timing=False):
        self.t = 0.0

    def record(self):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


def _count():
    if _mode in ("cpu", "nocuda"):
        return 0
    return int(os.environ.get("FAKE_GPUS", "8"))


def _set_device(i):
    if i >= _count():
        raise RuntimeError("CUDA error: invalid device ordinal")


cuda = SimpleNamespace(
    is_available=lambda: _count() > 0,
    device_count=_count,
    set_device=_set_device,
    synchronize=lambda: None,
    Event=_Event,
    get_device_properties=lambda d: SimpleNamespace(
        name=os.environ.get("FAKE_GPU_NAME", "NVIDIA H100 80GB HBM3"), major=9, minor=0),
    nccl=SimpleNamespace(version=lambda: (2, 21, 5)),
)
