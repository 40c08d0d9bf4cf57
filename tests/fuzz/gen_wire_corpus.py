#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_wire (tests/fuzz/corpus/wire/).

Each file starts with a mode byte (see fuzz_wire.c): 0 a header (64 bytes,
then how the AM data length is chosen, the length, the reply's caps and op),
1 a request (the op, then its control bytes), 2 a reply (the remotedrive op,
the status kind and a small number, then the reply's control bytes).  The
messages follow docs/PROTOCOL.md "Drive protocol (UCX)"; some are valid,
some broken on purpose (truncated, past a limit, a NUL in a bucket).

    python3 tests/fuzz/gen_wire_corpus.py tests/fuzz/corpus/wire
"""
import hashlib
import os
import struct
import sys

MAGIC = 0x50444C4F
(PING, BEGIN, WRITE, COMMIT, ABORT, COPY, MARK, VERSIONS, SET_META, READ, DELETE,
 LIST_KEYS, LIST_BUCKETS) = range(1, 14)


def u8(v):
    return struct.pack("<B", v)


def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def u64(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


def s(b):
    if isinstance(b, str):
        b = b.encode()
    return u32(len(b)) + b


def vid(n=1):
    return bytes([n] * 16)


def meta(k=4, m=2, shard=1, size=1000, meta_len=0):
    return (vid() + bytes([k, m, shard, 0, 0, 0, 0, 0]) + u32(65536) + u64(size) +
            u64(1700000000 * 10**9) + b"d41d8cd98f00b204e9800998ecf8427e".ljust(64, b"\0") +
            u32(meta_len) + u32(0) + u64(7))


def hdr(op, ctl_len=0, data_len=0, flags=0, version=2, magic=MAGIC, status=0,
        hlc=0x0193_5F2A_6B40_0001):
    """The 64-byte header of wire version 2: magic, version, op, flags, drive,
    status, req_id, hlc (the sender's clock stamp), data_len, ctl_len, data_crc,
    mac (16 bytes; the fuzz target checks headers, not MACs)."""
    return struct.pack("<IBBHIiQQQII", magic, version, op, flags, 0, status, 42, hlc, data_len,
                       ctl_len, 0) + bytes(range(16))


def header_seed(h, how, length, ctl_cap, data_cap, op):
    return b"\0" + h + u8(how) + u32(length) + u32(ctl_cap) + u32(data_cap) + u8(op)


def bk(b="bkt", k="key"):
    return s(b) + s(k)


seeds = {}

# Headers.
seeds["hdr_req"] = header_seed(hdr(READ, 100), 128, 0, 0, 0, READ)
seeds["hdr_req_data"] = header_seed(hdr(WRITE, 16, 65536), 128, 0, 0, 0, WRITE)
seeds["hdr_rep"] = header_seed(hdr(READ, 0, 4096, flags=1), 128, 0, 0, 4096, READ)
seeds["hdr_rep_short"] = header_seed(hdr(READ, 0, 4096, flags=1), 1, 4000, 0, 4096, READ)
seeds["hdr_rep_big"] = header_seed(hdr(VERSIONS, 1 << 20, 0, flags=1), 128, 0, 100, 0, VERSIONS)
seeds["hdr_bad_magic"] = header_seed(hdr(PING, magic=0x12345678), 128, 0, 0, 0, PING)
seeds["hdr_bad_version"] = header_seed(hdr(PING, version=1), 128, 0, 0, 0, PING)
seeds["hdr_no_clock"] = header_seed(hdr(READ, 0, 4096, flags=1, hlc=0), 128, 0, 0, 4096, READ)
seeds["hdr_too_big"] = header_seed(hdr(WRITE, 2 << 20, 128 << 20), 128, 0, 0, 0, WRITE)
seeds["hdr_short"] = b"\0" + hdr(PING)[:20]

# Requests.
def req(op, ctl):
    return b"\1" + u8(op) + ctl


seeds["req_ping"] = req(PING, b"")
seeds["req_begin"] = req(BEGIN, bk())
seeds["req_begin_empty_key"] = req(BEGIN, bk(k=""))
seeds["req_begin_nul_bucket"] = req(BEGIN, bk(b="b\0t"))
seeds["req_begin_long_bucket"] = req(BEGIN, bk(b="b" * 64))
seeds["req_begin_truncated"] = req(BEGIN, bk()[:-1])
seeds["req_begin_key_nul"] = req(BEGIN, bk(k="a\0b"))
seeds["req_write"] = req(WRITE, u64(1025) + u64(65536))
seeds["req_write_short"] = req(WRITE, u64(1025))
seeds["req_commit"] = req(COMMIT, u64(1025) + u64(1000) + meta(meta_len=5) + s("hello"))
seeds["req_commit_no_meta"] = req(COMMIT, u64(1025) + u64(1000) + meta() + s(""))
seeds["req_commit_meta_len_lies"] = req(COMMIT, u64(1025) + u64(1000) + meta() + u32(70000))
seeds["req_abort"] = req(ABORT, u64(1025))
seeds["req_copy"] = req(COPY, bk("src", "skey") + vid(3) + bk() + meta() + s("m"))
seeds["req_mark"] = req(MARK, bk() + vid())
seeds["req_delete"] = req(DELETE, bk() + vid())
seeds["req_versions"] = req(VERSIONS, bk() + u32(16) + u8(3) + vid() + u32(4096))
seeds["req_versions_huge_cap"] = req(VERSIONS, bk() + u32(0xFFFFFFFF) + u8(1) + vid() +
                                     u32(0xFFFFFFFF))
seeds["req_set_meta"] = req(SET_META, bk() + vid() + u64(9) + s("x" * 40))
seeds["req_read"] = req(READ, bk() + vid() + u64(0) + u64(1 << 20))
seeds["req_read_long_key"] = req(READ, bk(k="k" * 1025) + vid() + u64(0) + u64(10))
seeds["req_list_keys"] = req(LIST_KEYS, s("bkt") + s("after") + u32(100))
seeds["req_list_keys_start"] = req(LIST_KEYS, s("bkt") + s("") + u32(1000))
seeds["req_list_buckets"] = req(LIST_BUCKETS, b"")
seeds["req_bucket_create"] = req(14, s("bkt") + u64(1700000000000000000))
seeds["req_bucket_delete"] = req(15, s("bkt"))
seeds["req_bucket_get_empty"] = req(16, s(""))
seeds["req_bucket_list"] = req(17, b"")
seeds["req_bconf_put"] = req(18, s("bkt") + s("ol.versioning") + u64(1))
seeds["req_bconf_get_huge"] = req(19, s("bkt") + s("cors") + u64(0xFFFFFFFFFFFFFFFF))
seeds["req_bconf_get_nul_name"] = req(19, s("bkt") + s("a\0b") + u64(10))
LOCK, UNLOCK = 20, 21
OWNER = bytes(range(1, 17))
seeds["req_lock"] = req(LOCK, s(b"bkt\0key") + OWNER + u32(30000))
seeds["req_lock_empty_name"] = req(LOCK, s(b"") + OWNER + u32(30000))
seeds["req_lock_long_name"] = req(LOCK, s(b"n" * 1089) + OWNER + u32(1))
seeds["req_lock_max_name"] = req(LOCK, s(b"n" * 1088) + OWNER + u32(0xFFFFFFFF))
seeds["req_lock_no_ttl"] = req(LOCK, s(b"bkt\0key") + OWNER)
seeds["req_lock_short_owner"] = req(LOCK, s(b"bkt\0key") + OWNER[:9])
seeds["req_unlock"] = req(UNLOCK, s(b"bkt\0key") + OWNER)
seeds["req_unlock_zero_owner"] = req(UNLOCK, s(b"k") + bytes(16) + b"trailing")
MEMBER = 23
seeds["req_member"] = req(MEMBER, s("openlake"))
seeds["req_member_empty"] = req(MEMBER, s(""))
seeds["req_member_nul"] = req(MEMBER, s(b"open\0lake"))
seeds["req_member_long"] = req(MEMBER, s("c" * 65))
seeds["req_member_max"] = req(MEMBER, s("c" * 64) + b"trailing")
seeds["req_member_truncated"] = req(MEMBER, s("openlake")[:-2])
seeds["req_unknown_op"] = req(99, b"abc")
seeds["req_trailing"] = req(MARK, bk() + vid() + b"future fields")

# Replies: which (fuzz_wire.c's switch), kind (status class | data_len/64 << 2),
# small, then the control bytes.
def rep(which, kind, small, ctl=b"", status=None):
    b = b"\2" + u8(which) + u8(kind) + u8(small)
    if status is not None:
        b += u32(status)
    return b + ctl


seeds["rep_ping"] = rep(0, 0, 0, u32(4))
seeds["rep_ping_no_drive"] = rep(0, 0, 7, u32(2))
seeds["rep_ping_short"] = rep(0, 0, 0, b"\1")
seeds["rep_begin"] = rep(1, 0, 0, u64(1025))
seeds["rep_begin_abort"] = rep(1, 0, 1, u64(1025))
seeds["rep_begin_short"] = rep(1, 0, 0, u32(1))
seeds["rep_begin_err"] = rep(1, 2, 28)
seeds["rep_versions"] = rep(2, 1, 2, u32(2) + meta() + meta(shard=2) + u8(0) + u32(0) + meta() +
                            s(""))
seeds["rep_versions_count_lies"] = rep(2, 1, 1, u32(5) + meta())
seeds["rep_versions_blob"] = rep(3, 1, (3 << 5) | 1, u32(1) + meta() + u8(1) + u32(5) + meta() +
                                 s("hello"))
seeds["rep_versions_blob_too_big"] = rep(3, 1, (1 << 5) | 1, u32(1) + meta() + u8(1) + u32(20) +
                                         meta() + s("x" * 20))
seeds["rep_versions_blob_len_lies"] = rep(3, 1, (3 << 5) | 1, u32(1) + meta() + u8(1) + u32(9) +
                                          meta() + s("hello"))
seeds["rep_read"] = rep(4, 4 << 2, 16)
seeds["rep_read_short"] = rep(4, 3 << 2, 16)
seeds["rep_read_err"] = rep(4, 2, 5)
seeds["rep_list_keys"] = rep(5, 1, 2, u32(2) + s("a") + meta() + s("b") + meta())
seeds["rep_list_keys_pages"] = rep(5, 1, 4, u32(1) + s("a") + meta())
seeds["rep_list_keys_empty_key"] = rep(5, 1, 1, u32(1) + s("") + meta())
seeds["rep_list_keys_long_key"] = rep(5, 1, 1, u32(1) + s("k" * 1100) + meta())
seeds["rep_list_buckets"] = rep(6, 0, 0, u32(3) + s("a") + s("bkt") + s("c" * 63))
seeds["rep_list_buckets_nul"] = rep(6, 0, 0, u32(1) + s("a\0b"))
seeds["rep_list_buckets_count_lies"] = rep(6, 0, 0, u32(1000) + s("a"))
seeds["rep_set_meta"] = rep(7, 0, 0)
seeds["rep_set_meta_ctl"] = rep(7, 0, 0, b"unexpected")
seeds["rep_copy"] = rep(8, 3, 0, status=-95)
seeds["rep_lock"] = rep(9, 0, 0)
seeds["rep_lock_busy"] = rep(9, 2, 16)
seeds["rep_lock_positive"] = rep(9, 1, 3)
seeds["rep_lock_ctl"] = rep(9, 0, 0, b"unexpected")

out = sys.argv[1] if len(sys.argv) > 1 else "tests/fuzz/corpus/wire"
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)
print(f"wrote {len(seeds)} seeds to {out}")
