#!/usr/bin/env python3
"""Writes vectors.json: test vectors of a one-shot peer session of protocol version 3 (SPEC.md
section 15.10), whose assigns carry their predecessors (section 8.3), computed from the text of
the SPEC alone, independently of the Swift code. It reuses the functions of ../peer-v1/vectors.py
and that file's key, nonces and replicas.

The client sends its versions, one batch of two assigns (the second listing a predecessor), done
and its ack; the server sends its versions, done, and its ack of the two operations. The batch's
zstd frame holds one raw (uncompressed) block, which every zstd decoder reads (RFC 8878).

Needs Python 3 and the `cryptography` package. Run from this directory:
    python3 vectors.py > vectors.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peer-v1"))
from vectors import CLIENT_REPLICA, CLIENT_VECTOR, SERVER_REPLICA, frame, handshake, seal, varint, versions_message  # noqa: E402


def svarint(n: int) -> bytes:
    return varint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def string(text: str) -> bytes:
    data = text.encode("utf-8")
    return varint(len(data)) + data


def zstd_raw_frame(payload: bytes) -> bytes:
    """One zstd frame (RFC 8878): a single segment whose content size is one byte, and one raw
    last block."""
    assert len(payload) < 256
    descriptor = bytes([0b0010_0000])  # single segment, content size field of 1 byte
    block_header = (1 | (0 << 1) | (len(payload) << 3)).to_bytes(3, "little")  # last, raw, size
    return bytes.fromhex("28b52ffd") + descriptor + bytes([len(payload)]) + block_header + payload


def main() -> None:
    h = handshake(3)
    k_cs, k_sc = h["k_cs"], h["k_sc"]
    client_replica, server_replica, client_vector = CLIENT_REPLICA, SERVER_REPLICA, CLIENT_VECTOR
    record = bytes.fromhex("0a1b2c3d4e5f60718293a4b5c6d7e8f9")
    t0 = 117656780800000000

    # Seqs 4 and 5 of the client: title = "Buy milk" (predecessors none), then priority = 2,
    # having seen the server's writes to that field up to seq 7.
    run = (
        bytes([0x08]) + svarint(t0) + bytes([1]) + record + bytes([1, 4]) + string("Buy milk") + varint(0)
        + bytes([0x0C]) + svarint(1) + bytes([4, 3]) + svarint(2) + varint(1) + server_replica + varint(7)
    )
    payload = varint(1) + client_replica + varint(1) + varint(0) + varint(4) + varint(2) + varint(len(run)) + run
    batch = bytes([2]) + varint(len(payload)) + zstd_raw_frame(payload)
    operations = [
        {"action": "assign", "field": "title", "kind": "reminder", "predecessors": [],
         "record": record.hex(), "replica": client_replica.hex(), "seq": 4,
         "time": "2026-11-21T22:26:40.000Z", "timestamp": t0, "value": "Buy milk"},
        {"action": "assign", "field": "priority", "kind": "reminder", "predecessors": [server_replica.hex() + ":7"],
         "record": record.hex(), "replica": client_replica.hex(), "seq": 5,
         "time": "2026-11-21T22:26:40.000Z", "timestamp": t0 + 1, "value": 2},
    ]
    done = bytes([3])
    vectors = {
        "clientHelloFrame": frame(h["client_hello"]).hex(),
        "serverHelloFrame": frame(h["server_hello"]).hex(),
        "clientProofFrame": frame(h["client_proof"]).hex(),
        "clientVersionsFrame": frame(seal(k_cs, 0, versions_message(client_replica, client_vector))).hex(),
        "serverVersionsFrame": frame(seal(k_sc, 0, versions_message(server_replica, []))).hex(),
        "clientBatchFrame": frame(seal(k_cs, 1, batch)).hex(),
        "clientDoneFrame": frame(seal(k_cs, 2, done)).hex(),
        "serverDoneFrame": frame(seal(k_sc, 1, done)).hex(),
        "serverAckFrame": frame(seal(k_sc, 2, bytes([5]) + varint(2))).hex(),
        "clientAckFrame": frame(seal(k_cs, 3, bytes([5, 0]))).hex(),
        "operations": operations,
    }
    print(json.dumps(vectors, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
