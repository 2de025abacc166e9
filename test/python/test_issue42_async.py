#!/usr/bin/env python3
"""Issue 42's asynchronous acquire through the Python wrapper and the real library:
Dispatcher.acquire_async awaited by 10,000 coroutines on one event loop, their leases run and
released by 4 worker threads (CN113051059B claims 1 and 5: a released GPU goes to the oldest
queued request): every coroutine gets one lease, in FIFO order, and the process keeps 5
threads. Then deadline, acquire_timeout, task cancellation, drain, close and bad arguments;
and acquire_async with placement inputs (priority order, memory that never fits, memory that
waits for a release).
Needs GPUSCHED_C_LIB and PYTHONPATH=python (ctest sets both). The only timing asserted is
loose."""

import asyncio
import os
import sys
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

from gpusched import (DEADLINE_EXCEEDED, DRAINING, Dispatcher,  # noqa: E402
                      GpuschedError, Service)

UNAVAILABLE = 6
FAILED_PRECONDITION = 4
REQUESTS, WORKERS, GPUS = 10000, 4, 4


def slots(gpus=1, acquire_timeout_ms=0):
    return Dispatcher(gpus=gpus, services=[Service("infer", cost_ms=20, wait_ms=10, try_ms=5)],
                      max_per_gpu=1, acquire_timeout_ms=acquire_timeout_ms)


def threads():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return -1


class AsyncAcquire(unittest.TestCase):
    def test_Issue42_CN113051059B_Claims1And5_ten_thousand_coroutines_on_four_threads(self):
        d = slots(gpus=GPUS)
        tickets = [0] * REQUESTS
        most_threads = [0]
        pool = ThreadPoolExecutor(max_workers=WORKERS)

        def work(lease):  # on a worker thread: the request's work is done at once
            most_threads[0] = max(most_threads[0], threads())
            d.release(lease)

        async def request(i):
            lease = await d.acquire_async("infer")
            tickets[i] = lease.ticket
            await asyncio.get_running_loop().run_in_executor(pool, work, lease)

        async def main():
            await asyncio.gather(*(request(i) for i in range(REQUESTS)))

        t0 = time.monotonic()
        asyncio.run(main())
        elapsed = time.monotonic() - t0
        pool.shutdown()
        self.assertTrue(all(tickets))
        self.assertEqual(len(set(tickets)), REQUESTS)  # one lease each
        self.assertEqual(tickets, sorted(tickets))  # FIFO: granted in the order they queued
        self.assertLessEqual(most_threads[0], 1 + WORKERS)
        m = d.service_metrics("infer")
        self.assertEqual(m["completed"], REQUESTS)
        d.close()
        print(f"  {REQUESTS} coroutines on {WORKERS} threads: {elapsed:.2f} s, at most "
              f"{most_threads[0]} threads, queue wait max {m['queue_ms_max']:.0f} ms")

    def test_Issue42_deadline_and_acquire_timeout(self):
        d = slots(acquire_timeout_ms=150)
        held = d.try_acquire("infer")

        async def main():
            t0 = time.monotonic()
            with self.assertRaises(GpuschedError) as e:
                await d.acquire_async("infer", deadline_ms=40)
            self.assertEqual(e.exception.code, DEADLINE_EXCEEDED)
            self.assertGreaterEqual(time.monotonic() - t0, 0.039)
            with self.assertRaises(GpuschedError) as e:
                await d.acquire_async("infer")
            self.assertEqual(e.exception.code, UNAVAILABLE)
            self.assertIn("acquire_timeout_ms", str(e.exception))
            self.assertGreaterEqual(time.monotonic() - t0, 0.149)

        asyncio.run(main())
        d.release(held)
        d.close()

    def test_Issue42_cancelling_the_task_cancels_the_request(self):
        d = slots()
        held = d.try_acquire("infer")

        async def main():
            first = asyncio.create_task(d.acquire_async("infer"))
            second = asyncio.create_task(d.acquire_async("infer"))
            await asyncio.sleep(0.01)
            first.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await first
            d.release(held)  # the GPU goes to `second`, not to the cancelled one
            lease = await asyncio.wait_for(second, 5)
            d.release(lease)
            # A task cancelled after its grant: the lease goes back by itself.
            third = asyncio.create_task(d.acquire_async("infer"))
            await asyncio.sleep(0)
            third.cancel()
            await asyncio.sleep(0.05)
            self.assertEqual(d.gpu_metrics(0)["running"], 0)

        asyncio.run(main())
        d.close()

    def test_Issue42_drain_ends_queued_requests_with_DRAINING(self):
        d = slots()
        held = d.try_acquire("infer")

        async def main():
            tasks = [asyncio.create_task(d.acquire_async("infer")) for _ in range(3)]
            await asyncio.sleep(0.01)
            d.release(held)  # granted to the first
            lease = await tasks[0]
            d.release(lease)  # to the second
            lease = await tasks[1]
            loop = asyncio.get_running_loop()
            drain = loop.run_in_executor(None, d.drain, 2000)
            await asyncio.sleep(0.05)
            with self.assertRaises(GpuschedError) as e:
                await tasks[2]
            self.assertEqual(e.exception.code, DRAINING)
            d.release(lease)
            await drain

        asyncio.run(main())

    def test_Issue42_close_ends_queued_requests(self):
        d = slots()
        d.set_gpu_enabled(0, False)

        async def main():
            tasks = [asyncio.create_task(d.acquire_async("infer")) for _ in range(5)]
            await asyncio.sleep(0.01)
            d.close()
            for t in tasks:
                with self.assertRaises(GpuschedError) as e:
                    await t
                self.assertEqual(e.exception.code, FAILED_PRECONDITION)

        asyncio.run(main())

    def test_Issue42_a_second_event_loop_after_the_first_closed(self):
        d = slots()

        async def once():
            lease = await d.acquire_async("infer")
            d.release(lease)
            return lease.gpu

        self.assertEqual(asyncio.run(once()), 0)
        self.assertEqual(asyncio.run(once()), 0)  # a new loop: the dispatcher follows it
        d.close()

    def test_Issue42_bad_arguments(self):
        d = slots()

        async def main():
            with self.assertRaises(ValueError):
                await d.acquire_async("infer", deadline_ms=-1)
            with self.assertRaises(ValueError):
                await d.acquire_async("infer", expected_ms=float("nan"))
            with self.assertRaises(GpuschedError) as e:
                await d.acquire_async("nope")
            self.assertIn("nope", str(e.exception))

        asyncio.run(main())
        d.close()

        async def after_close():
            await d.acquire_async("infer")

        with self.assertRaises(GpuschedError):
            asyncio.run(after_close())


class AsyncAcquireWithInputs(unittest.TestCase):
    """acquire_async with acquire's placement inputs (gpusched_dispatcher_acquire2_async)."""

    def test_Issue42_queued_requests_granted_by_priority_then_arrival(self):
        d = Dispatcher(gpus=1, services=[Service("infer", cost_ms=20, wait_ms=10, try_ms=5)],
                       max_per_gpu=1, gpu_memory_mib=[16384])
        held = d.try_acquire("infer")
        priorities = [(i * 7) % 5 - 2 for i in range(200)]  # -2..2, mixed
        granted = []

        async def request(i):
            lease = await d.acquire_async("infer", priority=priorities[i],
                                          expected_mem_mib=1024, model=f"m{i % 3}")
            granted.append(i)
            d.release(lease)

        async def main():
            tasks = [asyncio.create_task(request(i)) for i in range(len(priorities))]
            await asyncio.sleep(0.02)  # every request queued behind `held`
            d.release(held)
            await asyncio.wait_for(asyncio.gather(*tasks), 10)

        asyncio.run(main())
        d.close()
        expected = sorted(range(len(priorities)), key=lambda i: (-priorities[i], i))
        self.assertEqual(granted, expected)

    def test_Issue42_memory_larger_than_every_gpu_raises_at_once(self):
        d = Dispatcher(gpus=2, services=[Service("infer", cost_ms=20, wait_ms=10, try_ms=5)],
                       gpu_memory_mib=[4096, 16384])

        async def main():
            with self.assertRaises(GpuschedError) as e:
                await d.acquire_async("infer", expected_mem_mib=20000)
            self.assertIn("expected_mem_mib: 20000 MiB fits no GPU", str(e.exception))
            with self.assertRaises(TypeError):
                await d.acquire_async("infer", priority="high")

        asyncio.run(main())
        d.close()
        literal = Dispatcher(gpus=1, services=[Service("infer", cost_ms=20, wait_ms=10,
                                                       try_ms=5)], policy="literal")

        async def refused():
            with self.assertRaises(GpuschedError) as e:
                await literal.acquire_async("infer", model="resnet")
            self.assertIn("request.model", str(e.exception))

        asyncio.run(refused())
        literal.close()

    def test_Issue42_memory_fit_waits_for_a_release(self):
        d = Dispatcher(gpus=2, services=[Service("infer", cost_ms=20, wait_ms=10, try_ms=5)],
                       gpu_memory_mib=[4096, 16384])
        held = d.acquire("infer", expected_mem_mib=10000)
        self.assertEqual(held.gpu, 1)

        async def main():
            big = asyncio.create_task(d.acquire_async("infer", expected_mem_mib=10000))
            await asyncio.sleep(0.05)
            self.assertFalse(big.done())  # 4096 and 6384 MiB free: it waits
            d.release(held)
            lease = await asyncio.wait_for(big, 5)
            self.assertEqual(lease.gpu, 1)
            d.release(lease)

        asyncio.run(main())
        d.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
