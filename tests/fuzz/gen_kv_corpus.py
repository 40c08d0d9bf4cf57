#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_kv (tests/fuzz/corpus/kv/).

Each file: a byte choosing the op (0 PUT, 1 GET, 2 MATCH_PREFIX, 3 RELEASE,
4 STATS, 5 not a KV op), a u32 length of the arguments, the arguments as
docs/PROTOCOL.md "KV-cache ops" lays them out (after the access key), then
the request's bulk data.  Some seeds are valid, some broken on purpose.

    python3 tests/fuzz/gen_kv_corpus.py tests/fuzz/corpus/kv
"""
import hashlib
import os
import struct
import sys

PUT, GET, MATCH, RELEASE, STATS, OTHER = range(6)


def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def u64(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


def s(b):
    return u32(len(b)) + b


def key(i):
    return hashlib.sha256(b"k%d" % i).digest()


def seed(op, args, data=b""):
    return bytes([op]) + u32(len(args)) + args + data


def main(out):
    os.makedirs(out, exist_ok=True)
    seeds = []
    blocks = [bytes([i]) * (10 + i) for i in range(4)]
    put = u32(4) + b"".join(s(key(i)) + u64(len(blocks[i])) for i in range(4))
    seeds.append(seed(PUT, put, b"".join(blocks)))
    seeds.append(seed(PUT, put, b"".join(blocks)[:-1]))  # sizes do not add up
    seeds.append(seed(PUT, u32(1) + s(b"opaque@key") + u64(3), b"abc"))
    seeds.append(seed(PUT, u32(1) + s(b"x") + u64(65 << 20), b""))  # past the limit
    get = u32(5) + b"".join(s(key(i)) for i in range(5))
    seeds.append(seed(GET, get))
    seeds.append(seed(GET, get, b"data"))  # data on a GET
    seeds.append(seed(GET, u32(2) + s(key(0))))  # truncated
    seeds.append(seed(GET, u32(1) + s(b"")))  # empty key
    seeds.append(seed(GET, u32(1) + s(b"k" * 129)))  # key too long
    seeds.append(seed(GET, u32(4097)))  # batch too large
    seeds.append(seed(GET, u32(0)))
    match = u32(4) + u32(1) + u32(1000) + b"".join(s(key(i)) for i in range(4))
    seeds.append(seed(MATCH, match))
    seeds.append(seed(MATCH, u32(2) + u32(0)))  # lease missing
    seeds.append(seed(RELEASE, u32(3) + b"".join(s(key(i)) for i in range(3))))
    seeds.append(seed(STATS, b""))
    seeds.append(seed(OTHER, get))
    for b in seeds:
        name = hashlib.sha1(b).hexdigest()
        with open(os.path.join(out, name), "wb") as f:
            f.write(b)


if __name__ == "__main__":
    main(sys.argv[1])
