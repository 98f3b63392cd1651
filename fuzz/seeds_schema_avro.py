#!/usr/bin/env python3
"""Seed corpus for fuzz/schema_avro_fuzz.cc, written to the directory given (one file per seed).

Mode byte 0: schema text. Mode byte 1..: a payload for fixed schema (byte % 3), as the
target's kSchemas: 1 flat with logical types, 2 nested, 3 (byte 0x03, or 0x83 to reset the
chunk after it) recursive.
"""
import os
import struct
import sys


def varint(v):
    z = ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def s(b):
    if isinstance(b, str):
        b = b.encode()
    return varint(len(b)) + b


def flat(i):
    return (s("event-%d" % i) + varint(i * 1000) + struct.pack("<d", i / 3) + varint(1714564800000 + i)
            + s((12345 + i).to_bytes(3, "big", signed=True)) + s("12345678-9abc-def0-0123-456789abcdef")
            + bytes([i & 1]))


def nested(i):
    a = varint(2) + (varint(2) + s("k") + varint(1) + varint(i) + s("t") + varint(2) + s("x") + varint(0)) \
        + varint(0) + varint(0)
    r = varint(1) + varint(i % 2) + b"abc" + varint(-1) + varint(1) + varint(7) + varint(0)
    g = varint(1) + (varint(2) + struct.pack("<ff", 1.5, -2) + varint(0)) + varint(0)
    z = varint(3) + varint(0)
    dur = struct.pack("<III", 1, 2, 3000)
    return a + r + g + z + dur


def linked(n):
    out = b""
    for k in range(n):
        out += varint(k) + varint(1)
    return out + varint(n) + varint(0)


SCHEMAS = [
    b'"string"',
    b'{"type":"int"}',
    b'["null","long",{"type":"record","name":"P","fields":[{"name":"x","type":"int"}]}]',
    b'{"type":"record","name":"a.b.R","doc":"d","aliases":["Old"],"fields":[{"name":"e","type":'
    b'{"type":"enum","name":"E","symbols":["A","B"],"default":"A"},"default":"B"},{"name":"m","type":'
    b'{"type":"map","values":{"type":"array","items":{"type":"fixed","name":"F","size":2}}}},'
    b'{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":40,"scale":3}},'
    b'{"name":"next","type":["null","R"],"default":null}]}',
    b'{"type":"record","name":"T","fields":[{"name":"ts","type":{"type":"long","logicalType":"timestamp-nanos"}},'
    b'{"name":"u","type":{"type":"fixed","name":"U","size":16,"logicalType":"uuid"}},'
    b'{"name":"t","type":{"type":"int","logicalType":"time-millis"}},{"name":"x","type":"float","x-attr":[1,{"b":2}]}]}',
    b'{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":"x"}]}',
    b'{"type":"record","name":"R","fields":[',
    b'[' * 80 + b'"int"' + b']' * 80,
]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = {}
    for k, text in enumerate(SCHEMAS):
        seeds["schema_%d" % k] = b"\x00" + text
    for i in range(4):
        seeds["flat_%d" % i] = b"\x01" + flat(i)
        seeds["nested_%d" % i] = b"\x02" + nested(i)
    seeds["linked"] = b"\x03" + linked(5)
    seeds["linked_deep"] = b"\x83" + linked(200)
    bad = {
        "truncated": flat(1)[:7],
        "trailing": flat(2) + b"zz",
        "huge_count": varint(1 << 40) + varint(0),
        "negative_length": varint(-5),
        "union_index": nested(0)[:-1 - len(struct.pack("<III", 1, 2, 3))][:20] + varint(9),
        "bad_utf8": s(b"\xc3\x28") + flat(0)[8:],
        "long_varint": b"\xff" * 11,
        "zero_size_items": nested(0).replace(varint(3) + varint(0), varint(1 << 30) + varint(0)),
    }
    for name, payload in bad.items():
        seeds["bad_flat_" + name] = b"\x01" + payload
        seeds["bad_nested_" + name] = b"\x82" + payload
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
