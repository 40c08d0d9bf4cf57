"""Object tagging: Put/Get/DeleteObjectTagging, x-amz-tagging on PutObject,
x-amz-tagging-count on GetObject/HeadObject."""

import pytest
from botocore.exceptions import ClientError

import helpers as h


def tagset(d):
    return {"TagSet": [{"Key": k, "Value": v} for k, v in d.items()]}


def as_dict(resp):
    return {t["Key"]: t["Value"] for t in resp["TagSet"]}


def test_put_get_delete_tagging(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"data")
    before = s3.head_object(Bucket=bucket, Key="k")
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="k")) == {}
    assert "x-amz-tagging-count" not in before["ResponseMetadata"]["HTTPHeaders"]

    tags = {"project": "lake", "team": "storage+ops", "empty": "", "path": "a/b:c@d=e.f_g-h",
            "ünïcode": "välue with spaces"}
    r = s3.put_object_tagging(Bucket=bucket, Key="k", Tagging=tagset(tags))
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    got = s3.get_object_tagging(Bucket=bucket, Key="k")
    assert as_dict(got) == tags
    assert [t["Key"] for t in got["TagSet"]] == list(tags), "order is kept"

    # Tags do not change the object's ETag or Last-Modified.
    after = s3.head_object(Bucket=bucket, Key="k")
    assert after["ETag"] == before["ETag"]
    assert after["LastModified"] == before["LastModified"]
    assert after["ResponseMetadata"]["HTTPHeaders"]["x-amz-tagging-count"] == str(len(tags))
    g = s3.get_object(Bucket=bucket, Key="k")
    assert g["TagCount"] == len(tags)
    assert g["Body"].read() == b"data"

    # Replacing replaces the whole set.
    s3.put_object_tagging(Bucket=bucket, Key="k", Tagging=tagset({"only": "one"}))
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="k")) == {"only": "one"}

    d = s3.delete_object_tagging(Bucket=bucket, Key="k")
    assert d["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="k")) == {}
    assert "TagCount" not in s3.get_object(Bucket=bucket, Key="k")


def test_overwrite_drops_tags(s3, bucket):
    s3.put_object(Bucket=bucket, Key="o", Body=b"1")
    s3.put_object_tagging(Bucket=bucket, Key="o", Tagging=tagset({"a": "b"}))
    s3.put_object(Bucket=bucket, Key="o", Body=b"2")
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="o")) == {}


def test_missing_object(s3, bucket):
    for call in (lambda: s3.get_object_tagging(Bucket=bucket, Key="nope"),
                 lambda: s3.put_object_tagging(Bucket=bucket, Key="nope",
                                               Tagging=tagset({"a": "b"})),
                 lambda: s3.delete_object_tagging(Bucket=bucket, Key="nope")):
        with pytest.raises(ClientError) as e:
            call()
        assert h.error_code(e.value) == "NoSuchKey"
        assert h.http_status(e.value) == 404


@pytest.mark.parametrize("tags, why", [
    ({f"k{i}": "v" for i in range(11)}, "too many"),
    ({"k" * 129: "v"}, "key too long"),
    ({"k": "v" * 257}, "value too long"),
    ({"bad*key": "v"}, "bad key character"),
    ({"k": "bad<>value"}, "bad value character"),
    ({"aws:reserved": "v"}, "reserved prefix"),
])
def test_invalid_tags(s3, bucket, tags, why):
    s3.put_object(Bucket=bucket, Key="t", Body=b"x")
    with pytest.raises(ClientError) as e:
        s3.put_object_tagging(Bucket=bucket, Key="t", Tagging=tagset(tags))
    assert h.error_code(e.value) == "InvalidTag", why
    assert h.http_status(e.value) == 400


def test_limits_accepted(s3, bucket):
    s3.put_object(Bucket=bucket, Key="t", Body=b"x")
    tags = {f"k{i}": "v" for i in range(9)}
    tags["é" * 128] = "ü" * 256  # limits count characters, not bytes
    s3.put_object_tagging(Bucket=bucket, Key="t", Tagging=tagset(tags))
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="t")) == tags


@pytest.mark.parametrize("doc", [
    b"<Tagging><TagSet><Tag><Key>a</Key><Value>1</Value></Tag>"
    b"<Tag><Key>a</Key><Value>2</Value></Tag></TagSet></Tagging>",
    b"<Tagging><TagSet><Tag><Key></Key><Value>1</Value></Tag></TagSet></Tagging>",
])
def test_duplicate_or_empty_keys(server, bucket, s3, doc):
    s3.put_object(Bucket=bucket, Key="d", Body=b"x")
    r = h.signed_request(server, "PUT", f"/{bucket}/d?tagging", body=doc)
    assert r.status == 400
    assert h.parse_error(r.body)["Code"] == "InvalidTag"


@pytest.mark.parametrize("doc", [
    b"<Tagging><TagSet><Tag><Key>a</Key></Tag></TagSet></Tagging>",
    b"<Tagging><TagSet><Tag><Key>a</Key><Value>1</Value><Extra/></Tag></TagSet></Tagging>",
    b"<Other><TagSet/></Other>",
    b"<Tagging><TagSet><Tag><Key>a</Key>",
    b"",
])
def test_malformed(server, bucket, s3, doc):
    s3.put_object(Bucket=bucket, Key="m", Body=b"x")
    r = h.signed_request(server, "PUT", f"/{bucket}/m?tagging", body=doc)
    assert r.status == 400, r
    assert h.parse_error(r.body)["Code"] == "MalformedXML"


def test_empty_tagset_clears(server, bucket, s3):
    s3.put_object(Bucket=bucket, Key="e", Body=b"x")
    s3.put_object_tagging(Bucket=bucket, Key="e", Tagging=tagset({"a": "b"}))
    s3.put_object_tagging(Bucket=bucket, Key="e", Tagging={"TagSet": []})
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="e")) == {}


def test_put_object_with_tagging_header(s3, bucket):
    s3.put_object(Bucket=bucket, Key="h", Body=b"x", Tagging="a=1&b=two%20words&c=x%2By")
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="h")) == {
        "a": "1", "b": "two words", "c": "x+y"}
    assert s3.head_object(Bucket=bucket, Key="h")["ResponseMetadata"]["HTTPHeaders"][
        "x-amz-tagging-count"] == "3"


def test_put_object_bad_tagging_header(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="bad", Body=b"x", Tagging="a=1&a=2")
    assert h.error_code(e.value) == "InvalidTag"
    # Rejected before the object was written.
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="bad")
    assert h.http_status(e.value) == 404


def test_multipart_upload_with_tagging_header(s3, bucket):
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp", Tagging="team=lake&n=two%20words",
                                    ContentType="text/x-mp")["UploadId"]
    body = b"m" * (5 << 20)
    e1 = s3.upload_part(Bucket=bucket, Key="mp", UploadId=up, PartNumber=1, Body=body)["ETag"]
    e2 = s3.upload_part(Bucket=bucket, Key="mp", UploadId=up, PartNumber=2, Body=b"end")["ETag"]
    # Not visible before Complete: the object does not exist yet.
    with pytest.raises(ClientError) as e:
        s3.get_object_tagging(Bucket=bucket, Key="mp")
    assert h.http_status(e.value) == 404
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="mp")) == {
        "team": "lake", "n": "two words"}
    hd = s3.head_object(Bucket=bucket, Key="mp")
    assert hd["ResponseMetadata"]["HTTPHeaders"]["x-amz-tagging-count"] == "2"
    assert hd["ContentType"] == "text/x-mp"
    assert hd["ContentLength"] == len(body) + 3
    # The internal entry that carried the tags is not sent as a header.
    assert not any(k.startswith(":") for k in hd["ResponseMetadata"]["HTTPHeaders"])


def test_multipart_upload_bad_tagging_header(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.create_multipart_upload(Bucket=bucket, Key="mpbad", Tagging="aws:x=1")
    assert h.error_code(e.value) == "InvalidTag"
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_copy_tagging_directive(s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"x", Tagging="a=1&b=2")
    # COPY (the default) carries the source's tags.
    s3.copy_object(Bucket=bucket, Key="c1", CopySource={"Bucket": bucket, "Key": "src"})
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="c1")) == {"a": "1", "b": "2"}
    # REPLACE takes the request's x-amz-tagging instead.
    s3.copy_object(Bucket=bucket, Key="c2", CopySource={"Bucket": bucket, "Key": "src"},
                   TaggingDirective="REPLACE", Tagging="z=26")
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="c2")) == {"z": "26"}
    # REPLACE without tags leaves the copy untagged, even over a tagged object.
    s3.copy_object(Bucket=bucket, Key="c1", CopySource={"Bucket": bucket, "Key": "src"},
                   TaggingDirective="REPLACE")
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="c1")) == {}
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="c3", CopySource={"Bucket": bucket, "Key": "src"},
                       TaggingDirective="REPLACE", Tagging="k=1&k=2")
    assert h.error_code(e.value) == "InvalidTag"
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="src")) == {"a": "1", "b": "2"}


# ---- tags commit with the object (one index transaction) ----

def _enable_versioning(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})


def _tag_query(d):
    from urllib.parse import quote
    return "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in d.items())


def test_get_tagging_of_a_version(s3, bucket):
    _enable_versioning(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="v", Body=b"one", Tagging="gen=1&a=x")["VersionId"]
    v2 = s3.put_object(Bucket=bucket, Key="v", Body=b"two", Tagging="gen=2")["VersionId"]
    v3 = s3.put_object(Bucket=bucket, Key="v", Body=b"three")["VersionId"]
    assert len({v1, v2, v3}) == 3
    got = s3.get_object_tagging(Bucket=bucket, Key="v", VersionId=v1)
    assert as_dict(got) == {"gen": "1", "a": "x"}
    assert got["VersionId"] == v1
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="v", VersionId=v2)) == {"gen": "2"}
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="v", VersionId=v3)) == {}
    cur = s3.get_object_tagging(Bucket=bucket, Key="v")
    assert as_dict(cur) == {} and cur["VersionId"] == v3
    # Each version's GET reports its own count.
    assert s3.get_object(Bucket=bucket, Key="v", VersionId=v1)["TagCount"] == 2
    assert s3.head_object(Bucket=bucket, Key="v", VersionId=v2)["ResponseMetadata"][
        "HTTPHeaders"]["x-amz-tagging-count"] == "1"
    # Tagging the current version leaves the older ones alone.
    s3.put_object_tagging(Bucket=bucket, Key="v", Tagging=tagset({"now": "3"}))
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="v", VersionId=v3)) == {"now": "3"}
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="v", VersionId=v1)) == {
        "gen": "1", "a": "x"}
    with pytest.raises(ClientError) as e:
        s3.get_object_tagging(Bucket=bucket, Key="v", VersionId="A" * 22)
    assert h.error_code(e.value) == "NoSuchVersion"
    # A delete marker on top: the older versions' tags stay readable by id.
    s3.delete_object(Bucket=bucket, Key="v")
    with pytest.raises(ClientError) as e:
        s3.get_object_tagging(Bucket=bucket, Key="v")
    assert h.http_status(e.value) == 404
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="v", VersionId=v2)) == {"gen": "2"}


def test_multipart_tags_in_versioned_bucket(s3, bucket):
    _enable_versioning(s3, bucket)
    v0 = s3.put_object(Bucket=bucket, Key="mpv", Body=b"before", Tagging="old=1")["VersionId"]
    up = s3.create_multipart_upload(Bucket=bucket, Key="mpv", Tagging="mp=yes")["UploadId"]
    e1 = s3.upload_part(Bucket=bucket, Key="mpv", UploadId=up, PartNumber=1,
                        Body=b"p" * 100)["ETag"]
    done = s3.complete_multipart_upload(Bucket=bucket, Key="mpv", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}]})
    v1 = done["VersionId"]
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="mpv", VersionId=v1)) == {"mp": "yes"}
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="mpv", VersionId=v0)) == {"old": "1"}
    assert s3.head_object(Bucket=bucket, Key="mpv")["ResponseMetadata"]["HTTPHeaders"][
        "x-amz-tagging-count"] == "1"


def test_multipart_without_tags_drops_old_tags(s3, bucket):
    s3.put_object(Bucket=bucket, Key="mp0", Body=b"x", Tagging="a=1")
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp0")["UploadId"]
    e1 = s3.upload_part(Bucket=bucket, Key="mp0", UploadId=up, PartNumber=1, Body=b"y")["ETag"]
    s3.complete_multipart_upload(Bucket=bucket, Key="mp0", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}]})
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="mp0")) == {}


def test_copy_tags_in_versioned_bucket(s3, bucket):
    _enable_versioning(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="s", Body=b"1", Tagging="src=v1")["VersionId"]
    s3.put_object(Bucket=bucket, Key="s", Body=b"2", Tagging="src=v2")
    # COPY takes the tags of the version copied, REPLACE the request's.
    c1 = s3.copy_object(Bucket=bucket, Key="d", CopySource={
        "Bucket": bucket, "Key": "s", "VersionId": v1})["VersionId"]
    c2 = s3.copy_object(Bucket=bucket, Key="d", CopySource={"Bucket": bucket, "Key": "s"},
                        TaggingDirective="REPLACE", Tagging="dst=new&x=y")["VersionId"]
    c3 = s3.copy_object(Bucket=bucket, Key="d", CopySource={"Bucket": bucket, "Key": "s"},
                        TaggingDirective="REPLACE")["VersionId"]
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="d", VersionId=c1)) == {"src": "v1"}
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="d", VersionId=c2)) == {
        "dst": "new", "x": "y"}
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="d", VersionId=c3)) == {}
    assert s3.get_object(Bucket=bucket, Key="d", VersionId=c1)["Body"].read() == b"1"
    # Copying onto itself with new tags makes a new version with them.
    c4 = s3.copy_object(Bucket=bucket, Key="d", CopySource={"Bucket": bucket, "Key": "d",
                                                            "VersionId": c2},
                        MetadataDirective="REPLACE", TaggingDirective="COPY")["VersionId"]
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="d", VersionId=c4)) == {
        "dst": "new", "x": "y"}


def test_copy_replace_tags_onto_itself(s3, bucket):
    s3.put_object(Bucket=bucket, Key="self", Body=b"body", Tagging="a=1")
    s3.copy_object(Bucket=bucket, Key="self", CopySource={"Bucket": bucket, "Key": "self"},
                   MetadataDirective="REPLACE", TaggingDirective="REPLACE", Tagging="b=2")
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="self")) == {"b": "2"}
    assert s3.get_object(Bucket=bucket, Key="self")["Body"].read() == b"body"


def test_tags_in_suspended_bucket(s3, bucket):
    _enable_versioning(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="n", Body=b"1", Tagging="v=1")["VersionId"]
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})
    s3.put_object(Bucket=bucket, Key="n", Body=b"2", Tagging="v=null")
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="n", VersionId="null")) == {
        "v": "null"}
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="n", VersionId=v1)) == {"v": "1"}


def _racing_puts(server, bucket, key, writers, rounds, reader, check):
    """writers threads PUT key with their own body and tag set; reader(s3)
    runs meanwhile and returns the errors it saw."""
    import threading
    errors, results = [], []
    lock = threading.Lock()
    stop = threading.Event()

    def write(w):
        c = h.make_client(server.endpoint)
        for i in range(rounds):
            ntags = 1 + (w + i) % 4
            tags = {f"t{j}": f"w{w}r{i}" for j in range(ntags)}
            body = f"w{w} r{i} n{ntags}".encode()
            try:
                r = c.put_object(Bucket=bucket, Key=key, Body=body, Tagging=_tag_query(tags))
                with lock:
                    results.append((r.get("VersionId"), body, tags))
            except Exception as e:  # noqa: BLE001 - reported below
                with lock:
                    errors.append(f"put: {e!r}")

    def read():
        c = h.make_client(server.endpoint)
        while not stop.is_set():
            errors.extend(reader(c))

    rt = threading.Thread(target=read)
    rt.start()
    ts = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    stop.set()
    rt.join()
    errors.extend(check(results))
    return errors


def test_concurrent_puts_keep_tags_with_their_body(server, s3, bucket):
    """Every GET's tag count matches the body it came with: a GET never sees
    an object before its tags, nor another PUT's tags."""
    s3.put_object(Bucket=bucket, Key="race", Body=b"w- r- n0")
    seen = {"n": 0}

    def reader(c):
        errs = []
        g = c.get_object(Bucket=bucket, Key="race")
        body = g["Body"].read().decode()
        want = int(body.rsplit("n", 1)[1])
        if g.get("TagCount", 0) != want:
            errs.append(f"GET body {body!r} came with {g.get('TagCount', 0)} tags")
        seen["n"] += 1
        return errs

    errors = _racing_puts(server, bucket, "race", writers=6, rounds=25, reader=reader,
                          check=lambda res: [])
    assert not errors, errors[:5]
    assert seen["n"] > 0
    # The last PUT's tags are the current ones, and they match its body.
    g = s3.get_object(Bucket=bucket, Key="race")
    body = g["Body"].read().decode()
    w, r = body.split()[0][1:], body.split()[1][1:]
    tags = as_dict(s3.get_object_tagging(Bucket=bucket, Key="race"))
    assert tags and all(v == f"w{w}r{r}" for v in tags.values()), (body, tags)


def test_concurrent_puts_versioned_tags_per_version(server, s3, bucket):
    """In a versioned bucket, racing PUTs of one key: every version holds
    exactly the tags that were sent with its body."""
    _enable_versioning(s3, bucket)

    def check(results):
        errs = []
        for vid, body, tags in results:
            got = as_dict(s3.get_object_tagging(Bucket=bucket, Key="vrace", VersionId=vid))
            if got != tags:
                errs.append(f"version {vid}: tags {got}, sent {tags}")
            b = s3.get_object(Bucket=bucket, Key="vrace", VersionId=vid)["Body"].read()
            if b != body:
                errs.append(f"version {vid}: body {b!r}, sent {body!r}")
        return errs

    errors = _racing_puts(server, bucket, "vrace", writers=6, rounds=15,
                          reader=lambda c: [], check=check)
    assert not errors, errors[:5]
    vs = s3.list_object_versions(Bucket=bucket)["Versions"]
    assert len(vs) == 6 * 15


def test_put_delete_tagging_of_a_version(s3, bucket):
    _enable_versioning(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="pv", Body=b"one", Tagging="gen=1")["VersionId"]
    v2 = s3.put_object(Bucket=bucket, Key="pv", Body=b"two")["VersionId"]

    # A noncurrent version, by id: the current one is left alone.
    r = s3.put_object_tagging(Bucket=bucket, Key="pv", VersionId=v1,
                              Tagging=tagset({"set": "old", "b": "2"}))
    assert r["VersionId"] == v1
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="pv", VersionId=v1)) == {
        "set": "old", "b": "2"}
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="pv")) == {}
    assert s3.get_object(Bucket=bucket, Key="pv", VersionId=v1)["Body"].read() == b"one"

    # The current version, by id and without one: both answer its id.
    r = s3.put_object_tagging(Bucket=bucket, Key="pv", VersionId=v2, Tagging=tagset({"c": "2"}))
    assert r["VersionId"] == v2
    r = s3.put_object_tagging(Bucket=bucket, Key="pv", Tagging=tagset({"c": "3"}))
    assert r["VersionId"] == v2
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="pv", VersionId=v2)) == {"c": "3"}

    # DeleteObjectTagging by id removes that version's tags only.
    d = s3.delete_object_tagging(Bucket=bucket, Key="pv", VersionId=v1)
    assert d["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert d["VersionId"] == v1
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="pv", VersionId=v1)) == {}
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="pv")) == {"c": "3"}
    d = s3.delete_object_tagging(Bucket=bucket, Key="pv")
    assert d["VersionId"] == v2
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="pv")) == {}

    # Neither the listing nor the versions change.
    vs = s3.list_object_versions(Bucket=bucket, Prefix="pv")["Versions"]
    assert [v["VersionId"] for v in vs] == [v2, v1]


def test_tagging_of_a_delete_marker_or_unknown_version(s3, bucket):
    _enable_versioning(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="dm", Body=b"one")["VersionId"]
    marker = s3.delete_object(Bucket=bucket, Key="dm")["VersionId"]
    for call in (lambda: s3.put_object_tagging(Bucket=bucket, Key="dm", VersionId=marker,
                                               Tagging=tagset({"a": "b"})),
                 lambda: s3.delete_object_tagging(Bucket=bucket, Key="dm", VersionId=marker)):
        with pytest.raises(ClientError) as e:
            call()
        assert e.value.response["Error"]["Code"] == "MethodNotAllowed"
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 405
    # Without an id, the key's latest version is the marker: no such key.
    with pytest.raises(ClientError) as e:
        s3.put_object_tagging(Bucket=bucket, Key="dm", Tagging=tagset({"a": "b"}))
    assert e.value.response["Error"]["Code"] == "NoSuchKey"
    # The noncurrent version under the marker can still be tagged.
    r = s3.put_object_tagging(Bucket=bucket, Key="dm", VersionId=v1, Tagging=tagset({"a": "b"}))
    assert r["VersionId"] == v1
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="dm", VersionId=v1)) == {"a": "b"}
    for vid in ("A" * 22, "not-a-version-id"):
        for call in (lambda: s3.put_object_tagging(Bucket=bucket, Key="dm", VersionId=vid,
                                                   Tagging=tagset({"a": "b"})),
                     lambda: s3.delete_object_tagging(Bucket=bucket, Key="dm", VersionId=vid)):
            with pytest.raises(ClientError) as e:
                call()
            assert e.value.response["Error"]["Code"] == "NoSuchVersion"
            assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_tagging_null_version(s3, bucket):
    # An object written before versioning is the "null" version.
    s3.put_object(Bucket=bucket, Key="nv", Body=b"pre")
    _enable_versioning(s3, bucket)
    s3.put_object(Bucket=bucket, Key="nv", Body=b"post")
    r = s3.put_object_tagging(Bucket=bucket, Key="nv", VersionId="null",
                              Tagging=tagset({"n": "1"}))
    assert r["VersionId"] == "null"
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="nv", VersionId="null")) == {"n": "1"}
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="nv")) == {}
