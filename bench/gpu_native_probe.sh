#!/usr/bin/env bash
# The native port's numbers on the GPU machine (carried .gpu/): one client, per UCX
# transport, and four at once.  A probe, not a test.
R=$PWD; export LD_LIBRARY_PATH=$R/.gpu/lib UCX_MODULE_DIR=$R/.gpu/lib/ucx
W=/tmp/nb; rm -rf $W; mkdir -p $W
timeout 150 $R/.gpu/bin/openlake server --listen 127.0.0.1:19600 --native_listen 127.0.0.1:19601 --threads 8 $W/data >/dev/null 2>$W/log &
SRV=$!
sleep 1
env -u LD_LIBRARY_PATH curl -s -X PUT -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" --aws-sigv4 "aws:amz:us-east-1:s3" -u openlake:openlake-secret http://127.0.0.1:19600/bench
for t in all tcp; do echo "UCX_TLS=$t"; UCX_TLS=$t $R/.gpu/bin/native_bench 127.0.0.1:19601 bench get 64 9; done
echo "4 clients at once:"; P=""; for i in 1 2 3 4; do $R/.gpu/bin/native_bench 127.0.0.1:19601 bench get 64 9 > $W/c$i & P="$P $!"; done; wait $P; cat $W/c*
$R/.gpu/bin/native_bench 127.0.0.1:19601 bench lat4k 5000
$R/.gpu/bin/native_bench 127.0.0.1:19601 bench batch4k 3
kill $SRV; wait $SRV
