#!/usr/bin/env python3
"""Writes vectors.json: test vectors of SPEC.md section 16 (relays), computed from the text of the
SPEC alone, independently of the Swift code: a sync key's relay credentials (16.2), the signed
requests of a device's sync (16.2, 16.3: the bytes each signature covers, and the Concord-Auth
header), the body of a request of deletions (16.3), and where a store keeps its mirror (16.5).

Ed25519 signatures are deterministic (RFC 8032), so another implementation's headers are these
bytes exactly; one whose library randomizes its signatures (Apple's CryptoKit) must still accept
these.

Needs Python 3 and the `cryptography` package (Ed25519). Run from this directory:
    python3 vectors.py > vectors.json
"""
import hashlib
import json
import os
import sys

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peer-v1"))
from vectors import hkdf_sha256  # noqa: E402


def canonical(value) -> str:
    """SPEC.md 10: keys sorted by their UTF-8 bytes, no spaces (these values hold ASCII only)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


KEY = bytes(range(32))
URL = "http://127.0.0.1:7430"
TIME = 1798794000000
REPLICA = "0123456789abcdef0123456789abcdef"
# An encrypted bundle's first bytes (magic and format version 1, 13.1): all a relay checks.
SEALED = bytes([0x89, 0x43, 0x4E, 0x43, 0x45, 0x0D, 0x0A, 0x1A, 0x01]) + bytes(range(0x20, 0x40))


def file(serial: int) -> str:
    return f"{REPLICA}-{serial:010d}.cbundle"


def main() -> None:
    seed = hkdf_sha256(KEY, b"", b"concord relay signing key", 32)
    signing = Ed25519PrivateKey.from_private_bytes(seed)
    public = signing.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    space = hashlib.sha256(public).digest()[:16].hex()
    files = f"/v1/spaces/{space}/files"
    deletions = canonical({"names": sorted([file(2), file(1)])}).encode()

    requests = []
    for method, target, body in [
        ("GET", files, b""),
        ("GET", files + "?cursor=7&wait=25", b""),
        ("GET", f"{files}/{file(1)}", b""),
        ("PUT", f"{files}/{file(3)}", SEALED),
        ("POST", f"/v1/spaces/{space}/deletions", deletions),
        ("DELETE", f"{files}/{file(3)}", b""),
        ("DELETE", f"/v1/spaces/{space}", b""),
    ]:
        signed = f"concord-relay-1\n{method}\n{target}\n{TIME}\n{hashlib.sha256(body).hexdigest()}".encode()
        requests.append({
            "method": method,
            "target": target,
            "body": body.hex(),
            "signed": signed.decode(),
            "header": f"v1 {public.hex()} {TIME} {signing.sign(signed).hex()}",
        })

    vectors = {
        "key": KEY.hex(),
        "seed": seed.hex(),
        "publicKey": public.hex(),
        "space": space,
        "time": TIME,
        "requests": requests,
        # The body a device sends to delete these files: names in order, canonical JSON.
        "deletionNames": [file(2), file(1)],
        "deletionsBody": deletions.decode(),
        "url": URL,
        # STORE.relay-H: H the first 8 bytes of SHA-256 of URL LF SPACE.
        "mirrorSuffix": ".relay-" + hashlib.sha256(f"{URL}\n{space}".encode()).digest()[:8].hex(),
    }
    print(json.dumps(vectors, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
