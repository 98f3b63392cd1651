#!/usr/bin/env python3
"""Writes seed inputs for the fuzz targets into DIR/<target>/ (the corpus is generated,
not checked in). Usage: seeds.py DIR"""
import os
import struct
import sys

POLY = 0x82F63B78
TABLE = []
for b in range(256):
    c = b
    for _ in range(8):
        c = (c >> 1) ^ (POLY if c & 1 else 0)
    TABLE.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    for x in data:
        c = (c >> 8) ^ TABLE[(c ^ x) & 0xFF]
    return c ^ 0xFFFFFFFF


def varint(v):
    z = (v << 1) ^ (v >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def batch(base_offset, count, ts, value=b"v" * 20, attributes=0):
    records = bytearray()
    for i in range(count):
        rec = bytes([0]) + varint(i) + varint(i) + varint(-1) + varint(len(value)) + value + varint(0)
        records += varint(len(rec)) + rec
    body = struct.pack(">hiqqqhii", attributes, count - 1, ts, ts + count - 1, -1, -1, -1, count) + records
    crc = crc32c(body)
    after_length = struct.pack(">ibI", 0, 2, crc) + body
    return struct.pack(">qi", base_offset, len(after_length)) + after_length


def main():
    out = sys.argv[1]
    d = os.path.join(out, "segment")
    os.makedirs(d, exist_ok=True)
    log = b"".join(batch(i * 3, 3, 1000 + i) for i in range(8))
    seeds = {
        "validate_ok": b"\x00" + batch(0, 3, 1000),
        "validate_compressed_attr": b"\x00" + batch(0, 2, 1000, attributes=1),
        "last_segment_ok": b"\x01" + log,
        "last_segment_torn": b"\x01" + log[:-17],
        "closed_segment_ok": b"\x02" + log,
        "index_ok": b"\x03" + struct.pack(">ii", 6, 2 * len(batch(0, 3, 1000))),
        "index_past_end": b"\x03" + struct.pack(">ii", 6, 1 << 30),
    }
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
