#!/usr/bin/env python3
"""Writes basic.oprun, an operation run of SPEC.md §8.3 whose assigns carry predecessors (bit 3),
from the SPEC alone. Its expected decoding is basic.json, written by hand from the same values."""
import os

def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)

def svarint(n):
    return varint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)

def string(s):
    b = s.encode("utf-8")
    return varint(len(b)) + b

A = bytes.fromhex("5f0c2a9e4b7d4e21a3c8d6e9f1b27c40")
B = bytes.fromhex("11111111111111111111111111111111")
C = bytes.fromhex("c0ffee00c0ffee00c0ffee00c0ffee00")
RECORD = bytes.fromhex("0a1b2c3d4e5f60718293a4b5c6d7e8f9")
T0 = 117656780800000000

def predecessors(entries):
    out = varint(len(entries))
    for replica, seq in entries:
        out += replica + varint(seq)
    return out

ops = [
    # (header, timestamp, record or None, body)
    (0x08, T0, RECORD, bytes([1]) + bytes([4]) + string("Buy milk") + predecessors([])),  # title, predecessors none
    (0x0C, T0 + 1, None, bytes([4]) + bytes([3]) + svarint(2) + predecessors([(B, 3)])),  # priority = 2, saw B:3
    (0x04, T0 + 2, None, bytes([2]) + bytes([0])),  # notes = null, predecessors unknown
    (0x05, T0 + 3, None, string("home")),  # addTag home
    (0x0C, T0 + 65536, None, bytes([1]) + bytes([4]) + string("Buy oat milk") + predecessors([(B, 7), (C, 2)])),
]
out = bytearray()
previous = 0
for header, timestamp, record, body in ops:
    out.append(header)
    out += svarint(timestamp - previous)
    previous = timestamp
    if record is not None:
        out.append(1)  # reminder
        out += record
    out += body
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "basic.oprun"), "wb") as f:
    f.write(out)
