"""docs/openlake.conf.sample lists every row of the settings table (src/core/cfg.c)
with its default: a setting added without regenerating the sample fails here."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sample_matches_settings_table():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen-conf-sample.py"), "--check"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
