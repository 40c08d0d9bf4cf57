"""GETs into CUDA tensors by CUDA IPC (cuda_path "ipc"), on a GPU host,
against a server on the same host (tests/gpu/run.sh starts it).  Exits 1 on
any failure.

  python3 tests/gpu/cuda_ipc_loads.py ENDPOINT TAG"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from openlake import Client  # noqa: E402
from openlake.torch import load_safetensors, save_state_dict  # noqa: E402

ep, tag = sys.argv[1], sys.argv[2]
c = Client(ep, access_key="openlake", secret_key="openlake-secret")
torch.zeros(1, device="cuda")
fails = []


def check(name, ok):
    print(tag, name, "ok" if ok else "FAIL", flush=True)
    if not ok:
        fails.append(name)


check("cuda_path is ipc", c.cuda_path == "ipc")
b = "gpu-check"
try:
    c.create_bucket(b)
except Exception:  # noqa: BLE001 - made through S3 by run.sh
    pass
for n in (0, 1, 4097, (5 << 20) + 3, (300 << 20) + 7):
    data = torch.randint(0, 256, (n,), dtype=torch.uint8)
    c.put(b, f"o{n}", data.numpy())
    dst = torch.zeros(n + 100, dtype=torch.uint8, device="cuda")
    got = c.get_into(b, f"o{n}", dst[37:37 + n])
    hst = dst.cpu()
    ok = (got == n and torch.equal(hst[37:37 + n], data) and int(hst[:37].sum()) == 0
          and int(hst[37 + n:].sum()) == 0)
    if n > 10:  # a range from the middle, into a smaller tensor
        d2 = torch.zeros(n // 2, dtype=torch.uint8, device="cuda")
        g2 = c.get_into(b, f"o{n}", d2, offset=n // 3)
        ok = ok and g2 == n // 2 and torch.equal(d2.cpu(), data[n // 3:n // 3 + n // 2])
    check(f"get_into cuda {n} bytes", ok)
before = c.stats()["cuda_ipc_gets"]
sd = {f"w{i}": torch.randn(1 << 20 + i % 3, dtype=torch.bfloat16) for i in range(24)}
sd["odd"] = torch.arange(7, dtype=torch.int8)
save_state_dict(c, b, "m.safetensors", sd)
out = load_safetensors(c, b, "m.safetensors", device="cuda:0")
check("load_safetensors byte-identical",
      set(out) == set(sd) and all(torch.equal(out[k].cpu(), v) for k, v in sd.items()))
check("loads went by CUDA IPC", c.stats()["cuda_ipc_gets"] > before)
staged = Client(ep, access_key="openlake", secret_key="openlake-secret", cuda_path="staged")
out = load_safetensors(staged, b, "m.safetensors", device="cuda:0")
check("staged load byte-identical", all(torch.equal(out[k].cpu(), v) for k, v in sd.items()))
print(tag, "ALL OK" if not fails else f"FAILURES: {fails}", flush=True)
sys.exit(1 if fails else 0)
