"""Tests for runbox_agent.Workers, the threads requests run on.

Run from deploy/sandbox/agent:  python3 -m unittest discover -s tests -t .
"""
import threading
import unittest

import runbox_agent


class WorkersTest(unittest.TestCase):
    def test_a_request_after_another_reuses_the_idle_thread(self):
        workers = runbox_agent.Workers(keep=2, idle_s=30)
        ran_on = []
        for _ in range(3):
            done = threading.Event()
            workers.submit(lambda d=done: (ran_on.append(threading.get_ident()), d.set()))
            self.assertTrue(done.wait(5))
            # Each job returns its thread to the idle ones before the next is submitted.
            self.assertTrue(_until(lambda: workers.idle == 1))
        self.assertEqual(len(set(ran_on)), 1)
        self.assertEqual(workers.threads, 1)

    def test_requests_that_wait_for_each_other_each_get_a_thread(self):
        # Five requests that only finish together: a pool with a cap below five would hang.
        workers = runbox_agent.Workers(keep=1, idle_s=30)
        barrier = threading.Barrier(5, timeout=5)
        finished = []
        for _ in range(5):
            workers.submit(lambda: finished.append(barrier.wait()))
        self.assertTrue(_until(lambda: len(finished) == 5))
        self.assertEqual(workers.threads, 5)

    def test_idle_threads_beyond_the_ones_kept_end(self):
        workers = runbox_agent.Workers(keep=1, idle_s=0.05)
        barrier = threading.Barrier(3, timeout=5)
        for _ in range(3):
            workers.submit(barrier.wait)
        self.assertTrue(_until(lambda: workers.threads == 1, timeout=5))

    def test_a_job_that_raises_does_not_take_its_thread_down(self):
        workers = runbox_agent.Workers(keep=1, idle_s=30)
        workers.submit(lambda: 1 / 0)
        done = threading.Event()
        self.assertTrue(_until(lambda: workers.idle == 1))
        workers.submit(done.set)
        self.assertTrue(done.wait(5))
        self.assertEqual(workers.threads, 1)


def _until(predicate, timeout=5.0):
    done = threading.Event()
    deadline = timeout
    step = 0.01
    while deadline > 0:
        if predicate():
            return True
        done.wait(step)
        deadline -= step
    return predicate()
