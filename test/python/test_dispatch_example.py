#!/usr/bin/env python3
"""Runs examples/dispatch_two_services.py through the C ABI and checks what it reports.
Needs GPUSCHED_C_LIB (the built libgpusched_c.so) and PYTHONPATH=python; ctest sets both."""

import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "python"))

import dispatch_two_services as example  # noqa: E402
from gpusched import Dispatcher, GpuschedError, Service  # noqa: E402


class DispatchExampleTest(unittest.TestCase):
    def test_example_spreads_both_services(self):
        report = example.main(requests_per_worker=10, workers_per_service=3)
        self.assertEqual(report["errors"], [])
        self.assertEqual(sum(report["requests_per_gpu"]), 60)
        # 6 concurrent workers on 4 GPUs: the dispatcher must use more than one GPU.
        self.assertGreaterEqual(sum(1 for n in report["requests_per_gpu"] if n > 0), 2)
        for name in ("ocr", "asr"):
            m = report["services"][name]
            self.assertEqual(m["completed"], 30)
            self.assertGreater(m["run_ms_mean"], 0)
            self.assertGreater(m["cost_time_ms"], 0)  # learned from observations (claim 6)
        self.assertEqual(sum(g["started"] for g in report["gpus"]), 60)
        self.assertTrue(all(g["running"] == 0 for g in report["gpus"]))
        self.assertGreater(max(g["occupancy"] for g in report["gpus"]), 0)

    def test_bad_config_names_the_field(self):
        with self.assertRaises(GpuschedError) as ctx:
            Dispatcher(gpus=2, services=[Service("ocr", cost_ms=10, wait_ms=10, try_ms=1)])
        self.assertEqual(ctx.exception.code, 1)
        self.assertIn("wait_time", str(ctx.exception))

    def test_lease_releases_the_mark(self):
        d = Dispatcher(gpus=2, services=[Service("ocr", cost_ms=100, wait_ms=50, try_ms=10)])
        with d.lease("ocr") as gpu:
            owner, _ = d.mark(gpu)
            self.assertNotEqual(owner, 0)
        self.assertEqual(d.mark(gpu)[0], 0)
        with self.assertRaises(GpuschedError):
            d.acquire("nope")
        d.close()


if __name__ == "__main__":
    unittest.main()
