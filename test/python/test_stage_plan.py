#!/usr/bin/env python3
"""CN110955526B claim 2 across nodes from Python: plan_stage over executors given by the caller
and over the server's nodes JSON, with and without the free-CPU limit, and a bad field named.
Needs GPUSCHED_C_LIB and PYTHONPATH=python (ctest sets both)."""

import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

from gpusched import GpuschedError, plan_stage  # noqa: E402

MIB = 1 << 20
EXECUTORS = [("big-gpu", "n1", [80 * MIB], 1), ("small-gpu", "n2", [20 * MIB], 4)]


class StagePlanTest(unittest.TestCase):
    def test_free_cpu_limit(self):
        self.assertEqual(plan_stage(2, 16 * MIB, executors=EXECUTORS),
                         [("big-gpu", 0), ("small-gpu", 0)])
        self.assertEqual(plan_stage(2, 16 * MIB, executors=EXECUTORS, min_free_cpu=2),
                         [("small-gpu", 0), ("small-gpu", -1)])

    def test_nodes_json(self):
        body = ('{"nodes": [{"name": "n1", "available": true, "free_cpus": 1, "gpus": '
                '[{"index": 0, "total_mib": 100, "allocated_mib": 90}]}]}')
        self.assertEqual(plan_stage(2, 8 * MIB, nodes_json=body), [("n1", 0), (None, -1)])

    def test_bad_field_is_named(self):
        with self.assertRaises(GpuschedError) as e:
            plan_stage(1, MIB, nodes_json='{"nodes": [{"name": "n", "gpus": 1}]}')
        self.assertIn("nodes[0].gpus: must be an array", str(e.exception))


if __name__ == "__main__":
    unittest.main()
