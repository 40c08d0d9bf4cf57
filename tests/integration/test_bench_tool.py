"""Smoke test of `openlake bench`: short PUT and GET runs against a real
server must finish with zero errors (GET bodies are verified byte for byte)
and write valid JSON; a GET that expects the wrong size must count
verification errors, so the check can fail."""

import json
import subprocess

import helpers


def run_bench(server, tmp_path, name, *args):
    out = tmp_path / f"{name}.json"
    cmd = [str(helpers.openlake_binary()), "bench", "--endpoint", server.endpoint,
           "--bucket", "benchsmoke", "--quiet", "--json", str(out), *args]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=60)
    with open(out) as f:
        res = json.load(f)
    return p, res


def test_put_then_get_no_errors(server, tmp_path):
    p, put = run_bench(server, tmp_path, "put", "--op", "put", "--size", "4KiB:80,256KiB:20",
                       "--objects", "50", "--concurrency", "8", "--duration", "2s", "--prepare")
    assert p.returncode == 0, p.stdout
    assert put["errors"]["total"] == 0
    assert put["per_op"]["put"]["ops"] > 0
    assert put["total"]["latency_us"]["p50"] > 0

    p, get = run_bench(server, tmp_path, "get", "--op", "get", "--size", "4KiB:80,256KiB:20",
                       "--objects", "50", "--concurrency", "8", "--duration", "2s")
    assert p.returncode == 0, p.stdout
    assert get["errors"]["total"] == 0
    assert get["per_op"]["get"]["ops"] > 10
    assert get["total"]["mib_per_s"] > 0

    # The same keys read as if they were 8 KiB objects: every GET fails verification.
    p, bad = run_bench(server, tmp_path, "bad", "--op", "get", "--size", "8KiB",
                       "--objects", "50", "--concurrency", "2", "--duration", "500ms")
    assert p.returncode == 1
    assert bad["errors"]["verify"] > 0


def test_mixed_and_list(server, tmp_path):
    p, mixed = run_bench(server, tmp_path, "mixed", "--op", "mixed", "--mix",
                         "get=60,put=30,delete=10", "--size", "1KiB", "--objects", "40",
                         "--concurrency", "4", "--duration", "1s", "--range", "100")
    assert p.returncode == 0, p.stdout
    assert mixed["errors"]["total"] == 0
    p, lst = run_bench(server, tmp_path, "list", "--op", "list", "--concurrency", "1",
                       "--duration", "500ms")
    assert p.returncode == 0, p.stdout
    assert lst["list_keys"] > 0
