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
moves CUDA memory, else through pinned host memory: `Client.cuda_path`
says which).

Errors raise openlake.Error (or a subclass) with .code, the negative error
code of libopenlake.  Calls release the GIL while they wait, so threads
overlap their transfers; one Client may be shared by threads.
"""
import ctypes
import errno as _errno

from . import _lib
from ._lib import lib as _L

__all__ = ["Client", "Error", "NotFound", "AccessDenied", "ObjectInfo"]

ENOBUCKET, ENOKEY, ENOVERSION, EPRECONDITION = 10002, 10005, 10021, 10018


class Error(Exception):
    """A failed call: .code is libopenlake's (negative) code."""

    def __init__(self, code, what=""):
        self.code = code
        msg = _L.ol_client_strerror(code).decode(errors="replace")
        super().__init__(f"{what}: {msg} ({code})" if what else f"{msg} ({code})")


class NotFound(Error):
    """No such bucket or key (or version)."""


class AccessDenied(Error):
    """Unknown access key, wrong secret, or a clock far off the server's."""


def _raise(code, what):
    if code in (-ENOKEY, -ENOBUCKET, -ENOVERSION):
        raise NotFound(code, what)
    if code == -_errno.EACCES:
        raise AccessDenied(code, what)
    raise Error(code, what)


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
    t = type(x)
    return t.__module__.startswith("torch") and hasattr(x, "data_ptr")


def _writable(buf):
    """(address, bytes, keepalive) of a writable buffer."""
    if _is_tensor(buf):
        if not buf.is_contiguous():
            raise ValueError("tensor must be contiguous")
        return buf.data_ptr(), buf.numel() * buf.element_size(), buf
    mv = memoryview(buf)
    if mv.readonly:
        raise ValueError("buffer is read-only")
    mv = mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv
    if mv.nbytes == 0:
        return None, 0, mv
    c = (ctypes.c_char * mv.nbytes).from_buffer(mv)
    return ctypes.addressof(c), mv.nbytes, (mv, c)


def _readable(buf):
    if _is_tensor(buf):
        if not buf.is_contiguous():
            buf = buf.contiguous()
        return buf.data_ptr(), buf.numel() * buf.element_size(), buf
    mv = memoryview(buf)
    if not mv.contiguous:
        raise ValueError("buffer must be contiguous")
    mv = mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv
    n = mv.nbytes
    if n == 0:
        return None, 0, mv
    if mv.readonly:
        # ctypes wants a writable view for from_buffer; a read-only buffer
        # (bytes) is passed by its address, kept alive by mv.
        c = ctypes.c_char_p(mv.tobytes()) if not isinstance(buf, bytes) else ctypes.c_char_p(buf)
        return ctypes.cast(c, ctypes.c_void_p).value, n, (mv, c, buf)
    c = (ctypes.c_char * n).from_buffer(mv)
    return ctypes.addressof(c), n, (mv, c)


class Client:
    def __init__(self, endpoint="http://127.0.0.1:9000", access_key="openlake",
                 secret_key="openlake-secret", timeout_ms=0):
        self._c = None
        o = _lib.Opts(_b(endpoint), _b(access_key), _b(secret_key), timeout_ms)
        h = ctypes.c_void_p()
        rc = _L.ol_client_open(ctypes.byref(o), ctypes.byref(h))
        if rc < 0:
            _raise(rc, endpoint)
        self._c = h
        self.cuda_path = "direct" if _L.ol_client_cuda_direct(h) else "staged"

    def close(self):
        if self._c:
            _L.ol_client_close(self._c)
            self._c = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # ---- objects ----

    def head(self, bucket, key):
        info = _lib.Info()
        rc = _L.ol_client_head(self._c, _b(bucket), _b(key), ctypes.byref(info))
        if rc < 0:
            _raise(rc, f"{bucket}/{key}")
        return ObjectInfo(info, key)

    def get_into(self, bucket, key, buf, offset=0):
        """Reads the object from byte `offset` into buf (as many bytes as
        fit; fewer at the end of the object).  Returns the bytes read."""
        if _is_tensor(buf) and buf.is_cuda and self.cuda_path != "direct":
            import torch
            n = buf.numel() * buf.element_size()
            host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
            got = self.get_into(bucket, key, host, offset)
            buf.view(-1).view(torch.uint8)[:got].copy_(host[:got])
            return got
        addr, n, keep = _writable(buf)
        info = _lib.Info()
        rc = _L.ol_client_get(self._c, _b(bucket), _b(key), offset, addr, n, ctypes.byref(info))
        del keep
        if rc < 0:
            _raise(rc, f"{bucket}/{key}")
        return rc

    def get(self, bucket, key):
        """The whole object as bytes."""
        size = self.head(bucket, key).size
        buf = bytearray(size)
        n = self.get_into(bucket, key, buf) if size else 0
        return bytes(buf[:n])

    def put(self, bucket, key, buf):
        """Stores buf (any readable buffer or tensor) as the object."""
        if _is_tensor(buf) and buf.is_cuda and self.cuda_path != "direct":
            buf = buf.detach().contiguous().view(-1).cpu()
        addr, n, keep = _readable(buf)
        info = _lib.Info()
        rc = _L.ol_client_put(self._c, _b(bucket), _b(key), addr, n, ctypes.byref(info))
        del keep
        if rc < 0:
            _raise(rc, f"{bucket}/{key}")
        return ObjectInfo(info, key)

    def open_put(self, bucket, key, total):
        """A PutStream: write total bytes in pieces, then commit()."""
        return PutStream(self, bucket, key, total)

    def delete(self, bucket, key):
        rc = _L.ol_client_delete(self._c, _b(bucket), _b(key))
        if rc < 0:
            _raise(rc, f"{bucket}/{key}")

    def list(self, bucket, prefix="", start_after=""):
        """The keys (ObjectInfo with .key) in order."""
        out = []

        def cb(_arg, key, info):
            out.append(ObjectInfo(info.contents, key.decode()))
            return 0
        fn = _lib.LIST_FN(cb)
        rc = _L.ol_client_list(self._c, _b(bucket), _b(prefix) if prefix else None,
                               _b(start_after) if start_after else None, fn, None)
        if rc < 0:
            _raise(rc, bucket)
        return out

    # ---- batches ----

    def get_many(self, reads):
        """reads: [(bucket, key, buf, offset), ...] -> [bytes read or an
        Error instance, ...], in order, all in one batch (small reads share
        round trips)."""
        n = len(reads)
        ops = (_lib.Op * n)()
        keep = []
        for i, (bucket, key, buf, offset) in enumerate(reads):
            addr, ln, k = _writable(buf)
            bk, kk = _b(bucket), _b(key)
            keep.append((k, bk, kk))
            ops[i].opcode = _lib.OP_GET
            ops[i].bucket, ops[i].key = bk, kk
            ops[i].buf, ops[i].offset, ops[i].len = addr, offset, ln
        ptrs = (ctypes.POINTER(_lib.Op) * n)(*[ctypes.pointer(ops[i]) for i in range(n)])
        _L.ol_client_run(self._c, ptrs, n)
        out = []
        for i in range(n):
            r = ops[i].result
            if r < 0:
                try:
                    _raise(int(r), f"{reads[i][0]}/{reads[i][1]}")
                except Error as e:
                    out.append(e)
            else:
                out.append(int(r))
        del keep
        return out


class PutStream:
    def __init__(self, client, bucket, key, total):
        self._c = client
        self._s = ctypes.c_void_p()
        rc = _L.ol_client_put_begin(client._c, _b(bucket), _b(key), total, ctypes.byref(self._s))
        if rc < 0:
            _raise(rc, f"{bucket}/{key}")
        self._what = f"{bucket}/{key}"

    def write(self, buf):
        addr, n, keep = _readable(buf)
        rc = _L.ol_client_put_write(self._s, addr, n)
        del keep
        if rc < 0:
            _raise(rc, self._what)

    def commit(self):
        info = _lib.Info()
        s, self._s = self._s, None
        rc = _L.ol_client_put_commit(s, ctypes.byref(info))
        if rc < 0:
            _raise(rc, self._what)
        return ObjectInfo(info)

    def abort(self):
        if self._s:
            _L.ol_client_put_abort(self._s)
            self._s = None
