"""The KV-cache namespace through the Python client (libopenlake's KV
calls) against a real server: the key helper's known answers (the same as
src/kv/hash.c's unit test), batched put / get / match_prefix with dedup,
pins and releases, misses, bad keys refused, and a memory tier small enough
to evict: pinned blocks stay, unpinned old ones go."""

import pytest

from helpers import import_openlake

openlake = import_openlake()
from openlake.kv import chain_keys, external_key, root_key  # noqa: E402

SERVER_CONFIG = [("kv_memory_bytes", "4194304")]  # 4 MiB: evictions are easy to cause


def test_known_answers():
    k = chain_keys(range(1, 10), 4)
    assert [x.hex() for x in k] == [
        "2eaa2b35e9b0846a2e22d1c06eed82f8d1f3ff7a07c7dabf5c6ea43d8bb43186",
        "c3e56f0ff88bb5e91fe0a7f775c5fd0515f8115196e29ffc161a790739242a7d",
        "a37c5348dff65d2d6790477ebd36408c3425c3692cbfa1e2e8ede22312e6f69a"]
    assert chain_keys(range(1, 10), 4, partial=False) == k[:2]
    assert root_key("llama-3.1-8b/bf16/tp0").hex() == \
        "31a1dc263f004903b031bc1ed4876fcfca448ae25d756349d82fd15f3f312845"
    assert chain_keys(range(1, 5), 4, salt="llama-3.1-8b/bf16/tp0")[0].hex() == \
        "69771d44d89aaadc7240e93fc172c72c029028bbd3d37be97505622b21c15a42"
    with pytest.raises(ValueError):
        chain_keys([1 << 31], 4)
    assert external_key("x") != external_key("y") and len(external_key("x")) == 32


@pytest.fixture
def kv(make_server):
    srv = make_server(config=SERVER_CONFIG)
    with openlake.Client(srv.endpoint) as c:
        yield c.kv()


def test_put_get_match_dedup(kv):
    keys = chain_keys(range(4000), 100)  # 40 blocks
    blocks = [bytes([i]) * (1000 + i) for i in range(len(keys))]
    assert kv.put(keys[:30], blocks[:30]) == ["stored"] * 30
    assert kv.put(keys[:30], blocks[:30]) == ["present"] * 30  # dedup
    assert kv.match_prefix(keys) == 30
    bufs = [bytearray(2000) for _ in keys]
    got = kv.get(keys, bufs)
    assert got[:30] == [len(b) for b in blocks[:30]] and got[30:] == [None] * 10
    assert all(bytes(bufs[i][:got[i]]) == blocks[i] for i in range(30))
    # A hole ends the prefix.
    assert kv.match_prefix([keys[0], keys[35], keys[1]]) == 1
    # Pins are counted; releases drop them.
    assert kv.match_prefix(keys[:5], pin=True) == 5
    assert kv.release(keys[:5]) == 5
    assert kv.release(keys[:5]) == 0
    # Opaque keys of any length up to 128 bytes.
    assert kv.put([b"x" * 128, b"y"], [b"a", b"b"]) == ["stored", "stored"]
    assert kv.get([b"x" * 128], [bytearray(1)]) == [1]
    with pytest.raises(ValueError):
        kv.put([b"z" * 129], [b"c"])
    with pytest.raises(ValueError):
        kv.get([b""], [bytearray(1)])


def test_eviction_spares_pins(kv):
    keys = chain_keys(range(100000), 100)[:40]
    block = b"\xab" * (256 << 10)  # 40 x 256 KiB = 10 MiB through a 4 MiB tier
    assert kv.put(keys[:4], [block] * 4) == ["stored"] * 4
    assert kv.match_prefix(keys[:4], pin=True, lease_ms=60000) == 4
    for o in range(4, 40, 4):
        kv.put(keys[o:o + 4], [block] * 4)
    bufs = [bytearray(len(block)) for _ in keys]
    got = kv.get(keys, bufs)
    assert got[:4] == [len(block)] * 4  # pinned: kept
    assert None in got[4:20]  # the oldest unpinned ones went
    assert all(bytes(bufs[i]) == block for i in range(40) if got[i])  # never wrong bytes
    assert kv.release(keys[:4]) == 4
