"""PyTorch Distributed Checkpoint (torch.distributed.checkpoint) storage in
OpenLake: a StorageWriter and a StorageReader over a bucket prefix.

    import torch.distributed.checkpoint as dcp
    from openlake.dcp import OpenLakeWriter, OpenLakeReader

    dcp.save(state_dict, storage_writer=OpenLakeWriter(client, "ckpt", "run1/step-100"))
    dcp.load(state_dict, storage_reader=OpenLakeReader(client, "ckpt", "run1/step-100"))

Layout under the prefix: one object per rank, `__<rank>_0.distcp`, holding
that rank's items back to back (tensors as raw little-endian bytes, other
items as the bytes the planner gives), and `.metadata`, the pickled
checkpoint Metadata, written by the coordinator once every rank's object
is stored.  A checkpoint without `.metadata` is not loadable, so a save
that dies half-way never passes for a checkpoint; a rank's object itself
becomes visible only when its last byte is stored (one native PUT).

Requires torch.distributed.checkpoint (PyTorch 2.0 or later; the calls
added since, reset/validate_checkpoint_id/storage_meta, are provided so
that each version finds what it asks for).
"""
import dataclasses
import io
import pickle
from dataclasses import dataclass

import torch
from torch.futures import Future
from torch.distributed.checkpoint import (LoadPlan, LoadPlanner, Metadata, SavePlan,
                                          SavePlanner, StorageReader, StorageWriter)
from torch.distributed.checkpoint.planner import LoadItemType, WriteItemType
from torch.distributed.checkpoint.storage import WriteResult

from .torch import DTYPES

__all__ = ["OpenLakeWriter", "OpenLakeReader"]

_DT = {dt: name for name, (dt, _) in DTYPES.items()}


@dataclass
class _Item:
    """Where one item lies: its object, range and, for tensors, its layout."""
    key: str
    offset: int
    length: int
    dtype: str = ""
    shape: tuple = ()


@dataclass
class _Prefix:
    prefix: str


def _join(prefix, name):
    return prefix.rstrip("/") + "/" + name if prefix else name


def _narrow(t, offsets, lengths):
    for d, (o, n) in enumerate(zip(offsets, lengths)):
        if o != 0 or n != t.size(d):
            t = t.narrow(d, o, n)
    return t


class OpenLakeWriter(StorageWriter):
    def __init__(self, client, bucket, prefix):
        super().__init__()
        self.client, self.bucket, self.prefix = client, bucket, prefix
        self.is_coordinator = False

    # PyTorch >= 2.2
    def reset(self, checkpoint_id=None):
        if checkpoint_id:
            self.prefix = str(checkpoint_id)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return True

    def storage_meta(self):
        return None

    def set_up_storage_writer(self, is_coordinator, *args, **kwargs):
        self.is_coordinator = is_coordinator

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        return plan

    def prepare_global_plan(self, plans):
        return [dataclasses.replace(p, storage_data=_Prefix(f"__{i}_")) for i, p in
                enumerate(plans)]

    def write_data(self, plan: SavePlan, planner: SavePlanner):
        key = _join(self.prefix, plan.storage_data.prefix + "0.distcp")
        parts, results, off = [], [], 0
        for item in plan.items:
            data = planner.resolve_data(item)
            if item.type == WriteItemType.BYTE_IO:
                b = data.getbuffer() if isinstance(data, io.BytesIO) else memoryview(data)
                info = _Item(key, off, b.nbytes)
                parts.append(bytes(b))
            else:
                t = data.detach().to("cpu").contiguous()
                if t.dtype not in _DT:
                    raise TypeError(f"{item.index}: dtype {t.dtype} is not supported")
                raw = t.reshape(-1).view(torch.uint8).numpy().tobytes()
                info = _Item(key, off, len(raw), _DT[t.dtype], tuple(t.shape))
                parts.append(raw)
            results.append(WriteResult(index=item.index, size_in_bytes=info.length,
                                       storage_data=info))
            off += info.length
        self.client.put(self.bucket, key, b"".join(parts))
        fut = Future()
        fut.set_result(results)
        return fut

    def finish(self, metadata: Metadata, results) -> None:
        metadata.storage_data = {r.index: r.storage_data for rs in results for r in rs}
        self.client.put(self.bucket, _join(self.prefix, ".metadata"), pickle.dumps(metadata))


class OpenLakeReader(StorageReader):
    def __init__(self, client, bucket, prefix):
        super().__init__()
        self.client, self.bucket, self.prefix = client, bucket, prefix
        self.storage_data = {}

    def reset(self, checkpoint_id=None):
        if checkpoint_id:
            self.prefix = str(checkpoint_id)
        self.storage_data = {}

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return True

    def read_metadata(self) -> Metadata:
        return pickle.loads(self.client.get(self.bucket, _join(self.prefix, ".metadata")))

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator, *args, **kwargs):
        self.storage_data = metadata.storage_data

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans):
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner):
        for item in plan.items:
            info = self.storage_data[item.storage_index]
            if item.type == LoadItemType.BYTE_IO:
                buf = bytearray(info.length)
                self._read(info, buf)
                planner.load_bytes(item, io.BytesIO(buf))
                continue
            dtype = DTYPES[info.dtype][0]
            t = torch.empty(info.shape, dtype=dtype)
            self._read(info, t.reshape(-1).view(torch.uint8).numpy())
            t = _narrow(t, item.storage_offsets, item.lengths)
            target = planner.resolve_tensor(item).detach()
            if target.size() != t.size():
                raise ValueError(f"{item.storage_index}: stored {tuple(t.size())}, "
                                 f"asked for {tuple(target.size())}")
            target.copy_(t)
            planner.commit_tensor(item, target)
        fut = Future()
        fut.set_result(None)
        return fut

    def _read(self, info, buf):
        mv = memoryview(buf).cast("B")
        got = 0
        while got < info.length:
            n = self.client.get_into(self.bucket, info.key, mv[got:], offset=info.offset + got)
            if n <= 0:
                raise IOError(f"{self.bucket}/{info.key}: short read at {info.offset + got}")
            got += n
