#!/usr/bin/env python3
"""Issue 42's metrics through the Python wrapper and the real library: Dispatcher.metrics_text()
after 20 requests that each hold their GPU 30 ms, one at a time. The latency histogram counts
the 20 requests, a p50 computed from its buckets lies in the bucket of 30 ms, (20, 50] ms, and
the text passes `promtool check metrics` (skipped, saying so, without promtool). Needs
GPUSCHED_C_LIB and PYTHONPATH=python (ctest sets both)."""

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

from gpusched import Dispatcher, GpuschedError, Service  # noqa: E402

RUNS, RUN_MS = 20, 30


def run_requests():
    d = Dispatcher(gpus=1, services=[Service("infer", cost_ms=20, wait_ms=10, try_ms=5),
                                     Service('odd "name"\\x', cost_ms=20, wait_ms=10, try_ms=5)],
                   max_per_gpu=1)
    for _ in range(RUNS):
        d.run("infer", lambda gpu: time.sleep(RUN_MS / 1e3))
    with contextlib.suppress(ValueError):  # a failed request, counted in failures_total
        d.run("infer", fail)
    return d


def fail(gpu):
    raise ValueError("model crashed")


def buckets(text, family, service):
    """[(le, cumulative count)] of one service's histogram on GPU 0, +Inf last."""
    pattern = re.compile(r'^gpusched_dispatch_%s_bucket\{service="%s",gpu="0",le="([^"]+)"\} (\S+)$'
                         % (family, re.escape(service)), re.M)
    return [(float(le), float(v)) for le, v in pattern.findall(text)]


def quantile(q, bs):
    """histogram_quantile over cumulative buckets: (value, (lo, hi))."""
    total, below, lo = bs[-1][1], 0.0, 0.0
    for le, cumulative in bs:
        if cumulative >= q * total and cumulative > below:
            return lo + (le - lo) * (q * total - below) / (cumulative - below), (lo, le)
        below, lo = cumulative, le
    return None, None


class MetricsText(unittest.TestCase):
    def test_Issue42_CN113051059B_Claim6_histogram_counts_every_request_and_gives_its_p50(self):
        d = run_requests()
        text = d.metrics_text()
        d.close()
        bs = buckets(text, "latency_seconds", "infer")
        self.assertEqual(len(bs), 19)
        self.assertEqual(bs[-1][1], RUNS + 1)  # +Inf: every request, the failed one included
        self.assertIn(f'gpusched_dispatch_latency_seconds_count{{service="infer",gpu="0"}} {RUNS + 1}\n',
                      text)
        self.assertIn(f'gpusched_dispatch_requests_total{{service="infer"}} {RUNS + 1}\n', text)
        self.assertIn('gpusched_dispatch_failures_total{service="infer"} 1\n', text)
        p50, bucket = quantile(0.5, bs)
        self.assertEqual(bucket, (0.02, 0.05))  # the bucket of the known 30 ms
        self.assertTrue(0.02 < p50 <= 0.05, p50)
        self.assertIn('service="odd \\"name\\"\\\\x"', text)  # escaped
        print(f"  {RUNS + 1} requests of {RUN_MS} ms: p50 {p50 * 1e3:.1f} ms in bucket "
              f"({bucket[0] * 1e3:g}, {bucket[1] * 1e3:g}] ms")

    def test_Issue42_metrics_text_passes_promtool(self):
        promtool = shutil.which("promtool")
        if promtool is None:
            self.skipTest("promtool not found (apt-get install prometheus)")
        d = run_requests()
        text = d.metrics_text()
        d.close()
        r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                           text=True, check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_Issue42_metrics_text_after_close(self):
        d = Dispatcher(gpus=1, services=[Service("infer")])
        d.close()
        with self.assertRaises(GpuschedError):
            d.metrics_text()


if __name__ == "__main__":
    unittest.main(verbosity=2)
