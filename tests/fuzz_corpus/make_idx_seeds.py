#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz_idx.c into tests/fuzz_corpus/idx/: tiny IDX files
(each < 2 KB), valid and broken, raw and gzipped. Deterministic (gzip mtime 0), so running
it again reproduces the checked-in files byte for byte."""
import gzip
import os
import struct

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "idx")
os.makedirs(out, exist_ok=True)


def images(n, r, c, typ=0x08, ndims=3, body=None):
    head = bytes([0, 0, typ, ndims]) + struct.pack(">III", n, r, c)
    if body is None:
        body = bytes((i * 37 + 11) & 0xFF for i in range(n * r * c))
    return head + body


def labels(n, classes=10, body=None):
    head = bytes([0, 0, 0x08, 1]) + struct.pack(">I", n)
    if body is None:
        body = bytes(i % classes for i in range(n))
    return head + body


def gz(b):
    return gzip.compress(b, compresslevel=9, mtime=0)


seeds = {
    "images-2x3x4": images(2, 3, 4),
    "images-1x1x1": images(1, 1, 1),
    "images-3x8x8": images(3, 8, 8),
    "labels-20": labels(20),
    "labels-1": labels(1),
    "labels-255": labels(4, body=bytes([0, 9, 10, 255])),
    "images-truncated": images(2, 3, 4)[:30],
    "images-trailing": images(2, 3, 4) + b"\x00\x01",
    "images-short-header": images(2, 3, 4)[:11],
    "images-int8": images(2, 3, 4, typ=0x09),
    "images-float32": images(1, 2, 2, typ=0x0D, body=bytes(16)),
    "images-ndims2": images(2, 3, 4, ndims=2),
    "images-zero-dim": images(0, 3, 4, body=b""),
    "images-huge": images(0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, body=b""),
    "images-2p31": images(2048, 1024, 1024, body=bytes(8)),
    "labels-truncated": labels(20)[:15],
    "empty": b"",
}
for name, b in list(seeds.items()):
    if name in ("images-2x3x4", "labels-20", "images-3x8x8", "images-truncated",
                "images-trailing", "labels-255", "empty"):
        seeds[name + ".gz"] = gz(b)
seeds["images-2x3x4-gz-no-trailer.gz"] = gz(images(2, 3, 4))[:-8]
seeds["images-2x3x4-gz-cut.gz"] = gz(images(2, 3, 4))[:20]
bad = bytearray(gz(images(3, 8, 8)))
bad[len(bad) // 2] ^= 0xFF
seeds["images-3x8x8-corrupt.gz"] = bytes(bad)
seeds["images-two-members.gz"] = gz(images(2, 3, 4)[:21]) + gz(images(2, 3, 4)[21:])

for name, b in sorted(seeds.items()):
    assert len(b) < 2048, name
    with open(os.path.join(out, name), "wb") as f:
        f.write(b)
print(f"wrote {len(seeds)} seeds to {out}")
