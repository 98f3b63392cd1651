#!/usr/bin/env python3
"""Seed corpus for fuzz/schema_message_json_fuzz.cc, written to the directory given.

The first byte picks the target's fixed schema (byte % its count; with the top bit set the
rest is the whole value, framing included). Seeds: well-formed small bodies for the Avro and
Protobuf schemas, and, for every selector, bytes from a fixed pseudo-random stream at every
length up to 48, so the replay walks truncations and garbage through each decoder.
"""
import os
import random
import sys


def varint(z):
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def zigzag(v):
    return varint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = [
        # The recursive Avro record: three links, then null.
        bytes([1]) + zigzag(1) + zigzag(1) + zigzag(2) + zigzag(1) + zigzag(3) + zigzag(0),
        # A Protobuf message: no indexes, then a field 1 (int64) and field 2 (string).
        bytes([2]) + b"\x00" + b"\x08" + varint(150) + b"\x12\x03abc",
        # JSON Schema bodies.
        bytes([4]) + b'{"a": [1, 2.5, "x", null, true]}',
        bytes([4]) + b"[" * 100,
        # Whole values: not framed, a magic byte and a short id.
        bytes([0x80]) + b"plain text",
        bytes([0x80]) + b"\x00\x00\x00",
    ]
    rng = random.Random(20261206)
    for selector in range(8):
        for length in range(0, 49):
            seeds.append(bytes([selector]) + bytes(rng.randrange(256) for _ in range(length)))
            seeds.append(bytes([selector | 0x80]) + b"\x00\x00\x00\x00" + bytes([selector % 5 + 1])
                         + bytes(rng.randrange(256) for _ in range(length)))
    for i, seed in enumerate(seeds):
        with open(os.path.join(out, f"seed-{i:04}"), "wb") as f:
            f.write(seed)


if __name__ == "__main__":
    main()
