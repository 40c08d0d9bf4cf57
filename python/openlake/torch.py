"""Checkpoints and model weights straight between OpenLake and (GPU) memory.

    from openlake import Client
    from openlake.torch import load_safetensors, save_state_dict

    with Client("http://127.0.0.1:9000", access_key=..., secret_key=...) as c:
        sd = load_safetensors(c, "models", "llama/model.safetensors", device="cuda:0")
        save_state_dict(c, "ckpt", "step-100.safetensors", sd)

Loading reads the safetensors header, then the data region in chunks by
ranged native GETs, several in flight, into a ring of pinned host buffers;
each chunk is copied to the device asynchronously on a CUDA stream while the
next ones are read.  Where the native client can write into CUDA memory
directly (client.cuda_path "direct", or "ipc": the node on this host copies
into the GPU memory itself), the chunks land in device memory with no
staging, in larger chunks.  The tensors returned are views of one device buffer per
file (as many loaders do); a tensor whose offset does not suit its dtype's
alignment is copied out instead.

A model folder (Hugging Face layout: model.safetensors.index.json and its
shards) loads with the same call: pass the folder's prefix, or the index
key.

Saving writes a safetensors object that `safetensors` itself reads: the
header first, then every tensor's bytes, back to back (no holes, as the
format requires), tensors ordered by alignment.  The object is one native
PUT (a session for large ones): nothing is visible under the key until the
last byte has arrived, so an interrupted save never leaves a half-written
checkpoint behind.

Byte order: safetensors is little-endian; so are the hosts OpenLake runs on
(a big-endian host is refused rather than given swapped bytes).
"""
import json
import struct
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import torch

__all__ = ["load_safetensors", "save_state_dict", "SafetensorsError", "parse_header",
           "DTYPES"]

#: safetensors dtype names -> (torch dtype, bytes per element)
DTYPES = {
    "F64": (torch.float64, 8), "F32": (torch.float32, 4), "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2), "I64": (torch.int64, 8), "I32": (torch.int32, 4),
    "I16": (torch.int16, 2), "I8": (torch.int8, 1), "U8": (torch.uint8, 1),
    "BOOL": (torch.bool, 1),
}
for _name, _attr, _size in (("F8_E4M3", "float8_e4m3fn", 1), ("F8_E5M2", "float8_e5m2", 1),
                            ("U16", "uint16", 2), ("U32", "uint32", 4), ("U64", "uint64", 8)):
    if hasattr(torch, _attr):
        DTYPES[_name] = (getattr(torch, _attr), _size)
_NAMES = {dt: name for name, (dt, _) in DTYPES.items()}

#: the largest header accepted (safetensors' own limit is 100 MB)
MAX_HEADER = 100 * 1000 * 1000
CHUNK = 16 << 20
RING = 8


class SafetensorsError(ValueError):
    """A safetensors object that is truncated or malformed."""


def _check_host():
    if sys.byteorder != "little":
        raise SafetensorsError("safetensors data is little-endian; this host is not")


def parse_header(raw, data_len):
    """Checks a header (bytes) against a data region of data_len bytes.

    Returns (metadata dict, [(name, dtype, shape, begin, end)] sorted by
    begin).  Every tensor's size must match its dtype and shape, and lie
    inside the data region."""
    try:
        hdr = json.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise SafetensorsError(f"the header is not JSON: {e}") from None
    if not isinstance(hdr, dict):
        raise SafetensorsError("the header is not a JSON object")
    meta = hdr.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise SafetensorsError("__metadata__ must map strings to strings")
    out = []
    for name, t in hdr.items():
        if not isinstance(t, dict):
            raise SafetensorsError(f"tensor {name!r}: not an object")
        dt = DTYPES.get(t.get("dtype"))
        if dt is None:
            raise SafetensorsError(f"tensor {name!r}: unknown dtype {t.get('dtype')!r}")
        shape, offs = t.get("shape"), t.get("data_offsets")
        if (not isinstance(shape, list) or
                not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
            raise SafetensorsError(f"tensor {name!r}: bad shape {shape!r}")
        if (not isinstance(offs, list) or len(offs) != 2 or
                not all(isinstance(o, int) and not isinstance(o, bool) for o in offs)):
            raise SafetensorsError(f"tensor {name!r}: bad data_offsets {offs!r}")
        b, e = offs
        n = dt[1]
        for d in shape:
            n *= d
        if not 0 <= b <= e:
            raise SafetensorsError(f"tensor {name!r}: data_offsets {offs!r} out of order")
        if e > data_len:
            raise SafetensorsError(
                f"tensor {name!r}: ends at {e} past the data's {data_len} bytes (truncated?)")
        if e - b != n:
            raise SafetensorsError(
                f"tensor {name!r}: {e - b} bytes for {t['dtype']} {shape} ({n} expected)")
        out.append((name, dt[0], tuple(shape), b, e))
    out.sort(key=lambda x: x[3])
    return meta, out


def _read_exact(client, bucket, key, buf, offset):
    """Fills buf (a uint8 tensor or a writable buffer) from object offset."""
    if isinstance(buf, torch.Tensor):
        total = buf.numel()
        view = lambda a: buf[a:]  # noqa: E731
    else:
        mv = memoryview(buf).cast("B")
        total = len(mv)
        view = lambda a: mv[a:]  # noqa: E731
    got = 0
    while got < total:
        n = client.get_into(bucket, key, view(got), offset=offset + got)
        if n <= 0:
            raise SafetensorsError(f"{bucket}/{key}: ends at {offset + got} (truncated)")
        got += n


def _header(client, bucket, key):
    size = client.head(bucket, key).size
    if size < 8:
        raise SafetensorsError(f"{bucket}/{key}: {size} bytes, too short for safetensors")
    b8 = bytearray(8)
    _read_exact(client, bucket, key, b8, 0)
    (hlen,) = struct.unpack("<Q", b8)
    if hlen > MAX_HEADER or 8 + hlen > size:
        raise SafetensorsError(f"{bucket}/{key}: header length {hlen} past the object "
                               f"({size} bytes)")
    raw = bytearray(hlen)
    _read_exact(client, bucket, key, raw, 8)
    meta, tensors = parse_header(raw, size - 8 - hlen)
    return size, 8 + hlen, meta, tensors


def _views(flat, tensors, device):
    out = {}
    for name, dtype, shape, b, e in tensors:
        itemsize = DTYPES[_NAMES[dtype]][1]
        part = flat[b:e]
        if b % itemsize == 0:
            t = part.view(dtype)
        else:  # unaligned for its dtype: a copy of its own
            t = part.clone().view(dtype)
        out[name] = t.reshape(shape)
    return out


def _load_file(client, bucket, key, device, chunk, ring, threads):
    _check_host()
    size, base, meta, tensors = _header(client, bucket, key)
    data_len = size - base
    dev = torch.device(device)
    flat = torch.empty(data_len, dtype=torch.uint8, device=dev)
    spans = [(o, min(chunk, data_len - o)) for o in range(0, data_len, chunk)]
    if dev.type != "cuda" or getattr(client, "cuda_path", "staged") in ("direct", "ipc"):
        # Straight into the destination (host memory, or device memory the
        # client writes itself): reads in parallel, no staging.
        def read(span):
            o, n = span
            _read_exact(client, bucket, key, flat[o:o + n], base + o)
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(read, spans))
        return _views(flat, tensors, dev)
    # Through a ring of pinned buffers: read chunk i+1.. while chunk i copies.
    stream = torch.cuda.Stream(device=dev)
    slots = [torch.empty(chunk, dtype=torch.uint8, pin_memory=True) for _ in range(ring)]
    events = [None] * ring
    free = threading.Semaphore(0)

    def read_into_slot(i):
        o, n = spans[i]
        _read_exact(client, bucket, key, slots[i % ring][:n], base + o)

    with ThreadPoolExecutor(threads) as ex:
        futs = {}
        nxt = 0
        for i, (o, n) in enumerate(spans):
            # Keep up to `ring` reads ahead, each into a slot whose last copy is done.
            while nxt < len(spans) and nxt < i + ring:
                s = nxt % ring
                if events[s] is not None:
                    events[s].synchronize()
                    events[s] = None
                futs[nxt] = ex.submit(read_into_slot, nxt)
                nxt += 1
            futs.pop(i).result()
            s = i % ring
            with torch.cuda.stream(stream):
                flat[o:o + n].copy_(slots[s][:n], non_blocking=True)
                ev = torch.cuda.Event()
                ev.record(stream)
                events[s] = ev
        del free
    stream.synchronize()
    return _views(flat, tensors, dev)


def _index_of(client, bucket, key):
    """The index object of a model folder, or None when key is one file."""
    if key.endswith(".index.json"):
        return key
    if key.endswith(".safetensors"):
        return None
    cand = key.rstrip("/") + "/model.safetensors.index.json"
    try:
        client.head(bucket, cand)
        return cand
    except Exception:  # noqa: BLE001 - not found means: not a folder
        return None


def load_safetensors(client, bucket, key, device="cpu", chunk=None, ring=RING, threads=None):
    """Loads a safetensors object (or a model folder) into a dict of tensors
    on `device`.  Raises SafetensorsError for a truncated or malformed file,
    openlake.Error for what the store answers.

    chunk and threads: the read size and the reads in flight.  By default
    16 MiB x 8 through the pinned ring, and 64 MiB x 16 where the reads land
    in place (host memory, or a GPU the node copies into itself: "ipc"),
    which kept 16 node workers busy (bench/RESULTS.md "CUDA IPC reads")."""
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.init()  # so that the client sees CUDA loaded (cuda_path)
    in_place = dev.type != "cuda" or getattr(client, "cuda_path", "staged") in ("direct", "ipc")
    if chunk is None:
        chunk = 4 * CHUNK if in_place else CHUNK
    if threads is None:
        threads = 16 if in_place else 8
    idx = _index_of(client, bucket, key)
    if idx is None:
        return _load_file(client, bucket, key, device, chunk, ring, threads)
    raw = client.get(bucket, idx)
    try:
        wm = json.loads(bytes(raw).decode("utf-8"))["weight_map"]
        if not isinstance(wm, dict):
            raise TypeError("weight_map is not an object")
    except (ValueError, KeyError, TypeError) as e:
        raise SafetensorsError(f"{bucket}/{idx}: not a safetensors index: {e}") from None
    folder = idx.rsplit("/", 1)[0] + "/" if "/" in idx else ""
    out = {}
    for shard in sorted(set(wm.values())):
        if not isinstance(shard, str) or "/" in shard or shard.startswith("."):
            raise SafetensorsError(f"{bucket}/{idx}: bad shard name {shard!r}")
        part = _load_file(client, bucket, folder + shard, device, chunk, ring, threads)
        out.update(part)
    missing = [n for n in wm if n not in out]
    if missing:
        raise SafetensorsError(f"{bucket}/{idx}: tensors not in their shards: {missing[:5]}")
    return out


def _serialize_header(state_dict, metadata):
    items = []
    for name, t in state_dict.items():
        if not isinstance(name, str) or not isinstance(t, torch.Tensor):
            raise TypeError(f"{name!r}: state_dict must map str to tensors")
        if t.dtype not in _NAMES:
            raise TypeError(f"{name!r}: dtype {t.dtype} has no safetensors name")
        items.append((name, t))
    # By alignment (largest element first), then by name: no holes, and
    # every tensor at an offset its dtype divides.
    items.sort(key=lambda x: (-DTYPES[_NAMES[x[1].dtype]][1], x[0]))
    hdr, off = {}, 0
    if metadata:
        hdr["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, t in items:
        n = t.numel() * t.element_size()
        hdr[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape),
                     "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(hdr, separators=(",", ":")).encode()
    raw += b" " * (-(8 + len(raw)) % 8)  # the data starts 8-aligned
    return items, struct.pack("<Q", len(raw)) + raw, off


def save_state_dict(client, bucket, key, state_dict, metadata=None):
    """Writes state_dict as one safetensors object under bucket/key.

    Device tensors are copied to a pinned host buffer chunk by chunk on a
    side stream; the object is written in one native PUT.  Returns the
    object's info."""
    _check_host()
    items, head, data_len = _serialize_header(state_dict, metadata)
    total = len(head) + data_len
    any_cuda = any(t.is_cuda for _, t in items)
    buf = torch.empty(total, dtype=torch.uint8, pin_memory=any_cuda and torch.cuda.is_available())
    buf[:len(head)] = torch.frombuffer(bytearray(head), dtype=torch.uint8)
    off = len(head)
    streams = {}
    for _, t in items:
        n = t.numel() * t.element_size()
        if n:
            dst = buf[off:off + n]
            src = t.detach().contiguous().reshape(-1).view(torch.uint8)
            if t.is_cuda:
                s = streams.setdefault(t.device, torch.cuda.Stream(device=t.device))
                s.wait_stream(torch.cuda.current_stream(t.device))
                with torch.cuda.stream(s):
                    dst.copy_(src, non_blocking=True)
            else:
                dst.copy_(src)
        off += n
    for s in streams.values():
        s.synchronize()
    return client.put(bucket, key, buf.numpy())
