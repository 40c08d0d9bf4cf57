"""ctypes bindings of libopenlake (include/openlake/client.h)."""
import ctypes
import ctypes.util
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    # OPENLAKE_LIB, when set, is the only candidate: a wrong path there is
    # an error to report, not a reason to load some other copy.
    env = os.environ.get("OPENLAKE_LIB")
    if env:
        yield env
        return
    yield os.path.join(_HERE, "libopenlake.so")
    # A checkout: python/openlake/ -> build/libopenlake.so
    root = os.path.dirname(os.path.dirname(_HERE))
    for b in ("build", "builddir"):
        yield os.path.join(root, b, "libopenlake.so")
    found = ctypes.util.find_library("openlake")
    if found:
        yield found


def _load():
    errs = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errs.append(f"{path}: {e}")
    raise ImportError("libopenlake not found (set OPENLAKE_LIB, or build the checkout with "
                      "meson): " + "; ".join(errs))


lib = _load()


class Opts(ctypes.Structure):
    _fields_ = [("endpoint", ctypes.c_char_p), ("access_key", ctypes.c_char_p),
                ("secret_key", ctypes.c_char_p), ("timeout_ms", ctypes.c_uint),
                ("lanes", ctypes.c_uint)]

MAX_LANES = 8  # OL_CLIENT_MAX_LANES


class Info(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint64), ("mtime_ns", ctypes.c_int64),
                ("etag", ctypes.c_char * 72), ("version_id", ctypes.c_char * 72),
                ("content_type", ctypes.c_char * 256)]


class Op(ctypes.Structure):
    _fields_ = [("opcode", ctypes.c_int), ("bucket", ctypes.c_char_p), ("key", ctypes.c_char_p),
                ("buf", ctypes.c_void_p), ("offset", ctypes.c_uint64), ("len", ctypes.c_uint64),
                ("user_data", ctypes.c_uint64), ("result", ctypes.c_int64), ("info", Info)]


class Stats(ctypes.Structure):
    _fields_ = [("direct_gets", ctypes.c_uint64), ("shard_reads", ctypes.c_uint64),
                ("shard_failures", ctypes.c_uint64), ("pieces_rebuilt", ctypes.c_uint64),
                ("fallbacks", ctypes.c_uint64), ("lanes", ctypes.c_uint),
                ("lane_calls", ctypes.c_uint64 * MAX_LANES), ("inline_gets", ctypes.c_uint64),
                ("cuda_ipc_gets", ctypes.c_uint64)]


OP_GET, OP_PUT, OP_HEAD, OP_DELETE = 1, 2, 3, 4
LIST_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(Info))

_P = ctypes.c_void_p
for name, res, args in [
    ("ol_client_open", ctypes.c_int, [ctypes.POINTER(Opts), ctypes.POINTER(_P)]),
    ("ol_client_close", None, [_P]),
    ("ol_client_strerror", ctypes.c_char_p, [ctypes.c_int]),
    ("ol_client_cuda_direct", ctypes.c_int, [_P]),
    ("ol_client_cuda_ipc", ctypes.c_int, [_P]),
    ("ol_client_stats", None, [_P, ctypes.POINTER(Stats)]),
    ("ol_client_get", ctypes.c_int64, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64,
                                       _P, ctypes.c_uint64, ctypes.POINTER(Info)]),
    ("ol_client_put", ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_char_p, _P, ctypes.c_uint64,
                                     ctypes.POINTER(Info)]),
    ("ol_client_put_begin", ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_char_p,
                                           ctypes.c_uint64, ctypes.POINTER(_P)]),
    ("ol_client_put_write", ctypes.c_int, [_P, _P, ctypes.c_uint64]),
    ("ol_client_put_commit", ctypes.c_int, [_P, ctypes.POINTER(Info)]),
    ("ol_client_put_abort", None, [_P]),
    ("ol_client_head", ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_char_p,
                                      ctypes.POINTER(Info)]),
    ("ol_client_delete", ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_char_p]),
    ("ol_client_list", ctypes.c_int64, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                        LIST_FN, _P]),
    ("ol_client_run", ctypes.c_int, [_P, ctypes.POINTER(ctypes.POINTER(Op)), ctypes.c_uint]),
    ("ol_client_submit", ctypes.c_int, [_P, ctypes.POINTER(ctypes.POINTER(Op)), ctypes.c_uint]),
    ("ol_client_reap", ctypes.c_int, [_P, ctypes.POINTER(ctypes.POINTER(Op)), ctypes.c_uint,
                                      ctypes.c_uint, ctypes.c_int]),
    ("ol_client_mem_reg", ctypes.c_int, [_P, _P, ctypes.c_size_t, ctypes.c_int,
                                         ctypes.POINTER(_P)]),
    ("ol_client_mem_dereg", None, [_P, _P]),
    ("ol_client_kv_replicas", ctypes.c_int, [_P, ctypes.c_uint]),
    ("ol_client_kv_put", ctypes.c_int, [_P, _P, _P, _P, ctypes.c_uint, _P]),
    ("ol_client_kv_get", ctypes.c_int, [_P, _P, _P, _P, ctypes.c_uint, _P]),
    ("ol_client_kv_match_prefix", ctypes.c_int, [_P, _P, ctypes.c_uint, ctypes.c_int,
                                                 ctypes.c_uint]),
    ("ol_client_kv_release", ctypes.c_int, [_P, _P, ctypes.c_uint]),
]:
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = args


class PyBuffer(ctypes.Structure):
    """CPython's Py_buffer (Include/pybuffer.h; the same layout since 3.3)."""
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int),
                ("ndim", ctypes.c_int), ("format", ctypes.c_char_p),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


PyBUF_SIMPLE, PyBUF_WRITABLE = 0, 1
# pythonapi is a PyDLL: the GIL stays held and a set Python error raises.
get_buffer = ctypes.pythonapi.PyObject_GetBuffer
get_buffer.restype = ctypes.c_int
get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(PyBuffer), ctypes.c_int]
release_buffer = ctypes.pythonapi.PyBuffer_Release
release_buffer.restype = None
release_buffer.argtypes = [ctypes.POINTER(PyBuffer)]


class KVKey(ctypes.Structure):
    _fields_ = [("p", ctypes.c_void_p), ("len", ctypes.c_size_t)]
