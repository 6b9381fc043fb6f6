#!/usr/bin/env python3
"""Decodes a bundle of format 6 or 7 (SPEC.md §13) from the SPEC alone and prints its manifest and
its entries as JSON, one operation or stretch of compacted seqs per line, each with the number of
its block (from 1). Needs the `zstd` command. Usage: decode.py BUNDLE"""
import json
import struct
import subprocess
import sys

FIELDS = ["", "title", "notes", "due", "priority", "completed", "snoozedUntil", "repeat", "deleted", "body", "pinned"]
COLUMNS = ["headers", "compacted seqs", "timestamps", "records", "record kinds", "record ids' first six bytes",
           "record ids' last ten bytes", "fields", "tags", "operation ids"]
COLUMNS += [f"values of field code {c}" for c in range(11)] + [f"texts of field code {c}" for c in range(11)]


class Reader:
    def __init__(self, data, name="payload"):
        self.data, self.at, self.name = data, 0, name

    def take(self, count):
        if self.at + count > len(self.data):
            raise ValueError(f"the {self.name} ends early")
        chunk = self.data[self.at:self.at + count]
        self.at += count
        return chunk

    def byte(self):
        return self.take(1)[0]

    def varint(self):
        value = shift = 0
        while True:
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def svarint(self):
        raw = self.varint()
        return (raw >> 1) ^ -(raw & 1)

    def id(self):
        return self.take(16).hex()

    def string(self, length=None):
        return self.take(self.varint() if length is None else length).decode("utf-8")

    def ids(self):
        return [(self.id(), self.varint()) for _ in range(self.varint())]

    def vector(self):
        return {self.id(): self.varint() for _ in range(self.varint())}


REACH = 131072


class Table:
    """The record table (SPEC.md §13): a block's in format 6, the bundle's in format 7."""

    def __init__(self, scope):
        self.scope, self.records, self.previous_time = scope, [], 0

    def lookup(self, k):
        named = len(self.records)
        if k > named:
            raise ValueError(f"record #{k} of a {self.scope} that named {named} so far")
        if self.scope == "bundle" and k <= named - REACH:
            raise ValueError(f"record #{k} of a bundle that named {named} so far, more than {REACH} names back")
        return self.records[k - 1]


def operations(payload, table):
    main = Reader(payload)
    replicas = [main.id() for _ in range(main.varint())]
    runs = [(replicas[main.varint()], main.varint(), main.varint()) for _ in range(main.varint())]
    columns = []
    for name in COLUMNS:
        columns.append(Reader(main.take(main.varint()), name))
    if main.at != len(payload):
        raise ValueError("bytes after the last column")
    (headers, compacted, timestamps, records, kinds, times, rests, fields, tags, ids) = columns[:10]
    values, texts = columns[10:21], columns[21:]
    for author, seq, count in runs:
        end, timestamp, record = seq + count, 0, None
        while seq < end:
            header = headers.byte()
            if header == 0x20:
                n = compacted.varint()
                yield {"author": author, "compacted": [seq, seq + n - 1]}
                seq += n
                continue
            timestamp = (timestamp + timestamps.svarint()) % (1 << 64)
            if not header & 0x04:
                k = records.varint()
                if k == 0:
                    kind = kinds.byte()
                    table.previous_time += times.svarint()
                    if not 0 <= table.previous_time < 1 << 48:
                        raise ValueError("a record id's first six bytes out of range")
                    record = (kind, f"{table.previous_time:012x}" + rests.take(10).hex())
                    table.records.append(record)
                else:
                    record = table.lookup(k)
            entry = {"author": author, "seq": seq, "timestamp": timestamp, "kind": record[0], "record": record[1]}
            action = header & 0x03
            if header & 0x10:
                entry["action"] = "elided"
            elif action == 0:
                code = fields.byte()
                entry["field"] = fields.string() if code == 0 else FIELDS[code]
                value = values[code]
                value_type = value.byte()
                entry["value"] = {0: None, 1: False, 2: True}.get(value_type)
                if value_type == 3:
                    entry["value"] = value.svarint()
                elif value_type == 4:
                    entry["value"] = texts[code].string(value.varint())
                if header & 0x08:
                    entry["predecessors"] = ids.ids()
            elif action in (1, 2):
                entry["action"] = "addTag" if action == 1 else "removeTag"
                entry["tag"] = tags.string()
                if action == 2:
                    entry["observed"] = ids.ids()
            else:
                entry["action"] = "purge"
            yield entry
            seq += 1
    for column in columns:
        if column.at != len(column.data):
            raise ValueError(f"bytes left in the {column.name} column")


def main():
    data = open(sys.argv[1], "rb").read()
    if data[:8] != b"\x89CNCD\r\n\x1a" or data[8] not in (6, 7):
        raise ValueError("not a bundle of format 6 or 7")
    # Format 7's table goes on from block to block; format 6's starts afresh in each.
    table, block = Table("bundle"), 0
    at = 10
    while at < len(data):
        kind, flags = data[at], data[at + 1]
        stored, raw, _ = struct.unpack(">III", data[at + 2:at + 14])
        body = data[at + 14:at + 14 + stored]
        at += 14 + stored
        if flags & 1:
            body = subprocess.run(["zstd", "-d", "-c"], input=body, capture_output=True, check=True).stdout
        if kind == 1:
            manifest = Reader(body)
            print(json.dumps({"publisher": manifest.id(), "created": manifest.varint(), "base": manifest.vector(),
                              "top": manifest.vector(), "dropped": manifest.vector()}))
        elif kind == 2:
            block += 1
            if data[8] == 6:
                table = Table("block")
            for entry in operations(body, table):
                print(json.dumps({"block": block} | entry))


if __name__ == "__main__":
    main()
