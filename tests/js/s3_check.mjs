// The AWS SDK for JavaScript v3 against OpenLake, with the SDK's defaults
// (path-style addressing, us-east-1, the default checksum behaviour: CRC32
// on uploads "when supported", checked on downloads when asked for).
//
// usage: OPENLAKE_ENDPOINT=http://127.0.0.1:PORT OPENLAKE_ACCESS_KEY=...
//        OPENLAKE_SECRET_KEY=... OPENLAKE_BUCKET=name node s3_check.mjs
//
// Prints one line per check, "PASS name" or "FAIL name: error", in a fixed
// order (tests/integration/test_js_sdk.py lists the same names), then
// "DONE passed=N failed=M"; exits 1 when a check failed.  A check that
// depends on an earlier one fails too when that one did.  The bucket is
// created by the first check and removed by the last.

import { createHash } from "node:crypto";

import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutObjectCommand,
  PutObjectTaggingCommand,
  S3Client,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";

const MIB = 1024 * 1024;
const CHECK_TIMEOUT_MS = 120_000;

const env = (name) => {
  const v = process.env[name];
  if (!v) {
    console.error(`s3_check.mjs: ${name} is not set`);
    process.exit(2);
  }
  return v;
};
const endpoint = env("OPENLAKE_ENDPOINT");
const Bucket = env("OPENLAKE_BUCKET");
const s3 = new S3Client({
  endpoint,
  region: "us-east-1",
  forcePathStyle: true,
  credentials: {
    accessKeyId: env("OPENLAKE_ACCESS_KEY"),
    secretAccessKey: env("OPENLAKE_SECRET_KEY"),
  },
});

function assert(cond, what) {
  if (!cond) throw new Error(what);
}
const md5 = (b) => createHash("md5").update(b).digest("hex");
// CRC32 (IEEE) of a buffer as S3 writes it: 4 bytes big-endian, base64.
// (zlib.crc32 would need node 20.15.)
const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
const crc32b64 = (b) => {
  let c = 0xffffffff;
  for (const byte of b) c = CRC_TABLE[(c ^ byte) & 0xff] ^ (c >>> 8);
  const out = Buffer.alloc(4);
  out.writeUInt32BE((c ^ 0xffffffff) >>> 0);
  return out.toString("base64");
};
const bytesOf = async (resp) => Buffer.from(await resp.Body.transformToByteArray());
// Deterministic bytes (a 5 MiB body that is not one repeated byte).
function pattern(n, seed) {
  const b = Buffer.alloc(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i += 4) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    b.writeUInt32LE(x, Math.min(i, n - 4));
  }
  return b;
}
async function errorOf(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  throw new Error("the call succeeded; an error was expected");
}

const STR = "hello from the JS SDK v3\n";
const BUF = pattern(70_000, 7);
const BIG = pattern(5 * MIB, 11);
const checks = [];
const check = (name, fn) => checks.push([name, fn]);

check("create_bucket", async () => {
  await s3.send(new CreateBucketCommand({ Bucket }));
  await s3.send(new HeadBucketCommand({ Bucket }));
  const r = await s3.send(new ListBucketsCommand({}));
  assert(r.Buckets.some((b) => b.Name === Bucket), "bucket not listed");
});

check("put_string", async () => {
  const r = await s3.send(new PutObjectCommand({ Bucket, Key: "str.txt", Body: STR,
    ContentType: "text/plain" }));
  assert(r.ETag === `"${md5(STR)}"`, `ETag ${r.ETag}`);
});

check("put_buffer_metadata", async () => {
  const r = await s3.send(new PutObjectCommand({ Bucket, Key: "dir/buf.bin", Body: BUF,
    Metadata: { color: "blue" } }));
  assert(r.ETag === `"${md5(BUF)}"`, `ETag ${r.ETag}`);
});

check("put_5mib", async () => {
  const r = await s3.send(new PutObjectCommand({ Bucket, Key: "dir/big.bin", Body: BIG }));
  assert(r.ETag === `"${md5(BIG)}"`, `ETag ${r.ETag}`);
});

check("get_object", async () => {
  const r = await s3.send(new GetObjectCommand({ Bucket, Key: "str.txt" }));
  assert((await r.Body.transformToString()) === STR, "string body differs");
  assert(r.ContentType === "text/plain", `ContentType ${r.ContentType}`);
  const b = await s3.send(new GetObjectCommand({ Bucket, Key: "dir/buf.bin" }));
  assert((await bytesOf(b)).equals(BUF), "buffer body differs");
  assert(b.Metadata?.color === "blue", `metadata ${JSON.stringify(b.Metadata)}`);
  const big = await s3.send(new GetObjectCommand({ Bucket, Key: "dir/big.bin" }));
  assert((await bytesOf(big)).equals(BIG), "5 MiB body differs");
});

check("get_range", async () => {
  const r = await s3.send(new GetObjectCommand({ Bucket, Key: "dir/big.bin",
    Range: "bytes=1000000-1000099" }));
  assert(r.ContentRange === `bytes 1000000-1000099/${BIG.length}`, `range ${r.ContentRange}`);
  assert((await bytesOf(r)).equals(BIG.subarray(1000000, 1000100)), "range body differs");
});

check("head_object", async () => {
  const r = await s3.send(new HeadObjectCommand({ Bucket, Key: "dir/buf.bin" }));
  assert(r.ContentLength === BUF.length, `ContentLength ${r.ContentLength}`);
  assert(r.ETag === `"${md5(BUF)}"`, `ETag ${r.ETag}`);
  assert(r.Metadata?.color === "blue", `metadata ${JSON.stringify(r.Metadata)}`);
  const e = await errorOf(s3.send(new HeadObjectCommand({ Bucket, Key: "missing" })));
  assert(e.$metadata?.httpStatusCode === 404, `HEAD missing: ${e.name} ${e.$metadata?.httpStatusCode}`);
});

check("get_missing", async () => {
  const e = await errorOf(s3.send(new GetObjectCommand({ Bucket, Key: "missing" })));
  assert(e.name === "NoSuchKey", `error ${e.name}`);
});

check("get_checksum_mode", async () => {
  // The SDK sent a CRC32 with each PUT (its default); asked for, it comes
  // back with the object, and the SDK checks the body against it.
  for (const [Key, body] of [["str.txt", Buffer.from(STR)], ["dir/big.bin", BIG]]) {
    const r = await s3.send(new GetObjectCommand({ Bucket, Key, ChecksumMode: "ENABLED" }));
    assert((await bytesOf(r)).equals(body), `${Key}: body differs`);
    assert(r.ChecksumCRC32 === crc32b64(body), `${Key}: ChecksumCRC32 ${r.ChecksumCRC32}`);
  }
});

check("list_objects_v2", async () => {
  const r = await s3.send(new ListObjectsV2Command({ Bucket }));
  const keys = (r.Contents ?? []).map((o) => o.Key);
  assert(JSON.stringify(keys) === JSON.stringify(["dir/big.bin", "dir/buf.bin", "str.txt"]),
    `keys ${keys}`);
  const d = await s3.send(new ListObjectsV2Command({ Bucket, Delimiter: "/" }));
  assert(JSON.stringify((d.CommonPrefixes ?? []).map((p) => p.Prefix)) === '["dir/"]',
    "common prefixes");
  const p = await s3.send(new ListObjectsV2Command({ Bucket, Prefix: "dir/", MaxKeys: 1 }));
  assert(p.IsTruncated && p.NextContinuationToken && p.KeyCount === 1, "MaxKeys page");
  const p2 = await s3.send(new ListObjectsV2Command({ Bucket, Prefix: "dir/",
    ContinuationToken: p.NextContinuationToken }));
  assert(p2.Contents?.[0]?.Key === "dir/buf.bin" && !p2.IsTruncated, "second page");
});

check("copy_object", async () => {
  const r = await s3.send(new CopyObjectCommand({ Bucket, Key: "copy.bin",
    CopySource: `${Bucket}/dir/buf.bin` }));
  assert(r.CopyObjectResult?.ETag === `"${md5(BUF)}"`, `ETag ${r.CopyObjectResult?.ETag}`);
  const g = await s3.send(new GetObjectCommand({ Bucket, Key: "copy.bin" }));
  assert((await bytesOf(g)).equals(BUF), "copy differs");
  assert(g.Metadata?.color === "blue", "metadata not copied");
});

check("tagging", async () => {
  await s3.send(new PutObjectCommand({ Bucket, Key: "tagged", Body: "t", Tagging: "a=1&b=2" }));
  let r = await s3.send(new GetObjectTaggingCommand({ Bucket, Key: "tagged" }));
  const tags = (t) => JSON.stringify(t.TagSet.map((x) => [x.Key, x.Value]).sort());
  assert(tags(r) === '[["a","1"],["b","2"]]', `tags ${tags(r)}`);
  await s3.send(new PutObjectTaggingCommand({ Bucket, Key: "tagged",
    Tagging: { TagSet: [{ Key: "c", Value: "3" }] } }));
  r = await s3.send(new GetObjectTaggingCommand({ Bucket, Key: "tagged" }));
  assert(tags(r) === '[["c","3"]]', `tags ${tags(r)}`);
});

check("conditional_put", async () => {
  await s3.send(new PutObjectCommand({ Bucket, Key: "once", Body: "1", IfNoneMatch: "*" }));
  const e = await errorOf(s3.send(new PutObjectCommand({ Bucket, Key: "once", Body: "2",
    IfNoneMatch: "*" })));
  assert(e.$metadata?.httpStatusCode === 412, `second put: ${e.name}`);
});

check("multipart_raw", async () => {
  const Key = "mp/raw.bin";
  const parts = [pattern(5 * MIB, 21), pattern(1234, 22)];
  const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket, Key }));
  const done = [];
  for (let i = 0; i < parts.length; i++) {
    const r = await s3.send(new UploadPartCommand({ Bucket, Key, UploadId, PartNumber: i + 1,
      Body: parts[i] }));
    assert(r.ETag === `"${md5(parts[i])}"`, `part ${i + 1} ETag ${r.ETag}`);
    done.push({ PartNumber: i + 1, ETag: r.ETag, ChecksumCRC32: r.ChecksumCRC32 });
  }
  const lp = await s3.send(new ListPartsCommand({ Bucket, Key, UploadId }));
  assert(lp.Parts?.length === 2, `ListParts ${lp.Parts?.length}`);
  const c = await s3.send(new CompleteMultipartUploadCommand({ Bucket, Key, UploadId,
    MultipartUpload: { Parts: done } }));
  assert(/-2"$/.test(c.ETag), `ETag ${c.ETag}`);
  const g = await s3.send(new GetObjectCommand({ Bucket, Key }));
  assert((await bytesOf(g)).equals(Buffer.concat(parts)), "multipart body differs");
});

check("multipart_abort", async () => {
  const Key = "mp/aborted.bin";
  const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket, Key }));
  await s3.send(new UploadPartCommand({ Bucket, Key, UploadId, PartNumber: 1, Body: "x" }));
  await s3.send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId }));
  const e = await errorOf(s3.send(new ListPartsCommand({ Bucket, Key, UploadId })));
  assert(e.name === "NoSuchUpload", `ListParts after abort: ${e.name}`);
});

check("lib_storage_upload", async () => {
  const Key = "mp/lib.bin";
  const body = pattern(12 * MIB + 5, 31);
  const up = new Upload({ client: s3, params: { Bucket, Key, Body: body },
    partSize: 5 * MIB, queueSize: 2 });
  const r = await up.done();
  assert(/-3"$/.test(r.ETag), `ETag ${r.ETag}`);
  const g = await s3.send(new GetObjectCommand({ Bucket, Key }));
  assert((await bytesOf(g)).equals(body), "lib-storage body differs");
});

check("presigned_get", async () => {
  const url = await getSignedUrl(s3, new GetObjectCommand({ Bucket, Key: "dir/buf.bin" }),
    { expiresIn: 300 });
  const r = await fetch(url);
  const got = Buffer.from(await r.arrayBuffer()); // read once: the messages below use it
  assert(r.status === 200, `status ${r.status}: ${got.toString()}`);
  assert(got.equals(BUF), "presigned GET body differs");
});

check("presigned_put", async () => {
  // The body is given at signing time: with the default checksum behaviour
  // the SDK puts its CRC32 (and the algorithm) in the URL's query, so the
  // URL is only good for that body.  (Without one it would sign the CRC32
  // of an empty body, a URL that S3 deployments disagree about.)
  const body = "put through a presigned URL";
  const url = await getSignedUrl(s3, new PutObjectCommand({ Bucket, Key: "presigned.txt",
    Body: body }), { expiresIn: 300 });
  const r = await fetch(url, { method: "PUT", body });
  const text = await r.text();
  assert(r.status === 200, `status ${r.status}: ${text}`);
  assert(r.headers.get("etag") === `"${md5(body)}"`, `ETag ${r.headers.get("etag")}`);
  const g = await s3.send(new GetObjectCommand({ Bucket, Key: "presigned.txt" }));
  assert((await g.Body.transformToString()) === body, "body differs");
});

check("delete_object", async () => {
  await s3.send(new DeleteObjectCommand({ Bucket, Key: "str.txt" }));
  const e = await errorOf(s3.send(new HeadObjectCommand({ Bucket, Key: "str.txt" })));
  assert(e.$metadata?.httpStatusCode === 404, `deleted object: ${e.name}`);
});

check("delete_objects", async () => {
  const all = await s3.send(new ListObjectsV2Command({ Bucket }));
  const Objects = (all.Contents ?? []).map((o) => ({ Key: o.Key }));
  Objects.push({ Key: "never-existed" });
  const r = await s3.send(new DeleteObjectsCommand({ Bucket, Delete: { Objects } }));
  assert((r.Errors ?? []).length === 0, `errors ${JSON.stringify(r.Errors)}`);
  assert((r.Deleted ?? []).length === Objects.length, `deleted ${(r.Deleted ?? []).length}`);
  const after = await s3.send(new ListObjectsV2Command({ Bucket }));
  assert(after.KeyCount === 0, `left ${after.KeyCount}`);
});

check("delete_bucket", async () => {
  await s3.send(new DeleteBucketCommand({ Bucket }));
  const e = await errorOf(s3.send(new HeadBucketCommand({ Bucket })));
  assert(e.$metadata?.httpStatusCode === 404, `deleted bucket: ${e.name}`);
});

let failed = 0;
for (const [name, fn] of checks) {
  let timer;
  try {
    await Promise.race([
      fn(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${CHECK_TIMEOUT_MS} ms`)),
          CHECK_TIMEOUT_MS);
      }),
    ]);
    console.log(`PASS ${name}`);
  } catch (e) {
    failed++;
    const status = e?.$metadata?.httpStatusCode ? ` (HTTP ${e.$metadata.httpStatusCode})` : "";
    const msg = `${e?.name ?? "Error"}: ${e?.message ?? e}${status}`.replace(/\s+/g, " ");
    console.log(`FAIL ${name}: ${msg}`);
  } finally {
    clearTimeout(timer);
  }
}
console.log(`DONE passed=${checks.length - failed} failed=${failed}`);
s3.destroy();
process.exitCode = failed ? 1 : 0;
