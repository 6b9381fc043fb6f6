#!/usr/bin/env python3
"""Writes vectors.json: test vectors of SPEC.md section 15 (sync keys, handshake, encrypted
frames), computed from the text of the SPEC alone, independently of the Swift code.

Needs Python 3 and the `cryptography` package (ChaCha20-Poly1305). Run from this directory:
    python3 vectors.py > vectors.json
"""
import base64
import hashlib
import hmac
import json

from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305


def hkdf_sha256(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869."""
    prk = hmac.new(salt if salt else bytes(32), ikm, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def key_text(key: bytes) -> str:
    payload = key + hashlib.sha256(key).digest()[:3]
    body = base64.b32encode(payload).decode().lower()
    assert "=" not in body and len(body) == 56
    return "concord-key-1-" + body


def key_id(key: bytes) -> str:
    return hkdf_sha256(key, b"", b"concord key id", 8).hex()


def varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


MAGIC = b"CNCDPEER"


def header(kind: int, version: int = 1) -> bytes:
    return MAGIC + version.to_bytes(2, "big") + bytes([kind])


def versions_message(replica: bytes, vector: list) -> bytes:
    body = bytes([1]) + replica + varint(len(vector))
    for entry, seq in sorted(vector):
        body += entry + varint(seq)
    return body


def seal(key: bytes, counter: int, plaintext: bytes) -> bytes:
    nonce = bytes(4) + counter.to_bytes(8, "big")
    return ChaCha20Poly1305(key).encrypt(nonce, plaintext, None)


def handshake(version: int) -> dict:
    """The handshake of SPEC.md 15.3 with this file's key and nonces, in frames of `version`: the
    keys, both hellos and the client's proof."""
    key = bytes(range(32))
    nc = bytes(range(0x40, 0x60))
    ns = bytes(range(0x80, 0xA0))
    salt = nc + ns
    k_auth = hkdf_sha256(key, salt, b"concord-peer-1 auth", 32)
    client_hello = header(1, version) + nc
    server_hello_start = header(2, version) + ns
    transcript = client_hello + server_hello_start
    return {
        "key": key, "nc": nc, "ns": ns, "k_auth": k_auth,
        "k_cs": hkdf_sha256(key, salt, b"concord-peer-1 client-to-server", 32),
        "k_sc": hkdf_sha256(key, salt, b"concord-peer-1 server-to-client", 32),
        "client_hello": client_hello,
        "server_hello": server_hello_start
        + hmac.new(k_auth, b"concord-peer-1 server" + transcript, hashlib.sha256).digest(),
        "client_proof": header(3, version)
        + hmac.new(k_auth, b"concord-peer-1 client" + transcript, hashlib.sha256).digest(),
    }


CLIENT_REPLICA = bytes.fromhex("0102030405060708090a0b0c0d0e0f10")
SERVER_REPLICA = bytes.fromhex("f0e0d0c0b0a090807060504030201000")
CLIENT_VECTOR = [(CLIENT_REPLICA, 3), (SERVER_REPLICA, 200)]


def main() -> None:
    h = handshake(1)
    key, nc, ns, k_auth, k_cs, k_sc = h["key"], h["nc"], h["ns"], h["k_auth"], h["k_cs"], h["k_sc"]
    other_key = bytes([0xFF]) * 32
    client_replica, server_replica, client_vector = CLIENT_REPLICA, SERVER_REPLICA, CLIENT_VECTOR
    server_vector = []
    client_versions = versions_message(client_replica, client_vector)
    server_versions = versions_message(server_replica, server_vector)
    done = bytes([3])

    vectors = {
        "key": key.hex(),
        "keyText": key_text(key),
        "keyID": key_id(key),
        "otherKey": other_key.hex(),
        "otherKeyText": key_text(other_key),
        "otherKeyID": key_id(other_key),
        "clientNonce": nc.hex(),
        "serverNonce": ns.hex(),
        "authKey": k_auth.hex(),
        "clientToServerKey": k_cs.hex(),
        "serverToClientKey": k_sc.hex(),
        "clientReplica": client_replica.hex(),
        "clientVersions": {r.hex(): s for r, s in client_vector},
        "serverReplica": server_replica.hex(),
        "serverVersions": {r.hex(): s for r, s in server_vector},
        # A whole session in which neither side sends operations (the test's driver has none), so
        # each sends its versions, then done, then acks the other's done (0 operations): client
        # hello, server hello, client proof and versions, server versions, each side's done, each
        # side's ack.
        "clientHelloFrame": frame(h["client_hello"]).hex(),
        "serverHelloFrame": frame(h["server_hello"]).hex(),
        "clientProofFrame": frame(h["client_proof"]).hex(),
        "clientVersionsFrame": frame(seal(k_cs, 0, client_versions)).hex(),
        "serverVersionsFrame": frame(seal(k_sc, 0, server_versions)).hex(),
        "clientDoneFrame": frame(seal(k_cs, 1, done)).hex(),
        "serverDoneFrame": frame(seal(k_sc, 1, done)).hex(),
        "clientAckFrame": frame(seal(k_cs, 2, bytes([5, 0]))).hex(),
        "serverAckFrame": frame(seal(k_sc, 2, bytes([5, 0]))).hex(),
        "wrongKeyRefusalFrame": frame(header(4) + bytes([2])).hex(),
        "versionRefusalFrame": frame(header(4) + bytes([1])).hex(),
    }
    print(json.dumps(vectors, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
