"""OpenLake's native client: objects over UCX straight into your buffers.

    from openlake import Client

    with Client("http://127.0.0.1:9000", access_key="openlake",
                secret_key="openlake-secret") as c:
        c.put("bucket", "key", b"hello")
        buf = bytearray(5)
        c.get_into("bucket", "key", buf)

The endpoint is the node's S3 URL (the same one and the same keys as S3;
the native port is found from it) or its native address "host:port".  On
a cluster, any node: the client learns the others and fails over.

Buffers: anything with the buffer protocol (bytes for put; bytearray,
memoryview, numpy arrays, array.array for get_into), and torch tensors
(CPU tensors directly; CUDA tensors directly where the UCX found at run time
moves CUDA memory; reads into CUDA tensors by CUDA IPC where the node runs
on this host: the node's GPU DMA engine copies the bytes in; else through
pinned host memory in pieces of 64 MiB: `Client.cuda_path` says which,
"direct", "ipc" or "staged").

Errors raise openlake.Error (or a subclass) with .code, the negative error
code of libopenlake.  Calls release the GIL while they wait, so threads
overlap their transfers; one Client may be shared by threads.
"""
import contextlib
import ctypes
import errno as _errno
import weakref

from . import _lib
from ._lib import lib as _L

__all__ = ["Client", "PutStream", "ObjectInfo", "Error", "NotFound", "AccessDenied",
           "InvalidRange", "PreconditionFailed", "TransportError"]

ENOBUCKET, ENOKEY, EPRECONDITION, ENOVERSION = 10002, 10005, 10018, 10021

# One message carries at most 64 MiB (client.h "Large objects"): the piece
# size of staged CUDA transfers, so each piece is one round trip.
STAGE_BYTES = 64 << 20


class Error(Exception):
    """A failed call: .code is libopenlake's (negative) code, .message
    ol_client_strerror's name for it."""

    def __init__(self, code, what=""):
        self.code = code
        self.message = _L.ol_client_strerror(code).decode(errors="replace")
        self.what = what
        super().__init__(f"{what}: {self.message} ({code})" if what
                         else f"{self.message} ({code})")


class NotFound(Error):
    """No such bucket, key or version."""


class AccessDenied(Error):
    """Unknown access key, wrong secret, a clock far off the server's, or
    a user the bucket does not let in."""


class InvalidRange(Error):
    """A GET offset past the end of a non-empty object."""


class PreconditionFailed(Error):
    """A condition of the request did not hold."""


class TransportError(Error):
    """The server could not be reached or stopped answering."""


_CLASSES = {-ENOKEY: NotFound, -ENOBUCKET: NotFound, -ENOVERSION: NotFound,
            -_errno.EACCES: AccessDenied, -_errno.ERANGE: InvalidRange,
            -EPRECONDITION: PreconditionFailed}
for _e in ("ETIMEDOUT", "ECONNREFUSED", "ECONNRESET", "EHOSTUNREACH", "ENETUNREACH"):
    _CLASSES[-getattr(_errno, _e)] = TransportError


def error(code, what=""):
    """The Error (subclass) instance for a negative libopenlake code."""
    return _CLASSES.get(code, Error)(code, what)


def _raise(code, what):
    raise error(code, what)


class ObjectInfo:
    __slots__ = ("size", "mtime_ns", "etag", "version_id", "content_type", "key")

    def __init__(self, info, key=None):
        self.size = info.size
        self.mtime_ns = info.mtime_ns
        self.etag = info.etag.decode()
        self.version_id = info.version_id.decode()
        self.content_type = info.content_type.decode()
        self.key = key

    def __repr__(self):
        return f"ObjectInfo(key={self.key!r}, size={self.size}, etag={self.etag!r})"


def _b(s):
    return s.encode() if isinstance(s, str) else bytes(s)


def _is_tensor(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _tensor_bytes(t):
    """A contiguous tensor as a flat uint8 view of the same memory."""
    import torch
    if not t.is_contiguous():
        raise ValueError("tensor must be contiguous")
    return t.reshape(-1).view(torch.uint8) if t.dtype != torch.uint8 else t.reshape(-1)


def _host_buffer(n):
    """n bytes of host memory to stage a CUDA tensor through: pinned, so
    the copies to and from the GPU are DMA (torch's caching host allocator
    keeps them for reuse).  Without a CUDA device (the staging code run on
    CPU tensors by the tests) plain memory."""
    import torch
    return torch.empty(n, dtype=torch.uint8, pin_memory=torch.cuda.is_available())


@contextlib.contextmanager
def _region(buf, writable):
    """(address, bytes) of buf's memory, held for the with-block: a buffer
    export (so a bytearray cannot be resized under the call) or a tensor's
    storage.  Read-only buffers (bytes, read-only memoryviews) are passed
    in place, never copied."""
    if _is_tensor(buf):
        if not buf.is_contiguous():
            if writable:
                raise ValueError("tensor must be contiguous")
            buf = buf.contiguous()
        yield (buf.data_ptr() or None), buf.numel() * buf.element_size()
        return
    view = _lib.PyBuffer()
    # PyBUF_SIMPLE asks for one contiguous run of bytes: a strided numpy
    # array or memoryview raises BufferError rather than being misread.
    _lib.get_buffer(buf, ctypes.byref(view),
                    _lib.PyBUF_WRITABLE if writable else _lib.PyBUF_SIMPLE)
    try:
        yield (view.buf if view.len else None), view.len
    finally:
        _lib.release_buffer(ctypes.byref(view))


class Client:
    """A connection to one OpenLake node (or cluster) over its native port.

    cuda_path: None picks "direct" where the UCX found at run time moves CUDA
    memory, else "ipc" for reads where the node runs on this host with a
    CUDA driver (the node copies into the tensor itself; writes are
    staged), else "staged" (through pinned host memory); "staged" forces
    staging; "direct" raises where UCX cannot."""

    def __init__(self, endpoint="http://127.0.0.1:9000", access_key="openlake",
                 secret_key="openlake-secret", timeout_ms=0, cuda_path=None, lanes=0):
        if cuda_path not in (None, "direct", "ipc", "staged"):
            raise ValueError("cuda_path: None, 'direct', 'ipc' or 'staged'")
        self._c = None
        self._endpoint = endpoint
        self._streams = weakref.WeakSet()  # open PutStreams, aborted by close()
        o = _lib.Opts(_b(endpoint), _b(access_key), _b(secret_key), timeout_ms, lanes)
        h = ctypes.c_void_p()
        rc = _L.ol_client_open(ctypes.byref(o), ctypes.byref(h))
        if rc < 0:
            _raise(rc, endpoint)
        self._c = h
        self.cuda_direct = bool(_L.ol_client_cuda_direct(h))
        if cuda_path == "direct" and not self.cuda_direct:
            self.close()
            raise ValueError("cuda_path='direct': this UCX was built without CUDA")
        self._cuda_pref = cuda_path

    @property
    def cuda_path(self):
        """How CUDA tensors move: "direct", "ipc" (reads) or "staged".  Asked
        at the time of the call: PyTorch loads CUDA on first use, perhaps
        after the client was opened."""
        if self._cuda_pref:
            return self._cuda_pref
        if self.cuda_direct:
            return "direct"
        if self._c and _L.ol_client_cuda_ipc(self._c):
            return "ipc"
        return "staged"

    @property
    def _h(self):
        if not self._c:
            raise ValueError("client is closed")
        return self._c

    def close(self):
        """Closes the connection, aborting the put streams still open.
        Every other call must have returned first."""
        if self._c:
            for st in list(self._streams):
                st.abort()
            _L.ol_client_close(self._c)
            self._c = None

    @property
    def closed(self):
        return not self._c

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self):
        state = "closed" if self.closed else self.cuda_path
        return f"Client({self._endpoint!r}, {state})"

    def _staged(self, buf):
        return _is_tensor(buf) and buf.is_cuda and self.cuda_path != "direct"

    def stats(self):
        """What this client's GETs did (ol_client_stats): a dict of
        direct_gets, shard_reads, shard_failures, pieces_rebuilt, fallbacks,
        lanes, lane_calls (a list: messages sent on each lane) and
        inline_gets."""
        st = _lib.Stats()
        _L.ol_client_stats(self._h, ctypes.byref(st))
        out = {name: getattr(st, name) for name, _ in _lib.Stats._fields_}
        out["lane_calls"] = list(st.lane_calls)[:st.lanes]
        return out

    # ---- objects ----

    def kv(self, replicas=1):
        """The KV-cache namespace (openlake.kv.KV; docs/KV.md)."""
        from .kv import KV
        return KV(self, replicas)

    def head(self, bucket, key):
        info = _lib.Info()
        rc = _L.ol_client_head(self._h, _b(bucket), _b(key), ctypes.byref(info))
        if rc < 0:
            _raise(rc, f"{bucket}/{key}")
        return ObjectInfo(info, key)

    def _get(self, bucket, key, offset, buf, info):
        with _region(buf, True) as (addr, n):
            rc = _L.ol_client_get(self._h, _b(bucket), _b(key), offset, addr, n,
                                  ctypes.byref(info))
        if rc < 0:
            _raise(rc, f"{bucket}/{key}")
        return rc

    def get_into(self, bucket, key, buf, offset=0):
        """Reads the object from byte `offset` into buf (as many bytes as
        fit; fewer at the end of the object).  Returns the bytes read."""
        if self._staged(buf):
            if self.cuda_path == "ipc":
                # The node copies into the tensor; memory it cannot be
                # named to (not exportable) is staged after all.
                try:
                    return self._get(bucket, key, offset, buf, _lib.Info())
                except Error as e:
                    if e.code != -_errno.ENOTSUP:
                        raise
            return self._get_staged(bucket, key, buf, offset)
        return self._get(bucket, key, offset, buf, _lib.Info())

    def _get_staged(self, bucket, key, buf, offset):
        # Through one pinned buffer, a message's worth at a time.  Pieces
        # are separate GETs, so each is checked against the first piece's
        # ETag: an overwrite in between restarts the read (a few times).
        dst = _tensor_bytes(buf)
        n = dst.numel()
        host = _host_buffer(min(n, STAGE_BYTES))
        if n == 0:  # still looked up, as an unstaged read of 0 bytes is
            return self._get(bucket, key, offset, host, _lib.Info())
        for _ in range(3):
            got, etag = 0, None
            while got < n:
                want = min(n - got, STAGE_BYTES)
                info = _lib.Info()
                m = self._get(bucket, key, offset + got, host[:want], info)
                if etag is None:
                    etag = info.etag
                elif info.etag != etag:
                    break
                dst[got:got + m].copy_(host[:m])
                got += m
                if m < want or offset + got >= info.size:
                    return got
            else:
                return got
        _raise(-_errno.EAGAIN, f"{bucket}/{key} (overwritten while staged)")

    def get(self, bucket, key):
        """The whole object as bytes."""
        for _ in range(3):
            size = self.head(bucket, key).size
            if size == 0:
                return b""
            buf = bytearray(size)
            info = _lib.Info()
            n = self._get(bucket, key, 0, buf, info)
            if info.size == size:  # else overwritten between head and get
                return bytes(buf) if n == size else bytes(memoryview(buf)[:n])
        _raise(-_errno.EAGAIN, f"{bucket}/{key} (size changed while read)")

    def put(self, bucket, key, buf):
        """Stores buf (any readable buffer or tensor) as the object."""
        if self._staged(buf):
            return self._put_staged(bucket, key, buf)
        return self._put(bucket, key, buf)

    def _put(self, bucket, key, buf):
        info = _lib.Info()
        with _region(buf, False) as (addr, n):
            rc = _L.ol_client_put(self._h, _b(bucket), _b(key), addr, n, ctypes.byref(info))
        if rc < 0:
            _raise(rc, f"{bucket}/{key}")
        return ObjectInfo(info, key)

    def _put_staged(self, bucket, key, buf):
        src = _tensor_bytes(buf.detach().contiguous())
        n = src.numel()
        host = _host_buffer(min(n, STAGE_BYTES))
        if n <= STAGE_BYTES:
            host.copy_(src)
            return self._put(bucket, key, host)
        # Larger: a put stream, so nothing is visible before the commit.
        s = self.open_put(bucket, key, n)
        try:
            for o in range(0, n, STAGE_BYTES):
                m = min(STAGE_BYTES, n - o)
                host[:m].copy_(src[o:o + m])
                s.write(host[:m])
            info = s.commit()
        finally:
            s.abort()
        info.key = key
        return info

    def open_put(self, bucket, key, total):
        """A PutStream: write total bytes in pieces, then commit()."""
        return PutStream(self, bucket, key, total)

    def delete(self, bucket, key):
        """Deletes the object (no error when it did not exist, as S3)."""
        rc = _L.ol_client_delete(self._h, _b(bucket), _b(key))
        if rc < 0:
            _raise(rc, f"{bucket}/{key}")

    def list(self, bucket, prefix="", start_after="", page=1000):
        """Iterates over the keys (ObjectInfo: .key, .size, .mtime_ns,
        .etag) in order, `page` keys per library call, so a bucket of any
        size takes bounded memory.  Errors raise on iteration."""
        after = start_after
        while True:
            out = []

            def cb(_arg, k, info):
                out.append(ObjectInfo(info.contents, k.decode()))
                return 1 if len(out) >= page else 0  # non-zero stops the listing
            fn = _lib.LIST_FN(cb)
            rc = _L.ol_client_list(self._h, _b(bucket), _b(prefix) if prefix else None,
                                   _b(after) if after else None, fn, None)
            if rc < 0:
                _raise(rc, bucket)
            yield from out
            if len(out) < page:
                return
            after = out[-1].key

    # ---- batches ----

    def get_many(self, reads):
        """reads: [(bucket, key, buf[, offset]), ...] -> [bytes read or an
        Error instance, ...], in order, all submitted as one batch (small
        reads share round trips; each read has its own status).  CUDA
        tensors are staged through pinned host memory unless cuda_path is
        "direct"."""
        n = len(reads)
        if n == 0:
            return []
        ops = (_lib.Op * n)()
        staged = []
        with contextlib.ExitStack() as stack:
            names = []
            for i, (bucket, key, buf, *rest) in enumerate(reads):
                offset = rest[0] if rest else 0
                if self._staged(buf):
                    host = _host_buffer(buf.numel() * buf.element_size())
                    staged.append((i, buf, host))
                    buf = host
                addr, ln = stack.enter_context(_region(buf, True))
                bk, kk = _b(bucket), _b(key)
                names.append((bk, kk))  # the ops borrow them until reaped
                op = ops[i]
                op.opcode = _lib.OP_GET
                op.bucket, op.key = bk, kk
                op.buf, op.offset, op.len = addr, offset, ln
                op.user_data = i
            ptrs = (ctypes.POINTER(_lib.Op) * n)(*[ctypes.pointer(ops[i]) for i in range(n)])
            _L.ol_client_run(self._h, ptrs, n)
        out = []
        for i in range(n):
            r = int(ops[i].result)
            out.append(error(r, f"{reads[i][0]}/{reads[i][1]}") if r < 0 else r)
        for i, buf, host in staged:
            if out[i] is not None and not isinstance(out[i], Error) and out[i] > 0:
                _tensor_bytes(buf)[:out[i]].copy_(host[:out[i]])
        return out


class PutStream:
    """A PUT in pieces (ol_client_put_begin/write/commit): nothing is
    visible under the key before commit() returns.  As a context manager it
    aborts unless committed.  One thread at a time."""

    def __init__(self, client, bucket, key, total):
        self._c = client
        self._key = key
        self._s = ctypes.c_void_p()
        rc = _L.ol_client_put_begin(client._h, _b(bucket), _b(key), total, ctypes.byref(self._s))
        if rc < 0:
            _raise(rc, f"{bucket}/{key}")
        self._what = f"{bucket}/{key}"
        client._streams.add(self)

    def write(self, buf):
        if not self._s:
            raise ValueError("stream is committed or aborted")
        with _region(buf, False) as (addr, n):
            rc = _L.ol_client_put_write(self._s, addr, n)
        if rc < 0:
            _raise(rc, self._what)

    def commit(self):
        info = _lib.Info()
        s, self._s = self._s, None
        rc = _L.ol_client_put_commit(s, ctypes.byref(info))
        if rc < 0:
            _raise(rc, self._what)
        return ObjectInfo(info, self._key)

    def abort(self):
        """Drops the stream: nothing becomes visible.  No-op once committed
        or aborted."""
        s, self._s = self._s, None
        # Client.close() aborts its open streams first, so a closed client
        # here means the handle is already gone; never touch a freed client.
        if s and not self._c.closed:
            _L.ol_client_put_abort(s)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.abort()

    def __del__(self):
        try:
            self.abort()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
