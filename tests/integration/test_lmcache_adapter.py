"""openlake.lmcache.OpenLakeConnector against LMCache's documented
RemoteConnector contract (not against LMCache itself: it cannot be
installed here, no PyPI): put / get / exists round trips of chunks with
their shape, dtype and format, batched calls, prefix lookup with pins."""
from types import SimpleNamespace

import pytest

from helpers import import_openlake

torch = pytest.importorskip("torch")
import_openlake()
from openlake.lmcache import OpenLakeConnector, run  # noqa: E402


class FakeMemoryObj:
    """What the connector uses of LMCache's MemoryObj."""

    def __init__(self, shape, dtype, fmt=1):
        self.tensor = torch.zeros(shape, dtype=dtype)
        self.metadata = SimpleNamespace(shape=torch.Size(shape), dtype=dtype, fmt=fmt)
        self.refs = 1

    @property
    def byte_array(self):
        return memoryview(self.tensor.view(-1).view(torch.uint8).numpy())

    def ref_count_down(self):
        self.refs -= 1


class FakeAllocator:
    def allocate(self, shape, dtype, fmt):
        return FakeMemoryObj(tuple(shape), dtype, fmt)


class Key:
    def __init__(self, s):
        self.s = s

    def to_string(self):
        return self.s


def test_connector_contract(make_server):
    srv = make_server()
    conn = OpenLakeConnector(srv.endpoint, local_cpu_backend=FakeAllocator(),
                             max_chunk_bytes=1 << 20)
    try:
        keys = [Key(f"vllm@llama@1@0@{i:x}@bfloat16") for i in range(8)]
        objs = []
        for i in range(8):
            o = FakeMemoryObj((2, 4, 16, 64), torch.bfloat16)
            o.tensor.copy_(torch.randn(2, 4, 16, 64).to(torch.bfloat16) + i)
            objs.append(o)
        want = [o.tensor.clone() for o in objs]
        run(conn.batched_put(keys[:6], objs[:6]))
        assert all(o.refs == 0 for o in objs[:6])  # put lets go of them
        assert conn.exists_sync(keys[0]) and not conn.exists_sync(keys[7])
        assert run(conn.exists(keys[5]))
        assert conn.batched_contains(keys) == [True] * 6 + [False] * 2
        assert run(conn.batched_async_contains("req-1", keys, pin=True)) == 6
        assert conn.release_lookup("req-1") == 6
        got = run(conn.batched_get(keys))
        assert got[6] is None and got[7] is None
        for i in range(6):
            assert got[i].metadata.shape == torch.Size((2, 4, 16, 64))
            assert got[i].metadata.dtype == torch.bfloat16
            assert torch.equal(got[i].tensor, want[i])
        one = run(conn.get(keys[2]))
        assert torch.equal(one.tensor, want[2])
        run(conn.put(keys[6], objs[6]))
        assert torch.equal(run(conn.get(keys[6])).tensor, want[6])
        assert run(conn.get(Key("never-stored"))) is None
    finally:
        run(conn.close())
