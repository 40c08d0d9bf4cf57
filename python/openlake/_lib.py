"""ctypes bindings of libopenlake (include/openlake/client.h)."""
import ctypes
import ctypes.util
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("OPENLAKE_LIB")
    if env:
        yield env
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
                ("secret_key", ctypes.c_char_p), ("timeout_ms", ctypes.c_uint)]


class Info(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint64), ("mtime_ns", ctypes.c_int64),
                ("etag", ctypes.c_char * 72), ("version_id", ctypes.c_char * 72),
                ("content_type", ctypes.c_char * 256)]


class Op(ctypes.Structure):
    _fields_ = [("opcode", ctypes.c_int), ("bucket", ctypes.c_char_p), ("key", ctypes.c_char_p),
                ("buf", ctypes.c_void_p), ("offset", ctypes.c_uint64), ("len", ctypes.c_uint64),
                ("user_data", ctypes.c_uint64), ("result", ctypes.c_int64), ("info", Info)]


OP_GET, OP_PUT, OP_HEAD, OP_DELETE = 1, 2, 3, 4
LIST_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(Info))

_P = ctypes.c_void_p
for name, res, args in [
    ("ol_client_open", ctypes.c_int, [ctypes.POINTER(Opts), ctypes.POINTER(_P)]),
    ("ol_client_close", None, [_P]),
    ("ol_client_strerror", ctypes.c_char_p, [ctypes.c_int]),
    ("ol_client_cuda_direct", ctypes.c_int, [_P]),
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
]:
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = args
