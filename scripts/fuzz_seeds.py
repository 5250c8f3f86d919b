#!/usr/bin/env python3
"""Seed inputs for scripts/fuzz.sh that h2 does not write by itself: checkpoint manifests and layer
files shaped as heteropp/src/checkpoint.cpp writes them (for the fuzz target's tensors "w" [4] and
"b" [2, 2]), and rendezvous store sessions in dicomm/src/store/store_protocol.hpp's frames, each starting
with a hello that the fuzz target's store (2 ranks, token "fuzz-token") welcomes."""
import json
import os
import struct
import sys


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def checkpoint_seeds(corpus):
    manifest = {"format": "h2-checkpoint", "version": 1, "step": 2, "optimizer_steps": 2, "samples": 32,
                "loss_scale": 1.0, "good_steps": 2, "seed": 1234, "model": {"name": "tiny", "layers": 1},
                "data_files": ["/usr/share/common-licenses/GPL-3"],
                "layers": [{"file": "layer-embedding.bin", "header_xxh3": "0123456789abcdef"},
                           {"file": "layer-block-0000.bin", "header_xxh3": "fedcba9876543210"}],
                "plan": {}}
    write(os.path.join(corpus, "checkpoint_manifest", "manifest.json"), json.dumps(manifest, indent=2).encode())
    old = dict(manifest, layers=["layer-embedding.bin", "layer-block-0000.bin"])
    write(os.path.join(corpus, "checkpoint_manifest", "manifest-names-only.json"), json.dumps(old).encode())

    data = struct.pack("<8f", 1, 2, 3, 4, 5, 6, 7, 8)
    header = {"layer": 0, "tensors": [
        {"name": "w", "shape": [4], "dtype": "f32", "offset": 0, "bytes": 16},
        {"name": "b", "shape": [2, 2], "dtype": "f32", "offset": 16, "bytes": 16}]}
    text = json.dumps(header).encode()
    write(os.path.join(corpus, "checkpoint_layer", "layer.bin"), b"H2CKPT01" + struct.pack("<Q", len(text)) + text + data)


def frame(kind, payload=b""):
    body = bytes([kind]) + payload
    return struct.pack(">I", len(body)) + body


def string(s):
    b = s.encode()
    return struct.pack(">I", len(b)) + b


HELLO = frame(1, struct.pack(">IH", 0x48325354, 3) + string("fuzz-token") + struct.pack(">iii", 1, 2, 4242) +
              string("fuzz-host"))


def request(kind, request_id, payload=b""):
    return frame(kind, struct.pack(">Q", request_id) + payload)


def store_seeds(corpus):
    sessions = {
        "hello": HELLO,
        "wrong-token": frame(1, struct.pack(">IH", 0x48325354, 3) + string("not-the-token") +
                             struct.pack(">iii", 1, 2, 1) + string("h")),
        "set-get-add": HELLO + request(2, 1, string("key") + string("value")) +
        request(3, 2, string("key") + struct.pack(">q", 100)) + request(4, 3, string("n") + struct.pack(">q", 5)),
        "barrier-ping-goodbye": HELLO + request(5, 1, string("b") + struct.pack(">q", 100)) +
        frame(8, struct.pack(">BQ", 1, 1500)) + request(7, 2),
        "ping-activity": HELLO + frame(8, struct.pack(">BQ", 0, 42)) + request(9, 1),
        "abort": HELLO + request(6, 1, string("a reason")),
    }
    for name, data in sessions.items():
        write(os.path.join(corpus, "store_protocol", name), data)


def main():
    corpus = sys.argv[1]
    checkpoint_seeds(corpus)
    store_seeds(corpus)


if __name__ == "__main__":
    main()
