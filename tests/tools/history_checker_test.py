#!/usr/bin/env python3
"""Tests of history_checker.py: clean histories pass, each kind of violation is found,
malformed lines are reported and do not stop the check."""

import io
import json
import os
import sys
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import history_checker as hc  # noqa: E402


def ack(p, o, v, t="t"):
    return {"type": "ack", "topic": t, "partition": p, "offset": o, "value": v}


def read(p, o, v, t="t"):
    return {"type": "read", "topic": t, "partition": p, "offset": o, "value": v}


def commit(p, o, g="g", t="t"):
    return {"type": "commit", "group": g, "topic": t, "partition": p, "offset": o}


def leader(p, e, n, t="t"):
    return {"type": "leader", "topic": t, "partition": p, "epoch": e, "node": n}


def txn(i, outcome, *records):
    return {"type": "txn", "id": i, "outcome": outcome, "records": [list(x) for x in records]}


def lines(events):
    return [json.dumps(e) for e in events]


class CheckerTest(unittest.TestCase):
    def test_clean_history_passes(self):
        ev = [ack(0, 0, "a:0"), ack(0, 1, "a:1"), ack(1, 0, "b:0"), commit(0, 1), commit(0, 2),
              read(0, 0, "a:0"), read(0, 1, "a:1"), read(0, 2, "a:2"), read(1, 0, "b:0")]
        r = hc.check_lines(lines(ev))
        self.assertTrue(r.ok(), r.violations)
        self.assertEqual((r.acked, r.read, r.commits), (3, 4, 2))

    def test_unacknowledged_records_may_be_lost_or_kept(self):
        # Only acknowledged writes must survive; an unacked one at a gap is fine.
        r = hc.check_lines(lines([ack(0, 0, "a:0"), read(0, 0, "a:0"), read(0, 5, "a:3")]))
        self.assertTrue(r.ok(), r.violations)

    def test_lost_acknowledged_record(self):
        ev = [ack(0, 0, "a:0"), ack(0, 1, "a:1"), read(0, 0, "a:0"),
              {"type": "end", "topic": "t", "partition": 0, "offset": 1}]
        r = hc.check_lines(lines(ev))
        self.assertEqual(r.kinds(), ["lost"])
        self.assertIn("final read ended at 1", r.violations[0][1])

    def test_implicit_ack_without_offset(self):
        # librdkafka acks a failed batch implicitly once a later one succeeded: no offset.
        ok = [ack(0, 0, "a:0"), ack(0, None, "a:1"), ack(0, 2, "a:2"),
              read(0, 0, "a:0"), read(0, 1, "a:1"), read(0, 2, "a:2")]
        r = hc.check_lines(lines(ok))
        self.assertTrue(r.ok(), r.violations)
        self.assertEqual(r.acked, 3)
        gone = [ack(0, None, "a:1"), read(0, 0, "a:0"), read(1, 0, "a:1")]
        self.assertEqual(hc.check_lines(lines(gone)).kinds(), ["lost"])
        twice = [ack(0, None, "a:1"), read(0, 0, "a:1"), read(0, 1, "a:1")]
        self.assertEqual(hc.check_lines(lines(twice)).kinds(), ["duplicate"])
        late = [ack(0, 0, "a:2"), ack(0, None, "a:1"), read(0, 0, "a:2"), read(0, 1, "a:1")]
        self.assertEqual(hc.check_lines(lines(late)).kinds(), ["order"])

    def test_overwritten_offset(self):
        r = hc.check_lines(lines([ack(0, 0, "a:0"), read(0, 0, "b:0")]))
        self.assertEqual(r.kinds(), ["overwrite"])

    def test_two_acks_for_one_offset_is_split_brain(self):
        r = hc.check_lines(lines([ack(0, 3, "a:0"), ack(0, 3, "b:0"), read(0, 3, "a:0")]))
        self.assertIn("overwrite", r.kinds())
        self.assertTrue(any("two leaders" in m for _, m in r.violations))

    def test_duplicate_value(self):
        ev = [ack(0, 0, "a:0"), read(0, 0, "a:0"), read(0, 1, "a:0")]
        self.assertEqual(hc.check_lines(lines(ev)).kinds(), ["duplicate"])

    def test_duplicate_across_partitions(self):
        ev = [read(0, 0, "x"), read(1, 0, "x")]
        self.assertEqual(hc.check_lines(lines(ev)).kinds(), ["duplicate"])

    def test_order_within_a_producer(self):
        ev = [ack(0, 0, "a:1"), ack(0, 1, "a:0"), read(0, 0, "a:1"), read(0, 1, "a:0")]
        self.assertEqual(hc.check_lines(lines(ev)).kinds(), ["order"])

    def test_order_is_per_partition_and_producer(self):
        ev = [ack(0, 0, "a:5"), ack(1, 0, "a:1"), ack(0, 1, "b:0"), ack(0, 2, "a:6"),
              read(0, 0, "a:5"), read(1, 0, "a:1"), read(0, 1, "b:0"), read(0, 2, "a:6")]
        self.assertTrue(hc.check_lines(lines(ev)).ok())

    def test_committed_offset_backwards(self):
        r = hc.check_lines(lines([commit(0, 10), commit(0, 12), commit(0, 11)]))
        self.assertEqual(r.kinds(), ["backwards"])
        self.assertIn("from 12 to 11", r.violations[0][1])

    def test_commits_are_per_group_and_partition(self):
        ev = [commit(0, 10), commit(1, 2), commit(0, 3, g="other"), commit(0, 10)]
        self.assertTrue(hc.check_lines(lines(ev)).ok())

    def test_a_vanished_commit(self):
        r = hc.check_lines(lines([commit(0, 5), commit(0, -1), commit(0, 6)]))
        self.assertEqual(r.kinds(), ["vanished"])
        self.assertIn("from 5 to nothing", r.violations[0][1])
        r = hc.check_lines(lines([commit(0, -1), commit(0, 3)]))
        self.assertTrue(r.ok(), r.violations)
        # Gone, then committed again from the start: one violation, and the history goes on
        # from there.
        r = hc.check_lines(lines([commit(0, 5), commit(0, -1), commit(0, 2), commit(0, 3)]))
        self.assertEqual([k for k, _ in r.violations], ["vanished"])
        r = hc.check_lines(lines([commit(0, 5), commit(0, -1), commit(0, 3), commit(0, 2)]))
        self.assertEqual(r.kinds(), ["backwards", "vanished"])

    def test_one_leader_per_epoch(self):
        a = dict(ack(0, 0, "a:0"), epoch=3)
        ev = [leader(0, 3, 1), leader(0, 3, 1), leader(0, 4, 2), a, read(0, 0, "a:0")]
        r = hc.check_lines(lines(ev))
        self.assertTrue(r.ok(), r.violations)
        r = hc.check_lines(lines(ev + [leader(0, 3, 2)]))
        self.assertEqual(r.kinds(), ["split"])
        self.assertIn("epoch 3 was led by brokers [1, 2] (1 acknowledged", r.violations[0][1])
        # Epochs are per partition.
        r = hc.check_lines(lines(ev + [leader(1, 3, 2)]))
        self.assertTrue(r.ok(), r.violations)

    def test_an_acknowledged_epoch_nobody_led(self):
        ev = [leader(0, 3, 1), dict(ack(0, 0, "a:0"), epoch=5), read(0, 0, "a:0")]
        r = hc.check_lines(lines(ev))
        self.assertEqual(r.kinds(), ["epoch"])
        # Without leader events for the partition there is nothing to hold it against.
        r = hc.check_lines(lines([dict(ack(1, 0, "a:0"), epoch=5), read(1, 0, "a:0")]))
        self.assertTrue(r.ok(), r.violations)

    def test_malformed_leader_and_epoch_fields(self):
        bad = [leader(0, -2, 1), leader(0, 1, "x"), dict(ack(0, 0, "a:0"), epoch=-1),
               dict(ack(0, 0, "a:0"), epoch="3"), commit(0, -2)]
        r = hc.check_lines(lines(bad))
        self.assertEqual([k for k, _ in r.violations], ["malformed"] * 5)

    def test_an_ack_without_offset_must_be_read_back_in_its_partition(self):
        ev = [ack(0, -1, "a:0"), read(0, 4, "a:0")]
        self.assertTrue(hc.check_lines(lines(ev)).ok())
        r = hc.check_lines(lines([ack(0, -1, "a:0"), read(1, 4, "a:0")]))
        self.assertEqual(r.kinds(), ["lost"])
        r = hc.check_lines(lines([ack(0, -1, "a:0"), read(0, 4, "a:0"), read(0, 5, "a:0")]))
        self.assertEqual(r.kinds(), ["duplicate"])

    def test_transactions_clean(self):
        ev = [txn("x:1", "committed", ("x", 0, "x1a"), ("x", 1, "x1b"), ("x", 0, "x1c")),
              txn("x:2", "aborted", ("x", 0, "x2a")),
              txn("x:3", "unknown", ("x", 1, "x3a"), ("x", 2, "x3b")),
              txn("x:4", "unknown", ("x", 1, "x4a")),
              read(0, 0, "x1a", t="x"), read(0, 2, "x1c", t="x"), read(1, 0, "x1b", t="x"),
              read(1, 3, "x3a", t="x"), read(2, 0, "x3b", t="x")]
        r = hc.check_lines(lines(ev))
        self.assertTrue(r.ok(), r.violations)

    def test_a_committed_transaction_lost_in_part(self):
        ev = [txn("x:1", "committed", ("x", 0, "x1a"), ("x", 1, "x1b")), read(0, 0, "x1a", t="x")]
        r = hc.check_lines(lines(ev))
        self.assertEqual(r.kinds(), ["txn-lost"])
        self.assertIn("'x1b' in x-1", r.violations[0][1])
        # In another partition than it was sent to is not read back either.
        ev = [txn("x:1", "committed", ("x", 0, "x1a")), read(1, 0, "x1a", t="x")]
        self.assertEqual(hc.check_lines(lines(ev)).kinds(), ["txn-lost"])

    def test_a_committed_transaction_read_twice(self):
        ev = [txn("x:1", "committed", ("x", 0, "x1a")), read(0, 0, "x1a", t="x"),
              read(0, 1, "x1a", t="x")]
        self.assertEqual(hc.check_lines(lines(ev)).kinds(), ["duplicate"])

    def test_an_aborted_transaction_read(self):
        ev = [txn("x:2", "aborted", ("x", 0, "x2a"), ("x", 0, "x2b")), read(0, 5, "x2b", t="x")]
        r = hc.check_lines(lines(ev))
        self.assertEqual(r.kinds(), ["txn-aborted"])
        self.assertIn("x-0@5", r.violations[0][1])

    def test_an_unknown_transaction_is_all_or_nothing(self):
        ev = [txn("x:3", "unknown", ("x", 0, "x3a"), ("x", 1, "x3b")), read(0, 0, "x3a", t="x")]
        self.assertEqual(hc.check_lines(lines(ev)).kinds(), ["txn-partial"])

    def test_a_transaction_out_of_order(self):
        ev = [txn("x:1", "committed", ("x", 0, "x1a"), ("x", 0, "x1b")),
              read(0, 0, "x1b", t="x"), read(0, 1, "x1a", t="x")]
        self.assertEqual(hc.check_lines(lines(ev)).kinds(), ["txn-order"])

    def test_a_stray_record_in_a_transactional_topic(self):
        ev = [txn("x:1", "committed", ("x", 0, "x1a")), read(0, 0, "x1a", t="x"),
              read(0, 1, "zz", t="x"), read(0, 0, "other", t="t")]
        r = hc.check_lines(lines(ev))
        self.assertEqual(r.kinds(), ["txn-stray"])
        self.assertIn("'zz' at x-0@1", r.violations[0][1])

    def test_malformed_transactions(self):
        ok = txn("x:1", "committed", ("x", 0, "v"))
        bad = [dict(ok, outcome="maybe"), dict(ok, id=3), dict(ok, records="v"),
               dict(ok, records=[["x", -1, "v"]]), dict(ok, records=[["x", 0]]),
               dict(ok, records=[["x", True, "v"]]), dict(ok, records=[[1, 0, "v"]])]
        r = hc.check_lines(lines(bad))
        self.assertEqual([k for k, _ in r.violations], ["malformed"] * len(bad))

    def test_malformed_lines(self):
        bad = [
            "{not json",
            "[]",
            json.dumps({"type": "nope"}),
            json.dumps({"type": "ack", "topic": "t", "partition": "0", "offset": 0, "value": "v"}),
            json.dumps({"type": "ack", "topic": "t", "partition": 0, "offset": -2, "value": "v"}),
            json.dumps({"type": "read", "topic": "t", "partition": True, "offset": 0,
                        "value": "v"}),
            json.dumps({"type": "commit", "group": "g", "topic": "t", "partition": 0}),
        ]
        r = hc.check_lines(bad + lines([ack(0, 0, "a:0"), read(0, 0, "a:0")]))
        self.assertEqual(r.kinds(), ["malformed"])
        self.assertEqual(len(r.violations), len(bad))
        self.assertEqual(r.acked, 1)  # the good lines were still checked

    def test_main_exit_code_and_seed(self):
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"hc-{os.getpid()}.jsonl")
        try:
            with open(path, "w") as f:
                f.write("\n".join(lines([ack(0, 0, "a:0")])))
            out = io.StringIO()
            with redirect_stdout(out):
                rc = hc.main([path, "--seed", "1234"])
            self.assertEqual(rc, 1)
            self.assertIn("lost", out.getvalue())
            self.assertIn("seed: 1234", out.getvalue())
            with open(path, "w") as f:
                f.write("\n".join(lines([ack(0, 0, "a:0"), read(0, 0, "a:0")])))
            with redirect_stdout(io.StringIO()):
                self.assertEqual(hc.main([path]), 0)
        finally:
            os.unlink(path)


if __name__ == "__main__":
    unittest.main()
