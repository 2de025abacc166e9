#!/usr/bin/env python3
"""Issue 42 through the Python wrapper and the real library, for both policies: a run function
that raises is a failed request (the same exception re-raised, counted in `failed`, no cost
learned); drain() refuses new leases, ends a waiting acquire once with DRAINING, waits for a
lease another thread holds, and names the lease still out when its deadline passes;
try_acquire() never waits. Needs GPUSCHED_C_LIB and PYTHONPATH=python (ctest sets both).
Threads wait on events; the only timing asserted is loose."""

import os
import re
import sys
import threading
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import gpusched  # noqa: E402
from gpusched import (BUILTIN_KERNELS, DEADLINE_EXCEEDED, DRAINING, Dispatcher,  # noqa: E402
                      GpuschedError, Service)

POLICIES = ("gpusched", "literal")


def one_slot(policy, try_ms=5):
    """One GPU, at most one lease on it; cost 20 ms (1000 ms with a long retry period)."""
    service = (Service("infer", cost_ms=20, wait_ms=10, try_ms=try_ms) if try_ms < 20 else
               Service("infer", cost_ms=1000, wait_ms=600, try_ms=try_ms))
    return Dispatcher(gpus=1, services=[service], max_per_gpu=1, policy=policy)


def wait_for_a_waiter(d):
    """Until the service has given up once: an acquire is waiting (10 s at most)."""
    for _ in range(10000):
        if d.service_metrics("infer")["give_ups"] >= 1:
            return True
        time.sleep(0.001)
    return False


class FailedRuns(unittest.TestCase):
    def test_Issue42_CN113051059B_Claim6_run_reraises_and_releases_as_failed(self):
        for policy in POLICIES:
            with one_slot(policy) as d:
                boom = ValueError("model crashed")

                def fails(gpu):
                    time.sleep(0.03)
                    raise boom

                with self.assertRaises(ValueError) as ctx:
                    d.run("infer", fails)
                self.assertIs(ctx.exception, boom, policy)
                m = d.service_metrics("infer")
                self.assertEqual((m["completed"], m["failed"]), (1, 1), policy)
                self.assertEqual(m["cost_time_ms"], 20.0, policy)  # 30 ms of failure: not learned
                self.assertEqual(d.gpu_metrics(0)["running"], 0, policy)
                lease = d.try_acquire("infer")  # the GPU came back
                self.assertIsNotNone(lease, policy)
                d.release(lease)
                # A run that succeeds returns fn's value and does train the cost.
                self.assertEqual(d.run("infer", lambda gpu: (time.sleep(0.03), gpu)[1]), 0)
                m = d.service_metrics("infer")
                self.assertEqual(m["failed"], 1, policy)
                self.assertNotEqual(m["cost_time_ms"], 20.0, policy)


class Drain(unittest.TestCase):
    def test_Issue42_CN113051059B_Claim1_drain_waits_for_a_lease_another_thread_holds(self):
        for policy in POLICIES:
            d = one_slot(policy)
            held, release_now, codes, drained = (threading.Event(), threading.Event(), [], [])

            def hold():
                lease = d.acquire("infer")
                held.set()
                release_now.wait(30)
                d.release(lease)

            def wait():
                try:
                    d.release(d.acquire("infer", deadline_ms=10000))
                    codes.append(0)
                except GpuschedError as e:
                    codes.append(e.code)

            def drain():
                d.drain(10000)
                drained.append(True)

            # Daemons: a failed check must not leave the test waiting on them.
            holder = threading.Thread(target=hold, daemon=True)
            holder.start()
            self.assertTrue(held.wait(30))
            waiter = threading.Thread(target=wait, daemon=True)
            waiter.start()
            self.assertTrue(wait_for_a_waiter(d), policy)
            drainer = threading.Thread(target=drain, daemon=True)
            drainer.start()
            waiter.join(30)
            self.assertEqual(codes, [DRAINING], policy)  # once, not per retry round
            for call in (lambda: d.acquire("infer"), lambda: d.try_acquire("infer"),
                         lambda: d.run("infer", lambda gpu: self.fail("fn ran while draining"))):
                with self.assertRaises(GpuschedError) as ctx:
                    call()
                self.assertEqual(ctx.exception.code, DRAINING, policy)
                self.assertIn("draining", str(ctx.exception))
            time.sleep(0.02)
            self.assertTrue(drainer.is_alive(), policy)  # still waiting for the held lease
            release_now.set()
            holder.join(30)
            drainer.join(30)
            self.assertEqual(drained, [True], policy)
            with self.assertRaises(GpuschedError) as ctx:  # drained and closed
                d.acquire("infer")
            self.assertEqual(ctx.exception.code, DRAINING, policy)

    def test_Issue42_CN113051059B_Claim1_drain_deadline_passes_with_a_lease_out(self):
        for policy in POLICIES:
            d = one_slot(policy)
            lease = d.acquire("infer")
            with self.assertRaises(GpuschedError) as ctx:
                d.drain(50)
            self.assertEqual(ctx.exception.code, DEADLINE_EXCEEDED, policy)
            self.assertIn(f"ticket {lease.ticket} (gpu 0)", str(ctx.exception))
            with self.assertRaises(GpuschedError) as ctx:  # still drained, still open
                d.acquire("infer")
            self.assertEqual(ctx.exception.code, DRAINING, policy)
            d.release(lease)
            d.drain(0)  # nothing out: drains and closes
            with self.assertRaises(ValueError):
                d.drain(-1)


class TryAcquire(unittest.TestCase):
    def test_Issue42_CN113051059B_Claim1_try_acquire_never_waits(self):
        for policy in POLICIES:
            with one_slot(policy, try_ms=500) as d:  # an acquire would retry after 500 ms
                first = d.try_acquire("infer")
                self.assertIsNotNone(first, policy)
                t0 = time.monotonic()
                self.assertIsNone(d.try_acquire("infer"), policy)
                self.assertLess(time.monotonic() - t0, 0.25, policy)
                d.release(first)
                again = d.try_acquire("infer")
                self.assertIsNotNone(again, policy)
                d.release(again)
                with self.assertRaises(GpuschedError):
                    d.try_acquire("nope")


class ChunkKernelNames(unittest.TestCase):
    def test_Issue42_CN110955526B_builtin_kernel_names_are_those_of_the_header(self):
        header = os.path.join(ROOT, "src", "dispatch", "c_api", "gpusched_chunks_c.h")
        with open(header, encoding="utf-8") as f:
            defines = re.findall(r'^#define GPUSCHED_KERNEL_(\w+) "([^"]+)"$', f.read(), re.M)
        self.assertTrue(defines)
        self.assertEqual(sorted(BUILTIN_KERNELS), sorted(name for _, name in defines))
        for macro, name in defines:
            self.assertEqual(getattr(gpusched, "KERNEL_" + macro), name)


if __name__ == "__main__":
    unittest.main()
