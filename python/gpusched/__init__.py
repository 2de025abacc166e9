"""gpusched's node-level library from Python, through the C ABI (gpusched_c.h) with ctypes.

No compiled extension: the module loads libgpusched_c.so from $GPUSCHED_C_LIB, or by name from
the loader's search path. Errors raise GpuschedError carrying the C status code and message.

    from gpusched import Dispatcher, Service, SimDevices
    devices = SimDevices(count=4)
    d = Dispatcher(gpus=4, services=[Service("ocr", cost_ms=20, wait_ms=10, try_ms=2)])
    with d.lease("ocr") as gpu:
        devices.compute(gpu, ms=15)
"""

import ctypes
import os
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["Dispatcher", "GpuschedError", "Service", "SimDevices", "load_library"]


class GpuschedError(RuntimeError):
    def __init__(self, code, message):
        super().__init__(f"gpusched error {code}: {message}")
        self.code = code


@dataclass
class Service:
    name: str
    cost_ms: int = 100
    wait_ms: int = 50
    try_ms: int = 10


class _ServiceConfig(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("cost_time_ms", ctypes.c_int64),
                ("wait_time_ms", ctypes.c_int64), ("try_time_ms", ctypes.c_int64)]


class _Options(ctypes.Structure):
    _fields_ = [("gpu_count", ctypes.c_int32), ("literal_release", ctypes.c_int32),
                ("max_fin_time", ctypes.c_int32), ("earliest_finish_scan", ctypes.c_int32),
                ("elapsed_budget", ctypes.c_int32), ("direct_no_lock", ctypes.c_int32),
                ("cost_learning", ctypes.c_int32), ("ema_alpha", ctypes.c_double),
                ("submit_threads", ctypes.c_int32)]


class _Lease(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_int32), ("service", ctypes.c_int32), ("ticket", ctypes.c_uint64),
                ("locked", ctypes.c_int32), ("attempts", ctypes.c_int32),
                ("requested_ns", ctypes.c_int64), ("granted_ns", ctypes.c_int64)]


class _ServiceMetrics(ctypes.Structure):
    _fields_ = [("completed", ctypes.c_uint64), ("give_ups", ctypes.c_uint64),
                ("direct_grabs", ctypes.c_uint64), ("queue_ms_mean", ctypes.c_double),
                ("queue_ms_max", ctypes.c_double), ("run_ms_mean", ctypes.c_double),
                ("run_ms_max", ctypes.c_double), ("cost_time_ms", ctypes.c_double)]


class _GpuMetrics(ctypes.Structure):
    _fields_ = [("running", ctypes.c_int32), ("started", ctypes.c_uint64),
                ("busy_ms", ctypes.c_double), ("occupancy", ctypes.c_double),
                ("mean_running", ctypes.c_double)]


_lib = None


def load_library():
    """Loads libgpusched_c.so once ($GPUSCHED_C_LIB, else the loader's search path)."""
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(os.environ.get("GPUSCHED_C_LIB", "libgpusched_c.so"))
    P = ctypes.POINTER
    lib.gpusched_last_error.restype = ctypes.c_char_p
    lib.gpusched_dispatcher_create.argtypes = [P(_Options), P(_ServiceConfig), ctypes.c_int32,
                                               P(ctypes.c_void_p)]
    lib.gpusched_dispatcher_destroy.argtypes = [ctypes.c_void_p]
    lib.gpusched_dispatcher_acquire.argtypes = [ctypes.c_void_p, ctypes.c_char_p, P(_Lease)]
    lib.gpusched_dispatcher_release.argtypes = [ctypes.c_void_p, P(_Lease)]
    lib.gpusched_dispatcher_mark.argtypes = [ctypes.c_void_p, ctypes.c_int32,
                                             P(ctypes.c_uint64), P(ctypes.c_int64)]
    lib.gpusched_dispatcher_service_metrics.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                        P(_ServiceMetrics)]
    lib.gpusched_dispatcher_gpu_metrics.argtypes = [ctypes.c_void_p, ctypes.c_int32,
                                                    P(_GpuMetrics)]
    lib.gpusched_sim_devices_create.argtypes = [ctypes.c_int32, ctypes.c_int64, ctypes.c_int32,
                                                P(ctypes.c_void_p)]
    lib.gpusched_sim_devices_destroy.argtypes = [ctypes.c_void_p]
    lib.gpusched_sim_devices_compute.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_double]
    lib.gpusched_sim_devices_memory.argtypes = [ctypes.c_void_p, ctypes.c_int32,
                                                P(ctypes.c_int64), P(ctypes.c_int64)]
    lib.gpusched_sim_devices_scale.argtypes = [ctypes.c_void_p, ctypes.c_int32,
                                               P(ctypes.c_float), ctypes.c_int64, ctypes.c_float]
    _lib = lib
    return lib


def _check(code):
    if code != 0:
        raise GpuschedError(code, _lib.gpusched_last_error().decode())


def _struct_dict(s):
    return {name: getattr(s, name) for name, _ in s._fields_}


class Dispatcher:
    """The CN113051059B real-time dispatcher over `gpus` GPUs, on the real clock.

    Thread-safe: call lease()/acquire() from many Python threads (ctypes releases the GIL
    while a call blocks)."""

    def __init__(self, gpus, services, **options):
        lib = load_library()
        opts = _Options(gpu_count=gpus, **options)
        arr = (_ServiceConfig * len(services))(
            *[_ServiceConfig(s.name.encode(), s.cost_ms, s.wait_ms, s.try_ms) for s in services])
        handle = ctypes.c_void_p()
        _check(lib.gpusched_dispatcher_create(ctypes.byref(opts), arr, len(services),
                                              ctypes.byref(handle)))
        self._h = handle
        self.gpus = gpus

    def close(self):
        if self._h:
            _lib.gpusched_dispatcher_destroy(self._h)
            self._h = None

    def __del__(self):
        self.close()

    def acquire(self, service):
        lease = _Lease()
        _check(_lib.gpusched_dispatcher_acquire(self._h, service.encode(), ctypes.byref(lease)))
        return lease

    def release(self, lease):
        _check(_lib.gpusched_dispatcher_release(self._h, ctypes.byref(lease)))

    @contextmanager
    def lease(self, service):
        """Blocks until a GPU is granted; yields its index; releases on exit."""
        lease = self.acquire(service)
        try:
            yield lease.gpu
        finally:
            self.release(lease)

    def mark(self, gpu):
        owner, fin = ctypes.c_uint64(), ctypes.c_int64()
        _check(_lib.gpusched_dispatcher_mark(self._h, gpu, ctypes.byref(owner), ctypes.byref(fin)))
        return owner.value, fin.value

    def service_metrics(self, service):
        m = _ServiceMetrics()
        _check(_lib.gpusched_dispatcher_service_metrics(self._h, service.encode(), ctypes.byref(m)))
        return _struct_dict(m)

    def gpu_metrics(self, gpu):
        m = _GpuMetrics()
        _check(_lib.gpusched_dispatcher_gpu_metrics(self._h, gpu, ctypes.byref(m)))
        return _struct_dict(m)


class SimDevices:
    """Simulated GPUs (host memory, CPU threads, processor-shared compute)."""

    def __init__(self, count, memory_mib=1024, streams=16):
        lib = load_library()
        handle = ctypes.c_void_p()
        _check(lib.gpusched_sim_devices_create(count, memory_mib, streams, ctypes.byref(handle)))
        self._h = handle

    def close(self):
        if self._h:
            _lib.gpusched_sim_devices_destroy(self._h)
            self._h = None

    def __del__(self):
        self.close()

    def compute(self, gpu, ms):
        """Occupies `gpu` for `ms` of compute shared with co-running kernels; waits for it."""
        _check(_lib.gpusched_sim_devices_compute(self._h, gpu, float(ms)))

    def scale(self, gpu, values, factor):
        """Copies `values` to the device, multiplies them there, copies them back."""
        arr = (ctypes.c_float * len(values))(*values)
        _check(_lib.gpusched_sim_devices_scale(self._h, gpu, arr, len(values), factor))
        return list(arr)

    def memory(self, gpu):
        used, total = ctypes.c_int64(), ctypes.c_int64()
        _check(_lib.gpusched_sim_devices_memory(self._h, gpu, ctypes.byref(used),
                                                ctypes.byref(total)))
        return used.value, total.value
