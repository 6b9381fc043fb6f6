#!/usr/bin/env python3
"""Writes compacted.oprun, an operation run of SPEC.md §8.3 with entries of compacted seqs (bit 5:
the header 0x20 alone, then a count), from the SPEC alone. Its expected decoding is compacted.json,
written by hand from the same values: the run covers seqs 20 to 27, of which 21-23 and 25-26 are
compacted, so it decodes to three operations."""
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

entries = [
    # an operation: (header, timestamp, (kind, record) or None, body); compacted seqs: count
    (0x08, T0, (1, RECORD), bytes([1]) + bytes([4]) + string("Kept") + varint(0)),  # title, predecessors none
    3,  # seqs 21-23 compacted: no timestamp, no record
    (0x05, T0 + 7, None, string("home")),  # addTag of the same record as the last operation (seq 20)
    2,  # seqs 25-26 compacted
    (0x08, T0 + 9, (1, OTHER), bytes([2]) + bytes([4]) + string("n") + varint(0)),  # notes of another record
]
out = bytearray()
previous = 0
for entry in entries:
    if isinstance(entry, int):
        out.append(0x20)
        out += varint(entry)
        continue
    header, timestamp, record, body = entry
    out.append(header)
    out += svarint(timestamp - previous)
    previous = timestamp
    if record is not None:
        out.append(record[0])
        out += record[1]
    out += body
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "compacted.oprun"), "wb") as f:
    f.write(out)
