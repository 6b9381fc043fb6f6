#!/usr/bin/env python3
"""Where a bundle's bytes go, per operation. Reads a bundle (SPEC.md §13) of format 2 to 6 and
decompresses its operations blocks with the `zstd` command.

Format 6 holds each block's entries in columns: it prints each column's raw bytes per operation,
and what it compresses to alone with `zstd -3`, over all blocks.

Formats 2 to 5 hold rows: it decodes their runs (§8.3), and prints for each part of an operation (header, timestamp, record, field code, each
field's values, predecessors, tags, removed dots) its raw bytes per operation, and what it
compresses to as a column of its own with `zstd -3`: a lower bound of what a column-wise layout
of the same operations would take, over the whole bundle (a lower bound) and block by block (as
the format compresses them). Records are counted in two columns: a record's first mention (its
17 bytes), and the later ones as a back reference (a varint: how many distinct records ago).

Usage: Benchmarks/bundle_bytes.py BUNDLE"""
import collections
import struct
import subprocess
import sys


def varint(data, at):
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def encode_varint(value):
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def zstd(data):
    return len(subprocess.run(["zstd", "-3", "-c"], input=bytes(data), capture_output=True, check=True).stdout)


def payloads(bundle):
    """The raw payloads of the operations blocks, and their stored (compressed) bytes."""
    at, raw, stored_total = 10, [], 0
    while at < len(bundle):
        kind = bundle[at]
        stored, length, _ = struct.unpack(">III", bundle[at + 2:at + 14])
        body = bundle[at + 14:at + 14 + stored]
        at += 14 + stored
        if kind == 2:
            stored_total += stored
            out = subprocess.run(["zstd", "-d", "-c"], input=body, capture_output=True, check=True).stdout
            assert len(out) == length, "a block decompresses to other than its raw length"
            raw.append(out)
        elif kind == 3:
            break
    return raw, stored_total


def columns(raw):
    """Splits every operation into its parts: a column of bytes per part."""
    parts = collections.defaultdict(bytearray)
    records = {}
    operations = 0

    def take(name, data, start, end):
        parts[name] += data[start:end]
        return end

    def dots(data, at, name):
        start = at
        count, at = varint(data, at)
        for _ in range(count):
            _, at = varint(data, at + 16)
        return take(name, data, start, at)

    for data in raw:
        table, at = varint(data, 0)
        at += 16 * table
        runs, at = varint(data, at)
        for _ in range(runs):
            for _ in range(3):
                _, at = varint(data, at)
            length, at = varint(data, at)
            end = at + length
            while at < end:
                header = data[at]
                at = take("header", data, at, at + 1)
                if header == 0x20:
                    _, next_at = varint(data, at)
                    at = take("compacted seqs", data, at, next_at)
                    continue
                operations += 1
                _, next_at = varint(data, at)
                at = take("timestamp", data, at, next_at)
                if not header & 4:
                    record = bytes(data[at:at + 17])
                    at += 17
                    if record in records:
                        parts["record, again"] += encode_varint(len(records) - records[record])
                    else:
                        records[record] = len(records)
                        parts["record, first"] += record
                if header & 16:
                    continue
                action = header & 3
                if action == 0:
                    code = data[at]
                    start = at
                    at += 1
                    if code == 0:
                        name_length, at = varint(data, at)
                        at += name_length
                    take("field", data, start, at)
                    start = at
                    kind = data[at]
                    at += 1
                    if kind == 3:
                        _, at = varint(data, at)
                    elif kind == 4:
                        text_length, at = varint(data, at)
                        at += text_length
                    take(f"value of field {code}", data, start, at)
                    if header & 8:
                        at = dots(data, at, "predecessors")
                elif action in (1, 2):
                    start = at
                    tag_length, at = varint(data, at)
                    at = take("tag", data, start, at + tag_length)
                    if action == 2:
                        at = dots(data, at, "removed dots")
    return parts, operations


COLUMNS = ["headers", "compacted seqs", "timestamps", "records", "record kinds", "record ids' first six bytes",
           "record ids' last ten bytes", "fields", "tags", "operation ids"]
COLUMNS += [f"values of field code {c}" for c in range(11)] + [f"texts of field code {c}" for c in range(11)]


def in_columns(bundle, raw, stored):
    """The columns of the blocks of formats 6 and 7, as they are."""
    sizes = collections.Counter()
    compressed = collections.Counter()
    operations = 0
    for data in raw:
        table, at = varint(data, 0)
        at += 16 * table
        runs, at = varint(data, at)
        for _ in range(3 * runs):
            _, at = varint(data, at)
        for name in COLUMNS:
            length, at = varint(data, at)
            column = data[at:at + length]
            at += length
            sizes[name] += length
            compressed[name] += zstd(column) if column else 0
            if name == "headers":
                operations += sum(1 for header in column if header != 0x20)
    print(f"{operations} operations; the file {len(bundle)} bytes, {len(bundle) / operations:.2f} bytes/operation")
    print(f"operations blocks: raw {sum(map(len, raw)) / operations:.2f}, stored {stored / operations:.2f} bytes/operation")
    print(f"{'column':28} {'raw':>8} {'alone, zstd -3':>16}   (bytes/operation)")
    for name in sorted((name for name in COLUMNS if sizes[name]), key=lambda name: -sizes[name]):
        print(f"{name:28} {sizes[name] / operations:8.2f} {compressed[name] / operations:16.2f}")


def main():
    bundle = open(sys.argv[1], "rb").read()
    raw, stored = payloads(bundle)
    if bundle[8] >= 6:
        return in_columns(bundle, raw, stored)
    parts, operations = columns(raw)
    raw_bytes = sum(len(block) for block in raw)
    print(f"{operations} operations; the file {len(bundle)} bytes, {len(bundle) / operations:.2f} bytes/operation")
    print(f"operations blocks: raw {raw_bytes / operations:.2f}, stored {stored / operations:.2f} bytes/operation")
    print(f"{'part':22} {'raw':>8} {'column, zstd -3':>16}   (bytes/operation)")
    total = 0
    for name in sorted(parts, key=lambda name: -len(parts[name])):
        compressed = zstd(parts[name])
        total += compressed
        print(f"{name:22} {len(parts[name]) / operations:8.2f} {compressed / operations:16.2f}")
    print(f"{'all columns':22} {'':8} {total / operations:16.2f}   (over the whole bundle: a lower bound)")
    per_block = 0
    for block in raw:
        block_parts, _ = columns([block])
        per_block += sum(zstd(part) for part in block_parts.values())
    print(f"{'all columns, per block':22} {'':8} {per_block / operations:16.2f}   (each block's columns apart, as blocks are compressed)")


if __name__ == "__main__":
    main()
