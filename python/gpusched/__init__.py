"""gpusched's node-level library from Python, through the C ABI (gpusched_c.h) with ctypes.

No compiled extension. The library is found, in order: $GPUSCHED_C_LIB (a path); next to this
package as installed by `cmake --install BUILD --prefix P` (P/lib/libgpusched_c.so.1, the
package being P/lib/python3/dist-packages/gpusched); by name (libgpusched_c.so.1) on the
loader's search path. Errors raise GpuschedError carrying the C status code and message.

    from gpusched import Dispatcher, Service, SimDevices
    with SimDevices(count=4) as devices, \\
         Dispatcher(gpus=4, services=[Service("ocr", cost_ms=20, wait_ms=10, try_ms=2)]) as d:
        with d.lease("ocr") as gpu:
            devices.compute(gpu, ms=15)

Every object is thread-safe and may be closed from any thread: close() refuses new calls,
waits for the calls in flight and then frees the handle; a call after close() raises
GpuschedError instead of crashing. Objects are context managers.

What the per-GPU lock does and does not guarantee: a lease with `locked` set owns its GPU's
signal mark (CN113051059B claim 4), and only the owner's release resets it. It is not
exclusive: a request whose cost fits inside the owner's remaining busy time is granted the
same GPU and runs beside it (claim 1), and after its wait budget a request may be granted a busy
GPU directly (claim 3). Pass max_per_gpu to bound the leases running on one GPU.
"""

import asyncio
import ctypes
import math
import os
import threading
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

__all__ = ["Cancel", "ChunkRuntime", "Dispatcher", "GpuschedError", "Service", "SimDevices",
           "cuda_device_count", "load_library", "shared_marks_unlink", "ABI_VERSION",
           "BUSY", "CANCELLED", "DEADLINE_EXCEEDED", "DRAINING", "RUN_FAILED",
           "BUILTIN_KERNELS", "KERNEL_VADD_U32", "KERNEL_SCALE_U32", "KERNEL_VADD_F32",
           "KERNEL_SCALE_F32", "KERNEL_SUM_U32", "KERNEL_HISTOGRAM_U32"]

ABI_VERSION = 1
_SONAME = f"libgpusched_c.so.{ABI_VERSION}"
_FAILED_PRECONDITION = 4
_RESOURCE_EXHAUSTED = 5
# GpuschedError.code of an acquire whose deadline_ms passed, or whose Cancel was fired.
DEADLINE_EXCEEDED = 20
CANCELLED = 21
# Issue 42: a run function that failed; a draining (or drained) dispatcher; a try that found
# no GPU free (Dispatcher.try_acquire returns None then).
RUN_FAILED = 22
DRAINING = 23
BUSY = 24

# The chunk runtime's built-in kernels, the GPUSCHED_KERNEL_* names of gpusched_chunks_c.h (what
# each computes is documented there); test/python/test_issue42.py keeps the two lists equal.
KERNEL_VADD_U32 = "vadd_u32"
KERNEL_SCALE_U32 = "scale_u32"
KERNEL_VADD_F32 = "vadd_f32"
KERNEL_SCALE_F32 = "scale_f32"
KERNEL_SUM_U32 = "sum_u32"
KERNEL_HISTOGRAM_U32 = "histogram_u32"
BUILTIN_KERNELS = (KERNEL_VADD_U32, KERNEL_SCALE_U32, KERNEL_VADD_F32, KERNEL_SCALE_F32,
                   KERNEL_SUM_U32, KERNEL_HISTOGRAM_U32)


class GpuschedError(RuntimeError):
    def __init__(self, code, message):
        super().__init__(f"gpusched error {code}: {message}")
        self.code = code


@dataclass
class Service:
    name: str
    cost_ms: float = 100  # fractions of a ms allowed
    wait_ms: int = 50
    try_ms: int = 10


class _ServiceConfig(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("cost_time_ms", ctypes.c_double),
                ("wait_time_ms", ctypes.c_int64), ("try_time_ms", ctypes.c_int64)]


class _Options(ctypes.Structure):
    _fields_ = [("gpu_count", ctypes.c_int32), ("literal_release", ctypes.c_int32),
                ("max_fin_time", ctypes.c_int32), ("earliest_finish_scan", ctypes.c_int32),
                ("elapsed_budget", ctypes.c_int32), ("direct_no_lock", ctypes.c_int32),
                ("cost_learning", ctypes.c_int32), ("ema_alpha", ctypes.c_double),
                ("max_per_gpu", ctypes.c_int32), ("acquire_timeout_ms", ctypes.c_int64)]


class _Lease(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_int32), ("service", ctypes.c_int32), ("ticket", ctypes.c_uint64),
                ("locked", ctypes.c_int32), ("attempts", ctypes.c_int32),
                ("requested_ns", ctypes.c_int64), ("granted_ns", ctypes.c_int64)]


class _AsyncResult(ctypes.Structure):
    _fields_ = [("request", ctypes.c_uint64), ("status", ctypes.c_int32),
                ("reserved", ctypes.c_int32), ("lease", _Lease), ("message", ctypes.c_char * 256)]


class _ServiceMetrics(ctypes.Structure):
    _fields_ = [("completed", ctypes.c_uint64), ("failed", ctypes.c_uint64),
                ("give_ups", ctypes.c_uint64), ("direct_grabs", ctypes.c_uint64),
                ("queue_ms_mean", ctypes.c_double), ("queue_ms_max", ctypes.c_double),
                ("run_ms_mean", ctypes.c_double), ("run_ms_max", ctypes.c_double),
                ("cost_time_ms", ctypes.c_double)]


class _PlacementOptions(ctypes.Structure):  # issue 42 item 5, GPUSCHED_C_1.4
    _fields_ = [("struct_size", ctypes.c_uint32),
                ("gpu_memory_mib", ctypes.POINTER(ctypes.c_int64)),
                ("gpu_speed", ctypes.POINTER(ctypes.c_double)),
                ("affinity_margin_ms", ctypes.c_double), ("models_per_gpu", ctypes.c_int32),
                ("fixed_speed", ctypes.c_int32)]


class _Request(ctypes.Structure):  # issue 42 item 5, GPUSCHED_C_1.4
    _fields_ = [("struct_size", ctypes.c_uint32), ("service", ctypes.c_char_p),
                ("expected_ms", ctypes.c_double), ("deadline_ms", ctypes.c_int64),
                ("cancel", ctypes.c_void_p), ("expected_mem_mib", ctypes.c_int64),
                ("model", ctypes.c_char_p), ("priority", ctypes.c_int32)]


# gpusched_run_fn: int32_t fn(int32_t gpu, void* user).
_RUN_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p)


class _GpuMetrics(ctypes.Structure):
    _fields_ = [("running", ctypes.c_int32), ("started", ctypes.c_uint64),
                ("busy_ms", ctypes.c_double), ("occupancy", ctypes.c_double),
                ("mean_running", ctypes.c_double)]


_lib = None
_lib_lock = threading.Lock()


def _candidates():
    env = os.environ.get("GPUSCHED_C_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, _SONAME),
            os.path.normpath(os.path.join(here, "..", "..", "..", _SONAME)),
            _SONAME]


def _declare(lib):
    P, i32, i64, vp, cp = (ctypes.POINTER, ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p,
                           ctypes.c_char_p)
    sigs = {
        "gpusched_abi_version": ([], ctypes.c_int),
        "gpusched_last_error": ([], cp),
        "gpusched_dispatcher_create": ([P(_Options), P(_ServiceConfig), i32, P(vp)], ctypes.c_int),
        "gpusched_dispatcher_create_ex": ([cp, cp, P(_Options), P(_ServiceConfig), i32, P(vp)],
                                          ctypes.c_int),
        "gpusched_dispatcher_create_ex2": ([cp, cp, P(_Options), P(_ServiceConfig), i32,
                                            P(_PlacementOptions), P(vp)], ctypes.c_int),
        "gpusched_dispatcher_acquire2": ([vp, P(_Request), P(_Lease)], ctypes.c_int),
        "gpusched_shared_marks_unlink": ([cp], ctypes.c_int),
        "gpusched_dispatcher_acquire_ex": ([vp, cp, i64, vp, ctypes.c_double, P(_Lease)],
                                           ctypes.c_int),
        "gpusched_cancel_create": ([P(vp)], ctypes.c_int),
        "gpusched_cancel_fire": ([vp], ctypes.c_int),
        "gpusched_cancel_reset": ([vp], ctypes.c_int),
        "gpusched_cancel_fired": ([vp, P(i32)], ctypes.c_int),
        "gpusched_cancel_destroy": ([vp], ctypes.c_int),
        "gpusched_dispatcher_destroy": ([vp], ctypes.c_int),
        "gpusched_dispatcher_shutdown": ([vp, i32], ctypes.c_int),
        "gpusched_dispatcher_acquire": ([vp, cp, P(_Lease)], ctypes.c_int),
        "gpusched_dispatcher_try_acquire": ([vp, cp, P(_Lease)], ctypes.c_int),
        "gpusched_dispatcher_run": ([vp, cp, _RUN_FN, vp, P(i32)], ctypes.c_int),
        "gpusched_dispatcher_drain": ([vp, i64], ctypes.c_int),
        "gpusched_dispatcher_acquire_async": ([vp, cp, i64, ctypes.c_double,
                                               P(ctypes.c_uint64)], ctypes.c_int),
        "gpusched_dispatcher_acquire2_async": ([vp, P(_Request), P(ctypes.c_uint64)],
                                               ctypes.c_int),
        "gpusched_dispatcher_event_fd": ([vp, P(i32)], ctypes.c_int),
        "gpusched_dispatcher_poll_async": ([vp, P(_AsyncResult), ctypes.c_size_t,
                                            P(ctypes.c_size_t)], ctypes.c_int),
        "gpusched_dispatcher_cancel_async": ([vp, ctypes.c_uint64], ctypes.c_int),
        "gpusched_dispatcher_metrics_text": ([vp, ctypes.c_char_p, ctypes.c_size_t,
                                              P(ctypes.c_size_t)], ctypes.c_int),
        "gpusched_dispatcher_release": ([vp, P(_Lease), i32], ctypes.c_int),
        "gpusched_dispatcher_mark": ([vp, i32, P(ctypes.c_uint64), P(i64)], ctypes.c_int),
        "gpusched_dispatcher_set_gpu_enabled": ([vp, i32, i32], ctypes.c_int),
        "gpusched_dispatcher_service_metrics": ([vp, cp, P(_ServiceMetrics)], ctypes.c_int),
        "gpusched_dispatcher_gpu_metrics": ([vp, i32, P(_GpuMetrics)], ctypes.c_int),
        "gpusched_sim_devices_create": ([i32, i64, i32, P(vp)], ctypes.c_int),
        "gpusched_sim_devices_destroy": ([vp], ctypes.c_int),
        "gpusched_sim_devices_compute": ([vp, i32, ctypes.c_double], ctypes.c_int),
        "gpusched_sim_devices_memory": ([vp, i32, P(i64), P(i64)], ctypes.c_int),
        "gpusched_sim_devices_scale": ([vp, i32, P(ctypes.c_float), i64, ctypes.c_float],
                                       ctypes.c_int),
        "gpusched_chunks_create_sim": ([ctypes.c_int, i64, i64, P(vp)], ctypes.c_int),
        "gpusched_chunks_create_cuda": ([ctypes.c_int, i64, P(vp)], ctypes.c_int),
        "gpusched_cuda_device_count": ([], ctypes.c_int),
        "gpusched_chunks_job_set_tasks": ([vp, cp, ctypes.c_int], ctypes.c_int),
        "gpusched_chunks_destroy": ([vp], ctypes.c_int),
        "gpusched_chunks_job_new": ([], vp),
        "gpusched_chunks_job_free": ([vp], None),
        "gpusched_chunks_job_add_buffer": ([vp, cp, vp, i64, ctypes.c_int], ctypes.c_int),
        "gpusched_chunks_job_add_stage": ([vp, cp, cp, cp, cp, ctypes.c_double, i64],
                                          ctypes.c_int),
        "gpusched_chunks_run": ([vp, vp], ctypes.c_int),
        "gpusched_chunks_stat": ([vp, cp], i64),
        "gpusched_chunks_plan_new": ([P(vp)], ctypes.c_int),
        "gpusched_chunks_plan_add_executor": ([vp, cp, cp, P(i64), i32, i32], ctypes.c_int),
        "gpusched_chunks_plan_add_nodes_json": ([vp, cp], ctypes.c_int),
        "gpusched_chunks_plan_set_min_free_cpu": ([vp, i32], ctypes.c_int),
        "gpusched_chunks_plan_assign": ([vp, i32, i64, i32], ctypes.c_int),
        "gpusched_chunks_plan_partition": ([vp, i32, P(cp), P(i32)], ctypes.c_int),
        "gpusched_chunks_plan_free": ([vp], ctypes.c_int),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = res


def load_library():
    """Loads libgpusched_c once (see the module docstring for where it looks)."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        errors = []
        for path in _candidates():
            if os.sep in path and not os.path.exists(path):
                errors.append(f"{path}: no such file")
                continue
            try:
                lib = ctypes.CDLL(path)
                break
            except OSError as e:
                errors.append(str(e))
        else:
            raise OSError("gpusched: cannot load the C library; set GPUSCHED_C_LIB to the path "
                          f"of {_SONAME} (tried: {'; '.join(errors)})")
        _declare(lib)
        if lib.gpusched_abi_version() != ABI_VERSION:
            raise OSError(f"gpusched: {path} has ABI version {lib.gpusched_abi_version()}, "
                          f"this package needs {ABI_VERSION}")
        _lib = lib
        return lib


def _check(code):
    if code != 0:
        raise GpuschedError(code, _lib.gpusched_last_error().decode())


def _struct_dict(s):
    return {name: getattr(s, name) for name, _ in s._fields_}


def _check_request(deadline_ms, expected_ms, expected_mem_mib, model, priority):
    """The checks of acquire()'s and acquire_async()'s arguments made before the library's."""
    for name, value in (("deadline_ms", deadline_ms), ("expected_mem_mib", expected_mem_mib)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name}: must be an int >= 0, got {value!r}")
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"priority: must be an int, got {priority!r}")
    if model is not None and not isinstance(model, str):
        raise TypeError(f"model: must be None or a str, got {model!r}")
    _nonneg_number("expected_ms", expected_ms)


def _request(service, deadline_ms, expected_ms, expected_mem_mib, model, priority, cancel=None):
    """A gpusched_request (issue 42 item 5) of checked arguments."""
    return _Request(struct_size=ctypes.sizeof(_Request), service=service.encode(),
                    expected_ms=float(expected_ms), deadline_ms=deadline_ms, cancel=cancel,
                    expected_mem_mib=expected_mem_mib,
                    model=model.encode() if model is not None else None, priority=priority)


def _nonneg_number(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}: must be a finite number >= 0, got {value!r}")
    return value


class _Handle:
    """A C handle shared by threads. Every call holds a pass (`with self._call():`); close()
    refuses new calls, waits for the passes out, then frees the handle once."""

    _destroy = None  # name of the C destroy function

    def __init__(self):
        # What a call after close raises: (code, why); a drained dispatcher says so.
        self._closed = (_FAILED_PRECONDITION, "is closed")
        self._h = None  # set by the subclass once the C object exists
        self._cv = threading.Condition()
        self._in_flight = 0
        self._closing = False

    @contextmanager
    def _call(self, allowed_while_closing=False):
        with self._cv:
            if self._h is None or (self._closing and not allowed_while_closing):
                code, why = self._closed
                raise GpuschedError(code, f"{type(self).__name__} {why}")
            self._in_flight += 1
        try:
            yield self._h
        finally:
            with self._cv:
                self._in_flight -= 1
                self._cv.notify_all()

    def _before_wait(self):
        """Hook: end the waits of calls in flight (the dispatcher shuts down)."""

    def _after_refused(self):
        """Hook: undo _before_wait when the C library refused to destroy."""

    def close(self):
        """Frees the handle after the calls in flight on other threads return. Idempotent."""
        with self._cv:
            if self._h is None or self._closing:
                return
            self._closing = True
        self._before_wait()
        with self._cv:  # held through destroy, so no call (a release) can slip in
            self._cv.wait_for(lambda: self._in_flight == 0)
            code = getattr(_lib, self._destroy)(self._h)
            if code != 0:
                error = GpuschedError(code, _lib.gpusched_last_error().decode())
                self._closing = False
            else:
                self._h = None
        if code != 0:
            self._after_refused()
            raise error

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # Only after a successful constructor; never raises from the garbage collector.
        if getattr(self, "_h", None) is not None:
            try:
                self.close()
            except Exception:  # noqa: BLE001 (refused: leases out; or interpreter teardown)
                pass


_COST_LEARNING = {"mean": 0, "ema": 1, "offline": 2}



def _placement(gpus, gpu_memory_mib, gpu_speed, affinity_margin_ms, models_per_gpu,
               fixed_speed):
    """The create options of issue 42's placement inputs, or None when all are defaults."""
    if gpu_memory_mib is None and gpu_speed is None and not affinity_margin_ms \
            and not models_per_gpu and not fixed_speed:
        return None
    p = _PlacementOptions(struct_size=ctypes.sizeof(_PlacementOptions),
                          affinity_margin_ms=float(affinity_margin_ms),
                          models_per_gpu=models_per_gpu, fixed_speed=int(bool(fixed_speed)))
    for name, values, ctype in (("gpu_memory_mib", gpu_memory_mib, ctypes.c_int64),
                                ("gpu_speed", gpu_speed, ctypes.c_double)):
        if values is None:
            continue
        if len(values) != gpus:
            raise ValueError(f"{name}: one entry per GPU ({gpus}), got {len(values)}")
        arr = (ctype * gpus)(*values)
        setattr(p, name, ctypes.cast(arr, ctypes.POINTER(ctype)))
        setattr(p, "_keep_" + name, arr)  # the array lives as long as the struct
    return p

class Dispatcher(_Handle):
    """A node-level dispatcher over `gpus` GPUs, on the real clock.

    policy: "gpusched" (the default): a request gets at once the GPU where it is expected to
    finish earliest, weighed against the delay it causes the leases already there; it waits
    only when every GPU is at max_per_gpu or out of service, and wakes when a lease is
    released. "literal": the CN113051059B dispatcher as claimed, with the claims' options.
    shared_marks: None, or a name "/name" (either policy): the marks live in the shared-memory
    segment /dev/shm/name, one set for every process on the machine that opens that name (see
    shared_marks_unlink).

    Options (keyword-only; an unknown keyword is a TypeError): cost_learning ("mean", "ema" or
    "offline"), ema_alpha, max_per_gpu (0: no cap) and acquire_timeout_ms (0: none); for the
    literal policy only, literal_release, max_fin_time, earliest_finish_scan, elapsed_budget,
    direct_no_lock (bools: the claims' alternative readings). Placement inputs (issue 42, the
    gpusched policy only): gpu_memory_mib (a list, one per GPU), gpu_speed (seed speed factors,
    one per GPU; 2 = twice as slow), affinity_margin_ms, models_per_gpu (0: 4), fixed_speed.

    Thread-safe: call lease()/acquire() from many Python threads (ctypes releases the GIL
    while a call blocks). close() refuses while leases from acquire() are out."""

    _destroy = "gpusched_dispatcher_destroy"

    def __init__(self, gpus, services, *, policy="gpusched", shared_marks=None,
                 literal_release=False, max_fin_time=False,
                 earliest_finish_scan=False, elapsed_budget=False, direct_no_lock=False,
                 cost_learning="mean", ema_alpha=0.0, max_per_gpu=0, acquire_timeout_ms=0,
                 gpu_memory_mib=None, gpu_speed=None, affinity_margin_ms=0.0,
                 models_per_gpu=0, fixed_speed=False):
        super().__init__()
        lib = load_library()
        if policy not in ("gpusched", "literal"):
            raise ValueError(f"policy: must be 'gpusched' or 'literal', got {policy!r}")
        if shared_marks is not None and not isinstance(shared_marks, str):
            raise TypeError(f"shared_marks: must be None or a str, got {shared_marks!r}")
        if cost_learning not in _COST_LEARNING:
            raise ValueError(f"cost_learning: must be one of {sorted(_COST_LEARNING)}, "
                             f"got {cost_learning!r}")
        flags = dict(literal_release=literal_release, max_fin_time=max_fin_time,
                     earliest_finish_scan=earliest_finish_scan, elapsed_budget=elapsed_budget,
                     direct_no_lock=direct_no_lock)
        for name, value in flags.items():
            if not isinstance(value, bool):
                raise TypeError(f"{name}: must be a bool, got {value!r}")
        opts = _Options(gpu_count=gpus, cost_learning=_COST_LEARNING[cost_learning],
                        ema_alpha=ema_alpha, max_per_gpu=max_per_gpu,
                        acquire_timeout_ms=acquire_timeout_ms,
                        **{k: int(v) for k, v in flags.items()})
        arr = (_ServiceConfig * len(services))(
            *[_ServiceConfig(s.name.encode(), s.cost_ms, s.wait_ms, s.try_ms) for s in services])
        handle = ctypes.c_void_p()
        placement = _placement(gpus, gpu_memory_mib, gpu_speed, affinity_margin_ms,
                               models_per_gpu, fixed_speed)
        _check(lib.gpusched_dispatcher_create_ex2(
            policy.encode(), shared_marks.encode() if shared_marks is not None else None,
            ctypes.byref(opts), arr, len(services),
            ctypes.byref(placement) if placement is not None else None, ctypes.byref(handle)))
        self._h = handle
        self.gpus = gpus
        self.policy = policy
        # acquire_async: the event loop it is bound to, and its futures by request id (touched
        # on that loop's thread only).
        self._loop = None
        self._fd = None
        self._futures = {}

    def _after_refused(self):
        _lib.gpusched_dispatcher_shutdown(self._h, 0)

    def acquire(self, service, *, deadline_ms=0, cancel=None, expected_ms=0,
                expected_mem_mib=0, model=None, priority=0):
        """Blocks until a GPU is granted; returns the lease to release.

        deadline_ms > 0: give up after that many ms (GpuschedError, code DEADLINE_EXCEEDED).
        cancel: a Cancel; firing it from another thread ends the wait (code CANCELLED).
        expected_ms > 0: this request's expected run time, used by the gpusched policy.
        Issue 42 (gpusched policy; the literal one refuses them, naming the field):
        expected_mem_mib: GPU memory it needs (granted only where it fits), model: a str kept
        on the GPUs that have it loaded, priority: higher waiting requests first."""
        _check_request(deadline_ms, expected_ms, expected_mem_mib, model, priority)
        if cancel is not None and not isinstance(cancel, Cancel):
            raise TypeError(f"cancel: must be None or a Cancel, got {cancel!r}")
        lease = _Lease()
        with self._call() as h, (cancel._call() if cancel is not None else nullcontext()) as c:
            if expected_mem_mib or model or priority:  # issue 42: gpusched_dispatcher_acquire2
                req = _request(service, deadline_ms, expected_ms, expected_mem_mib, model,
                               priority, cancel=c)
                _check(_lib.gpusched_dispatcher_acquire2(h, ctypes.byref(req),
                                                         ctypes.byref(lease)))
            else:
                _check(_lib.gpusched_dispatcher_acquire_ex(h, service.encode(), deadline_ms, c,
                                                           float(expected_ms),
                                                           ctypes.byref(lease)))
        return lease

    def release(self, lease, failed=False):
        """Hands `lease` back. failed=True: the request failed; its run time trains nothing."""
        # Allowed while close() waits: a release ends what close is waiting for.
        with self._call(allowed_while_closing=True) as h:
            _check(_lib.gpusched_dispatcher_release(h, ctypes.byref(lease), 1 if failed else 0))

    @contextmanager
    def lease(self, service, **acquire_options):
        """Blocks until a GPU is granted (acquire's options apply); yields its index; releases
        on exit, as failed when the block raised."""
        lease = self.acquire(service, **acquire_options)
        try:
            yield lease.gpu
        except BaseException:
            self.release(lease, failed=True)
            raise
        self.release(lease)

    def try_acquire(self, service):
        """A lease if a GPU can be granted now, else None at once (every GPU at max_per_gpu or
        out of service; the literal policy: none granted in its first round). Never waits."""
        lease = _Lease()
        with self._call() as h:
            code = _lib.gpusched_dispatcher_try_acquire(h, service.encode(), ctypes.byref(lease))
            if code == BUSY:
                return None
            _check(code)
        return lease

    def run(self, service, fn):
        """Acquires a GPU, calls fn(gpu) on this thread, releases; returns what fn returned.
        When fn raises, the lease is released as failed (counted in service_metrics' `failed`,
        its run time trains no cost) and run re-raises that same exception."""
        raised = []

        def call(gpu, _user):
            try:
                raised.append(("value", fn(gpu)))
                return 0
            except BaseException as e:  # noqa: BLE001 (re-raised below, after the release)
                raised.append(("error", e))
                return 1

        callback = _RUN_FN(call)  # kept alive through the call
        result = ctypes.c_int32()
        with self._call() as h:
            code = _lib.gpusched_dispatcher_run(h, service.encode(), callback, None,
                                                ctypes.byref(result))
            if raised and raised[0][0] == "error":
                error = raised.pop()[1]
                raise error  # the original exception, its traceback kept
            _check(code)
        return raised[0][1]

    def drain(self, deadline_ms):
        """Stops granting leases at once (acquires, waiting ones included, raise GpuschedError
        with code DRAINING), waits up to deadline_ms (int >= 0) for the leases out to be
        released, then closes the dispatcher. When leases are still out at the deadline, raises
        GpuschedError with code DEADLINE_EXCEEDED naming them and leaves the dispatcher open
        but drained: release them, then close() (or drain again)."""
        if isinstance(deadline_ms, bool) or not isinstance(deadline_ms, int) or deadline_ms < 0:
            raise ValueError(f"deadline_ms: must be an int >= 0, got {deadline_ms!r}")
        with self._call() as h:
            _check(_lib.gpusched_dispatcher_drain(h, deadline_ms))
        self._closed = (DRAINING, "is drained")
        self.close()

    async def acquire_async(self, service, *, deadline_ms=0, expected_ms=0,
                            expected_mem_mib=0, model=None, priority=0):
        """acquire() for asyncio: queues the request in the library and awaits its lease with no
        thread per request (the dispatcher's fd is watched with loop.add_reader). Raises
        GpuschedError as acquire() does (DEADLINE_EXCEEDED, DRAINING, and UNAVAILABLE after
        acquire_timeout_ms). Cancelling the awaiting task cancels the request (there is no
        cancel= here); a lease granted to a request whose task was cancelled is released.
        expected_mem_mib, model, priority: as acquire() (issue 42; argument errors, memory
        larger than every GPU included, are raised here, nothing queued). Queued requests are
        granted as leases are released, highest priority first, then in arrival order (FIFO
        when no priority is given); a request whose memory fits no GPU yet holds back those
        behind it of its own or lower priority. A dispatcher serves one event loop at a time
        (the first to call this, until that loop is closed)."""
        _check_request(deadline_ms, expected_ms, expected_mem_mib, model, priority)
        loop = asyncio.get_running_loop()
        request = ctypes.c_uint64()
        with self._call() as h:
            self._watch(loop, h)
            if expected_mem_mib or model or priority:  # gpusched_dispatcher_acquire2_async
                req = _request(service, deadline_ms, expected_ms, expected_mem_mib, model,
                               priority)
                _check(_lib.gpusched_dispatcher_acquire2_async(h, ctypes.byref(req),
                                                               ctypes.byref(request)))
            else:
                _check(_lib.gpusched_dispatcher_acquire_async(h, service.encode(), deadline_ms,
                                                              float(expected_ms),
                                                              ctypes.byref(request)))
        future = loop.create_future()
        self._futures[request.value] = future
        try:
            return await future
        except asyncio.CancelledError:
            if future.cancelled():  # the task was cancelled, not the request
                self._cancel_request(request.value)
            raise

    def _watch(self, loop, h):
        if self._loop is not None and self._loop is not loop and self._loop.is_closed():
            self._loop = None  # asyncio.run() ended that loop: serve this one
            self._futures.clear()
        if self._loop is None:
            fd = ctypes.c_int32()
            _check(_lib.gpusched_dispatcher_event_fd(h, ctypes.byref(fd)))
            self._loop, self._fd = loop, fd.value
            loop.add_reader(self._fd, self._on_results)
        elif self._loop is not loop:
            raise RuntimeError("acquire_async: this Dispatcher serves another event loop")

    def _cancel_request(self, request):
        try:
            with self._call(allowed_while_closing=True) as h:
                _lib.gpusched_dispatcher_cancel_async(h, request)  # NOT_FOUND: completed
        except GpuschedError:
            pass  # closed: its future is failed by close()

    def _take_results(self):
        """Every result waiting in the library: [(request, status, lease, message)]."""
        out, buf, n = [], (_AsyncResult * 64)(), ctypes.c_size_t()
        with self._call(allowed_while_closing=True) as h:
            while True:
                _check(_lib.gpusched_dispatcher_poll_async(h, buf, 64, ctypes.byref(n)))
                for r in buf[:n.value]:
                    lease = _Lease.from_buffer_copy(r.lease) if r.status == 0 else None
                    out.append((r.request, r.status, lease, r.message.decode(errors="replace")))
                if n.value < 64:
                    return out

    def _on_results(self, results=None):
        """On the loop's thread: resolves the futures of the results taken."""
        try:
            results = self._take_results() if results is None else results
        except GpuschedError:
            return  # closed meanwhile: close() fails what is left
        for request, status, lease, message in results:
            future = self._futures.pop(request, None)
            if future is None or future.done():  # its task was cancelled
                if lease is not None:
                    self.release(lease)
            elif lease is not None:
                future.set_result(lease)
            else:
                future.set_exception(GpuschedError(status, message))

    @staticmethod
    def _run_on(loop, fn, *args):
        """Runs fn on `loop`'s thread: now when called there, else scheduled."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            fn(*args)
        elif not loop.is_closed():
            loop.call_soon_threadsafe(fn, *args)

    def _fail_futures(self, code, why):
        for future in self._futures.values():
            if not future.done():
                future.set_exception(GpuschedError(code, f"Dispatcher {why}"))
        self._futures.clear()

    def close(self):
        """Frees the dispatcher (see _Handle.close). Requests of acquire_async still queued end
        with GpuschedError (FAILED_PRECONDITION, or DRAINING after drain())."""
        loop = self._loop
        if loop is None:
            return super().close()
        self._run_on(loop, loop.remove_reader, self._fd)
        try:
            super().close()
        except GpuschedError:
            self._run_on(loop, loop.add_reader, self._fd, self._on_results)
            raise
        if self._h is None:
            self._loop = None
            self._run_on(loop, self._fail_futures, *self._closed)
        return None

    def _before_wait(self):
        _lib.gpusched_dispatcher_shutdown(self._h, 1)  # waiting acquires fail now
        if self._loop is not None:  # and so do queued requests: hand their results over
            self._run_on(self._loop, self._on_results, self._take_results())

    def set_gpu_enabled(self, gpu, enabled):
        """Takes a GPU out of service (no new grants) or puts it back."""
        with self._call() as h:
            _check(_lib.gpusched_dispatcher_set_gpu_enabled(h, gpu, 1 if enabled else 0))

    def mark(self, gpu):
        owner, fin = ctypes.c_uint64(), ctypes.c_int64()
        with self._call() as h:
            _check(_lib.gpusched_dispatcher_mark(h, gpu, ctypes.byref(owner), ctypes.byref(fin)))
        return owner.value, fin.value

    def service_metrics(self, service):
        m = _ServiceMetrics()
        with self._call() as h:
            _check(_lib.gpusched_dispatcher_service_metrics(h, service.encode(), ctypes.byref(m)))
        return _struct_dict(m)

    def metrics_text(self):
        """The metrics as Prometheus text exposition format 0.0.4 (a str): per service and GPU,
        latency and queue-wait histograms (p50/p99 with histogram_quantile), counters of
        requests, failures and timeouts; see gpusched_dispatcher_metrics_text."""
        size, length = 1 << 16, ctypes.c_size_t()
        with self._call() as h:
            while True:
                buf = ctypes.create_string_buffer(size)
                code = _lib.gpusched_dispatcher_metrics_text(h, buf, size, ctypes.byref(length))
                if code != _RESOURCE_EXHAUSTED:
                    _check(code)
                    return buf.value.decode()
                size = length.value + 1 + 4096  # it may grow before the next call

    def gpu_metrics(self, gpu):
        m = _GpuMetrics()
        with self._call() as h:
            _check(_lib.gpusched_dispatcher_gpu_metrics(h, gpu, ctypes.byref(m)))
        return _struct_dict(m)


class Cancel(_Handle):
    """Ends the acquires waiting with it when fired (from any thread); they raise
    GpuschedError with code CANCELLED. Stays fired until reset(). close() fires it first."""

    _destroy = "gpusched_cancel_destroy"

    def __init__(self):
        super().__init__()
        lib = load_library()
        handle = ctypes.c_void_p()
        _check(lib.gpusched_cancel_create(ctypes.byref(handle)))
        self._h = handle

    def _before_wait(self):
        _lib.gpusched_cancel_fire(self._h)  # the acquires using it return, so close can wait

    def fire(self):
        with self._call() as h:
            _check(_lib.gpusched_cancel_fire(h))

    def reset(self):
        with self._call() as h:
            _check(_lib.gpusched_cancel_reset(h))

    @property
    def fired(self):
        out = ctypes.c_int32()
        with self._call() as h:
            _check(_lib.gpusched_cancel_fired(h, ctypes.byref(out)))
        return out.value == 1


def shared_marks_unlink(name):
    """Removes the shared-marks segment `name` (processes that opened it keep it)."""
    lib = load_library()
    code = lib.gpusched_shared_marks_unlink(name.encode())
    if code != 0:
        raise GpuschedError(code, lib.gpusched_last_error().decode())


class SimDevices(_Handle):
    """Simulated GPUs (host memory, CPU threads, processor-shared compute)."""

    _destroy = "gpusched_sim_devices_destroy"

    def __init__(self, count, memory_mib=1024, streams=16):
        super().__init__()
        lib = load_library()
        handle = ctypes.c_void_p()
        _check(lib.gpusched_sim_devices_create(count, memory_mib, streams, ctypes.byref(handle)))
        self._h = handle

    def compute(self, gpu, ms):
        """Occupies `gpu` for `ms` (finite, >= 0) of compute shared with co-running kernels."""
        ms = _nonneg_number("ms", ms)
        with self._call() as h:
            _check(_lib.gpusched_sim_devices_compute(h, gpu, float(ms)))

    def scale(self, gpu, values, factor):
        """Copies `values` to the device, multiplies them there, copies them back."""
        arr = (ctypes.c_float * len(values))(*values)
        with self._call() as h:
            _check(_lib.gpusched_sim_devices_scale(h, gpu, arr, len(values), factor))
        return list(arr)

    def memory(self, gpu):
        used, total = ctypes.c_int64(), ctypes.c_int64()
        with self._call() as h:
            _check(_lib.gpusched_sim_devices_memory(h, gpu, ctypes.byref(used),
                                                    ctypes.byref(total)))
        return used.value, total.value


def cuda_device_count(with_reason=False):
    """CUDA devices the library sees: 0 without a usable CUDA (no plugin, driver or GPU), -1 in
    a build without CUDA. with_reason=True returns (count, reason): why there is no device
    ("" when count > 0), e.g. "CUDA plugin .../libgpusched_cuda.so.1 not loaded: ..."."""
    lib = load_library()
    count = lib.gpusched_cuda_device_count()
    if not with_reason:
        return count
    return count, (lib.gpusched_last_error().decode() if count <= 0 else "")


class ChunkRuntime(_Handle):
    """The CN110955526B chunk scheduler over simulated GPUs, or with cuda=True over CUDA
    devices 0..gpus-1 (gpus=0: all; gpu_memory_mib is then unused). chunk_bytes=0 spreads each
    input over every GPU (chunks of ceil(input / gpus), 1 MiB to 64 MiB, smaller on small GPUs:
    see gpusched_chunks_c.h); otherwise every chunk is chunk_bytes. Shared by threads: runs
    queue, each one having every GPU of the runtime."""

    _destroy = "gpusched_chunks_destroy"

    def __init__(self, gpus, gpu_memory_mib=256, chunk_bytes=0, cuda=False):
        super().__init__()
        lib = load_library()
        handle = ctypes.c_void_p()
        if cuda:
            _check(lib.gpusched_chunks_create_cuda(gpus, chunk_bytes, ctypes.byref(handle)))
        else:
            _check(lib.gpusched_chunks_create_sim(gpus, gpu_memory_mib, chunk_bytes,
                                                  ctypes.byref(handle)))
        self._h = handle
        self.last_stats = {}

    def sum_u32(self, values, scale=1, tasks=1):
        """Runs scale_u32 then sum_u32 over `values` (uint32) on the GPUs: sum(v * scale)
        modulo 2**32 per element, added as uint64. Each stage is split into `tasks` tasks
        (CN110955526B claim 2 picks each one's executor); the run's counters are left in
        `last_stats`."""
        data = (ctypes.c_uint32 * len(values))(*values)
        total = ctypes.c_uint64()
        job = _lib.gpusched_chunks_job_new()
        try:
            _check(_lib.gpusched_chunks_job_add_buffer(job, b"data", ctypes.cast(data, ctypes.c_void_p),
                                                       ctypes.sizeof(data), 0))
            _check(_lib.gpusched_chunks_job_add_buffer(job, b"total", ctypes.cast(ctypes.byref(total), ctypes.c_void_p),
                                                       8, 0))
            _check(_lib.gpusched_chunks_job_add_stage(job, b"scale", KERNEL_SCALE_U32.encode(),
                                                      b"data", b"scaled", float(scale), 0))
            _check(_lib.gpusched_chunks_job_add_stage(job, b"sum", KERNEL_SUM_U32.encode(),
                                                      b"scaled", b"total", 0.0, 0))
            for stage in (b"scale", b"sum"):
                _check(_lib.gpusched_chunks_job_set_tasks(job, stage, tasks))
            with self._call() as h:
                _check(_lib.gpusched_chunks_run(h, job))
            self.last_stats = {name: _lib.gpusched_chunks_stat(job, name.encode())
                               for name in ("subtasks", "bytes_h2d", "cpu_runs", "gpu_tasks",
                                            "cpu_tasks", "task_waves", "pinned_bytes")}
        finally:
            _lib.gpusched_chunks_job_free(job)
        return total.value


def plan_stage(partitions, subtask_bytes, *, executors=(), nodes_json=None, cpus=1,
               min_free_cpu=0):
    """CN110955526B claim 2 across nodes (issue 42): the driver's plan of a stage's `partitions`
    over executors by available GPU memory and free CPUs (gpusched_chunks_plan_* of
    gpusched_chunks_c.h). `executors`: (name, node, [free bytes per GPU], free_cpus) tuples
    (free_cpus None or < 0: unknown); `nodes_json`: the text of the gpusched server's
    GET /api/v1/nodes, one executor per available node. `min_free_cpu`: the free-CPU limit, an
    executor with fewer free CPUs is not used. Returns one (executor, gpu) per partition:
    executor None when none could take it, gpu -1 on the executor's CPUs. GpuschedError on bad
    input (the message names the field)."""
    lib = load_library()
    plan = ctypes.c_void_p()
    _check(lib.gpusched_chunks_plan_new(ctypes.byref(plan)))
    try:
        for name, node, gpus, free_cpus in executors:
            free = (ctypes.c_int64 * max(1, len(gpus)))(*gpus)
            _check(lib.gpusched_chunks_plan_add_executor(
                plan, name.encode(), node.encode() if node else None, free, len(gpus),
                -1 if free_cpus is None else int(free_cpus)))
        if nodes_json is not None:
            _check(lib.gpusched_chunks_plan_add_nodes_json(plan, nodes_json.encode()))
        _check(lib.gpusched_chunks_plan_set_min_free_cpu(plan, int(min_free_cpu)))
        _check(lib.gpusched_chunks_plan_assign(plan, int(partitions), int(subtask_bytes),
                                               int(cpus)))
        placed = []
        for p in range(int(partitions)):
            name, gpu = ctypes.c_char_p(), ctypes.c_int32()
            _check(lib.gpusched_chunks_plan_partition(plan, p, ctypes.byref(name),
                                                      ctypes.byref(gpu)))
            placed.append((name.value.decode() or None, gpu.value))
        return placed
    finally:
        lib.gpusched_chunks_plan_free(plan)
