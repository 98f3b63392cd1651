#!/usr/bin/python3
"""Tests of tests/integration/etcd_util.py against real etcd: a single member that keeps
its data across kill -9, a three-member cluster that carries on without its leader, and a
paused member; every process and data directory gone afterwards."""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import etcd_util  # noqa: E402
from etcd_util import EtcdCluster, EtcdError  # noqa: E402


@unittest.skipIf(etcd_util.unavailable(), etcd_util.unavailable())
class EtcdUtilTest(unittest.TestCase):
    def test_single_member_keeps_data_across_kill_and_restart(self):
        with EtcdCluster() as etcd:
            base = etcd.base_dir
            self.assertTrue(base.startswith("/dev/shm/"))
            rev = etcd.put("/a", b"\x00\xff")
            self.assertEqual(etcd.get("/a"), b"\x00\xff")
            self.assertIsNone(etcd.get("/missing"))
            etcd.put("/p/1", "x")
            etcd.put("/p/2", "y")
            etcd.put("/q", "z")
            self.assertEqual(etcd.get_prefix("/p/"), {b"/p/1": b"x", b"/p/2": b"y"})
            etcd.kill(0)
            self.assertFalse(etcd.running(0))
            with self.assertRaises(EtcdError):
                etcd.get("/a")
            etcd.restart(0)
            self.assertEqual(etcd.get("/a"), b"\x00\xff")
            self.assertGreater(etcd.revision(), rev)
            self.assertEqual(etcd.delete("/q"), 1)
            lease = etcd.grant(60)
            etcd.put("/leased", "v", lease=lease)
            with self.assertRaises(EtcdError):
                etcd.put("/bad", "v", lease=12345)  # no such lease
            etcd.stop(0)
            self.assertFalse(etcd.running(0))
        self.assertFalse(os.path.exists(base))

    def test_three_members_survive_the_leader_killed_and_a_member_paused(self):
        with EtcdCluster(members=3) as etcd:
            self.assertEqual(len(set(etcd.endpoints)), 3)
            self.assertEqual(len(etcd.endpoints_arg().split(",")), 3)
            etcd.put("/k", "1")
            leader = None
            deadline = time.monotonic() + 30
            while leader is None and time.monotonic() < deadline:
                leader = etcd.leader()
            self.assertIsNotNone(leader)
            etcd.kill(leader)
            # The others elect a new leader and take writes.
            deadline = time.monotonic() + 30
            while True:
                try:
                    etcd.put("/k", "2")
                    break
                except EtcdError:
                    self.assertLess(time.monotonic(), deadline)
                    time.sleep(0.1)
            self.assertEqual(etcd.get("/k"), b"2")
            etcd.restart(leader)
            self.assertEqual(etcd.call("kv/range", {"key": etcd_util.b64("/k")}, member=leader)
                             ["kvs"][0]["value"], etcd_util.b64("2"))
            other = (leader + 1) % 3
            etcd.pause(other)
            etcd.put("/k", "3")  # a majority is left
            etcd.resume(other)
            etcd.wait_healthy(other)
            self.assertEqual(etcd.get("/k"), b"3")


if __name__ == "__main__":
    unittest.main(verbosity=2)
