#!/usr/bin/env python3
"""Writes seed inputs for the fuzz targets into DIR/<target>/ (the corpus is generated,
not checked in). Usage: seeds.py DIR"""
import os
import shutil
import struct
import subprocess
import sys
import zlib

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


def txn_entry(pid, first, last, lso):
    return struct.pack(">hqqqq", 0, pid, first, last, lso)


def control_record(kind, coordinator_epoch):
    key = struct.pack(">hh", 0, kind)
    value = struct.pack(">hi", 0, coordinator_epoch)
    rec = bytes([0]) + varint(0) + varint(0) + varint(len(key)) + key + varint(len(value)) + value + varint(0)
    return varint(len(rec)) + rec


def segment_seeds(out):
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
        # .txnindex entries: version, producer id, first, last, last stable offset.
        "txnindex_ok": b"\x04" + txn_entry(7, 0, 5, 6) + txn_entry(8, 3, 20, 21),
        "txnindex_torn": b"\x04" + txn_entry(7, 0, 5, 6)[:-3],
        "txnindex_bad_version": b"\x04" + struct.pack(">h", 1) + txn_entry(7, 0, 5, 6)[2:],
        # a marker's record: length, attributes, ts delta, offset delta, key, value, headers
        "control_record": b"\x04" + control_record(0, 5),
        "recover_txnindex_ok": b"\x05" + txn_entry(7, 0, 5, 6) + txn_entry(8, 3, 20, 21),
        "recover_txnindex_past_end": b"\x05" + txn_entry(7, 0, 5, 6) + txn_entry(9, 10, 99, 100),
        "recover_txnindex_out_of_order": b"\x05" + txn_entry(7, 0, 20, 21) + txn_entry(8, 0, 5, 6),
        "remote_segment_ok": b"\x06" + log,
        "remote_segment_torn": b"\x06" + log[:-17],
        "remote_segment_garbage_tail": b"\x06" + log + b"\xff" * 70,
    }
    # Mode 7: a remote .index (its length first) and .log, read in chunks.
    step = len(batch(0, 3, 1000))
    index = b"".join(struct.pack(">ii", 3 * k, k * step) for k in range(1, 8, 2))
    for name, idx in {"remote_chunks_ok": index,
                      "remote_chunks_no_index": b"",
                      "remote_chunks_index_past_end": index + struct.pack(">ii", 30, 1 << 30),
                      "remote_chunks_index_unsorted": index[8:] + index[:8],
                      "remote_chunks_index_mid_batch": struct.pack(">ii", 3, step + 5),
                      "remote_chunks_index_torn": index[:-3]}.items():
        seeds[name] = b"\x07" + struct.pack(">H", len(idx)) + idx + log
    write_all(d, seeds)


def write_all(d, seeds):
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


# --- records_fuzz: batches in every compression ---------------------------------------
# The codecs are written here without their libraries, in their simplest valid forms
# (stored deflate aside, zlib is in the standard library): snappy literals, LZ4 frames of
# uncompressed blocks, zstd frames of raw blocks. The zstd and lz4 command-line tools,
# when installed, add really compressed payloads.

def uvarint(z):
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def nullable(b):
    return varint(-1) if b is None else varint(len(b)) + b


def records_section(count):
    out = bytearray()
    for i in range(count):
        key = None if i == 1 else b"key-%d" % i
        headers = [(b"trace", b"abc"), (b"none", None)] if i == 2 else []
        rec = bytes([0]) + varint(i * 5) + varint(i) + nullable(key) + nullable(b"value %d " % i * 6)
        rec += varint(len(headers)) + b"".join(nullable(k) + nullable(v) for k, v in headers)
        out += varint(len(rec)) + rec
    return bytes(out)


def batch_around(payload, count, attributes, ts=1700000000000):
    body = struct.pack(">hiqqqhii", attributes, count - 1, ts, ts + 5 * count, -1, -1, -1, count) + payload
    after_length = struct.pack(">ibI", -1, 2, crc32c(body)) + body
    return struct.pack(">qi", 0, len(after_length)) + after_length


def gzip_compress(data):
    c = zlib.compressobj(6, zlib.DEFLATED, 16 + 15)
    return c.compress(data) + c.flush()


def snappy_raw(data):
    out = bytearray(uvarint(len(data)))
    for p in range(0, len(data), 60):
        chunk = data[p:p + 60]
        out.append((len(chunk) - 1) << 2)  # literal
        out += chunk
    return bytes(out)


def snappy_xerial(data):
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for p in range(0, len(data), 32768):
        block = snappy_raw(data[p:p + 32768])
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


def xxh32(data, seed=0):
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    m = 0xFFFFFFFF
    rotl = lambda x, r: ((x << r) | (x >> (32 - r))) & m
    i, n = 0, len(data)
    if n >= 16:
        v = [(seed + p1 + p2) & m, (seed + p2) & m, seed & m, (seed - p1) & m]
        while i + 16 <= n:
            for j in range(4):
                lane = struct.unpack_from("<I", data, i + 4 * j)[0]
                v[j] = (rotl((v[j] + lane * p2) & m, 13) * p1) & m
            i += 16
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & m
    else:
        h = (seed + p5) & m
    h = (h + n) & m
    while i + 4 <= n:
        h = (rotl((h + struct.unpack_from("<I", data, i)[0] * p3) & m, 17) * p4) & m
        i += 4
    while i < n:
        h = (rotl((h + data[i] * p5) & m, 11) * p1) & m
        i += 1
    h ^= h >> 15
    h = (h * p2) & m
    h ^= h >> 13
    h = (h * p3) & m
    return h ^ (h >> 16)


def lz4_frame(data):
    descriptor = bytes([0x60, 0x40])  # version 1, independent blocks; 64 KiB blocks
    out = bytearray(struct.pack("<I", 0x184D2204) + descriptor + bytes([(xxh32(descriptor) >> 8) & 0xFF]))
    for p in range(0, len(data), 65536):
        chunk = data[p:p + 65536]
        out += struct.pack("<I", len(chunk) | 0x80000000) + chunk  # stored block
    return bytes(out + struct.pack("<I", 0))


def zstd_frame(data):
    out = bytearray(struct.pack("<IBI", 0xFD2FB528, 0xA0, len(data)))  # single segment, 4-byte size
    chunks = [data[p:p + 131072] for p in range(0, len(data), 131072)] or [b""]
    for k, chunk in enumerate(chunks):
        last = 1 if k == len(chunks) - 1 else 0
        out += struct.pack("<I", (len(chunk) << 3) | last)[:3] + chunk  # raw block
    return bytes(out)


def zstd_rle_bomb(blocks):
    """`blocks` RLE blocks of 128 KiB zeros, 4 bytes each, in a frame without a content size."""
    out = bytearray(struct.pack("<IBB", 0xFD2FB528, 0x00, 7 << 3))  # 128 KiB window
    for k in range(blocks):
        last = 1 if k == blocks - 1 else 0
        out += struct.pack("<I", (131072 << 3) | (1 << 1) | last)[:3] + b"\x00"
    return bytes(out)


def cli(cmd, data):
    if shutil.which(cmd[0]) is None:
        return None
    try:
        return subprocess.run(cmd, input=data, stdout=subprocess.PIPE, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


def records_seeds(out):
    d = os.path.join(out, "records")
    os.makedirs(d, exist_ok=True)
    plain = records_section(3)
    codecs = {
        "none": (0, lambda b: b),
        "gzip": (1, gzip_compress),
        "snappy_raw": (2, snappy_raw),
        "snappy_xerial": (2, snappy_xerial),
        "lz4": (3, lz4_frame),
        "zstd": (4, zstd_frame),
        "lz4_cli": (3, lambda b: cli(["lz4", "-q", "-c"], b)),
        "zstd_cli": (4, lambda b: cli(["zstd", "-q", "-c"], b)),
    }
    seeds = {}
    for name, (codec, compress) in codecs.items():
        payload = compress(plain)
        if payload is None:
            continue
        b = batch_around(payload, 3, codec)
        seeds["batch_" + name] = b"\x00" + b
        seeds["truncated_" + name] = b"\x00" + b[:-7]
        seeds["sealed_" + name] = b"\x01" + b
        seeds["sealed_truncated_" + name] = b"\x01" + b[:-7]
        seeds["payload_" + name] = bytes([2, codec]) + payload
        seeds["payload_truncated_" + name] = bytes([2, codec]) + payload[: len(payload) // 2]
    for codec in range(5):
        seeds["section_%d" % codec] = bytes([3, codec, 3]) + plain
    seeds["codec_5"] = b"\x00" + batch_around(plain, 3, 5)
    seeds["count_mismatch"] = b"\x01" + batch_around(plain, 4, 0)
    seeds["bomb_gzip"] = bytes([2, 1]) + gzip_compress(bytes(4 << 20))
    seeds["bomb_zstd"] = b"\x00" + batch_around(zstd_rle_bomb(16), 1, 4)
    seeds["bomb_zstd_payload"] = bytes([2, 4]) + zstd_rle_bomb(16)
    write_all(d, seeds)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def f64(v):
    return struct.pack(">d", v)


def kstr(s):
    return i16(len(s)) + s


def cstr(s):
    return uvarint(len(s) + 1) + s


def header(key, version, flexible, corr=1, client=b"seed"):
    h = i16(key) + i16(version) + i32(corr) + kstr(client)
    return h + (b"\x00" if flexible else b"")


def request_seeds(out):
    """Request frames (without the size prefix) for the request decoder."""
    d = os.path.join(out, "request")
    b = batch(0, 3, 1700000000000)
    topic = b"t"
    seeds = {
        "api_versions_v0": header(18, 0, False),
        "api_versions_v3": header(18, 3, True) + cstr(b"sluice") + cstr(b"1.0") + b"\x00",
        "api_versions_v99": header(18, 99, False),
        "metadata_v1_all": header(3, 1, False) + i32(-1),
        "metadata_v4_one": header(3, 4, False) + i32(1) + kstr(topic) + b"\x01",
        "metadata_v12": header(3, 12, True) + uvarint(2) + b"\x00" * 16 + cstr(topic) + b"\x00"
        + b"\x01\x00\x00",
        "produce_v7": header(0, 7, False) + i16(-1) + i16(1) + i32(30000) + i32(1) + kstr(topic)
        + i32(1) + i32(0) + i32(len(b)) + b,
        "produce_v9": header(0, 9, True) + uvarint(0) + i16(-1) + i32(30000) + uvarint(2) + cstr(topic)
        + uvarint(2) + i32(0) + uvarint(len(b) + 1) + b + b"\x00" + b"\x00" + b"\x00",
        "fetch_v11": header(1, 11, False) + i32(-1) + i32(500) + i32(1) + i32(1 << 20) + b"\x00"
        + i32(0) + i32(-1) + i32(1) + kstr(topic) + i32(1) + i32(0) + i32(-1) + i64(0) + i64(-1)
        + i32(1 << 20) + i32(0) + kstr(b""),
        "find_coordinator_v2": header(10, 2, False) + kstr(b"group") + b"\x00",
        "list_offsets_v1": header(2, 1, False) + i32(-1) + i32(1) + kstr(topic) + i32(1) + i32(0)
        + i64(-1),
        # Transactions (src/kafka/protocol/messages/txn.h), decoded before the broker serves them.
        "init_producer_id_v4_txn": header(22, 4, True) + cstr(b"txn") + i32(60000) + i64(-1)
        + i16(-1) + b"\x00",
        "find_coordinator_v3_txn": header(10, 3, True) + cstr(b"txn") + b"\x01" + b"\x00",
        "add_partitions_to_txn_v0": header(24, 0, False) + kstr(b"txn") + i64(7) + i16(1) + i32(1)
        + kstr(topic) + i32(2) + i32(0) + i32(1),
        "add_partitions_to_txn_v3": header(24, 3, True) + cstr(b"txn") + i64(7) + i16(1) + uvarint(2)
        + cstr(topic) + uvarint(2) + i32(0) + b"\x00" + b"\x00",
        "add_partitions_to_txn_v5_batch": header(24, 5, True) + uvarint(3)
        + (cstr(b"txn") + i64(7) + i16(1) + b"\x01" + uvarint(2) + cstr(topic) + uvarint(2) + i32(0)
           + b"\x00" + b"\x00") * 2 + b"\x00",
        "add_offsets_to_txn_v0": header(25, 0, False) + kstr(b"txn") + i64(7) + i16(1) + kstr(b"group"),
        "add_offsets_to_txn_v4": header(25, 4, True) + cstr(b"txn") + i64(7) + i16(1) + cstr(b"group")
        + b"\x00",
        "end_txn_v1_commit": header(26, 1, False) + kstr(b"txn") + i64(7) + i16(1) + b"\x01",
        "end_txn_v4_abort": header(26, 4, True) + cstr(b"txn") + i64(7) + i16(1) + b"\x00" + b"\x00",
        "end_txn_v5_unadvertised": header(26, 5, True) + cstr(b"txn") + i64(7) + i16(1) + b"\x01"
        + b"\x00",
        "write_txn_markers_v0": header(27, 0, False) + i32(1) + i64(7) + i16(1) + b"\x01" + i32(1)
        + kstr(topic) + i32(1) + i32(0) + i32(3),
        "write_txn_markers_v1": header(27, 1, True) + uvarint(2) + i64(7) + i16(1) + b"\x00" + uvarint(2)
        + cstr(topic) + uvarint(2) + i32(0) + b"\x00" + i32(3) + b"\x00" + b"\x00",
        "txn_offset_commit_v2": header(28, 2, False) + kstr(b"txn") + kstr(b"group") + i64(7) + i16(1)
        + i32(1) + kstr(topic) + i32(1) + i32(0) + i64(42) + i32(5) + i16(-1),
        "txn_offset_commit_v3": header(28, 3, True) + cstr(b"txn") + cstr(b"group") + i64(7) + i16(1)
        + i32(3) + cstr(b"member") + uvarint(0) + uvarint(2) + cstr(topic) + uvarint(2) + i32(0)
        + i64(42) + i32(5) + cstr(b"meta") + b"\x00" + b"\x00" + b"\x00",
        "describe_producers_v0": header(61, 0, True) + uvarint(2) + cstr(topic) + uvarint(3) + i32(0)
        + i32(1) + b"\x00" + b"\x00",
        "describe_transactions_v0": header(65, 0, True) + uvarint(3) + cstr(b"a") + cstr(b"b")
        + b"\x00",
        "list_transactions_v1": header(66, 1, True) + uvarint(2) + cstr(b"Ongoing") + uvarint(2)
        + i64(7) + i64(-1) + b"\x00",
        # SCRAM credentials (src/kafka/protocol/messages/users.h), flexible from v0.
        "describe_user_scram_credentials_v0": header(50, 0, True) + uvarint(3) + cstr(b"alice")
        + b"\x00" + cstr(b"bob") + b"\x00" + b"\x00",
        "describe_user_scram_credentials_v0_all": header(50, 0, True) + uvarint(0) + b"\x00",
        "alter_user_scram_credentials_v0": header(51, 0, True) + uvarint(2) + cstr(b"bob") + b"\x02"
        + b"\x00" + uvarint(2) + cstr(b"alice") + b"\x01" + i32(4096) + uvarint(33) + bytes(range(32))
        + uvarint(33) + bytes(range(32, 64)) + b"\x00" + b"\x00",
        # ACLs (src/kafka/protocol/messages/acls.h): v0-3, pattern types from v1, flexible from
        # v2; decoded before the broker serves them. Codes: resource type 1 ANY, 2 TOPIC,
        # 3 GROUP, 7 USER (v3); pattern type 1 ANY, 3 LITERAL, 4 PREFIXED; operation 1 ANY,
        # 3 READ, 4 WRITE; permission 1 ANY, 2 DENY, 3 ALLOW.
        "describe_acls_v0": header(29, 0, False) + b"\x02" + kstr(b"orders") + i16(-1) + i16(-1)
        + b"\x03\x03",
        "describe_acls_v1_prefixed": header(29, 1, False) + b"\x02" + kstr(b"orders-") + b"\x04"
        + kstr(b"User:alice") + kstr(b"*") + b"\x03\x03",
        "describe_acls_v3_any": header(29, 3, True) + b"\x01" + uvarint(0) + b"\x01" + uvarint(0)
        + uvarint(0) + b"\x01\x01" + b"\x00",
        "create_acls_v0": header(30, 0, False) + i32(1) + b"\x02" + kstr(topic) + kstr(b"User:alice")
        + kstr(b"*") + b"\x04\x03",
        "create_acls_v1": header(30, 1, False) + i32(2) + b"\x02" + kstr(b"orders-") + b"\x04"
        + kstr(b"User:alice") + kstr(b"*") + b"\x03\x03" + b"\x03" + kstr(b"app") + b"\x03"
        + kstr(b"User:bob") + kstr(b"10.0.0.1") + b"\x03\x02",
        "create_acls_v3_user": header(30, 3, True) + uvarint(2) + b"\x07" + cstr(b"alice") + b"\x03"
        + cstr(b"User:admin") + cstr(b"*") + b"\x02\x03" + b"\x00" + b"\x00",
        "delete_acls_v0": header(31, 0, False) + i32(1) + b"\x02" + kstr(topic) + i16(-1) + i16(-1)
        + b"\x01\x01",
        "delete_acls_v2": header(31, 2, True) + uvarint(3)
        + (b"\x02" + cstr(topic) + b"\x03" + cstr(b"User:alice") + cstr(b"*") + b"\x03\x03" + b"\x00")
        + (b"\x01" + uvarint(0) + b"\x01" + uvarint(0) + uvarint(0) + b"\x01\x01" + b"\x00")
        + b"\x00",
        "delete_acls_v3_huge_filters": header(31, 3, True) + uvarint(0xFFFFFFFF) + b"\x01" + uvarint(0)
        + b"\x01" + uvarint(0) + uvarint(0) + b"\x01\x01" + b"\x00" + b"\x00",
        # Client quotas (src/kafka/protocol/messages/quotas.h): v0-1, flexible from v1. Match
        # types 0 exact name, 1 default, 2 any; values are big-endian IEEE 754 doubles.
        "describe_client_quotas_v0": header(48, 0, False) + i32(2) + kstr(b"user") + b"\x00"
        + kstr(b"alice") + kstr(b"client-id") + b"\x01" + i16(-1) + b"\x01",
        "describe_client_quotas_v1_any": header(48, 1, True) + uvarint(2) + cstr(b"ip") + b"\x02"
        + uvarint(0) + b"\x00" + b"\x00" + b"\x00",
        "alter_client_quotas_v0": header(49, 0, False) + i32(1) + i32(2) + kstr(b"user")
        + kstr(b"alice") + kstr(b"client-id") + i16(-1) + i32(2) + kstr(b"producer_byte_rate")
        + f64(1048576.0) + b"\x00" + kstr(b"request_percentage") + f64(0.0) + b"\x01" + b"\x00",
        "alter_client_quotas_v1": header(49, 1, True) + uvarint(2) + uvarint(2) + cstr(b"ip")
        + uvarint(0) + b"\x00" + uvarint(2) + cstr(b"connection_creation_rate") + f64(250.0)
        + b"\x00" + b"\x00" + b"\x00" + b"\x01" + b"\x00",
        "alter_client_quotas_v1_nan": header(49, 1, True) + uvarint(2) + uvarint(2) + cstr(b"user")
        + uvarint(0) + b"\x00" + uvarint(2) + cstr(b"k") + struct.pack(">Q", 0x7FF8000000000123)
        + b"\x00" + b"\x00" + b"\x00" + b"\x00" + b"\x00",
        "alter_client_quotas_v1_huge_ops": header(49, 1, True) + uvarint(2) + uvarint(2)
        + cstr(b"user") + uvarint(0) + b"\x00" + uvarint(0xFFFFFFFF) + cstr(b"k") + f64(1.0)
        + b"\x00" + b"\x00" + b"\x00" + b"\x00" + b"\x00",
        "txn_huge_nested": header(27, 1, True) + uvarint(2) + i64(7) + i16(1) + b"\x00" + uvarint(2)
        + cstr(topic) + uvarint(0x7FFFFFF0) + i32(0),
        "unknown_api": header(999, 0, False),
        "truncated": header(3, 1, False)[:5],
        "huge_array": header(3, 1, False) + i32(0x7FFFFFFF),
    }
    write_all(d, seeds)


def sasl_seeds(out):
    """SASL exchanges: a mechanism byte, then length-prefixed client messages."""
    d = os.path.join(out, "sasl")

    def msgs(mech, *parts):
        return bytes([mech]) + b"".join(struct.pack(">H", len(p)) + p for p in parts)

    first = b"n,,n=alice,r=rOprNGfwEbeRWgbNEkqO"
    seeds = {
        "plain_ok": msgs(0, b"\x00alice\x00alice-secret"),
        "plain_wrong": msgs(0, b"\x00alice\x00nope"),
        "plain_authzid": msgs(0, b"bob\x00alice\x00alice-secret"),
        "plain_no_nul": msgs(0, b"alice"),
        "plain_twice": msgs(0, b"\x00alice\x00alice-secret", b"\x00alice\x00alice-secret"),
        "scram_first": msgs(1, first),
        "scram_full": msgs(1, first, b"c=biws,r=rOprNGfwEbeRWgbNEkqOxxxx,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="),
        "scram_escaped": msgs(1, b"n,,n=a=2Cb=3Dc,r=abc"),
        "scram_binding": msgs(1, b"p=tls-unique,,n=alice,r=abc"),
        "scram_authzid": msgs(1, b"n,a=bob,n=alice,r=abc"),
        "scram_ext": msgs(1, b"n,,n=alice,r=abc,tokenauth=true"),
        "empty": msgs(1, b""),
    }
    write_all(d, seeds)


def offsets_seeds(out):
    """__consumer_offsets keys and values, in Kafka's layouts."""
    d = os.path.join(out, "offsets")

    def kstr16(b):
        return struct.pack(">h", len(b)) + b

    seeds = {
        "offset_key_v1": struct.pack(">h", 1) + kstr16(b"group") + kstr16(b"topic") + struct.pack(">i", 3),
        "offset_key_v0": struct.pack(">h", 0) + kstr16(b"g") + kstr16(b"t") + struct.pack(">i", 0),
        "group_key_v2": struct.pack(">h", 2) + kstr16(b"group"),
        "offset_value_v3": struct.pack(">hqi", 3, 42, 7) + kstr16(b"meta") + struct.pack(">q", 1700000000000),
        "offset_value_v1": struct.pack(">hq", 1, 42) + kstr16(b"") + struct.pack(">qq", 1, 2),
        "group_value_v0": struct.pack(">h", 0) + kstr16(b"consumer") + struct.pack(">i", 5)
        + kstr16(b"range") + kstr16(b"leader") + struct.pack(">i", 0),
        "negative_string": struct.pack(">h", 1) + struct.pack(">h", -5),
        "unknown_version": struct.pack(">h", 99) + b"\x00" * 8,
        "truncated": struct.pack(">h", 1) + kstr16(b"group")[:3],
        "marker_commit": struct.pack(">hh", 0, 1),
        "marker_abort": struct.pack(">hh", 0, 0),
        "marker_unknown_type": struct.pack(">hh", 0, 7),
        "marker_value": struct.pack(">hi", 0, 3),
    }
    write_all(d, seeds)


def txn_state_seeds(out):
    """__transaction_state keys and values (TransactionLogKey/Value), in Kafka's layouts."""
    d = os.path.join(out, "txn_state")

    def kstr16(b):
        return struct.pack(">h", len(b)) + b

    head = struct.pack(">hqhib", 0, 1000, 0, 60000, 1)
    parts = struct.pack(">i", 1) + kstr16(b"t") + struct.pack(">iii", 2, 0, 1)
    times = struct.pack(">qq", 1700000000000, 1700000000000)
    flex_parts = bytes([2, 2]) + b"t" + bytes([3]) + struct.pack(">ii", 0, 1) + bytes([0])
    seeds = {
        "key_v0": struct.pack(">h", 0) + kstr16(b"tx"),
        "value_v0_ongoing": head + parts + times,
        "value_v0_empty": struct.pack(">hqhib", 0, 1000, 0, 60000, 0) + struct.pack(">i", -1) + times,
        "value_v1_tags": struct.pack(">hqhib", 1, 1000, 0, 60000, 2) + flex_parts + times
        + bytes([2, 0, 8]) + struct.pack(">q", 999) + bytes([0xA0, 0x9C, 0x01, 4, 2, 2]) + b"g",
        "bad_status": struct.pack(">hqhib", 0, 1, 0, 1, 9) + struct.pack(">i", -1) + times,
        "negative_count": head + struct.pack(">i", -7),
        "unknown_version": struct.pack(">h", 5) + b"\x00" * 8,
        "truncated": head + parts[:5],
    }
    write_all(d, seeds)


def pipeline_config_seeds(out):
    """Pipeline files: the ones in tests/pipelines, and broken variants of one of them."""
    d = os.path.join(out, "pipeline_config")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "pipelines")
    seeds = {}
    for name in sorted(os.listdir(src)):
        if name.endswith(".yml"):
            with open(os.path.join(src, name), "rb") as f:
                seeds[name] = f.read()
    base = seeds.get("sluice.full.yml", b"pipeline: {}\n")
    seeds.update({
        "empty": b"",
        "truncated": base[: len(base) // 2],
        "template_unclosed": b"pipeline:\n  name: {{ X\n",
        "template_default": b"pipeline:\n  name: {{ X|default('a', true) }} {{ MULTI }}\n",
        "template_statement": b"{% for x in y %}\n",
        "template_comment": b"{# c\n#}pipeline: {{- EMPTY -}}\n",
        "aliases": b"pipeline: &p\n  name: a\ncommands: [*p, *p, *p]\n",
        "nested": b"pipeline: " + b"[" * 300 + b"]" * 300 + b"\n",
        "two_documents": base + b"---\n" + base,
        "nul": b"pipeline:\n  name: a\x00b\n",
        "not_utf8": b"pipeline:\n  name: \xff\n",
        "window_hopping_state": (
            b"pipeline:\n  source: {type: kafka, kafka: {brokers: [a:1], group_id: g, "
            b"auto_offset_reset: earliest, topics: [t]}}\n"
            b"  handler: {type: handlers.InferredMemBatch, sql: SELECT * FROM batch}\n"
            b"  window:\n    type: hopping\n    time_column: ts\n    size: 5m\n    slide: 1m\n"
            b"    grace: 500ms\n    allowed_lateness: 1h\n    idle_close: 30s\n    max_future: 1d\n"
            b"    emit_sql: SELECT window_start, count(*) FROM closed GROUP BY ALL\n"
            b"    sink: {type: console}\n"
            b"  state: {path: s.db}\n"),
        "window_session_errors": (
            b"pipeline:\n  source: {type: kafka, kafka: {brokers: [a:1], group_id: g, "
            b"auto_offset_reset: earliest, topics: [t]}}\n"
            b"  handler: {type: handlers.InferredMemBatch, sql: SELECT * FROM batch}\n"
            b"  sink: {type: noop}\n"
            b"  window: {type: session, time_column: ts, gap: 30, size: 1m, key: [user_id], "
            b"sink: {type: noop}}\n"
            b"  state: {pth: s.db}\n"),
        "exactly_once": (
            b"pipeline:\n  name: eos\n  source: {type: kafka, kafka: {brokers: [a:1], group_id: g, "
            b"auto_offset_reset: earliest, topics: [t], properties: {group.instance.id: m1}}}\n"
            b"  handler: {type: handlers.InferredMemBatch, sql: SELECT * FROM batch}\n"
            b"  sink: {type: kafka, kafka: {brokers: [a:1], topic: o, exactly_once: true, "
            b"transactional_id: eos-1}}\n"
            b"  on_error: {policy: DLQ, dlq: {type: kafka, kafka: {brokers: [a:1], topic: d}}}\n"),
        "exactly_once_refused": (
            b"pipeline:\n  source: {type: kafka, kafka: {brokers: [a:1], group_id: g, "
            b"auto_offset_reset: earliest, topics: [t]}}\n"
            b"  handler: {type: handlers.InferredMemBatch, sql: SELECT * FROM batch}\n"
            b"  window: {type: tumbling, time_column: ts, size: 1m, sink: {type: kafka, "
            b"kafka: {brokers: [a:1], topic: o, exactly_once: [true]}}}\n"
            b"  state: {path: s.db}\n"),
    })
    write_all(d, seeds)


# --- json_decoder_fuzz: batches of message values, one per line -------------------------

def json_decoder_seeds(out):
    sample = (b'{"event":"page_view","timestamp":"2024-05-01T12:00:00.123Z","user_id":"u-123456",'
              b'"properties":{"city":"Berlin","amount":12.5}}')
    every = (b'{"event":"e","n":1,"big":9223372036854775807,"u":18446744073709551615,"small":-128,'
             b'"d":1e300,"r":1.5,"ok":true,"ts":"2024-05-01 12:00:00","tz":"2024-05-01T12:00:00+02:00",'
             b'"ns":1714564800123456789,"day":"2024-02-29","raw":"\\u0000x","j":{"a":[1,null]},'
             b'"tags":["a","\\u00e9"],"grid":[[1],[],null],"properties":{"city":"Rome","xs":[1,2]},'
             b'"items":[{"k":"a","v":{"w":1}},null],"price":"12.34","id":"6ba7b810-9dad-11d1-80b4-00c04fd430c8"}')
    seeds = {
        "sample": b"\x00" + b"\n".join([sample] * 20),
        "every_type": b"\x01" + every + b"\n" + every.replace(b"Rome", b"Paris"),
        "bad": b"\x01" + b"\n".join([b'{"a":1', b"[1,2]", b"", b'{"n":"x"}', b'{"n":1e300}',
                                       b'{"u":-1}', b'{"x":tru}', b'{"a":1} x', b'{"price":"abc"}',
                                       b'{"tags":"notalist"}', b"\xff\xfe", sample]),
        "conflicts": b"\x00" + b'{"a":1,"b":{"x":1}}\n{"a":"s","b":[1]}\n{"a":null,"c":{}}',
        "chunks": b"\x00" + b"\n".join(b'{"n":%d,"tags":["t%d"]}' % (i, i) for i in range(2100)),
        "deep": b"\x00" + b'{"j":' + b"[" * 300 + b"]" * 300 + b"}\n" + b'{"d":' + b'{"a":' * 40 + b"1" + b"}" * 41,
    }
    write_all(os.path.join(out, "json_decoder"), seeds)


# --- avro_fuzz: object container files (mode byte 0) and manifest datums (mode byte 1) ----

def avro_bytes(b):
    return varint(len(b)) + b


def avro_manifest_entry(i):
    """One datum of avro_fuzz.cc's manifest-entry schema."""
    sizes = b"".join(varint(k) + varint(100 * k + i) for k in range(1, 3))
    offsets = varint(4) + varint(1 << 20)
    data_file = (varint(i % 3) + avro_bytes(b"s3://b/t/data/%05d.parquet" % i)  # content, file_path
                 + varint(i * 1000)                                          # record_count
                 + varint(1) + varint(2) + sizes + varint(0)                 # column_sizes
                 + varint(1) + avro_bytes(b"1") + avro_bytes(b"\x00\xff") + varint(0)  # lower_bounds
                 + (varint(1) + bytes(range(16)) if i % 2 else varint(0))    # key_metadata
                 + bytes([i % 2]) + struct.pack("<f", 1.5) + struct.pack("<d", -2.25)
                 + varint(3) + varint(0)                                     # nulls
                 + varint(1) + varint(-2) + varint(len(offsets)) + offsets + varint(0))  # sized block
    return varint(1) + varint(1) + varint(8744736658442914487) + data_file


AVRO_MANIFEST_SCHEMA = (
    b'{"type":"record","name":"manifest_entry","fields":[{"name":"status","type":"int","field-id":0},'
    b'{"name":"snapshot_id","type":["null","long"],"default":null,"field-id":1},'
    b'{"name":"data_file","field-id":2,"type":{"type":"record","name":"r2","fields":['
    b'{"name":"content","type":{"type":"enum","name":"c","symbols":["DATA","POS","EQ"]}},'
    b'{"name":"file_path","type":"string","field-id":100},'
    b'{"name":"partition","type":{"type":"record","name":"r102","fields":[]},"field-id":102},'
    b'{"name":"record_count","type":"long","field-id":103},'
    b'{"name":"column_sizes","default":null,"field-id":108,"type":["null",{"type":"array",'
    b'"logicalType":"map","items":{"type":"record","name":"k117_v118","fields":['
    b'{"name":"key","type":"int","field-id":117},{"name":"value","type":"long","field-id":118}]}}]},'
    b'{"name":"lower_bounds","type":{"type":"map","values":"bytes"}},'
    b'{"name":"key_metadata","type":["null",{"type":"fixed","name":"f16","size":16}],"default":null},'
    b'{"name":"ok","type":"boolean"},{"name":"f","type":"float"},{"name":"d","type":"double"},'
    b'{"name":"nulls","type":{"type":"array","items":"null"}},'
    b'{"name":"split_offsets","type":["null",{"type":"array","items":"long","element-id":133}]}]}}]}')


def avro_ocf(schema, blocks, codec=b"null", sync=b"0123456789abcdef", meta=()):
    """An object container file; `blocks` is a list of (object count, encoded objects)."""
    entries = [(b"avro.schema", schema), (b"avro.codec", codec)] + list(meta)
    out = b"Obj\x01" + varint(len(entries))
    out += b"".join(avro_bytes(k) + avro_bytes(v) for k, v in entries) + varint(0) + sync
    for count, data in blocks:
        if codec == b"deflate":
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            data = c.compress(data) + c.flush()
        out += varint(count) + avro_bytes(data) + sync
    return out


def avro_seeds(out):
    entries = [avro_manifest_entry(i) for i in range(4)]
    manifest = avro_ocf(AVRO_MANIFEST_SCHEMA, [(2, entries[0] + entries[1]), (2, entries[2] + entries[3])],
                        meta=[(b"format-version", b"2"), (b"content", b"data")])
    deflated = avro_ocf(AVRO_MANIFEST_SCHEMA, [(4, b"".join(entries))], codec=b"deflate")
    longs = avro_ocf(b'"long"', [(3, varint(1) + varint(-1) + varint(1 << 40)), (1, varint(7))])
    seeds = {
        "manifest": b"\x00" + manifest,
        "manifest_deflate": b"\x00" + deflated,
        "manifest_truncated": b"\x00" + manifest[:-40],
        "deflate_truncated": b"\x00" + deflated[:-30],
        "longs": b"\x00" + longs,
        "bad_sync": b"\x00" + longs[:-1] + b"x",
        "bad_magic": b"\x00Obj\x02" + longs[4:],
        "snappy": b"\x00" + avro_ocf(b'"long"', [], codec=b"snappy"),
        "huge_count": b"\x00" + avro_ocf(b'"long"', [(1 << 40, varint(1))]),
        "nulls": b"\x00" + avro_ocf(b'"null"', [(1 << 20, b"")]),
        "recursive": b"\x00" + avro_ocf(
            b'{"type":"record","name":"n","fields":[{"name":"c","type":["null","n"]}]}',
            [(1, b"\x02" * 80 + b"\x00")]),
        "every_primitive": b"\x00" + avro_ocf(
            b'{"type":"record","name":"r","fields":[{"name":"b","type":"boolean"},{"name":"s","type":"string"},'
            b'{"name":"m","type":{"type":"map","values":{"type":"array","items":"double"}}}]}',
            [(1, b"\x01" + avro_bytes(b"x") + varint(1) + avro_bytes(b"k") + varint(1) + struct.pack("<d", 1.0)
              + varint(0) + varint(0))]),
        "datum": b"\x01" + entries[1],
        "datum_even": b"\x01" + entries[2],
        "datum_truncated": b"\x01" + entries[3][:-9],
        "datum_overlong_varint": b"\x01" + b"\x82\x80\x00" + entries[0][1:],
    }
    write_all(os.path.join(out, "avro"), seeds)


# --- iceberg_metadata_fuzz: table metadata JSON (byte 0 even) and commit requests (odd) --

def iceberg_metadata_seeds(out):
    import json
    schema = {"type": "struct", "schema-id": 0, "identifier-field-ids": [1], "fields": [
        {"id": 1, "name": "id", "required": True, "type": "long"},
        {"id": 2, "name": "ts", "required": False, "type": "timestamptz"},
        {"id": 3, "name": "data", "required": False, "type": "string", "doc": "payload"},
        {"id": 4, "name": "amount", "required": False, "type": "decimal(10, 2)"},
        {"id": 5, "name": "tags", "required": False, "type": {
            "type": "list", "element-id": 6, "element": "string", "element-required": False}},
        {"id": 7, "name": "attrs", "required": False, "type": {
            "type": "map", "key-id": 8, "key": "string", "value-id": 9, "value": "fixed[4]",
            "value-required": False}}]}
    snap = lambda sid, parent, seq, op: dict(
        [("snapshot-id", sid)] + ([("parent-snapshot-id", parent)] if parent else []) +
        [("sequence-number", seq), ("timestamp-ms", 1700000000000 + seq),
         ("summary", {"operation": op, "added-records": "10"}),
         ("manifest-list", "s3://b/t/metadata/snap-%d.avro" % sid), ("schema-id", 0)])
    meta = {
        "format-version": 2, "table-uuid": "fb072c92-a02b-11e9-ae9c-1bb7bc9eca94",
        "location": "s3://b/t", "last-sequence-number": 2, "last-updated-ms": 1700000000002,
        "last-column-id": 9, "current-schema-id": 0, "schemas": [schema],
        "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": [
            {"name": "ts_day", "transform": "day", "source-id": 2, "field-id": 1000},
            {"name": "id_bucket", "transform": "bucket[16]", "source-id": 1, "field-id": 1001}]}],
        "last-partition-id": 1001, "default-sort-order-id": 1, "sort-orders": [
            {"order-id": 0, "fields": []},
            {"order-id": 1, "fields": [{"transform": "identity", "source-id": 1,
                                        "direction": "asc", "null-order": "nulls-first"}]}],
        "properties": {"write.format.default": "parquet"},
        "current-snapshot-id": 2, "refs": {"main": {"snapshot-id": 2, "type": "branch"},
                                           "t": {"snapshot-id": 1, "type": "tag"}},
        "snapshots": [snap(1, None, 1, "append"), snap(2, 1, 2, "overwrite")],
        "snapshot-log": [{"timestamp-ms": 1700000000001, "snapshot-id": 1},
                         {"timestamp-ms": 1700000000002, "snapshot-id": 2}],
        "metadata-log": [{"timestamp-ms": 1700000000000, "metadata-file": "s3://b/t/metadata/0.json"}]}
    v1 = {"format-version": 1, "location": "/tmp/t", "last-updated-ms": 1, "last-column-id": 1,
          "schema": {"type": "struct", "fields": [{"id": 1, "name": "a", "required": True, "type": "int"}]},
          "partition-spec": [{"name": "a_b", "transform": "bucket[4]", "source-id": 1}]}
    create = {"requirements": [{"type": "assert-create"}], "updates": [
        {"action": "assign-uuid", "uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1"},
        {"action": "upgrade-format-version", "format-version": 2},
        {"action": "add-schema", "schema": schema, "last-column-id": 9},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"fields": [
            {"name": "ts_hour", "transform": "hour", "source-id": 2}]}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 1, "fields": [
            {"transform": "truncate[4]", "source-id": 3, "direction": "desc", "null-order": "nulls-last"}]}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-location", "location": "s3://b/t"},
        {"action": "set-properties", "updates": {"a": "b"}}]}
    append = {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None},
                               {"type": "assert-table-uuid", "uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1"},
                               {"type": "assert-current-schema-id", "current-schema-id": 0}],
              "updates": [{"action": "add-snapshot", "snapshot": snap(10, None, 1, "append")},
                          {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                           "snapshot-id": 10},
                          {"action": "set-snapshot-ref", "ref-name": "keep", "type": "tag",
                           "snapshot-id": 10, "max-ref-age-ms": 1000},
                          {"action": "remove-snapshot-ref", "ref-name": "keep"},
                          {"action": "remove-properties", "removals": ["x"]}]}
    expire = {"requirements": [], "updates": [{"action": "remove-snapshots", "snapshot-ids": [10, 11]}]}
    bad_meta = dict(meta, **{"format-version": 3})
    seeds = {
        "metadata_v2": b"\x00" + json.dumps(meta).encode(),
        "metadata_v1": b"\x00" + json.dumps(v1).encode(),
        "metadata_v3": b"\x00" + json.dumps(bad_meta).encode(),
        "metadata_bad_current": b"\x00" + json.dumps(dict(meta, **{"current-snapshot-id": 7})).encode(),
        "metadata_truncated": b"\x00" + json.dumps(meta).encode()[:300],
        "metadata_deep": b"\x00" + json.dumps(dict(meta, schemas=["DEEP"])).encode().replace(
            b'"DEEP"', b'{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"a","required":true,"type":' +
            b'{"type":"list","element-id":2,"element-required":true,"element":' * 300 + b'"int"' +
            b"}" * 300 + b"}]}"),
        "create": b"\x03" + json.dumps(create).encode(),
        "append": b"\x01" + json.dumps(append).encode(),
        "expire": b"\x01" + json.dumps(expire).encode(),
        "conflict": b"\x01" + json.dumps({"requirements": [{"type": "assert-create"}], "updates": []}).encode(),
        "unsupported": b"\x01" + json.dumps({"requirements": [], "updates": [{"action": "set-statistics"}]}).encode(),
        "not_json": b"\x01{\"requirements\": [",
    }
    write_all(os.path.join(out, "iceberg_metadata"), seeds)


def pg_seeds(out):
    """Postgres frontend bytes for pg_fuzz: byte 0 picks the phase (0 startup, 1 messages,
    2 binary parameter with a 4-byte type OID after it, 3 a COPY statement, NUL, a value)."""
    def msg(t, body):
        return t + struct.pack(">i", len(body) + 4) + body

    def startup(body):
        return struct.pack(">i", len(body) + 4) + body
    params = b"user\0alice\0database\0db\0application_name\0psql\0\0"
    bind = (b"p\0s\0" + struct.pack(">hh", 1, 1) + struct.pack(">h", 2) + struct.pack(">i", 4) +
            struct.pack(">i", 7) + struct.pack(">i", -1) + struct.pack(">hh", 1, 1))
    parse = b"s\0SELECT $1\0" + struct.pack(">hi", 1, 23)
    seeds = {
        "startup": b"\x00" + startup(struct.pack(">i", 196608) + params),
        "ssl": b"\x00" + startup(struct.pack(">i", 80877103)),
        "cancel": b"\x00" + startup(struct.pack(">iii", 80877102, 1234, 5678)),
        "startup_truncated": b"\x00" + startup(struct.pack(">i", 196608) + params)[:12],
        "startup_bad_len": b"\x00" + struct.pack(">i", -8),
        "extended": b"\x01" + msg(b"P", parse) + msg(b"B", bind) + msg(b"D", b"Pp\0") +
                    msg(b"E", b"p\0" + struct.pack(">i", 10)) + msg(b"C", b"Ss\0") + msg(b"H", b"") + msg(b"S", b""),
        "query": b"\x01" + msg(b"Q", b"SELECT 1; SELECT 'a;b'\0") + msg(b"X", b""),
        "sasl": b"\x01" + msg(b"p", b"SCRAM-SHA-256\0" + struct.pack(">i", 12) + b"n,,n=,r=abcd"),
        "oversized": b"\x01Q" + struct.pack(">i", 1 << 30),
        "negative": b"\x01Q" + struct.pack(">i", -1),
        "numeric": b"\x02" + struct.pack(">I", 1700) + struct.pack(">hhhhhh", 2, 0, 0, 2, 1, 5000),
        "int4_array": b"\x02" + struct.pack(">I", 1007) + struct.pack(">iiiii", 1, 1, 23, 2, 1) +
                      struct.pack(">ii", 4, 1) + struct.pack(">i", -1),
        "interval": b"\x02" + struct.pack(">I", 1186) + struct.pack(">qii", 3000000, 2, 1),
        "timestamp": b"\x02" + struct.pack(">I", 1114) + struct.pack(">q", 1000000),
        "copy_csv": b"\x03COPY (SELECT ')' AS x) TO STDOUT WITH (FORMAT csv, HEADER, QUOTE '''', "
                    b"ESCAPE E'\\\\', FORCE_QUOTE *)\0a,'b\"c\nd",
        "copy_old": b"\x03COPY BINARY t (a, \"B\") TO STDOUT USING DELIMITERS '|' WITH CSV HEADER FORCE QUOTE a\0x|y",
        "copy_text": b"\x03copy t to stdout (delimiter $$;$$, null 'nil', encoding 'utf8')\0a;b\\c\td\re\n",
        "copy_bad": b"\x03COPY t TO STDOUT (FORMAT csv, DELIMITER E'\\x\0",
        "ctas": b"\x03CREATE TEMP TABLE s AS SELECT c.relname FROM pg_catalog.pg_class c, (SELECT 1) t\0"
                b"Binder Error: x\n\nLINE 1: ...ABLE s AS SELECT c.relname...\n                ^",
        "insert_error": b"\x03INSERT INTO t (a) (SELECT 'e\xcc\x81', nosuch)\0E\n\nLINE 2: x\n   ^",
    }
    write_all(os.path.join(out, "pg"), seeds)


def etcd_json_seeds(out):
    # Bodies captured from etcd 3.4's JSON gateway; the first byte picks the parser
    # (fuzz/etcd_json_fuzz.cc), the second where the watch stream is cut in two.
    h = b'"header":{"cluster_id":"15118495548433857066","member_id":"13668033151171901709","revision":"5","raft_term":"2"}'
    kv = b'{"key":"Zm9v","create_revision":"2","mod_revision":"3","version":"2","value":"eA==","lease":"7"}'
    seeds = {
        "range": b"\x00\x00{" + h + b',"kvs":[' + kv + b'],"count":"1","more":true}',
        "range_empty": b"\x00\x00{" + h + b"}",
        "range_error": b'\x00\x00{"error":"etcdserver: mvcc: required revision has been compacted","message":"x","code":11}',
        "put": b"\x01\x00{" + h + b',"prev_kv":' + kv + b"}",
        "delete": b"\x02\x00{" + h + b',"deleted":"1","prev_kvs":[' + kv + b"]}",
        "txn": b"\x03\x00{" + h + b',"succeeded":true,"responses":[{"response_put":{"header":{"revision":"3"}}},'
               b'{"response_range":{"kvs":[' + kv + b']}},{"response_delete_range":{"deleted":"1"}}]}',
        "txn_failed": b"\x03\x00{" + h + b',"responses":[{"response_range":{"header":{"revision":"2"}}}]}',
        "grant": b"\x04\x00{" + h + b',"ID":"4111120390776528394","TTL":"2"}',
        "keepalive": b'\x05\x00{"result":{' + h + b',"ID":"4111120390776528394","TTL":"2"}}',
        "keepalive_gone": b'\x05\x00{"result":{' + h + b',"ID":"1"}}',
        "revoke_notfound": b'\x06\x00{"error":"etcdserver: requested lease not found","code":5}',
        "status": b"\x07\x00{" + h + b',"version":"3.4.23","dbSize":"36864","leader":"13668033151171901709",'
                  b'"raftIndex":"8","raftTerm":"2","raftAppliedIndex":"8","errors":["x"]}',
        "huge": b'\x08\x00{"header":{"revision":"99999999999999999999","cluster_id":1e400}}',
        "watch": b"\x09\x17" + b'{"result":{' + h + b',"created":true}}\n{"result":{' + h +
                 b',"events":[{"kv":' + kv + b'},{"type":"DELETE","kv":{"key":"Zm9v","mod_revision":"6"},"prev_kv":' +
                 kv + b'}]}}\n{"result":{"canceled":true,"compact_revision":"4"}}\n',
        "watch_error": b'\x09\x03{"error":{"grpc_code":3,"http_code":400,"message":"bad","http_status":"Bad Request"}}',
        "watch_strings": b'\x09\x09{"s":"}{\\"[]","a":[{}]} {}',
    }
    write_all(os.path.join(out, "etcd_json"), seeds)


def txn_answer_seeds(out):
    """Answers about transactions between brokers (txn_answer_fuzz): mode byte, response
    header, body."""
    def carr(items):
        return uvarint(len(items) + 1) + b"".join(items)

    def cs(b):
        return uvarint(len(b) + 1) + b

    def topic(name, errors):
        parts = [struct.pack(">ih", p, e) + b"\x00" for p, e in errors]
        return cs(name) + carr(parts) + b"\x00"

    topics = [topic(b"t", [(0, 0), (1, 6)]), topic(b"u", [(0, 19)])]
    markers_v1 = carr([struct.pack(">q", 7) + carr(topics) + b"\x00"]) + b"\x00"
    markers_v0 = struct.pack(">i", 1) + struct.pack(">q", 7) + struct.pack(">i", 1) + \
        struct.pack(">h", 1) + b"t" + struct.pack(">i", 2) + struct.pack(">ih", 0, 0) + \
        struct.pack(">ih", 1, 6)
    verify_v4 = struct.pack(">ih", 0, 0) + carr([cs(b"x") + carr(topics) + b"\x00"]) + b"\x00"
    corr_flex = struct.pack(">i", 1) + b"\x00"
    corr = struct.pack(">i", 1)
    seeds = {
        "markers_v1": b"\x00" + corr_flex + markers_v1,
        "markers_v0": b"\x01" + corr + markers_v0,
        "verify_v4": b"\x02" + corr_flex + verify_v4,
        "verify_v5": b"\x03" + corr_flex + verify_v4,
        "markers_cut": b"\x00" + corr_flex + markers_v1[:-5],
        "markers_many": b"\x00" + corr_flex + uvarint(1 << 30) + b"\x00",
        "verify_error": b"\x02" + corr_flex + struct.pack(">ih", 0, 51) + b"\x01\x00",
    }
    write_all(os.path.join(out, "txn_answer"), seeds)


def tokens_seeds(out):
    seeds = {
        "empty": b"",
        "shape": b"sluice.v1.eyJzdWIiOiJhbGljZSJ9.AAAA",
        "dots": b"....",
        "prefix": b"sluice.v1.",
        "padding": b"sluice.v1.YQ==.YQ==",
        "long": b"sluice.v1." + b"A" * 5000 + b".B",
        "binary": bytes(range(256)),
    }
    write_all(os.path.join(out, "tokens"), seeds)


def grant_sql_seeds(out):
    seeds = {
        "role": b"CREATE ROLE analysts",
        "drop": b"DROP ROLE IF EXISTS a, \"B\"",
        "member": b"GRANT analysts TO alice, bob",
        "lake": b"GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA lake.a.\"b.c\" TO r",
        "table": b"REVOKE SELECT ON TABLE \"lake.sales\".orders FROM r",
        "topic": b"GRANT SELECT ON TOPIC 'it''s' TO r",
        "dir": b"GRANT READ, WRITE ON DIRECTORY '/data/x' TO r",
        "limits": b"ALTER ROLE bob SET memory_share = '25%'",
        "reset": b"ALTER USER bob RESET ALL",
        "show": b"SHOW GRANTS FOR alice",
        "comments": b"/* x */ GRANT -- y\n SELECT ON lake.s TO r;",
        "unterminated": b"GRANT SELECT ON lake.\"x TO r",
        "param": b"GRANT READ ON DIRECTORY $1 TO r",
    }
    write_all(os.path.join(out, "grant_sql"), seeds)


def rewrite_seeds(out):
    """Choices for rewrite_fuzz: random bytes from a fixed generator (each input is read as
    a stream of choices, so any bytes make a table and a query)."""
    import random
    rng = random.Random(29)
    seeds = {}
    for n in range(40):
        seeds["r%02d" % n] = bytes(rng.randrange(256) for _ in range(96))
    seeds["zeros"] = b""
    # Drawn from another generator for design 0013 D25: a Parquet table whose float kept
    # column is assumed exact from the first rows with 2 and 3 parts; in the second a later
    # row breaks that and the plan is made again without it.
    seeds["float_assumed"] = bytes.fromhex(
        "7556d4a93a4ce46f25d1f5decae76ed9b44398270fb5eddd432b7370ead7ae49ed190be23654a9777e6e5fbacdac9b6f"
        "48ec1b0b2b624d4f0eebfb9fd601769d6a7fed07b9b9686014a2843c0c1844ed8d718fb4da81763c305f8069686ee63a")
    seeds["float_assumption_broken"] = bytes.fromhex(
        "78a46b399bb5b0590c57393054f6c6c29ed144bdea26a1c964fd2a06d8ebc404bdeb12dc8fd989fc506d269fdb004f4c"
        "cefd948a463f3c47df4ea291c58ef35bef69103ade639ef813050a03755f3db92585a7997f8212c7fa4004402fd7b426")
    write_all(os.path.join(out, "rewrite"), seeds)


def main():
    out = sys.argv[1]
    tokens_seeds(out)
    grant_sql_seeds(out)
    pg_seeds(out)
    segment_seeds(out)
    records_seeds(out)
    request_seeds(out)
    sasl_seeds(out)
    offsets_seeds(out)
    txn_state_seeds(out)
    pipeline_config_seeds(out)
    json_decoder_seeds(out)
    avro_seeds(out)
    iceberg_metadata_seeds(out)
    etcd_json_seeds(out)
    txn_answer_seeds(out)
    rewrite_seeds(out)


if __name__ == "__main__":
    main()
