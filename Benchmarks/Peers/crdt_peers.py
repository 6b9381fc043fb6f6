#!/usr/bin/env python3
"""Yrs (through pycrdt) and Loro merging the same workload as Concord's `bench merge`, for
compare.sh. Each builds replica A's document and replica B's from their operations files
(operations.py), not timed: a top-level map of records, each a map of its fields, with its tags
in a map of their own (an add sets the tag, a remove deletes it). Then it times B's whole
update merged into a fresh copy of A, ROUNDS times, and prints one line per round:

    yrs 788250 operations in 1.234 s: 638000 operations/s

Their rules are not Concord's, so the comparison is of speed, not of results: A creates a tenth
of B's records concurrently, and where Loro merges those records' maps field by field (mergeable
containers), Yrs keeps one of the two maps created under the same key and drops the other's
fields, which is less work than Concord's registers that keep both writes as rivals.

Usage: crdt_peers.py yrs|loro A.tsv B.tsv ROUNDS"""
import re
import sys
import time


# operations.py's escapes, undone in one pass (so that an escaped backslash before a `t` stays).
UNESCAPE = re.compile(r"\\(.)")
ESCAPES = {"t": "\t", "n": "\n"}


def operations(path):
    with open(path) as file:
        for line in file:
            replica, seq, record, field, kind, text = line.rstrip("\n").split("\t")
            if kind == "i":
                value = int(text)
            elif kind == "s":
                value = UNESCAPE.sub(lambda match: ESCAPES.get(match.group(1), match.group(1)), text)
            else:
                value = None
            yield record, field, value


def yrs_build(path, client):
    import pycrdt
    doc = pycrdt.Doc(client_id=client)
    records = doc.get("records", type=pycrdt.Map)
    with doc.transaction():
        for record, field, value in operations(path):
            if record not in records:
                records[record] = pycrdt.Map({"tags": pycrdt.Map()})
            fields = records[record]
            if field == "+tag":
                fields["tags"][value] = True
            elif field == "-tag":
                fields["tags"].pop(value, None)
            else:
                fields[field] = value
    return doc.get_update()


def loro_build(path, peer):
    import loro
    doc = loro.LoroDoc()
    doc.peer_id = peer
    records = doc.get_map("records")
    for record, field, value in operations(path):
        fields = records.ensure_mergeable_map(record)
        if field == "+tag":
            fields.ensure_mergeable_map("tags").insert(value, True)
        elif field == "-tag":
            fields.ensure_mergeable_map("tags").delete(value)
        else:
            fields.insert(field, value)
    doc.commit()
    return doc.export(loro.ExportMode.Snapshot())


def timed_merge(peer, a, b):
    """Seconds to merge B's update into a fresh document that holds A's."""
    if peer == "yrs":
        import pycrdt
        doc, merge = pycrdt.Doc(), "apply_update"
    else:
        import loro
        doc, merge = loro.LoroDoc(), "import_"
    getattr(doc, merge)(a)
    start = time.perf_counter()
    getattr(doc, merge)(b)
    return time.perf_counter() - start


def main():
    peer, a_path, b_path, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    count = sum(1 for _ in open(b_path))
    build = yrs_build if peer == "yrs" else loro_build
    a, b = build(a_path, 1), build(b_path, 2)
    for _ in range(rounds):
        seconds = timed_merge(peer, a, b)
        print(f"{peer} {count} operations in {seconds:.3f} s: {count / seconds:.0f} operations/s", flush=True)


if __name__ == "__main__":
    main()
