#!/usr/bin/env python3
"""Writes docs/openlake.conf.sample from the settings table in src/core/cfg.c.

Run after adding or changing a row:  python3 scripts/gen-conf-sample.py
With --check it only compares, and exits 1 when the sample is stale (the test
suite runs it that way)."""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CFG = ROOT / "src" / "core" / "cfg.c"
SAMPLE = ROOT / "docs" / "openlake.conf.sample"

HEAD = """# OpenLake sample configuration.  One setting per line: 'name value'.
# Command-line flags (--name value) override this file.  Sizes take K/M/G/T suffixes.
# Every line below shows the default.  (Generated from the table in src/core/cfg.c
# by scripts/gen-conf-sample.py.)
"""
TAIL = """
# Users: repeat for each.  Without any, the server accepts openlake / openlake-secret.
#user AKIAEXAMPLE0001 change-this-secret
#
# One user's limits, over user_requests_per_sec and user_bytes_per_sec
# (0 = none; (anonymous) for requests without credentials), e.g.
#limit AKIAEXAMPLE0001 100 50m
#
# Access control: a bucket belongs to the user who created it; other users
# (and anonymous requests) get 403 unless the bucket's policy or a canned ACL
# lets them in.  Users named in admin_users see and may do everything, e.g.
#admin_users AKIAEXAMPLE0001
"""

# A row: I(name, lo, hi, "default", "help"), Z(...), B(name, "default", "help"), S(...).
ROW = re.compile(r'^\s*([IZBS])\((\w+),\s*(.*)\),\s*$')
STR = r'"((?:[^"\\]|\\.)*)"'


def rows(text):
    body = text.split("static const struct cfg_row rows[] = {", 1)[1].split("};", 1)[0]
    # Rows may be wrapped over several lines: join each row up to its "),".
    joined, cur = [], ""
    for line in body.splitlines():
        s = line.strip()
        if not s or s.startswith("/*") or s.startswith("//"):
            continue
        cur = (cur + " " + s).strip()
        if cur.endswith("),"):
            joined.append(cur)
            cur = ""
    for r in joined:
        m = ROW.match(r)
        if not m:
            raise SystemExit(f"cannot parse row: {r}")
        kind, name, rest = m.groups()
        if kind in "IZ":
            mm = re.match(r'(.*?),\s*(.*?),\s*' + STR + r',\s*' + STR + r'$', rest)
            lo, hi, default, help_ = mm.groups()
            yield name, default, f"{help_} (range {lo} .. {hi})"
        else:
            mm = re.match(STR + r',\s*' + STR + r'$', rest)
            default, help_ = mm.groups()
            yield name, default, help_


def render():
    out = [HEAD]
    for name, default, help_ in rows(CFG.read_text()):
        help_ = help_.replace('\\"', '"')
        out.append(f"\n# {help_}\n#{name} {default}".rstrip() + "\n")
    out.append(TAIL)
    return "".join(out)


def main():
    text = render()
    if "--check" in sys.argv:
        if SAMPLE.read_text() != text:
            print(f"{SAMPLE} is stale: run python3 scripts/gen-conf-sample.py", file=sys.stderr)
            return 1
        return 0
    SAMPLE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
