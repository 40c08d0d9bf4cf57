#!/bin/sh
# Builds one libFuzzer target and fuzzes it for a while.
#
#   scripts/fuzz.sh TARGET [SECONDS] [libFuzzer options...]
#   scripts/fuzz.sh http 300
#   MERGE=1 scripts/fuzz.sh http 300    # then merge new finds into the corpus
#
# TARGET names tests/fuzz/fuzz_TARGET.c.  The target is built with
# clang -fsanitize=fuzzer,address,undefined together with the sources it needs
# (the table below) and run on a scratch copy of tests/fuzz/corpus/TARGET, so
# the committed corpus only changes when MERGE=1 asks for it; then libFuzzer's
# -merge=1 adds just the inputs that bring new coverage, and only small ones.
# Crashes land in build-fuzz/TARGET/ (crash-*, leak-*, timeout-*).
#
# SANITIZE picks the sanitizers (default address,undefined).  The router
# target is slow under ASan (LMDB allocates megabytes per write transaction,
# which ASan maps and poisons each time): SANITIZE=undefined fuzzes it some
# 20 times faster, and build/tests/fuzz/fuzz_router_replay of an ASan build
# (meson setup -Db_sanitize=address,undefined) then replays what it found.
set -eu

usage() {
    echo "usage: $0 TARGET [SECONDS] [libFuzzer options...]" >&2
    exit 2
}

[ $# -ge 1 ] || usage
target=$1
seconds=${2:-60}
[ $# -ge 2 ] && shift 2 || shift 1

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# Sources linked into every target: assertions and error names.
common="src/core/log.c src/core/err.c"

# The real connection code (src/http/conn.c) against the simulated peer of
# tests/fuzz/conn_sim.c: the linker redirects conn.c's socket and loop calls.
conn_sim="src/http/conn.c src/http/response.c src/http/parser.c tests/fuzz/conn_sim.c \
    src/core/loop.c src/core/msg.c src/core/clock.c"
conn_sim_libs="-luring -Wl,--wrap=ol_io_recv,--wrap=ol_io_sendmsg_all,--wrap=ol_io_sendmsg_flags,--wrap=ol_io_sendmsg_paced\
,--wrap=ol_io_sendfile,--wrap=ol_io_close,--wrap=ol_loop_stopping,--wrap=ol_io_poll_in\
,--wrap=ol_idle_add,--wrap=ol_idle_del,--wrap=ol_idle_done"

# Per-target sources and libraries.  Add a line for a new target.
case $target in
http)
    srcs="$conn_sim"
    libs="$conn_sim_libs"
    ;;
conn)
    srcs="$conn_sim"
    libs="$conn_sim_libs"
    ;;
response)
    srcs="src/http/response.c"
    libs=""
    ;;
sigv4)
    srcs="src/s3/sigv4.c src/http/parser.c"
    libs="-lcrypto"
    ;;
router)
    # The S3 layer over a real object layer: the router, every handler,
    # obj/, the one-drive store, the erasure sets and the deployment
    # (the sources of libopenlake-core in meson.build, less the server).
    srcs="$conn_sim $(ls src/core/*.c src/s3/*.c src/obj/*.c src/deploy/*.c src/store/*.c \
        src/ec/*.c src/access/*.c | grep -v -e src/core/log.c -e src/core/err.c -e src/core/loop.c \
        -e src/core/msg.c -e src/core/clock.c) src/native/rdma.c src/native/rdma_token.c \
        src/native/rdma_confirm.c src/native/proto.c"
    libs="$conn_sim_libs -llmdb -lisal -lcrypto -lexpat -lcjson -lpthread -lucp -lucs"
    ;;
policy)
    # The bucket-policy parser and evaluator (cJSON underneath).
    srcs="src/access/policy.c"
    libs="-lcjson"
    ;;
rdma_token)
    srcs="src/native/rdma_token.c"
    libs=""
    ;;
rdma_confirm)
    # The confirmation messages of S3 over RDMA (HMAC from core/sha256.c).
    srcs="src/native/rdma_confirm.c src/core/sha256.c"
    libs="-lcrypto -lpthread"
    ;;
wire)
    # The drive protocol's decoders; the target stands in for net.c's
    # ol_net_call, so no UCX.
    srcs="src/net/drive_req.c src/ec/remotedrive.c src/core/loop.c src/core/msg.c src/core/clock.c"
    libs="-luring -lpthread"""
    ;;
kv)
    # The native port's KV ops: the decoder and the batch on a memory-only
    # store (kv/serve.h, kv/kv.h, kv/hash.h for the header's key size).
    srcs="src/kv/serve.c src/kv/kv.c src/core/crc.c src/core/clock.c"
    libs="-lisal -lpthread"
    ;;
*)
    echo "$0: unknown target '$target' (add it to the table in this script)" >&2
    exit 2
    ;;
esac

fuzz_src=tests/fuzz/fuzz_$target.c
corpus=tests/fuzz/corpus/$target
[ -f "$fuzz_src" ] || { echo "$0: $fuzz_src is missing" >&2; exit 1; }
mkdir -p "$corpus"

out=build-fuzz/$target
mkdir -p "$out"
CC=${CC:-clang}
# -O1 with -g keeps reports readable; UBSan findings abort so the fuzzer
# stops on them like on a crash.
$CC -std=gnu11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
    -fsanitize=fuzzer,${SANITIZE:-address,undefined} -fno-sanitize-recover=all \
    -Wall -Wextra -Wshadow -Wformat=2 -Wvla -Wno-unused-parameter \
    -Isrc -Iinclude -Itests/fuzz -o "$out/fuzz_$target" "$fuzz_src" $srcs $common $libs

# A dictionary helps the fuzzer produce the grammar's keywords.
dict_opt=""
if [ "$target" = http ] || [ "$target" = conn ] || [ "$target" = router ]; then
    cat > "$out/http.dict" <<'DICT'
"GET"
"PUT"
"HEAD"
"POST"
"DELETE"
" HTTP/1.1\x0d\x0a"
" HTTP/1.0\x0a"
"HTTP/2.0"
"\x0d\x0a"
"\x0d\x0a\x0d\x0a"
"Host: "
"Content-Length: "
"Transfer-Encoding: chunked"
"Authorization: AWS4-HMAC-SHA256 "
"x-amz-content-sha256: "
"x-amz-date: "
";chunk-signature="
"0\x0d\x0a\x0d\x0a"
"?"
":"
DICT
    if [ "$target" = router ]; then
        # The S3 words: sub-resources, headers and request documents.
        cat >> "$out/http.dict" <<'DICT'
"OPTIONS"
"UPLOADID"
"?uploads"
"uploadId="
"partNumber="
"?versioning"
"?versions"
"versionId="
"?tagging"
"?cors"
"?lifecycle"
"?delete"
"?attributes"
"?location"
"list-type=2"
"prefix="
"delimiter="
"max-keys="
"continuation-token="
"start-after="
"key-marker="
"Range: bytes="
"Origin: "
"Access-Control-Request-Method: "
"Content-MD5: "
"Expect: 100-continue"
"If-Match: "
"If-None-Match: *"
"x-amz-copy-source: /bkt/"
"x-amz-copy-source-range: bytes="
"x-amz-metadata-directive: REPLACE"
"x-amz-tagging: "
"x-amz-meta-"
"x-amz-object-attributes: "
"x-amz-checksum-crc32: "
"x-amz-checksum-mode: ENABLED"
"x-amz-decoded-content-length: "
"Content-Encoding: aws-chunked"
"STREAMING-UNSIGNED-PAYLOAD-TRAILER"
"UNSIGNED-PAYLOAD"
"<CompleteMultipartUpload>"
"<Part><PartNumber>1</PartNumber><ETag>"
"</ETag></Part>"
"<Delete><Object><Key>"
"</Key></Object></Delete>"
"<VersionId>"
"<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>"
"<Tagging><TagSet><Tag><Key>"
"<CORSConfiguration><CORSRule><AllowedOrigin>"
"<LifecycleConfiguration><Rule>"
DICT
    fi
    dict_opt="-dict=$out/http.dict"
fi

# Fuzz a scratch copy, so that the run does not touch the committed corpus.
work=$out/corpus
rm -rf "$work"
mkdir -p "$work"
cp -R "$corpus"/. "$work"/

echo "fuzzing $target for ${seconds}s on a copy of $corpus"
"./$out/fuzz_$target" -max_total_time="$seconds" -max_len=16384 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/" $dict_opt "$@" \
    "$work"

if [ "${MERGE:-0}" = 1 ]; then
    echo "merging new inputs (at most 4 KiB each) into $corpus"
    small=$out/small
    rm -rf "$small"
    mkdir -p "$small"
    find "$work" -type f -size -4097c -exec cp {} "$small"/ \;
    # Edges only (no hit counters): keeps the committed corpus small.
    "./$out/fuzz_$target" -merge=1 -use_counters=0 -artifact_prefix="$out/" "$corpus" "$small"
    echo "$corpus now holds $(ls "$corpus" | wc -l) files"
fi
