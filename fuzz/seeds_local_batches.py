#!/usr/bin/env python3
"""Seed corpus for fuzz/local_batches_fuzz.cc, written to the directory given (one file per seed).

An input is: flags (bit 0 read_committed, bit 1 no CRC check, bit 2 seal the CRCs), a count
of aborted transactions, that many (producer id % 4, first offset) byte pairs, a fetch
offset byte, then the fetched bytes: v2 record batches as a partition's log holds them.
The codecs and the CRC come from seeds.py (written without their libraries).
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seeds import (crc32c, gzip_compress, lz4_frame, nullable, snappy_xerial,  # noqa: E402
                   varint, zstd_frame, zstd_rle_bomb)

TS = 1700000000000
CONTROL = 0x20
TRANSACTIONAL = 0x10
LOG_APPEND_TIME = 0x08
CODECS = {"gzip": (1, gzip_compress), "snappy": (2, snappy_xerial), "lz4": (3, lz4_frame),
          "zstd": (4, zstd_frame)}


def record(delta, key, value):
    rec = bytes([0]) + varint(delta) + varint(delta) + nullable(key) + nullable(value) + varint(0)
    return varint(len(rec)) + rec


def records(base, count):
    return b"".join(record(i, None if i == 1 else b"k%d" % (base + i), b"v%d " % (base + i) * 4)
                    for i in range(count))


def batch(base, count, payload=None, attributes=0, pid=-1, last_delta=None):
    """A batch at offset `base` of `count` records (or the given records section)."""
    if payload is None:
        payload = records(base, count)
    last = count - 1 if last_delta is None else last_delta
    seq = 0 if pid >= 0 and not attributes & CONTROL else -1
    body = struct.pack(">hiqqqhii", attributes, last, TS, TS + 9, pid, 0 if pid >= 0 else -1, seq,
                       count) + payload
    after_length = struct.pack(">ibI", 0, 2, crc32c(body)) + body
    return struct.pack(">qi", base, len(after_length)) + after_length


def compressed(base, count, codec):
    code, compress = CODECS[codec]
    return batch(base, count, compress(records(base, count)), attributes=code)


def marker(offset, pid, commit):
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)
    return batch(offset, 1, record(0, key, value), attributes=CONTROL | TRANSACTIONAL, pid=pid)


def txn(base, count, pid):
    return batch(base, count, attributes=TRANSACTIONAL, pid=pid)


def truncated(b, n=3):
    """`b` without its last `n` bytes, its length field fixed (the CRC is sealed by flag 4)."""
    b = b[:-n]
    return b[:8] + struct.pack(">i", len(b) - 12) + b[12:]


def seed(fetched, flags=0, aborted=(), fetch_offset=0):
    head = bytes([flags, len(aborted)]) + b"".join(bytes([p, f]) for p, f in aborted)
    return head + bytes([fetch_offset]) + fetched


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    plain = batch(0, 3) + batch(3, 2) + batch(5, 4)
    interleaved = (txn(0, 2, 1) + txn(2, 2, 2) + txn(4, 1, 1) + txn(5, 1, 2) + marker(6, 1, False)
                   + marker(7, 2, True) + txn(8, 1, 1) + marker(9, 1, True) + batch(10, 2))
    emptied = batch(0, 0, b"", attributes=TRANSACTIONAL, pid=3, last_delta=2)
    seeds = {
        "plain": seed(plain),
        "plain_inside": seed(plain, fetch_offset=4),
        "plain_past": seed(plain, fetch_offset=200),
        "log_append_time": seed(batch(0, 2, attributes=LOG_APPEND_TIME)),
        "txn_committed": seed(interleaved, flags=1, aborted=[(1, 0)]),
        "txn_uncommitted": seed(interleaved, aborted=[(1, 0)]),
        "txn_from_inside": seed(interleaved, flags=1, aborted=[(1, 0)], fetch_offset=4),
        "txn_two_aborts": seed(txn(0, 2, 1) + marker(2, 1, False) + txn(3, 1, 1) + marker(4, 1, False),
                               flags=1, aborted=[(1, 3), (1, 0)]),
        "txn_sealed": seed(interleaved, flags=1 | 4, aborted=[(1, 0), (2, 5)]),
        "recordless": seed(emptied + batch(3, 2), flags=1, aborted=[(3, 0)]),
        "partial": seed(plain + batch(9, 3)[:40]),
        "partial_header": seed(plain + batch(9, 3)[:9]),
        "control_bad_key": seed(batch(0, 1, record(0, b"\x00\x00", b""), CONTROL | TRANSACTIONAL, 2),
                                flags=1),
        "bomb_zstd": seed(batch(0, 1, zstd_rle_bomb(16), attributes=4)),
        "codec_5": seed(batch(0, 2, records(0, 2), attributes=5)),
        "garbage": seed(b"this is not a record batch, only some text long enough"),
        "garbage_after": seed(batch(0, 1) + b"\xff" * 70),
    }
    for name in CODECS:
        seeds["codec_" + name] = seed(compressed(0, 5, name) + batch(5, 2) + compressed(7, 3, name),
                                      fetch_offset=2)
        seeds["codec_sealed_truncated_" + name] = seed(truncated(compressed(0, 5, name)), flags=4 | 1)
    bad_crc = bytearray(plain)
    bad_crc[len(batch(0, 3)) + 70] ^= 1
    seeds["bad_crc"] = seed(bytes(bad_crc))
    seeds["bad_crc_unchecked"] = seed(bytes(bad_crc), flags=2)
    short = bytearray(plain)
    short[len(batch(0, 3)) + 8:len(batch(0, 3)) + 12] = struct.pack(">i", 20)
    seeds["short_length"] = seed(bytes(short))
    seeds["truncated_records_sealed"] = seed(truncated(batch(0, 3)) + batch(3, 1), flags=4)
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
