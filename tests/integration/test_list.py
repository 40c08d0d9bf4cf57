"""ListObjectsV2 and ListObjects (v1)."""

import concurrent.futures
import re
import urllib.parse

import pytest

import helpers as h

TREE = ["dir1/a", "dir1/b", "dir1/sub/c", "dir2/d", "top1", "top2", "zz/deep/e"]
ODD = ["a b", "a+b", "a%b", "ñ/ü", "line\nfeed", "amp&lt;<>\"'", "tab\tx", "semi;colon"]
N_BIG = 2500


def _put_all(s3, bucket, keys, body=b""):
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: s3.put_object(Bucket=bucket, Key=k, Body=body), keys))


@pytest.fixture(scope="module")
def tree(s3):
    bucket = h.unique_bucket("tree")
    s3.create_bucket(Bucket=bucket)
    _put_all(s3, bucket, TREE, b"t")
    return bucket


@pytest.fixture(scope="module")
def big(s3):
    bucket = h.unique_bucket("big")
    s3.create_bucket(Bucket=bucket)
    keys = [f"k{i:05d}" for i in range(N_BIG)]
    _put_all(s3, bucket, keys)
    return bucket, keys


def test_list_all(s3, tree):
    r = s3.list_objects_v2(Bucket=tree)
    assert [o["Key"] for o in r["Contents"]] == sorted(TREE)
    assert r["KeyCount"] == len(TREE)
    assert r["IsTruncated"] is False
    for o in r["Contents"]:
        assert o["Size"] == 1
        assert o["ETag"] == f'"{h.md5_hex(b"t")}"'
        assert o["LastModified"]


def test_prefix(s3, tree):
    r = s3.list_objects_v2(Bucket=tree, Prefix="dir1/")
    assert [o["Key"] for o in r["Contents"]] == ["dir1/a", "dir1/b", "dir1/sub/c"]
    assert r["KeyCount"] == 3
    assert r["Prefix"] == "dir1/"
    r = s3.list_objects_v2(Bucket=tree, Prefix="nothing-here")
    assert r.get("Contents", []) == []
    assert r["KeyCount"] == 0


def test_delimiter(s3, tree):
    r = s3.list_objects_v2(Bucket=tree, Delimiter="/")
    assert [o["Key"] for o in r["Contents"]] == ["top1", "top2"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["dir1/", "dir2/", "zz/"]
    assert r["KeyCount"] == 5  # keys plus common prefixes
    assert r["Delimiter"] == "/"

    r = s3.list_objects_v2(Bucket=tree, Delimiter="/", Prefix="dir1/")
    assert [o["Key"] for o in r["Contents"]] == ["dir1/a", "dir1/b"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["dir1/sub/"]


def test_delimiter_paging_with_small_pages(s3, tree):
    # Page through with MaxKeys=1: every key and prefix appears exactly once.
    seen = []
    token = None
    for _ in range(20):
        kw = {"Bucket": tree, "Delimiter": "/", "MaxKeys": 1}
        if token:
            kw["ContinuationToken"] = token
        r = s3.list_objects_v2(**kw)
        assert r["KeyCount"] == len(r.get("Contents", [])) + len(r.get("CommonPrefixes", []))
        assert r["KeyCount"] <= 1
        seen += [o["Key"] for o in r.get("Contents", [])]
        seen += [p["Prefix"] for p in r.get("CommonPrefixes", [])]
        if not r["IsTruncated"]:
            break
        token = r["NextContinuationToken"]
    else:
        pytest.fail("listing did not end")
    assert sorted(seen) == ["dir1/", "dir2/", "top1", "top2", "zz/"]
    assert len(seen) == len(set(seen))


def test_start_after(s3, tree):
    r = s3.list_objects_v2(Bucket=tree, StartAfter="dir1/b")
    assert [o["Key"] for o in r["Contents"]] == ["dir1/sub/c", "dir2/d", "top1", "top2",
                                                 "zz/deep/e"]
    r = s3.list_objects_v2(Bucket=tree, StartAfter="dir1/bb")
    assert r["Contents"][0]["Key"] == "dir1/sub/c"
    r = s3.list_objects_v2(Bucket=tree, StartAfter="zzz")
    assert r["KeyCount"] == 0


def test_paginate_2500(s3, big):
    bucket, keys = big
    pages = list(s3.get_paginator("list_objects_v2").paginate(Bucket=bucket))
    got = [o["Key"] for p in pages for o in p.get("Contents", [])]
    assert got == keys
    assert [p["KeyCount"] for p in pages] == [1000, 1000, 500]
    assert [p["IsTruncated"] for p in pages] == [True, True, False]
    assert all(p.get("NextContinuationToken") for p in pages[:2])
    assert not pages[2].get("NextContinuationToken")


def test_paginate_small_pages(s3, big):
    bucket, keys = big
    pages = list(s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix="k01", PaginationConfig={"PageSize": 7}))
    got = [o["Key"] for p in pages for o in p.get("Contents", [])]
    assert got == [k for k in keys if k.startswith("k01")]
    assert all(p["KeyCount"] == 7 for p in pages[:-1])
    assert len(pages) == (len(got) + 6) // 7


def test_max_keys_zero_and_over_1000(s3, big):
    bucket, keys = big
    r = s3.list_objects_v2(Bucket=bucket, MaxKeys=0)
    assert r["KeyCount"] == 0
    r = s3.list_objects_v2(Bucket=bucket, MaxKeys=5000)
    assert r["KeyCount"] == 1000  # the server caps a page at 1000
    assert r["IsTruncated"] is True


def test_encoding_type_url(s3, bucket):
    _put_all(s3, bucket, ODD, b"o")
    # Passing EncodingType ourselves stops botocore from decoding, so we
    # see the raw encoded keys.
    r = s3.list_objects_v2(Bucket=bucket, EncodingType="url")
    assert r.get("EncodingType") == "url"
    raw = [o["Key"] for o in r["Contents"]]
    for k in raw:
        assert re.fullmatch(r"[A-Za-z0-9%+\-_.~/*]*", k), f"key not url-encoded: {k!r}"
    assert sorted(urllib.parse.unquote_plus(k) for k in raw) == sorted(ODD)
    # Delimiter and prefixes are encoded too.
    r = s3.list_objects_v2(Bucket=bucket, EncodingType="url", Delimiter="/")
    prefixes = [urllib.parse.unquote_plus(p["Prefix"]) for p in r.get("CommonPrefixes", [])]
    assert prefixes == ["ñ/"]
    # Without EncodingType botocore asks for url and decodes: plain keys back.
    r = s3.list_objects_v2(Bucket=bucket)
    assert sorted(o["Key"] for o in r["Contents"]) == sorted(ODD)


def test_list_v1_marker_without_delimiter(s3, big):
    bucket, keys = big
    got = []
    marker = ""
    for _ in range(10):
        r = s3.list_objects(Bucket=bucket, Marker=marker, MaxKeys=900)
        page = [o["Key"] for o in r.get("Contents", [])]
        got += page
        if not r["IsTruncated"]:
            break
        assert len(page) == 900
        if "NextMarker" in r:
            assert r["NextMarker"] == page[-1]
        marker = page[-1]
    else:
        pytest.fail("listing did not end")
    assert got == keys
    r = s3.list_objects(Bucket=bucket, Marker="k02490")
    assert [o["Key"] for o in r["Contents"]] == keys[-9:]


def test_list_v1_next_marker_with_delimiter(s3, tree):
    seen = []
    marker = ""
    for _ in range(20):
        r = s3.list_objects(Bucket=tree, Delimiter="/", Marker=marker, MaxKeys=2)
        items = [o["Key"] for o in r.get("Contents", [])]
        items += [p["Prefix"] for p in r.get("CommonPrefixes", [])]
        assert 1 <= len(items) <= 2
        seen += items
        if not r["IsTruncated"]:
            break
        assert r.get("NextMarker"), "NextMarker is required when a delimiter is given"
        marker = r["NextMarker"]
    else:
        pytest.fail("listing did not end")
    assert sorted(seen) == ["dir1/", "dir2/", "top1", "top2", "zz/"]
    assert len(seen) == len(set(seen))


def test_list_v1_prefix_delimiter(s3, tree):
    r = s3.list_objects(Bucket=tree, Prefix="dir1/", Delimiter="/")
    assert [o["Key"] for o in r["Contents"]] == ["dir1/a", "dir1/b"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["dir1/sub/"]
    assert r["IsTruncated"] is False


def test_list_after_delete(s3, bucket):
    _put_all(s3, bucket, [f"d{i}" for i in range(10)])
    for i in range(0, 10, 2):
        s3.delete_object(Bucket=bucket, Key=f"d{i}")
    r = s3.list_objects_v2(Bucket=bucket)
    assert [o["Key"] for o in r["Contents"]] == [f"d{i}" for i in range(1, 10, 2)]


def _raw_list(srv, bucket, query):
    r = h.signed_request(srv, "GET", f"/{bucket}?{query}")
    assert r.status == 200, r.body
    return r.body


def _local_names(body):
    import xml.etree.ElementTree as ET
    return [e.tag.split("}")[-1] for e in ET.fromstring(body)]


@pytest.mark.parametrize("query", [
    "list-type=2&delimiter=&continuation-token=&start-after=&prefix=",
    "delimiter=&marker=&prefix=",
])
def test_empty_list_params_are_absent(mode_server, mode_s3, mode_bucket, query):
    # An empty delimiter, token, start-after, marker or prefix is as if it
    # were not sent: every key listed, nothing rolled up, no error.
    _put_all(mode_s3, mode_bucket, ["a/1", "a/2", "b"], b"x")
    body = _raw_list(mode_server, mode_bucket, query)
    assert h.xml_find_all(body, "Key") == ["a/1", "a/2", "b"]
    names = _local_names(body)
    assert "CommonPrefixes" not in names
    for absent in ("Delimiter", "ContinuationToken", "StartAfter"):
        assert absent not in names, body


def test_list_v1_url_encoding_leaves_prefix(mode_server, mode_s3, mode_bucket):
    # S3 (and botocore's decoder) encode Delimiter, Marker, NextMarker, Key
    # and CommonPrefixes/Prefix in v1, but not the top-level Prefix.
    _put_all(mode_s3, mode_bucket, ["a b/c d", "a b/e f/g", "a b/h"], b"x")
    body = _raw_list(mode_server, mode_bucket,
                     "encoding-type=url&prefix=a%20b%2F&delimiter=%2F&marker=a%20b%2Fa&max-keys=1")
    import xml.etree.ElementTree as ET
    root = ET.fromstring(body)
    top = {e.tag.split("}")[-1]: e.text or "" for e in root}
    assert top["Prefix"] == "a b/"
    assert top["Marker"] == "a%20b/a"
    assert top["EncodingType"] == "url"
    assert h.xml_find_all(body, "Key") == ["a%20b/c%20d"]
    assert top["NextMarker"] == "a%20b/c%20d"
    # v2 encodes the top-level Prefix.
    body = _raw_list(mode_server, mode_bucket, "list-type=2&encoding-type=url&prefix=a%20b%2F")
    top = {e.tag.split("}")[-1]: e.text or "" for e in ET.fromstring(body)}
    assert top["Prefix"] == "a%20b/"
