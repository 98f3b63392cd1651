#!/usr/bin/env python3
"""Seed corpus for fuzz/consumer_group_fuzz.cc, written to the directory given (one file per
seed): consumer protocol subscriptions (v0-v3) and assignments as librdkafka and the Java
client write them, and a few broken ones."""
import os
import struct
import sys


def string(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def nbytes(b):
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def topic_partitions(tps):
    out = struct.pack(">i", len(tps))
    for topic, parts in tps:
        out += string(topic) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    return out


def subscription(version, topics, user_data=None, owned=(), generation=-1, rack=None):
    out = struct.pack(">h", version) + struct.pack(">i", len(topics)) + b"".join(string(t) for t in topics)
    out += nbytes(user_data)
    if version >= 1:
        out += topic_partitions(owned)
    if version >= 2:
        out += struct.pack(">i", generation)
    if version >= 3:
        out += struct.pack(">h", -1) if rack is None else string(rack)
    return out


def assignment(tps, user_data=None):
    return struct.pack(">h", 0) + topic_partitions(tps) + nbytes(user_data)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = {
        "sub_v0": subscription(0, ["events"]),
        "sub_v0_short": subscription(0, ["a", "b"])[:-4],
        "sub_v1": subscription(1, ["events"], b"\x01", [("events", [0, 3])]),
        "sub_v3": subscription(3, ["t1", "t2"], None, [("t1", [1])], 7, "rack-a"),
        "sub_v9": subscription(3, ["t"]).replace(b"\x00\x03", b"\x00\x09", 1) + b"extra",
        "assign": assignment([("events", [0, 1, 2]), ("other", [5])]),
        "assign_empty": assignment([]),
        "broken_count": b"\x00\x00\x7f\xff\xff\xff",
        "broken_name": b"\x00\x00\x00\x00\x00\x01\x00\x09a",
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
