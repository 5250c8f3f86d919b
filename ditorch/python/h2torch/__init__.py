"""H2 devices in PyTorch.

``import h2torch`` loads libh2torch into this process's PyTorch: H2 is then PyTorch's
``privateuseone`` device, and a model moves onto any certified H2 plugin with
``model.to("privateuseone")``. Which H2 device an index means comes from ``H2_TORCH_DEVICES``
(``"cpu-reference:0,ascend:0"``) or, by default, every device of every plugin in ``h2 devices``
order. Operators without an H2 kernel run on the CPU and are counted (``fallback_counts()``);
``H2_TORCH_FALLBACK=error`` makes them an error naming the operator.
"""

import ctypes
import json
import os

import torch

from . import _library

__all__ = ["device", "device_count", "device_label", "synchronize", "memory_stats", "fallback_counts"]


def _load():
    # H2TORCH_LIBRARY overrides where the library is; otherwise the one this package was built or
    # installed with, then the loader's path.
    candidates = [os.environ.get("H2TORCH_LIBRARY"), _library.PATH, "libh2torch.so"]
    errors = []
    for path in candidates:
        if not path:
            continue
        try:
            # RTLD_GLOBAL: the library's operator registrations and PyTorch's share one dispatcher.
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise ImportError("h2torch: libh2torch could not be loaded (" + "; ".join(errors) +
                      "); build H2 with DiTorch, or set H2TORCH_LIBRARY to the library's path")


_lib = _load()
_lib.h2torch_last_error.restype = ctypes.c_char_p
for _name in ("h2torch_device_label", "h2torch_memory_stats_json", "h2torch_fallback_counts_json"):
    getattr(_lib, _name).restype = ctypes.c_char_p
_lib.h2torch_device_label.argtypes = [ctypes.c_int]
_lib.h2torch_memory_stats_json.argtypes = [ctypes.c_int]


def _raise():
    raise RuntimeError("h2torch: " + _lib.h2torch_last_error().decode())


def _text(result):
    if result is None:
        _raise()
    return result.decode()


def device_count():
    """The number of H2 devices PyTorch sees."""
    count = ctypes.c_int()
    if _lib.h2torch_device_count(ctypes.byref(count)) != 0:
        _raise()
    return count.value


def device(index=0):
    """PyTorch's device for H2 device ``index`` (``privateuseone:index``)."""
    if not 0 <= index < device_count():
        raise IndexError(f"h2torch: privateuseone:{index} does not exist: H2 has {device_count()} device(s)")
    return torch.device("privateuseone", index)


def device_label(index=0):
    """The H2 device behind ``privateuseone:index``, as ``plugin:index``."""
    return _text(_lib.h2torch_device_label(index))


def synchronize():
    """Waits for all work queued on every H2 device."""
    if _lib.h2torch_synchronize() != 0:
        _raise()


def memory_stats(index=0):
    """The caching allocator's statistics of H2 device ``index`` (bytes and counts)."""
    return json.loads(_text(_lib.h2torch_memory_stats_json(index)))


def fallback_counts():
    """How often each operator without an H2 kernel ran on the CPU, e.g. {"aten::cumsum.out": 2}."""
    return json.loads(_text(_lib.h2torch_fallback_counts_json()))
