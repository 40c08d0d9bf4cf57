"""The KV-cache namespace (docs/KV.md) from Python: batched put, get,
match_prefix and release of blocks under opaque keys, one round trip per
node for a whole batch, and the chain hash that makes keys from token ids.

    kv = client.kv()                      # or client.kv(replicas=2)
    keys = chain_keys(token_ids, block_tokens=256, salt=b"llama-3-8b@bf16@tp1/0")
    n = kv.match_prefix(keys, pin=True)   # how many leading blocks are cached
    sizes = kv.get(keys[:n], buffers)     # each: bytes read, or None (a miss)
    kv.release(keys[:n])
    stored = kv.put(keys[n:], new_blocks) # each: "stored" | "present" | an Error

A block that is lost (evicted, a node down, bad bytes) is a miss, never an
error: the engine recomputes it.
"""
import contextlib
import ctypes
import hashlib
import struct

from . import _lib
from ._lib import lib as _L

__all__ = ["KV", "chain_keys", "root_key", "KEY_BYTES"]

KEY_BYTES = 32
_TAG = b"openlake-kv/1\x00"
_ROOT_TAG = b"openlake-kv-root/1\x00"
_EXT_TAG = b"openlake-kv-ext/1\x00"
ENOENT, ENOSPC, EMSGSIZE = 2, 28, 90


def root_key(salt=None):
    """The chain's root: 32 zero bytes, or SHA-256 of the root tag and salt
    (put in the salt everything that changes the KV bytes: model, dtype,
    layout, tensor-parallel rank, adapter, tenant)."""
    if salt is None:
        return bytes(KEY_BYTES)
    if isinstance(salt, str):
        salt = salt.encode()
    return hashlib.sha256(_ROOT_TAG + bytes(salt)).digest()


def chain_keys(tokens, block_tokens, salt=None, partial=True):
    """The chain keys of a token sequence in blocks of block_tokens
    (docs/KV.md, "Keys"; the same bytes as libopenlake's ol_client_kv_chain
    and the server's src/kv/hash.c): key_i = SHA-256(tag || key_{i-1} ||
    the block's token ids as little-endian int32).  A partial last block
    gets a key too unless partial is False."""
    if block_tokens <= 0:
        raise ValueError("block_tokens must be positive")
    toks = [int(t) for t in tokens]
    for t in toks:
        if not -(1 << 31) <= t < (1 << 31):
            raise ValueError(f"token id {t} is outside int32")
    keys, parent = [], root_key(salt)
    for o in range(0, len(toks), block_tokens):
        block = toks[o:o + block_tokens]
        if len(block) < block_tokens and not partial:
            break
        parent = hashlib.sha256(_TAG + parent + struct.pack(f"<{len(block)}i", *block)).digest()
        keys.append(parent)
    return keys


def external_key(k):
    """A foreign key (an engine's key string or bytes) as a 32-byte key of
    ours that no chain key can equal (docs/KV.md)."""
    if isinstance(k, str):
        k = k.encode()
    return hashlib.sha256(_EXT_TAG + bytes(k)).digest()


class KV:
    """The KV namespace of a Client (client.kv())."""

    def __init__(self, client, replicas=1):
        from . import error
        self._c = client
        self._error = error
        rc = _L.ol_client_kv_replicas(client._h, replicas)
        if rc < 0:
            raise error(rc, "replicas")

    @staticmethod
    def _keys(keys):
        keys = [k.encode() if isinstance(k, str) else bytes(k) for k in keys]
        arr = (_lib.KVKey * len(keys))()
        for i, k in enumerate(keys):
            if not 1 <= len(k) <= 128:
                raise ValueError(f"key {i}: {len(k)} bytes (1..128)")
            arr[i].p = ctypes.cast(ctypes.c_char_p(k), ctypes.c_void_p)
            arr[i].len = len(k)
        return arr, keys  # keys keeps the bytes alive

    def _batch(self, call, keys, buffers, writable, out_type, what):
        """Runs one batched call over keys and their buffers (each held
        through the call); returns the per-key outputs."""
        from . import _region
        n = len(keys)
        if n != len(buffers):
            raise ValueError("keys and buffers differ in number")
        out = (out_type * n)()
        if n == 0:
            return out
        karr, keep = self._keys(keys)
        ptrs = (ctypes.c_void_p * n)()
        lens = (ctypes.c_uint64 * n)()
        with contextlib.ExitStack() as st:
            for i, b in enumerate(buffers):
                ptrs[i], lens[i] = st.enter_context(_region(b, writable))
            rc = call(self._c._h, karr, ptrs, lens, n, out)
        del keep
        if rc < 0:
            raise self._error(rc, what)
        return out

    def put(self, keys, buffers):
        """Stores blocks (any readable buffers or CPU tensors).  Returns per
        key "stored", "present" (a dedup: not written again) or an Error."""
        status = self._batch(_L.ol_client_kv_put, keys, buffers, False, ctypes.c_int, "kv put")
        return ["stored" if s == 0 else "present" if s == 1 else self._error(s, "kv put")
                for s in status]

    def get(self, keys, buffers):
        """Reads blocks into writable buffers.  Returns per key the bytes
        read, or None for a miss (an Error for a buffer too small or a full
        reply: ask again)."""
        res = self._batch(_L.ol_client_kv_get, keys, buffers, True, ctypes.c_int64, "kv get")
        return [int(r) if r >= 0 else None if r == -ENOENT else self._error(int(r), "kv get")
                for r in res]

    def match_prefix(self, keys, pin=False, lease_ms=0):
        """The number of leading keys present; with pin, those blocks are
        kept from eviction until release() or lease_ms (0: 30 s)."""
        if not keys:
            return 0
        karr, keep = self._keys(keys)
        rc = _L.ol_client_kv_match_prefix(self._c._h, karr, len(keys), 1 if pin else 0,
                                          lease_ms)
        del keep
        if rc < 0:
            raise self._error(rc, "kv match_prefix")
        return rc

    def release(self, keys):
        """Drops one pin of each key; returns how many were dropped."""
        if not keys:
            return 0
        karr, keep = self._keys(keys)
        rc = _L.ol_client_kv_release(self._c._h, karr, len(keys))
        del keep
        if rc < 0:
            raise self._error(rc, "kv release")
        return rc
