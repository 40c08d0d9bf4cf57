"""An LMCache remote connector over OpenLake's KV namespace (docs/KV.md).

LMCache loads external connectors through its `remote_storage_plugins`
setting (or `remote_url` with the external connector); this class keeps to
the contract of LMCache's `RemoteConnector`
(lmcache/v1/storage_backend/connector/base_connector.py): exists /
exists_sync, get, put, list, close, batched_get, batched_put,
batched_contains and batched_async_contains (prefix lookup, with pins).

Each LMCache key (a CacheEngineKey; its string form names format, model,
world size, worker and chunk hash) becomes the 32-byte key
SHA-256("openlake-kv-ext/1" 0x00 || key string).  A value is one block: a
64-byte header (magic, version, dtype, memory format, shape) then the
chunk's bytes, so a get rebuilds the MemoryObj with the right shape,
dtype and format, and refuses a block whose header does not parse (a miss).

Where LMCache is installed, the class derives from its RemoteConnector;
otherwise it stands alone and is checked against the documented contract
(tests/integration/test_lmcache_adapter.py): LMCache is not installable on
these machines (no PyPI), so no test here runs LMCache itself.
"""
import asyncio
import struct

from . import Client
from .kv import external_key

try:  # pragma: no cover - only where LMCache is installed
    from lmcache.v1.storage_backend.connector.base_connector import RemoteConnector as _Base
except Exception:  # noqa: BLE001
    _Base = object

MAGIC = b"OLKV"
HDR = struct.Struct("<4sHHH6x6Q")  # magic, version, dtype code, fmt, pad, ndim + 5 dims
assert HDR.size == 64

_DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32",
           "int64", "float8_e4m3fn", "float8_e5m2"]


def _dtype_code(dtype):
    name = str(dtype).replace("torch.", "")
    return _DTYPES.index(name)


def _dtype_of(code):
    import torch
    return getattr(torch, _DTYPES[code])


class OpenLakeConnector(_Base):
    """LMCache remote connector.  endpoint/access_key/secret_key: the node's
    S3 URL and keys; local_cpu_backend: LMCache's allocator (its allocate(shape,
    dtype, fmt) gives the MemoryObj a get fills); max_chunk_bytes: the largest
    value a get reads (LMCache's full chunk size where it told us)."""

    def __init__(self, endpoint, access_key="openlake", secret_key="openlake-secret",
                 local_cpu_backend=None, loop=None, replicas=1, max_chunk_bytes=64 << 20):
        self.client = Client(endpoint, access_key=access_key, secret_key=secret_key)
        self.kv = self.client.kv(replicas)
        self.local_cpu_backend = local_cpu_backend
        self.loop = loop
        self.max_chunk_bytes = max_chunk_bytes
        self._pinned = {}

    # ---- keys and values ----

    @staticmethod
    def _key(key):
        s = key.to_string() if hasattr(key, "to_string") else str(key)
        return external_key(s)

    @staticmethod
    def _encode(memory_obj):
        meta = memory_obj.metadata
        shape = list(meta.shape)
        if len(shape) > 5:
            raise ValueError("at most 5 dimensions")
        fmt = int(getattr(meta.fmt, "value", meta.fmt or 0))
        hdr = HDR.pack(MAGIC, 1, _dtype_code(meta.dtype), fmt, len(shape),
                       *(shape + [0] * (5 - len(shape))))
        return hdr, memory_obj.byte_array

    def _decode(self, buf, n):
        if n < HDR.size:
            return None
        magic, ver, code, fmt, ndim, *dims = HDR.unpack_from(buf, 0)
        if magic != MAGIC or ver != 1 or ndim > 5 or code >= len(_DTYPES):
            return None
        shape, dtype = tuple(dims[:ndim]), _dtype_of(code)
        fmt_v = fmt
        try:  # LMCache's MemoryFormat where there is one
            from lmcache.v1.memory_management import MemoryFormat
            fmt_v = MemoryFormat(fmt)
        except Exception:  # noqa: BLE001
            pass
        obj = self.local_cpu_backend.allocate(shape, dtype, fmt_v)
        if obj is None:
            return None
        body = memoryview(buf)[HDR.size:n]
        dst = obj.byte_array
        if len(dst) != len(body):
            return None
        dst[:] = body
        return obj

    # ---- the contract ----

    def exists_sync(self, key):
        return self.kv.match_prefix([self._key(key)]) == 1

    async def exists(self, key):
        return self.exists_sync(key)

    def batched_contains(self, keys, stop_after_first_not_exits=True):
        ks = [self._key(k) for k in keys]
        if stop_after_first_not_exits:
            n = self.kv.match_prefix(ks)
            return [i < n for i in range(len(ks))]
        return [self.kv.match_prefix([k]) == 1 for k in ks]

    def support_batched_contains(self):
        return True

    def support_batched_async_contains(self):
        return True

    async def batched_async_contains(self, lookup_id, keys, pin=False):
        ks = [self._key(k) for k in keys]
        n = self.kv.match_prefix(ks, pin=pin)
        if pin and n:
            self._pinned.setdefault(lookup_id, []).extend(ks[:n])
        return n

    def release_lookup(self, lookup_id):
        """Drops the pins a batched_async_contains(pin=True) took."""
        ks = self._pinned.pop(lookup_id, [])
        return self.kv.release(ks) if ks else 0

    def support_batched_get(self):
        return True

    async def batched_get(self, keys):
        if not keys:
            return []
        cap = HDR.size + self.max_chunk_bytes
        bufs = [bytearray(cap) for _ in keys]
        got = self.kv.get([self._key(k) for k in keys], bufs)
        return [self._decode(b, n) if isinstance(n, int) else None for b, n in zip(bufs, got)]

    async def get(self, key):
        return (await self.batched_get([key]))[0]

    def support_batched_put(self):
        return True

    async def batched_put(self, keys, memory_objs):
        if not keys:
            return
        blocks = []
        for o in memory_objs:
            hdr, body = self._encode(o)
            blocks.append(hdr + bytes(body))
        try:
            self.kv.put([self._key(k) for k in keys], blocks)
        finally:
            for o in memory_objs:
                if hasattr(o, "ref_count_down"):
                    o.ref_count_down()

    async def put(self, key, memory_obj):
        await self.batched_put([key], [memory_obj])

    async def list(self):
        return []  # blocks are addressed by hash; the namespace is not listable

    async def close(self):
        for lid in list(self._pinned):
            self.release_lookup(lid)
        self.client.close()

    def remove_sync(self, key):
        return False  # blocks leave by eviction only (docs/KV.md)


def run(coro):
    """Runs one of the connector's coroutines to completion (tests, scripts)."""
    return asyncio.run(coro)
