#!/usr/bin/env python3
"""Writes basic.cbundle and basic.key: ../bundle-v1/basic.cbundle sealed as an encrypted bundle
(SPEC.md section 13.1) with a fixed sync key and salt, computed from the text of the SPEC alone,
independently of the Swift code; and basic.dump.json, the plain bundle's expected dump.

Needs Python 3 and the `cryptography` package (ChaCha20-Poly1305). Run from this directory:
    python3 encrypt.py
"""
import base64
import hashlib
import hmac
import struct

from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

KEY = bytes(range(0x40, 0x60))          # the fixture's sync key: bytes 0x40 to 0x5f
SALT = bytes(range(0xA0, 0xC0))         # the fixture's salt: bytes 0xa0 to 0xbf
CHUNK = 65536


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
    return "concord-key-1-" + base64.b32encode(payload).decode().lower()


def seal(plain: bytes, key: bytes, salt: bytes) -> bytes:
    header = bytes([0x89, 0x43, 0x4E, 0x43, 0x45, 0x0D, 0x0A, 0x1A, 1, 0])
    header += hkdf_sha256(key, b"", b"concord key id", 8) + salt
    assert len(header) == 50
    aead = ChaCha20Poly1305(hkdf_sha256(key, salt, b"concord-bundle-1 file key", 32))
    chunks = [plain[i:i + CHUNK] for i in range(0, len(plain), CHUNK)]
    out = header
    for index, chunk in enumerate(chunks):
        last = 1 if index == len(chunks) - 1 else 0
        nonce = bytes(3) + struct.pack(">Q", index) + bytes([last])
        sealed = aead.encrypt(nonce, chunk, header)
        out += struct.pack(">I", len(sealed)) + sealed
    return out


if __name__ == "__main__":
    with open("../bundle-v1/basic.cbundle", "rb") as f:
        plain = f.read()
    with open("basic.cbundle", "wb") as f:
        f.write(seal(plain, KEY, SALT))
    with open("basic.key", "w") as f:
        f.write(key_text(KEY) + "\n")
    with open("../bundle-v1/basic.dump.json", "rb") as src, open("basic.dump.json", "wb") as dst:
        dst.write(src.read())
