#!/usr/bin/env bash
# The README's second command: installs what is missing, builds, and runs the
# whole suite: C unit tests (plain and ASan+UBSan), fuzz-corpus replay, and
# the pytest integration tests against real server processes.  Ends with
# "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh || exit 1

passed=0
failed=0
# "NAME:STATUS" for each result line of a meson test log.  Meson writes
# " 3/34 name  OK  0.1s", or with a project and suite
# " 3/34 openlake:unit / name  OK  0.1s": the status is the first field that is
# one, the name the field before it.
results() {
  # Up to meson's "Summary of Failures", which lists each failure again.
  sed '/^Summary of Failures/,$d' "$1" | grep -E "^ *[0-9]+/[0-9]+ " | awk '{
    for (i = 2; i <= NF; i++)
      if ($i ~ /^(OK|FAIL|SKIP|TIMEOUT|ERROR|EXPECTEDFAIL|UNEXPECTEDPASS)$/) {
        print $(i - 1) ":" $i; break
      }
  }'
}
# The last lines a failed test printed, from meson's own log of the run
# (DIR/meson-logs/testlog.txt): one block per test, headed "test: ... / NAME".
# CI keeps only this script's output, so a flaky failure must explain itself.
print_failure() { # builddir name
  awk -v name="$2" '
    /^=+ [0-9]+\/[0-9]+ =+$/ { keep = 0 }
    /^test: / { keep = ($NF == name) }
    keep' "$1/meson-logs/testlog.txt" 2>/dev/null | tail -n 40 | sed "s/^/  [$2] /"
}
failed_names=()
count() { # name rc
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); failed_names+=("$1"); fi
}

# "== NAME" for each phase, with the seconds the one before it took.
t_phase=$SECONDS
phase() {
  echo "== $1 (previous phase: $((SECONDS - t_phase)) s)"
  t_phase=$SECONDS
}

phase "build"
if ! bash scripts/build.sh >/tmp/openlake-build.log 2>&1; then
  cat /tmp/openlake-build.log
  echo "0 passed, 1 failed"
  exit 1
fi

# The ASan+UBSan build runs in the background (at a lower priority) while
# the plain unit tests run: those mostly wait on fdatasync and sleeps, not on
# the cores, and the compiler takes what they leave.
(
  if [ ! -f build-asan/build.ninja ]; then
    meson setup build-asan --buildtype=debug -Db_sanitize=address,undefined \
      -Db_lundef=false >/dev/null || exit 1
  fi
  nice -n 5 ninja -C build-asan
) >/tmp/openlake-asan-build.log 2>&1 &
asan_build=$!

# Four tests at a time on two cores: most are bound by disk syncs, not CPU.
UNIT_JOBS=${OPENLAKE_UNIT_JOBS:-4}

phase "unit tests and fuzz-corpus replay"
meson test -C build --print-errorlogs --num-processes "$UNIT_JOBS" >/tmp/openlake-unit.log 2>&1
grep -E "^ *[0-9]+/[0-9]+ " /tmp/openlake-unit.log
for t in $(results /tmp/openlake-unit.log); do
  name=${t%%:*}; st=${t##*:}
  if [ "$st" = OK ] || [ "$st" = SKIP ]; then count "unit:$name" 0; else count "unit:$name" 1; print_failure build "$name"; fi
done

phase "unit tests under ASan+UBSan"
if wait "$asan_build"; then
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --print-errorlogs --num-processes "$UNIT_JOBS" \
    >/tmp/openlake-asan.log 2>&1
  grep -E "^ *[0-9]+/[0-9]+ " /tmp/openlake-asan.log
  for t in $(results /tmp/openlake-asan.log); do
    name=${t%%:*}; st=${t##*:}
    if [ "$st" = OK ] || [ "$st" = SKIP ]; then count "asan:$name" 0; else count "asan:$name" 1; print_failure build-asan "$name"; fi
  done
else
  tail -30 /tmp/openlake-asan-build.log
  count "asan:build" 1
fi

phase "integration tests (pytest, real server processes)"
# Most files run two at a time (pytest-xdist, one file per worker: a file's
# servers stay its own), which the suite's waits on processes, disks and the
# aws CLI leave room for on two cores.  The files that measure time (fences
# and leases, slow-client cut-offs, shutdown and drive-timeout bounds) or
# start many processes run afterwards, one at a time, as before.
# OPENLAKE_TEST_JOBS=1 runs everything serially.
SERIAL=(test_security_conn.py test_shutdown.py test_durability.py test_cluster.py
        test_cluster_cond.py test_cluster_consistency.py test_cluster_etcd_restart.py
        test_cluster_netns.py test_cluster_pools.py test_cluster_storm.py
        test_cluster_native.py test_cluster_users.py)
jobs=${OPENLAKE_TEST_JOBS:-2}
if ! /usr/bin/python3 -c "import xdist" 2>/dev/null; then jobs=1; fi
parallel=()
serial=()
for f in tests/integration/test_*.py; do
  b=$(basename "$f")
  if [ "$jobs" -gt 1 ] && ! printf '%s\n' "${SERIAL[@]}" | grep -qx "$b"; then
    parallel+=("$f")
  else
    serial+=("$f")
  fi
done
pytest_run() { # log args...
  local log=$1
  shift
  OPENLAKE_BIN="$PWD/build/openlake" /usr/bin/python3 -m pytest -q -p no:cacheprovider "$@" \
    2>&1 | tee "$log"
  local summary p f e
  summary=$(tail -n 5 "$log" | grep -E "(passed|failed|error|no tests ran)" | tail -n 1)
  p=$(echo "$summary" | grep -oE "[0-9]+ passed" | grep -oE "[0-9]+" || true)
  f=$(echo "$summary" | grep -oE "[0-9]+ failed" | grep -oE "[0-9]+" || true)
  e=$(echo "$summary" | grep -oE "[0-9]+ error" | grep -oE "[0-9]+" || true)
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0} + ${e:-0}))
  if [ -z "$summary" ]; then failed=$((failed + 1)); failed_names+=("pytest:no-summary:$log"); fi
}
if [ ${#parallel[@]} -gt 0 ]; then
  pytest_run /tmp/openlake-pytest.log -n "$jobs" --dist loadfile "${parallel[@]}" "$@"
fi
phase "integration tests, serial group"
pytest_run /tmp/openlake-pytest-serial.log "${serial[@]}" "$@"
phase "done"

echo
[ ${#failed_names[@]} -gt 0 ] && echo "failed: ${failed_names[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
