#!/usr/bin/env python3
"""The checker over a cluster fault run's whole history (issue 21, docs/design/0018).

A fault test writes what its clients saw as JSON lines, one event per line, in the order
they happened, and a final read of every partition from its start:

  {"type": "ack", "topic": T, "partition": P, "offset": O, "value": V[, "epoch": E]}
      a write the broker acknowledged (acks=all). V is unique per record the test sent
      and, for ordered checks, "<producer>:<sequence>" with sequences increasing in the
      order the producer sent them (one producer's records to one partition are acked in
      send order when idempotence is on). E, when known, is the leader epoch its batch
      was appended in (the batch's partition_leader_epoch as read back). O may be null:
      librdkafka acknowledges a batch that failed with a retriable error "implicitly",
      without its offset, when a later batch of the same idempotent producer to the
      partition succeeded (its sequences prove the earlier one was written); such a
      record must be in the final read of its partition, once. O = -1 says the same.
  {"type": "leader", "topic": T, "partition": P, "epoch": E, "node": N}
      broker N acted as the partition's leader in epoch E (from the brokers' own logs, or
      etcd's history); one event per claim, repeats allowed.
  {"type": "read", "topic": T, "partition": P, "offset": O, "value": V}
      a record of the final read (every partition from its log start to its end).
  {"type": "commit", "group": G, "topic": T, "partition": P, "offset": O}
      a committed offset the test observed (OffsetFetch), in observation order; O = -1
      says the group had no committed offset there any more.
  {"type": "end", "topic": T, "partition": P, "offset": O}
      the end the final read reached for a partition (so an acknowledged offset past it
      is known lost, not unread).
  {"type": "txn", "id": I, "records": [[T, P, V], ...], "outcome": R}
      a transaction of a transactional producer: the records it produced in it (in send
      order; values unique) and how it ended: "committed" (commit_transaction returned),
      "aborted" (its commit was never asked for, or abort_transaction returned after a
      failed commit: the coordinator completed an abort) or "unknown" (a commit raised and
      no abort was acknowledged after it: it may have happened or not). The final read of
      a topic such records name must be read_committed.

Violations it finds:
  lost       an acknowledged record is not at its offset in the final read;
  overwrite  the final read holds another value at an acknowledged offset, or two acks
             name one offset with different values (two leaders accepted writes at the
             same offset: split brain);
  duplicate  a value appears more than once in the final read (idempotence failed);
  order      one producer's records in one partition are not in sequence order;
  backwards  a group's committed offset for a partition went down;
  vanished   a group's committed offset for a partition was gone (OffsetFetch answered
             none after one had been seen); the commits after it are checked from there;
  split      two brokers acted as leader of one partition in one leader epoch;
  epoch      an acknowledged write's epoch was led by nobody the history names (only
             checked when the history has leader events for that partition);
  txn-lost   a record of a committed transaction is not in the final read of its
             partition;
  txn-aborted  a record of an aborted transaction is in the final read;
  txn-partial  a transaction whose outcome is unknown is in the final read in part only
             (all or nothing);
  txn-order  a transaction's records in one partition are not in send order;
  txn-stray  the final read of a transactional topic holds a value no transaction sent;
  malformed  a line that is not one of the events above.

Prints a summary; exits 1 with each violation listed (and the run's seed, given with
--seed) when there is any, 0 otherwise. Usable as a module: check(events) -> Report.
Standard library only.
"""

import argparse
import json
import sys
from collections import defaultdict


class Report:
    def __init__(self):
        self.violations = []  # (kind, message)
        self.acked = 0
        self.read = 0
        self.commits = 0

    def add(self, kind, message):
        self.violations.append((kind, message))

    def kinds(self):
        return sorted({k for k, _ in self.violations})

    def ok(self):
        return not self.violations


_FIELDS = {
    "ack": (("topic", str), ("partition", int), ("offset", int), ("value", str)),
    "read": (("topic", str), ("partition", int), ("offset", int), ("value", str)),
    "commit": (("group", str), ("topic", str), ("partition", int), ("offset", int)),
    "end": (("topic", str), ("partition", int), ("offset", int)),
    "leader": (("topic", str), ("partition", int), ("epoch", int), ("node", int)),
}
_OPTIONAL = {"ack": (("epoch", int),)}
TXN_OUTCOMES = ("committed", "aborted", "unknown")


def _parse_txn(ev):
    if not isinstance(ev.get("id"), str):
        raise ValueError(f"txn: field 'id' must be a str, got {ev.get('id')!r}")
    if ev.get("outcome") not in TXN_OUTCOMES:
        raise ValueError(f"txn: field 'outcome' must be one of {', '.join(TXN_OUTCOMES)}, "
                         f"got {ev.get('outcome')!r}")
    recs = ev.get("records")
    if not isinstance(recs, list):
        raise ValueError(f"txn: field 'records' must be a list, got {recs!r}")
    for rec in recs:
        if (not isinstance(rec, list) or len(rec) != 3 or not isinstance(rec[0], str)
                or not isinstance(rec[1], int) or isinstance(rec[1], bool) or rec[1] < 0
                or not isinstance(rec[2], str)):
            raise ValueError(f"txn: a record must be [topic, partition >= 0, value], got {rec!r}")
    return ev


def parse_event(line):
    """One JSON line to a dict with checked fields; raises ValueError saying what is wrong."""
    try:
        ev = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(ev, dict):
        raise ValueError("not a JSON object")
    kind = ev.get("type")
    if kind == "txn":
        return _parse_txn(ev)
    if kind not in _FIELDS:
        raise ValueError(f"unknown event type {kind!r}")
    for name, typ in _FIELDS[kind]:
        v = ev.get(name)
        # bool is an int in Python: refuse it explicitly.
        if kind == "ack" and name == "offset" and v is None:
            continue  # an implicit acknowledgement: the offset is not known
        if not isinstance(v, typ) or isinstance(v, bool):
            raise ValueError(f"{kind}: field {name!r} must be a {typ.__name__}, got {v!r}")
        if typ is int and v < 0 and name in ("partition", "offset", "epoch", "node"):
            if not (kind in ("commit", "ack") and name == "offset" and v == -1):
                raise ValueError(f"{kind}: field {name!r} is negative ({v})")
    for name, typ in _OPTIONAL.get(kind, ()):
        if name not in ev:
            continue
        v = ev[name]
        if not isinstance(v, typ) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{kind}: field {name!r} must be a non-negative int, got {v!r}")
    return ev


def _sequence(value):
    """(producer, sequence) from "<producer>:<sequence>", or None."""
    producer, sep, seq = value.rpartition(":")
    if not sep or not producer or not seq.isdigit():
        return None
    return producer, int(seq)


def check(events):
    """Checks a list of parsed events (parse_event's dicts) in history order."""
    r = Report()
    acks = {}  # (topic, partition, offset) -> value
    acks_order = defaultdict(list)  # (topic, partition, producer) -> [(offset, seq)]
    final = {}  # (topic, partition, offset) -> value
    seen_values = defaultdict(list)  # value -> [(topic, partition, offset)]
    ends = {}
    last_commit = {}  # (group, topic, partition) -> offset
    leaders = defaultdict(set)  # (topic, partition, epoch) -> {node}
    led = set()  # (topic, partition) with leader events
    acked_epochs = defaultdict(list)  # (topic, partition, epoch) -> [offset]
    implicit = []  # (topic, partition, value): acknowledged without an offset
    txns = []  # txn events, in history order

    for ev in events:
        kind = ev["type"]
        if kind == "ack" and (ev["offset"] is None or ev["offset"] == -1):
            r.acked += 1
            implicit.append((ev["topic"], ev["partition"], ev["value"]))
        elif kind == "ack":
            r.acked += 1
            key = (ev["topic"], ev["partition"], ev["offset"])
            prev = acks.get(key)
            if prev is not None and prev != ev["value"]:
                r.add("overwrite", f"{_tp(key)} offset {key[2]} acknowledged twice: "
                      f"{prev!r} and {ev['value']!r} (two leaders in one epoch?)")
            acks[key] = ev["value"]
            if "epoch" in ev:
                acked_epochs[(ev["topic"], ev["partition"], ev["epoch"])].append(ev["offset"])
            seq = _sequence(ev["value"])
            if seq is not None:
                acks_order[(ev["topic"], ev["partition"], seq[0])].append((ev["offset"], seq[1]))
        elif kind == "read":
            r.read += 1
            key = (ev["topic"], ev["partition"], ev["offset"])
            if key in final:
                r.add("duplicate", f"{_tp(key)} offset {key[2]} read twice in the final read")
            final[key] = ev["value"]
            seen_values[ev["value"]].append(key)
        elif kind == "commit":
            r.commits += 1
            key = (ev["group"], ev["topic"], ev["partition"])
            prev = last_commit.get(key)
            if prev is not None and ev["offset"] == -1:
                r.add("vanished", f"group {key[0]} {key[1]}-{key[2]}: committed offset "
                      f"went from {prev} to nothing")
                # One violation, not one per later commit: the group starts again from
                # wherever its consumers reset to.
                del last_commit[key]
                continue
            elif prev is not None and ev["offset"] < prev:
                r.add("backwards", f"group {key[0]} {key[1]}-{key[2]}: committed offset "
                      f"went from {prev} to {ev['offset']}")
            if ev["offset"] >= 0:
                last_commit[key] = ev["offset"] if prev is None else max(prev, ev["offset"])
        elif kind == "end":
            ends[(ev["topic"], ev["partition"])] = ev["offset"]
        elif kind == "leader":
            leaders[(ev["topic"], ev["partition"], ev["epoch"])].add(ev["node"])
            led.add((ev["topic"], ev["partition"]))
        elif kind == "txn":
            txns.append(ev)

    for key, nodes in sorted(leaders.items()):
        if len(nodes) > 1:
            acked = acked_epochs.get(key, [])
            r.add("split", f"{_tp(key)} epoch {key[2]} was led by brokers {sorted(nodes)}"
                  f" ({len(acked)} acknowledged writes in it)")
    for key, offsets in sorted(acked_epochs.items()):
        if key[:2] in led and key not in leaders:
            r.add("epoch", f"{_tp(key)}: {len(offsets)} acknowledged writes (first at offset "
                  f"{min(offsets)}) in epoch {key[2]}, which no broker led")

    for key, value in sorted(acks.items()):
        got = final.get(key)
        if got is None:
            end = ends.get(key[:2])
            where = f" (the final read ended at {end})" if end is not None else ""
            r.add("lost", f"{_tp(key)} offset {key[2]}: acknowledged {value!r} is gone{where}")
        elif got != value:
            r.add("overwrite", f"{_tp(key)} offset {key[2]}: acknowledged {value!r}, "
                  f"the log holds {got!r}")

    for topic, partition, value in implicit:
        places = seen_values.get(value, [])
        if not any(p[:2] == (topic, partition) for p in places):
            r.add("lost", f"{topic}-{partition}: {value!r} (acknowledged without an offset) "
                  "is not in the final read")
        seq = _sequence(value)
        if seq is not None and len(places) == 1:
            acks_order[(topic, partition, seq[0])].append((places[0][2], seq[1]))

    for value, places in sorted(seen_values.items()):
        if len(places) > 1:
            where = ", ".join(f"{_tp(p)}@{p[2]}" for p in places)
            r.add("duplicate", f"value {value!r} is in the log {len(places)} times: {where}")

    _check_txns(r, txns, final, seen_values)

    for (topic, partition, producer), entries in sorted(acks_order.items()):
        entries.sort()
        for (o1, s1), (o2, s2) in zip(entries, entries[1:]):
            if s2 <= s1:
                r.add("order", f"{topic}-{partition} producer {producer}: sequence {s2} at "
                      f"offset {o2} after sequence {s1} at offset {o1}")
    return r


def _check_txns(r, txns, final, seen_values):
    """All or nothing per transaction in the (read_committed) final read: a committed one
    whole, once, in send order per partition; an aborted one not at all; an unknown one
    whole or not at all; and nothing in a transactional topic that no transaction sent."""
    sent = set()  # values the transactions sent
    topics = set()
    for t in txns:
        found, missing = [], []
        for topic, partition, value in t["records"]:
            sent.add(value)
            topics.add(topic)
            at = [o for tp, p, o in seen_values.get(value, ()) if (tp, p) == (topic, partition)]
            (found if at else missing).append((topic, partition, value, at[0] if at else None))
        name = f"transaction {t['id']} ({t['outcome']}, {len(t['records'])} records)"
        if t["outcome"] == "committed" and missing:
            r.add("txn-lost", f"{name}: {len(missing)} not read back, first "
                  f"{missing[0][2]!r} in {missing[0][0]}-{missing[0][1]}")
        elif t["outcome"] == "aborted" and found:
            r.add("txn-aborted", f"{name}: {len(found)} read back, first {found[0][2]!r} at "
                  f"{found[0][0]}-{found[0][1]}@{found[0][3]}")
        elif t["outcome"] == "unknown" and found and missing:
            r.add("txn-partial", f"{name}: {len(found)} read back, {len(missing)} not (first "
                  f"missing {missing[0][2]!r} in {missing[0][0]}-{missing[0][1]})")
        last = {}  # (topic, partition) -> offset of the previous record found
        for topic, partition, value, offset in found:
            prev = last.get((topic, partition))
            if prev is not None and offset < prev:
                r.add("txn-order", f"{name}: {value!r} at {topic}-{partition}@{offset}, "
                      f"sent after the record at offset {prev}")
            last[(topic, partition)] = offset
    strays = sorted(k for k, v in final.items() if k[0] in topics and v not in sent)
    if strays:
        k = strays[0]
        r.add("txn-stray", f"{len(strays)} records of transactional topics no transaction "
              f"sent, first {final[k]!r} at {_tp(k)}@{k[2]}")


def _tp(key):
    return f"{key[0]}-{key[1]}"


def check_lines(lines):
    """Parses and checks JSON lines; malformed lines are violations of their own."""
    events, bad = [], []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            events.append(parse_event(line))
        except ValueError as e:
            bad.append(f"line {n}: {e}")
    r = check(events)
    for b in bad:
        r.add("malformed", b)
    return r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("history", help="JSON lines file, - for standard input")
    ap.add_argument("--seed", help="the run's seed, printed with any violation")
    args = ap.parse_args(argv)
    f = sys.stdin if args.history == "-" else open(args.history, encoding="utf-8")
    with f:
        r = check_lines(f)
    print(f"history: {r.acked} acknowledged, {r.read} read back, {r.commits} commits observed, "
          f"{len(r.violations)} violations")
    for kind, msg in r.violations[:200]:
        print(f"  {kind}: {msg}")
    if len(r.violations) > 200:
        print(f"  ... and {len(r.violations) - 200} more")
    if not r.ok():
        if args.seed is not None:
            print(f"seed: {args.seed}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
