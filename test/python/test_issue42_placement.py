#!/usr/bin/env python3
"""Issue 42, item 5, through the Python wrapper and the real library: acquire's
expected_mem_mib, model and priority keywords and Dispatcher's gpu_memory_mib, gpu_speed and
affinity_margin_ms (gpusched_dispatcher_create_ex2 / acquire2). The literal policy refuses
them, naming the field. Needs GPUSCHED_C_LIB and PYTHONPATH=python (ctest sets both). Threads
wait on the give-up counter (a request is waiting); no timing is asserted."""

import os
import sys
import threading
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

from gpusched import (DEADLINE_EXCEEDED, Dispatcher,  # noqa: E402
                      GpuschedError, Service)

INVALID_ARGUMENT = 1  # GPUSCHED_E_INVALID_ARGUMENT
SERVICE = Service("infer", cost_ms=20, wait_ms=10, try_ms=5)


def wait_for_give_ups(d, n):
    """Until the service has given up n times: that many waits began (10 s at most)."""
    for _ in range(10000):
        if d.service_metrics("infer")["give_ups"] >= n:
            return True
        time.sleep(0.001)
    return False


class PlacementTest(unittest.TestCase):
    def test_issue42_expected_memory_fits_or_waits(self):
        d = Dispatcher(gpus=2, services=[SERVICE], gpu_memory_mib=[4096, 16384])
        a = d.acquire("infer", expected_mem_mib=10000)
        self.assertEqual(a.gpu, 1)
        with self.assertRaises(GpuschedError) as e:
            d.acquire("infer", expected_mem_mib=10000, deadline_ms=20)
        self.assertEqual(e.exception.code, DEADLINE_EXCEEDED)
        with self.assertRaises(GpuschedError) as e:
            d.acquire("infer", expected_mem_mib=20000)
        self.assertEqual(e.exception.code, INVALID_ARGUMENT)
        self.assertIn("expected_mem_mib", str(e.exception))
        d.release(a)
        d.close()

    def test_issue42_model_affinity_within_margin(self):
        d = Dispatcher(gpus=2, services=[SERVICE], affinity_margin_ms=50)
        a = d.acquire("infer", model="resnet")
        b = d.acquire("infer", model="resnet")  # GPU1 idle, GPU0 within the margin
        c = d.acquire("infer", model="bert")    # no GPU has bert: the idle one
        self.assertEqual((a.gpu, b.gpu, c.gpu), (0, 0, 1))
        for lease in (a, b, c):
            d.release(lease)
        d.close()

    def test_issue42_priority_order(self):
        d = Dispatcher(gpus=1, services=[SERVICE], max_per_gpu=1)
        held = d.acquire("infer")
        order = []
        lock = threading.Lock()

        def wait(priority):
            lease = d.acquire("infer", priority=priority)
            with lock:
                order.append(priority)
            d.release(lease)

        threads = []
        for i, priority in enumerate((1, 9, 4)):
            threads.append(threading.Thread(target=wait, args=(priority,)))
            threads[-1].start()
            self.assertTrue(wait_for_give_ups(d, i + 1))
        d.release(held)
        for t in threads:
            t.join()
        self.assertEqual(order, [9, 4, 1])
        d.close()

    def test_issue42_literal_policy_refuses_placement_inputs(self):
        with self.assertRaises(GpuschedError) as e:
            Dispatcher(gpus=2, services=[SERVICE], policy="literal", gpu_memory_mib=[1, 1])
        self.assertIn("gpu_memory_mib", str(e.exception))
        d = Dispatcher(gpus=1, services=[SERVICE], policy="literal")
        with self.assertRaises(GpuschedError) as e:
            d.acquire("infer", model="resnet")
        self.assertIn("request.model", str(e.exception))
        d.close()

    def test_issue42_gpu_speed_seed_is_checked(self):
        with self.assertRaises(ValueError):
            Dispatcher(gpus=2, services=[SERVICE], gpu_speed=[1.0])
        d = Dispatcher(gpus=2, services=[SERVICE], gpu_speed=[3.0, 1.0])
        lease = d.acquire("infer")
        self.assertEqual(lease.gpu, 1)  # GPU0 seeded three times as slow
        d.release(lease)
        d.close()


if __name__ == "__main__":
    unittest.main()
