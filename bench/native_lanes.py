"""GET throughput of libopenlake over the native port by lanes (issue 13):
C client processes at once, each with L lanes, each GETting one object of
SIZE MiB into its own buffer again and again for SECONDS; prints the total.
A benchmark, not a test: bench/native_lanes.sh starts the server.

  python3 bench/native_lanes.py ENDPOINT BUCKET --lanes L --clients C --mib SIZE --seconds S
"""
import argparse
import ctypes
import multiprocessing as mp
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import openlake  # noqa: E402


def one(endpoint, bucket, key, lanes, size, seconds, start, q):
    c = openlake.Client(endpoint, lanes=lanes)
    buf = bytearray(size)
    c.get_into(bucket, key, buf)  # warm
    while time.time() < start:
        time.sleep(0.001)
    n, t0 = 0, time.time()
    while time.time() - t0 < seconds:
        assert c.get_into(bucket, key, buf) == size
        n += 1
    dt = time.time() - t0
    q.put((n * size, dt, c.stats()["lanes"]))
    c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("endpoint")
    ap.add_argument("bucket")
    ap.add_argument("--lanes", type=int, default=0)
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=2)
    a = ap.parse_args()
    size = a.mib << 20
    c = openlake.Client(a.endpoint)
    key = "lanes-%d" % a.mib
    try:
        c.head(a.bucket, key)
    except openlake.NotFound:
        c.put(a.bucket, key, os.urandom(size))
    c.close()
    q = mp.Queue()
    start = time.time() + 1.0
    ps = [mp.Process(target=one, args=(a.endpoint, a.bucket, key, a.lanes, size, a.seconds,
                                       start, q)) for _ in range(a.clients)]
    for p in ps:
        p.start()
    res = [q.get() for _ in ps]
    for p in ps:
        p.join()
    total = sum(b for b, _, _ in res) / max(dt for _, dt, _ in res)
    print("GET %d MiB, %d client(s) x %d lane(s): %.2f GB/s total" %
          (a.mib, a.clients, res[0][2], total / 1e9))
    if a.clients == 1:
        # The ceiling the issue names: one thread's memcpy of the same size,
        # in the same run (median of 9, warm buffers).
        src, dst = bytearray(os.urandom(size)), bytearray(size)
        s_p = (ctypes.c_char * size).from_buffer(src)
        d_p = (ctypes.c_char * size).from_buffer(dst)
        ts = []
        for _ in range(10):
            t0 = time.perf_counter()
            ctypes.memmove(d_p, s_p, size)
            ts.append(time.perf_counter() - t0)
        m = size / sorted(ts[1:])[4] / 1e9
        print("memcpy %d MiB, one thread: %.2f GB/s; GET / memcpy %.2f" %
              (a.mib, m, total / 1e9 / m))


if __name__ == "__main__":
    main()
