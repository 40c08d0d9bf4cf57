"""The AWS SDK for JavaScript v3 (tests/js/s3_check.mjs) against both modes,
with the SDK's defaults: path-style, us-east-1, CRC32 checksums on uploads,
presigned URLs from @aws-sdk/s3-request-presigner used with fetch().

The packages come from tests/js/package-lock.json through `npm ci`, into a
cache outside the repository ($OPENLAKE_JS_CACHE, else ~/.cache/openlake-js),
one directory per lockfile: installed once, reused by later sessions.  The
tests skip only when node or npm is missing or npm cannot reach its
registry.  The script runs once per mode; each check it prints is one test
case here.  The locked SDK (3.940) is the last line that runs on Debian 12's
Node.js 18 and already has today's defaults (flexible checksums, x-id).
"""

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import helpers as h

JS_DIR = h.REPO_ROOT / "tests" / "js"
SCRIPT = "s3_check.mjs"
MIN_NODE = 18  # the "engines" of the locked @aws-sdk and @smithy packages (3.940: Debian 12 runs them)

# The checks of s3_check.mjs, in the order it runs them.
CHECKS = [
    "create_bucket", "put_string", "put_buffer_metadata", "put_5mib", "get_object",
    "get_range", "head_object", "get_missing", "get_checksum_mode", "list_objects_v2",
    "copy_object", "tagging", "conditional_put", "multipart_raw", "multipart_abort",
    "lib_storage_upload", "presigned_get", "presigned_put", "delete_object",
    "delete_objects", "delete_bucket",
]

RAN_ALL = "script_ran_every_check"  # the case that checks the script's own output


NETWORK_ERRORS = re.compile(r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|"
                            r"ENETUNREACH|EHOSTUNREACH|network|getaddrinfo|socket hang up|"
                            r"\b50[234]\b|proxy", re.I)


def _cases():
    out = []
    for mode in ("sd", "ec"):
        for name in CHECKS:
            out.append(pytest.param(mode, name, id=f"{mode}-{name}"))
        out.append(pytest.param(mode, RAN_ALL, id=f"{mode}-{RAN_ALL}"))
    return out


@pytest.fixture(scope="session")
def js_dir():
    """A directory with node_modules installed by `npm ci` from
    tests/js/package-lock.json, and the check script."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node or npm is not installed (scripts/install-deps.sh installs both)")
    v = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    m = re.match(r"v(\d+)\.", v.stdout.strip())
    if not m or int(m.group(1)) < MIN_NODE:
        pytest.skip(f"node {v.stdout.strip()} is too old: the locked @aws-sdk packages need "
                    f"node >= {MIN_NODE} (Debian 12's nodejs is 18; NodeSource's works)")
    lock = (JS_DIR / "package-lock.json").read_bytes()
    key = hashlib.sha256((JS_DIR / "package.json").read_bytes() + lock).hexdigest()[:16]
    cache = Path(os.environ.get("OPENLAKE_JS_CACHE") or Path.home() / ".cache" / "openlake-js")
    d = cache / key
    d.mkdir(parents=True, exist_ok=True)
    stamp = d / "node_modules" / ".openlake-npm-ci-done"
    # Other test sessions may share the cache: one installs, the rest wait.
    with open(cache / f"{key}.lock", "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        if not stamp.exists():
            for f in ("package.json", "package-lock.json"):
                shutil.copyfile(JS_DIR / f, d / f)
            try:
                p = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund",
                                    "--prefer-offline"],
                                   cwd=d, capture_output=True, text=True, timeout=600)
            except subprocess.TimeoutExpired:
                pytest.skip("npm ci did not finish within 600 s (registry unreachable?)")
            out = p.stdout + p.stderr
            if p.returncode != 0:
                if NETWORK_ERRORS.search(out):
                    pytest.skip(f"npm cannot reach its registry: {out.strip()[-500:]}")
                pytest.fail(f"npm ci failed in {d}:\n{out[-4000:]}")
            stamp.write_text("ok\n")
        shutil.copyfile(JS_DIR / SCRIPT, d / SCRIPT)
    return d


@pytest.fixture(scope="module")
def js_run(mode_server, js_dir, tmp_path_factory):
    """Runs s3_check.mjs once against the module's server of one mode;
    returns (process, {check: (passed, message)})."""
    tmp = tmp_path_factory.mktemp("js")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({
        "OPENLAKE_ENDPOINT": mode_server.endpoint,
        "OPENLAKE_ACCESS_KEY": h.ACCESS_KEY,
        "OPENLAKE_SECRET_KEY": h.SECRET_KEY,
        "OPENLAKE_BUCKET": h.unique_bucket("js"),
        # No shared config may change the SDK's defaults.
        "AWS_CONFIG_FILE": str(tmp / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "no-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
    })
    p = subprocess.run([shutil.which("node"), SCRIPT], cwd=js_dir, env=env,
                       capture_output=True, text=True, timeout=900)
    results = {}
    for line in p.stdout.splitlines():
        m = re.match(r"(PASS|FAIL) (\w+)(?:: (.*))?$", line)
        if m:
            results[m.group(2)] = (m.group(1) == "PASS", m.group(3) or "")
    return p, results


@pytest.mark.parametrize("mode_server, check", _cases(), indirect=["mode_server"], scope="module")
def test_js_sdk(mode_server, js_run, check):
    p, results = js_run
    if check == RAN_ALL:
        # The script ran every check listed here, in order, and its exit
        # status says whether one failed.
        assert list(results) == CHECKS, p.stdout
        failed = [c for c, (ok, _) in results.items() if not ok]
        assert f"DONE passed={len(CHECKS) - len(failed)} failed={len(failed)}" in p.stdout
        assert p.returncode == (1 if failed else 0), p.stderr[-3000:]
        return
    assert check in results, (f"s3_check.mjs printed no line for {check} (exit "
                              f"{p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    ok, msg = results[check]
    assert ok, f"{check} [{mode_server.mode}]: {msg}"
