"""openlake.torch (safetensors to and from OpenLake) and openlake.dcp
(PyTorch Distributed Checkpoint storage) on the CPU, against a real server:
round trips of every dtype, a file written by hand to the safetensors spec,
a Hugging Face model folder (index + shards), truncated and malformed
objects refused with a clear error, and an interrupted save that leaves
nothing under its key.  GPU runs are in bench/gpu_ckpt.py (bench/RESULTS.md)."""
import json
import os
import struct
import sys

import pytest

from helpers import REPO_ROOT, unique_bucket, import_openlake

torch = pytest.importorskip("torch")
openlake = import_openlake()
from openlake.torch import SafetensorsError, load_safetensors, save_state_dict  # noqa: E402


@pytest.fixture(scope="module")
def env(server, s3):
    b = unique_bucket("ckpt")
    s3.create_bucket(Bucket=b)
    with openlake.Client(server.endpoint) as c:
        yield c, b, s3


def state():
    g = torch.Generator().manual_seed(0)
    sd = {
        "emb.weight": torch.randn(1000, 64, generator=g),
        "layer.0.w": torch.randn(64, 64, generator=g).to(torch.bfloat16),
        "layer.0.b": torch.randn(64, generator=g).to(torch.float16),
        "ids": torch.arange(-50, 50, dtype=torch.int64),
        "mask": torch.rand(33, generator=g) > 0.5,
        "small": torch.tensor([1, 2, 3], dtype=torch.int8),
        "u8": torch.arange(7, dtype=torch.uint8),
        "scalar": torch.tensor(3.5, dtype=torch.float64),
        "empty": torch.zeros(0, 4, dtype=torch.float32),
    }
    return sd


def check_equal(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert torch.equal(a[k], b[k]), k


def test_save_load_round_trip(env):
    c, b, s3 = env
    sd = state()
    save_state_dict(c, b, "m.safetensors", sd, metadata={"format": "pt"})
    check_equal(load_safetensors(c, b, "m.safetensors"), sd)
    # The bytes follow the format: 8-byte header length, JSON, the data back
    # to back with no holes (what `safetensors` itself requires).
    raw = s3.get_object(Bucket=b, Key="m.safetensors")["Body"].read()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + n])
    assert hdr.pop("__metadata__") == {"format": "pt"}
    spans = sorted(tuple(v["data_offsets"]) for v in hdr.values())
    assert spans[0][0] == 0 and spans[-1][1] == len(raw) - 8 - n
    assert all(x[1] == y[0] for x, y in zip(spans, spans[1:]))
    assert (8 + n) % 8 == 0


def handmade(tensors, meta=None):
    """A safetensors file built from the spec, independently of our writer."""
    hdr, blobs, off = {}, [], 0
    names = {torch.float32: "F32", torch.int32: "I32", torch.float16: "F16"}
    for k, t in tensors.items():
        data = t.contiguous().numpy().tobytes()
        hdr[k] = {"dtype": names[t.dtype], "shape": list(t.shape),
                  "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    if meta:
        hdr["__metadata__"] = meta
    h = json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def test_load_handmade_and_unaligned(env):
    c, b, s3 = env
    # An odd-length header puts the F32 tensor at an unaligned offset.
    t = {"a": torch.arange(12, dtype=torch.float32).reshape(3, 4),
         "b": torch.tensor([7, 8, 9], dtype=torch.int32),
         "h": torch.tensor([1.5, 2.5], dtype=torch.float16)}
    raw = handmade(t, meta={"x": "y"})
    s3.put_object(Bucket=b, Key="hand.safetensors", Body=raw)
    check_equal(load_safetensors(c, b, "hand.safetensors"), t)


def test_model_folder(env):
    c, b, s3 = env
    sd = state()
    names = sorted(sd)
    shard1 = {k: sd[k] for k in names[:4]}
    shard2 = {k: sd[k] for k in names[4:]}
    save_state_dict(c, b, "llm/model-00001-of-00002.safetensors", shard1)
    save_state_dict(c, b, "llm/model-00002-of-00002.safetensors", shard2)
    index = {"metadata": {}, "weight_map": {**{k: "model-00001-of-00002.safetensors"
                                                for k in shard1},
                                             **{k: "model-00002-of-00002.safetensors"
                                                for k in shard2}}}
    s3.put_object(Bucket=b, Key="llm/model.safetensors.index.json",
                  Body=json.dumps(index).encode())
    check_equal(load_safetensors(c, b, "llm"), sd)
    check_equal(load_safetensors(c, b, "llm/model.safetensors.index.json"), sd)


def test_truncated_and_malformed(env):
    c, b, s3 = env
    good = handmade({"a": torch.arange(100, dtype=torch.float32)})
    cases = {
        "trunc": good[:-10],
        "tiny": b"\x01\x00",
        "hugehdr": struct.pack("<Q", 1 << 40) + b"{}",
        "notjson": struct.pack("<Q", 5) + b"{nope",
        "badtype": handmade({"a": torch.arange(4, dtype=torch.float32)}).replace(b'"F32"',
                                                                                  b'"Q99"'),
        "badshape": good.replace(b'"shape": [100]', b'"shape": [101]'),
    }
    for k, raw in cases.items():
        s3.put_object(Bucket=b, Key=k, Body=raw)
        with pytest.raises(SafetensorsError):
            load_safetensors(c, b, k + "")
    with pytest.raises(openlake.NotFound):
        load_safetensors(c, b, "absent.safetensors")


def test_interrupted_save_leaves_nothing(env):
    c, b, s3 = env
    s = c.open_put(b, "half.safetensors", 1 << 20)
    s.write(b"\0" * 1000)
    s.abort()  # what a dying saver's connection amounts to
    with pytest.raises(openlake.NotFound):
        c.head(b, "half.safetensors")
    # An old checkpoint under the key stays whole until a new one commits.
    save_state_dict(c, b, "keep.safetensors", {"a": torch.ones(10)})
    s = c.open_put(b, "keep.safetensors", 1 << 20)
    s.write(b"\0" * 1000)
    check_equal(load_safetensors(c, b, "keep.safetensors"), {"a": torch.ones(10)})
    s.abort()


def test_dcp_two_ranks(env, tmp_path):
    """A multi-rank save and a load with 2 ranks (gloo, CPU)."""
    import importlib
    try:
        importlib.import_module("torch.distributed.checkpoint")
    except Exception as e:  # noqa: BLE001 - Debian's torch 1.13 cannot import it
        pytest.skip(f"torch.distributed.checkpoint unavailable in torch {torch.__version__}: {e}")
    c, b, _ = env
    script = REPO_ROOT / "tests" / "integration" / "dcp_ranks.py"
    import subprocess
    r = subprocess.run([sys.executable, str(script), c_endpoint(env), b, str(tmp_path)],
                       capture_output=True, text=True, timeout=240,
                       env=dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python")))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "DCP OK" in r.stdout


def c_endpoint(env):
    return env[0]._endpoint
