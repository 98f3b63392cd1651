#!/usr/bin/env python3
"""Seeds for fuzz/schema_protobuf_fuzz.cc: `seeds_schema_protobuf.py DIR` writes DIR/*.

The first byte of each seed picks the target's mode: 0 .proto text, 1 a raw
FileDescriptorProto (the target base64-encodes it), 2 a framed payload (message indexes,
then the message) decoded against the target's built-in schema.
"""
import os
import struct
import sys


def varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def tag(field, wire):
    return varint((field << 3) | wire)


def vf(field, v):
    return tag(field, 0) + varint(v)


def lf(field, b):
    if isinstance(b, str):
        b = b.encode()
    return tag(field, 2) + varint(len(b)) + b


def f64(field, d):
    return tag(field, 1) + struct.pack("<d", d)


def zz(v):
    return (v << 1) ^ (v >> 63)


PROTOS = [
    b'syntax = "proto3";\npackage a.b;\nimport "google/protobuf/timestamp.proto";\n'
    b'message M { string s = 1; int64 n = 2 [deprecated = true]; repeated double d = 3;\n'
    b'  map<string, M> m = 4; google.protobuf.Timestamp t = 5; oneof o { int32 x = 6; string y = 7; }\n'
    b'  optional bool b = 8; message N { E e = 1; } enum E { A = 0; B = 1; } reserved 9 to 11; }\n',
    b'syntax = "proto2"; message S { required string q = 1; optional int32 p = 2 [default = 0x10];\n'
    b'  repeated group R = 3 { optional string u = 4; } extensions 100 to max; }\n'
    b'extend S { optional int32 e = 100; } service X { rpc Y (S) returns (S); }\n',
    b'/* c */ syntax = "proto3"; // x\nmessage T { T next = 1; string v = 2 [json_name = "V"]; }\n'
    b'enum F { option allow_alias = true; Z = 0; Y = 0; }',
    b'syntax = "proto3"; message A { int32 a = 0; }',
    b'syntax = "proto3"; message A { Missing a = 1; }',
    b'syntax = "proto3"; message A { string s = 1 [default = "\\x41\\101\\u00e9"]; }',
]


def descriptor():
    field = lf(1, "id") + vf(3, 1) + vf(4, 1) + vf(5, 9)
    ts = lf(1, "t") + vf(3, 2) + vf(4, 1) + vf(5, 11) + lf(6, ".google.protobuf.Timestamp")
    entry = lf(1, "CEntry") + lf(2, lf(1, "key") + vf(3, 1) + vf(4, 1) + vf(5, 9)) + \
        lf(2, lf(1, "value") + vf(3, 2) + vf(4, 1) + vf(5, 5)) + lf(7, vf(7, 1))
    mapf = lf(1, "c") + vf(3, 3) + vf(4, 3) + vf(5, 11) + lf(6, ".p.O.CEntry")
    opt = lf(1, "o") + vf(3, 4) + vf(4, 1) + vf(5, 9) + vf(9, 0) + vf(17, 1)
    msg = lf(1, "O") + lf(2, field) + lf(2, ts) + lf(2, mapf) + lf(2, opt) + lf(3, entry) + lf(8, lf(1, "_o"))
    return lf(1, "o.proto") + lf(2, "p") + lf(3, "google/protobuf/timestamp.proto") + lf(4, msg) + lf(12, "proto3")


def payloads():
    inner = lf(1, "lab") + lf(2, "t1") + lf(2, "t2") + lf(3, struct.pack("<dd", 1.0, 2.0))
    full = (f64(1, 2.5) + tag(2, 5) + struct.pack("<f", 1.5) + vf(3, -7) + vf(4, 1 << 40) + vf(5, 7)
            + vf(6, (1 << 64) - 1) + vf(7, zz(-3)) + vf(8, zz(-5)) + tag(9, 5) + struct.pack("<I", 7)
            + tag(10, 1) + struct.pack("<Q", 8) + vf(13, 1) + lf(14, "héllo") + lf(15, b"\x00\xff")
            + vf(16, 1) + lf(17, inner) + lf(18, varint(1) + varint(2)) + vf(18, 3)
            + lf(19, lf(1, "k") + vf(2, 1)) + lf(20, vf(1, 1714564800) + vf(2, 5))
            + lf(21, vf(1, 90)) + lf(22, vf(1, 42))
            + lf(23, lf(1, lf(1, "k") + lf(2, f64(2, 1.5))))
            + lf(24, "nm") + vf(25, 3) + lf(26, inner) + lf(27, vf(1, 7) + lf(2, inner))
            + lf(28, lf(14, "rec") + lf(28, lf(14, "deeper")))
            + lf(29, lf(6, lf(1, lf(3, "s")) + lf(1, vf(4, 1)))))
    seeds = [
        b"\x00" + full,
        b"\x02\x02\x00" + lf(1, "lab"),  # indexes [1]: Inner
        b"\x00" + full[: len(full) // 2],  # truncated
        b"\x00" + tag(3, 0) + b"\xff" * 11,  # overlong varint
        b"\x00" + tag(14, 2) + varint(1 << 40),  # huge length
        b"\x00" + lf(14, b"\xc3\x28"),  # bad UTF-8
        b"\x00" + tag(40, 3) * 100,  # deep groups
        b"\x00" + tag(40, 3) + tag(41, 4),  # end-group mismatch
        b"\x00" + tag(3, 5) + b"\x00\x00\x00\x00",  # wrong wire type
    ]
    return [b"\x02" + s for s in seeds]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = [b"\x00" + p for p in PROTOS] + [b"\x01" + descriptor(), b"\x01" + descriptor()[:30]]
    seeds += payloads()
    for i, s in enumerate(seeds):
        with open(os.path.join(out, "seed%02d" % i), "wb") as f:
            f.write(s)


if __name__ == "__main__":
    main()
