#!/usr/bin/env python3
"""Seed corpus for fuzz/consumer_protocol_fuzz.cc, written to the directory given (one file per seed).

Each seed is one ConsumerProtocolSubscription or ConsumerProtocolAssignment (the target decodes
every input as both): every version 0..3 and a newer one, what librdkafka and the Java client
send, and the malformed cases (truncated, trailing bytes, negative and huge lengths).
"""
import os
import struct
import sys


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def string(s):
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def nbytes(b):
    return i32(-1) if b is None else i32(len(b)) + b


def topic_partitions(tps):
    out = i32(len(tps))
    for topic, parts in tps:
        out += string(topic) + i32(len(parts)) + b"".join(i32(p) for p in parts)
    return out


def subscription(version, topics, user_data=None, owned=(), generation=-1, rack=None):
    out = i16(version) + i32(len(topics)) + b"".join(string(t) for t in topics) + nbytes(user_data)
    if version >= 1:
        out += topic_partitions(list(owned))
    if version >= 2:
        out += i32(generation)
    if version >= 3:
        out += string(rack)
    return out


def assignment(version, tps, user_data=None):
    return i16(version) + topic_partitions(tps) + nbytes(user_data)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    owned = [("orders", [0, 3]), ("payments", [1])]
    seeds = {}
    for v in range(4):
        seeds["sub_v%d" % v] = subscription(v, ["orders", "payments"], b"\x00\x00\x00\x07", owned, 7, "rack-a")
        seeds["asg_v%d" % v] = assignment(v, owned, b"ud")
    seeds["sub_empty"] = subscription(3, [])
    seeds["sub_nulls"] = subscription(3, ["t"], None, [], -1, None)
    # librdkafka 2.0: v1, empty user data, empty owned partitions.
    seeds["sub_librdkafka"] = subscription(1, ["abc"], b"", [])
    # Conflicting claims: the same partition twice, a partition past the topic's end.
    seeds["sub_claims"] = subscription(2, ["abcd", "ab"], None, [("abcd", [0, 0, 9, -1]), ("ab", [1])], 3)
    # A newer version: v3's fields, then a future field the decoder passes over.
    seeds["sub_v4_trailing"] = i16(4) + subscription(3, ["t0"], None, [("t0", [0])], 1, "r")[2:] + b"\x00\x01future"
    seeds["asg_v9_trailing"] = assignment(9, [("t", [0])]) + b"\xff"
    seeds["asg_empty"] = assignment(0, [])

    full = seeds["sub_v3"]
    seeds["bad_truncated_sub"] = full[:len(full) - 3]
    seeds["bad_truncated_asg"] = seeds["asg_v0"][:9]
    seeds["bad_one_byte"] = b"\x00"
    seeds["bad_empty"] = b""
    seeds["bad_trailing_v1"] = subscription(1, ["t"]) + b"\x00"
    seeds["bad_negative_version"] = i16(-1) + full[2:]
    seeds["bad_null_topics"] = i16(0) + i32(-1) + nbytes(None)
    seeds["bad_negative_count"] = i16(0) + i32(-2) + nbytes(None)
    seeds["bad_null_topic"] = i16(0) + i32(1) + i16(-1) + nbytes(None)
    seeds["bad_negative_string"] = i16(0) + i32(1) + i16(-2) + nbytes(None)
    seeds["bad_negative_bytes"] = i16(0) + i32(0) + i32(-2)
    seeds["bad_negative_rack"] = subscription(3, ["t"])[:-2] + i16(-5)
    seeds["bad_huge_topics"] = i16(0) + i32(0x7FFFFFFF) + string("t")
    seeds["bad_huge_partitions"] = i16(0) + i32(1) + string("t") + i32(0x7FFFFFFF) + i32(0) + nbytes(None)
    seeds["bad_huge_bytes"] = i16(0) + i32(0) + i32(0x7FFFFFFF) + b"x"
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
