#!/usr/bin/env python3
"""Deadlines, cancellation, the policy choice and shared marks through the Python wrapper.
Needs GPUSCHED_C_LIB and PYTHONPATH=python (ctest sets both). Threads wait on events; the only
timing asserted is loose (a cancel ends a wait long before a 10 s deadline)."""

import multiprocessing
import os
import sys
import threading
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

from gpusched import (CANCELLED, DEADLINE_EXCEEDED, Cancel, Dispatcher,  # noqa: E402
                      GpuschedError, Service, shared_marks_unlink)

INFER = [Service("infer", cost_ms=20, wait_ms=10, try_ms=5)]


def _hold_in_child(name, held, stop):
    with Dispatcher(gpus=1, services=INFER, max_per_gpu=1, shared_marks=name) as d:
        lease = d.acquire("infer")
        held.set()
        stop.wait(30)
        d.release(lease)


class DeadlinesAndCancel(unittest.TestCase):
    def blocked(self, policy):
        d = Dispatcher(gpus=1, services=INFER, max_per_gpu=1, policy=policy)
        return d, d.acquire("infer")

    def test_cancel_ends_a_blocked_acquire(self):
        for policy in ("gpusched", "literal"):
            d, held = self.blocked(policy)
            cancel, result, started = Cancel(), {}, threading.Event()

            def wait():
                started.set()
                try:
                    d.acquire("infer", deadline_ms=10000, cancel=cancel)
                except GpuschedError as e:
                    result["code"] = e.code

            t = threading.Thread(target=wait)
            t.start()
            started.wait()
            time.sleep(0.03)
            t0 = time.monotonic()
            cancel.fire()
            t.join()
            self.assertEqual(result.get("code"), CANCELLED, policy)
            self.assertLess(time.monotonic() - t0, 5)
            self.assertTrue(cancel.fired)
            d.release(held)
            cancel.close()
            d.close()

    def test_deadline_ends_a_blocked_acquire(self):
        for policy in ("gpusched", "literal"):
            d, held = self.blocked(policy)
            with self.assertRaises(GpuschedError) as ctx:
                d.acquire("infer", deadline_ms=50)
            self.assertEqual(ctx.exception.code, DEADLINE_EXCEEDED, policy)
            d.release(held)
            d.close()

    def test_bad_arguments(self):
        with Dispatcher(gpus=1, services=INFER) as d:
            with self.assertRaises(ValueError):
                d.acquire("infer", deadline_ms=-1)
            with self.assertRaises(ValueError):
                d.acquire("infer", expected_ms=float("nan"))
            with self.assertRaises(TypeError):
                d.acquire("infer", cancel=object())
        with self.assertRaises(ValueError):
            Dispatcher(gpus=1, services=INFER, policy="fifo")
        with self.assertRaises(GpuschedError):  # a claim option needs the literal policy
            Dispatcher(gpus=1, services=INFER, literal_release=True)
        Dispatcher(gpus=1, services=INFER, policy="literal", literal_release=True).close()


class SharedMarks(unittest.TestCase):
    def test_a_lease_in_another_process_is_seen_here(self):
        name = f"/gpusched-py-test-{os.getpid()}"
        ctx = multiprocessing.get_context("fork")
        held, stop = ctx.Event(), ctx.Event()
        child = ctx.Process(target=_hold_in_child, args=(name, held, stop))
        child.start()
        try:
            self.assertTrue(held.wait(30))
            with Dispatcher(gpus=1, services=INFER, max_per_gpu=1, shared_marks=name) as d:
                self.assertNotEqual(d.mark(0)[0], 0)
                with self.assertRaises(GpuschedError) as ctx_err:
                    d.acquire("infer", deadline_ms=50)  # the child's lease fills the GPU
                self.assertEqual(ctx_err.exception.code, DEADLINE_EXCEEDED)
                stop.set()  # the child releases: this waiter is woken by another process
                with d.lease("infer", deadline_ms=10000):
                    pass
        finally:
            stop.set()
            child.join(30)
            shared_marks_unlink(name)
        self.assertEqual(child.exitcode, 0)


if __name__ == "__main__":
    unittest.main()
