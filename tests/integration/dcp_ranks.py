"""Two ranks save a checkpoint with torch.distributed.checkpoint into
OpenLake (openlake.dcp), then two ranks load it and compare.  Run by
tests/integration/test_torch_ckpt.py (gloo, CPU) and on the GPU machine
(`--cuda`: the tensors on the GPU; NCCL where there is a GPU per rank,
else gloo, since NCCL refuses two ranks on one GPU).

    python3 dcp_ranks.py ENDPOINT BUCKET WORKDIR [--cuda]
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp


def state(rank, device, fill=None):
    g = torch.Generator().manual_seed(1234)
    shared = torch.randn(256, 64, generator=g)
    g.manual_seed(rank + 1)
    mine = torch.randn(1000 + rank, generator=g).to(torch.bfloat16)
    sd = {"shared.weight": shared, f"rank{rank}.only": mine,
          "step": torch.tensor(100 + 0 * rank)}
    if fill is not None:
        sd = {k: torch.full_like(v, fill) for k, v in sd.items()}
    return {k: v.to(device) for k, v in sd.items()}


def run(rank, world, endpoint, bucket, workdir, cuda):
    nccl = cuda and torch.cuda.device_count() >= world
    dist.init_process_group("nccl" if nccl else "gloo", rank=rank, world_size=world,
                            init_method=f"file://{workdir}/pg")
    device = f"cuda:{rank % torch.cuda.device_count()}" if cuda else "cpu"
    if rank == 0:
        print(f"backend {'nccl' if nccl else 'gloo'}, tensors on {device}", flush=True)
    from openlake import Client
    from openlake.dcp import OpenLakeReader, OpenLakeWriter
    c = Client(endpoint)
    prefix = "run/step-100"
    sd = state(rank, device)
    save = getattr(dcp, "save", None) or dcp.save_state_dict
    load = getattr(dcp, "load", None) or dcp.load_state_dict
    save(sd, storage_writer=OpenLakeWriter(c, bucket, prefix))
    dist.barrier()
    back = state(rank, device, fill=0)
    load(back, storage_reader=OpenLakeReader(c, bucket, prefix))
    want = state(rank, device)
    for k in want:
        assert torch.equal(back[k].cpu(), want[k].cpu()), (rank, k)
    keys = [o.key for o in c.list(bucket, prefix="run/step-100/")]
    assert "run/step-100/.metadata" in keys and len(keys) == 1 + world, keys
    dist.barrier()
    dist.destroy_process_group()
    c.close()
    if rank == 0:
        print("DCP OK", flush=True)


if __name__ == "__main__":
    endpoint, bucket, workdir = sys.argv[1:4]
    cuda = "--cuda" in sys.argv
    mp.spawn(run, args=(2, endpoint, bucket, workdir, cuda), nprocs=2, join=True)
