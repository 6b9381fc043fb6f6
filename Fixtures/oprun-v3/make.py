#!/usr/bin/env python3
"""Writes purge.oprun, an operation run of SPEC.md §8.3 with an elided operation (bit 4) and a
purge (action 3), from the SPEC alone. Its expected decoding is purge.json, written by hand from
the same values."""
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

RECORD = bytes.fromhex("0a1b2c3d4e5f60718293a4b5c6d7e8f9")
OTHER = bytes.fromhex("0a1b2c3d4e5f60718293a4b5c6d7e8fa")
T0 = 117656780800000000

ops = [
    # (header, timestamp, (kind, record) or None, body)
    (0x10, T0, (2, RECORD), b""),  # an elided operation of a note: nothing after its record
    (0x14, T0 + 1, None, b""),  # another, of the same record
    (0x00, T0 + 2, (1, OTHER), bytes([1]) + bytes([4]) + string("Kept")),  # an assign of another record, no predecessors
    (0x03, T0 + 65536, (2, RECORD), b""),  # the purge of the note
]
out = bytearray()
previous = 0
for header, timestamp, record, body in ops:
    out.append(header)
    out += svarint(timestamp - previous)
    previous = timestamp
    if record is not None:
        out.append(record[0])
        out += record[1]
    out += body
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "purge.oprun"), "wb") as f:
    f.write(out)
