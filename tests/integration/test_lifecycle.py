"""Bucket lifecycle: Put/Get/DeleteBucketLifecycleConfiguration, validation,
and the worker that expires objects and aborts multipart uploads.

The module's server uses 1-second lifecycle "days" and a 100 ms pass
interval (the least it takes), so expiry shows within a few seconds and
"still there a moment later" (half a second) spans five passes."""

import datetime
import time

import pytest
from botocore.exceptions import ClientError

import helpers as h

SERVER_CONFIG = {"lifecycle_day_sec": "1", "lifecycle_interval_ms": "100"}


def wait_for(cond, timeout=15.0, step=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return cond()


def keys(s3, bucket):
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


def test_put_get_delete(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.get_bucket_lifecycle_configuration(Bucket=bucket)
    assert h.error_code(e.value) == "NoSuchLifecycleConfiguration"
    assert h.http_status(e.value) == 404

    rules = [
        {"ID": "logs", "Filter": {"Prefix": "logs/"}, "Status": "Enabled",
         "Expiration": {"Days": 30}},
        {"ID": "mpu", "Filter": {"Prefix": ""}, "Status": "Enabled",
         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7}},
        {"ID": "dated", "Filter": {"And": {"Prefix": "tmp/"}}, "Status": "Disabled",
         "Expiration": {"Date": datetime.datetime(2031, 1, 1, tzinfo=datetime.timezone.utc)},
         "NoncurrentVersionExpiration": {"NoncurrentDays": 3}},
    ]
    r = s3.put_bucket_lifecycle_configuration(Bucket=bucket,
                                              LifecycleConfiguration={"Rules": rules})
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert [g["ID"] for g in got] == ["logs", "mpu", "dated"]
    assert got[0]["Filter"] == {"Prefix": "logs/"}
    assert got[0]["Expiration"] == {"Days": 30}
    assert got[0]["Status"] == "Enabled"
    assert got[1]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7}
    assert got[2]["Status"] == "Disabled"
    assert got[2]["Filter"]["And"]["Prefix"] == "tmp/"
    assert got[2]["Expiration"]["Date"] == datetime.datetime(2031, 1, 1,
                                                             tzinfo=datetime.timezone.utc)
    assert got[2]["NoncurrentVersionExpiration"]["NoncurrentDays"] == 3

    d = s3.delete_bucket_lifecycle(Bucket=bucket)
    assert d["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as e:
        s3.get_bucket_lifecycle_configuration(Bucket=bucket)
    assert h.error_code(e.value) == "NoSuchLifecycleConfiguration"


def rule(**kw):
    r = {"ID": "r", "Filter": {"Prefix": ""}, "Status": "Enabled"}
    r.update(kw)
    return r


def test_rule_without_id_gets_one(s3, bucket):
    # S3 assigns an ID to a rule stored without one, and Get returns it;
    # each rule gets its own, and a rule's ID stays the same across Gets.
    rules = [
        {"Filter": {"Prefix": "a/"}, "Status": "Enabled", "Expiration": {"Days": 30}},
        {"Filter": {"Prefix": "b/"}, "Status": "Enabled", "Expiration": {"Days": 5}},
        {"ID": "named", "Filter": {"Prefix": "c/"}, "Status": "Enabled",
         "Expiration": {"Days": 1}},
    ]
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})
    got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    ids = [g.get("ID") for g in got]
    assert all(ids) and ids[2] == "named", ids
    assert ids[0] != ids[1]
    assert 1 <= len(ids[0]) <= 255
    again = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert [g["ID"] for g in again] == ids
    assert [g["Filter"]["Prefix"] for g in got] == ["a/", "b/", "c/"]


@pytest.mark.parametrize("rules, code", [
    ([rule(Expiration={"Days": 0})], "InvalidArgument"),
    ([rule(Expiration={"Date": datetime.datetime(2031, 1, 1, 12, 0,
                                                 tzinfo=datetime.timezone.utc)})],
     "InvalidArgument"),
    ([rule()], "InvalidArgument"),  # no action
    ([rule(Expiration={"Days": 1}), rule(Expiration={"Days": 2})], "InvalidArgument"),  # same ID
    ([rule(ID="x" * 256, Expiration={"Days": 1})], "InvalidArgument"),
    ([rule(AbortIncompleteMultipartUpload={"DaysAfterInitiation": 0})], "InvalidArgument"),
    ([rule(Expiration={"Days": 1},
           Filter={"And": {"ObjectSizeGreaterThan": 10, "ObjectSizeLessThan": 10}})],
     "InvalidArgument"),  # GreaterThan must be below LessThan
    ([rule(Expiration={"Days": 1},
           Filter={"And": {"Tags": [{"Key": "a", "Value": "1"}, {"Key": "a", "Value": "2"}]}})],
     "InvalidArgument"),  # duplicate tag keys
    ([rule(Expiration={"Days": 1},
           Filter={"And": {"Tags": [{"Key": f"k{i}", "Value": "v"} for i in range(11)]}})],
     "InvalidArgument"),  # too many tags
    ([rule(Expiration={"ExpiredObjectDeleteMarker": True},
           Filter={"Tag": {"Key": "a", "Value": "b"}})], "InvalidArgument"),
    ([rule(Transitions=[{"Days": 1, "StorageClass": "GLACIER"}])], "NotImplemented"),
])
def test_invalid(s3, bucket, rules, code):
    with pytest.raises(ClientError) as e:
        s3.put_bucket_lifecycle_configuration(Bucket=bucket,
                                              LifecycleConfiguration={"Rules": rules})
    assert h.error_code(e.value) == code


@pytest.mark.parametrize("doc", [
    b"<LifecycleConfiguration><Rule><Expiration><Days>1</Days></Expiration></Rule>"
    b"</LifecycleConfiguration>",  # no Status
    b"<LifecycleConfiguration><Rule><Status>On</Status><Expiration><Days>1</Days>"
    b"</Expiration></Rule></LifecycleConfiguration>",
    b"<LifecycleConfiguration><Rule><Status>Enabled</Status><Expiration><Days>1</Days>"
    b"<Date>2031-01-01T00:00:00Z</Date></Expiration></Rule></LifecycleConfiguration>",
    b"<LifecycleConfiguration><Rule><Status>Enabled</Status><Unknown/><Expiration>"
    b"<Days>1</Days></Expiration></Rule></LifecycleConfiguration>",
    b"<LifecycleConfiguration/>",
    # A Filter with two conditions needs <And>; a Tag needs a Key.
    b"<LifecycleConfiguration><Rule><Status>Enabled</Status><Filter><Prefix>a</Prefix>"
    b"<Tag><Key>k</Key><Value>v</Value></Tag></Filter><Expiration><Days>1</Days></Expiration>"
    b"</Rule></LifecycleConfiguration>",
    b"<LifecycleConfiguration><Rule><Status>Enabled</Status><Filter>"
    b"<Tag><Key>k</Key><Value>v</Value></Tag><Tag><Key>j</Key><Value>v</Value></Tag></Filter>"
    b"<Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>",
    b"<LifecycleConfiguration><Rule><Status>Enabled</Status><Filter><Tag><Value>v</Value>"
    b"</Tag></Filter><Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>",
    b"<LifecycleConfiguration><Rule>",
])
def test_malformed(server, bucket, doc):
    r = h.signed_request(server, "PUT", f"/{bucket}?lifecycle", body=doc)
    assert r.status == 400, r
    assert h.parse_error(r.body)["Code"] == "MalformedXML"


def test_legacy_prefix_roundtrip(server, s3, bucket):
    doc = (b"<LifecycleConfiguration><Rule><ID>old</ID><Prefix>a/</Prefix>"
           b"<Status>Enabled</Status><Expiration><Days>100</Days></Expiration></Rule>"
           b"</LifecycleConfiguration>")
    r = h.signed_request(server, "PUT", f"/{bucket}?lifecycle", body=doc)
    assert r.status == 200, r
    got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert got[0]["Prefix"] == "a/"


def test_expiration_deletes_old_objects_under_prefix(s3, bucket):
    for k in ("tmp/a", "tmp/b", "tmp/sub/c", "keep/a", "tmpfile"):
        s3.put_object(Bucket=bucket, Key=k, Body=b"x")
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
        rule(ID="tmp", Filter={"Prefix": "tmp/"}, Expiration={"Days": 2}),
        rule(ID="off", Filter={"Prefix": "keep/"}, Status="Disabled", Expiration={"Days": 1}),
    ]})
    # Objects younger than two "days" stay.
    time.sleep(0.8)
    assert keys(s3, bucket) == ["keep/a", "tmp/a", "tmp/b", "tmp/sub/c", "tmpfile"]
    assert wait_for(lambda: keys(s3, bucket) == ["keep/a", "tmpfile"]), keys(s3, bucket)
    # A new object under the prefix lives its two days again.
    s3.put_object(Bucket=bucket, Key="tmp/new", Body=b"y")
    time.sleep(0.5)
    assert "tmp/new" in keys(s3, bucket)
    assert wait_for(lambda: "tmp/new" not in keys(s3, bucket))
    assert keys(s3, bucket) == ["keep/a", "tmpfile"]


def test_expiration_by_past_date(s3, bucket):
    s3.put_object(Bucket=bucket, Key="old/x", Body=b"x")
    s3.put_object(Bucket=bucket, Key="new/x", Body=b"x")
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
        rule(Filter={"Prefix": "old/"},
             Expiration={"Date": datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)}),
    ]})
    assert wait_for(lambda: keys(s3, bucket) == ["new/x"]), keys(s3, bucket)


def test_many_objects_expire_over_batches(s3, bucket):
    """More keys than one scan batch: all of them go, over one or more passes."""
    import concurrent.futures
    names = [f"bulk/{i:05d}" for i in range(1200)]
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda k: s3.put_object(Bucket=bucket, Key=k, Body=b""), names))
    s3.put_object(Bucket=bucket, Key="zz-stay", Body=b"")
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
        rule(Filter={"Prefix": "bulk/"}, Expiration={"Days": 1})]})
    assert wait_for(lambda: keys(s3, bucket) == ["zz-stay"], timeout=30), len(keys(s3, bucket))


def test_abort_incomplete_multipart(s3, bucket):
    old = s3.create_multipart_upload(Bucket=bucket, Key="up/a")["UploadId"]
    s3.upload_part(Bucket=bucket, Key="up/a", UploadId=old, PartNumber=1, Body=b"p" * 100)
    other = s3.create_multipart_upload(Bucket=bucket, Key="other/b")["UploadId"]
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
        rule(Filter={"Prefix": "up/"}, AbortIncompleteMultipartUpload={"DaysAfterInitiation": 2})
    ]})

    def uploads():
        return sorted(u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket)
                      .get("Uploads", []))

    assert old in uploads()
    assert wait_for(lambda: uploads() == [other]), uploads()
    with pytest.raises(ClientError) as e:
        s3.list_parts(Bucket=bucket, Key="up/a", UploadId=old)
    assert h.error_code(e.value) == "NoSuchUpload"
    s3.abort_multipart_upload(Bucket=bucket, Key="other/b", UploadId=other)


def test_bucket_delete_removes_config(s3):
    name = h.unique_bucket("lcdel")
    s3.create_bucket(Bucket=name)
    s3.put_bucket_lifecycle_configuration(Bucket=name, LifecycleConfiguration={"Rules": [
        rule(Expiration={"Days": 1})]})
    s3.delete_bucket(Bucket=name)
    s3.create_bucket(Bucket=name)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_lifecycle_configuration(Bucket=name)
    assert h.error_code(e.value) == "NoSuchLifecycleConfiguration"


def test_huge_days_expire_nothing(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="far/x", Body=b"x")
    doc = (b"<LifecycleConfiguration><Rule><Filter><Prefix>far/</Prefix></Filter>"
           b"<Status>Enabled</Status><Expiration><Days>999999999</Days></Expiration>"
           b"<AbortIncompleteMultipartUpload><DaysAfterInitiation>999999999"
           b"</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>"
           b"</LifecycleConfiguration>")
    r = h.signed_request(server, "PUT", f"/{bucket}?lifecycle", body=doc)
    assert r.status == 200, r
    up = s3.create_multipart_upload(Bucket=bucket, Key="far/u")["UploadId"]
    time.sleep(0.6)  # several passes
    assert keys(s3, bucket) == ["far/x"]
    s3.abort_multipart_upload(Bucket=bucket, Key="far/u", UploadId=up)


def versions(s3, bucket, prefix=""):
    """[(key, version id, is marker)] newest first per key."""
    r = s3.list_object_versions(Bucket=bucket, Prefix=prefix)
    out = [(v["Key"], v["VersionId"], False, v["LastModified"]) for v in r.get("Versions", [])]
    out += [(m["Key"], m["VersionId"], True, m["LastModified"])
            for m in r.get("DeleteMarkers", [])]
    return sorted((k, vid, mk) for k, vid, mk, _ in out)


def test_noncurrent_version_expiration(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    ids = {}
    for k in ("nc/a", "keep/a"):
        ids[k] = [s3.put_object(Bucket=bucket, Key=k, Body=f"{k}{i}".encode())["VersionId"]
                  for i in range(3)]
    # Three noncurrent versions, of which the newest one is kept.
    newer = [s3.put_object(Bucket=bucket, Key="newer/a", Body=b"%d" % i)["VersionId"]
             for i in range(4)]
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
        rule(ID="nc", Filter={"Prefix": "nc/"},
             NoncurrentVersionExpiration={"NoncurrentDays": 2}),
        rule(ID="newer", Filter={"Prefix": "newer/"},
             NoncurrentVersionExpiration={"NoncurrentDays": 1, "NewerNoncurrentVersions": 1}),
    ]})
    # Noncurrent for less than two "days": still there.
    time.sleep(0.8)
    assert len(versions(s3, bucket, "nc/")) == 3
    want_nc = [("nc/a", ids["nc/a"][2], False)]
    assert wait_for(lambda: versions(s3, bucket, "nc/") == want_nc), versions(s3, bucket, "nc/")
    assert wait_for(lambda: versions(s3, bucket, "newer/") ==
                    sorted([("newer/a", newer[3], False), ("newer/a", newer[2], False)])), \
        versions(s3, bucket, "newer/")
    # The current version is untouched, and so is every version outside the prefixes.
    assert s3.get_object(Bucket=bucket, Key="nc/a")["Body"].read() == b"nc/a2"
    assert s3.get_object(Bucket=bucket, Key="newer/a")["Body"].read() == b"3"
    assert len(versions(s3, bucket, "keep/")) == 3
    # An older version removed is gone for good.
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="nc/a", VersionId=ids["nc/a"][0])
    assert h.error_code(e.value) in ("NoSuchVersion", "NoSuchKey")


def test_expired_object_delete_marker_removed(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=bucket, Key="gone/a", Body=b"a")
    s3.delete_object(Bucket=bucket, Key="gone/a")  # a marker over one noncurrent version
    s3.put_object(Bucket=bucket, Key="gone/b", Body=b"b")  # current: stays
    s3.put_object(Bucket=bucket, Key="other/a", Body=b"a")
    s3.delete_object(Bucket=bucket, Key="other/a")
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
        rule(Filter={"Prefix": "gone/"}, Expiration={"ExpiredObjectDeleteMarker": True},
             NoncurrentVersionExpiration={"NoncurrentDays": 1}),
    ]})
    # The noncurrent version goes first, then the marker left alone.
    assert wait_for(lambda: [v[0] for v in versions(s3, bucket, "gone/")] == ["gone/b"]), \
        versions(s3, bucket, "gone/")
    assert s3.get_object(Bucket=bucket, Key="gone/b")["Body"].read() == b"b"
    assert [v[2] for v in versions(s3, bucket, "other/")] == [False, True]


def test_tag_filters_roundtrip(s3, bucket):
    rules = [
        rule(ID="one", Filter={"Tag": {"Key": "class", "Value": "tmp"}}, Expiration={"Days": 3}),
        rule(ID="and", Filter={"And": {"Prefix": "logs/", "Tags": [
            {"Key": "a", "Value": "1"}, {"Key": "b", "Value": ""}]}},
            NoncurrentVersionExpiration={"NoncurrentDays": 2}),
        rule(ID="tags-only", Filter={"And": {"Tags": [
            {"Key": "x", "Value": "y"}, {"Key": "z", "Value": "w w"}]}},
            Expiration={"Days": 1}),
    ]
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})
    got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert got[0]["Filter"] == {"Tag": {"Key": "class", "Value": "tmp"}}
    assert got[1]["Filter"] == {"And": {"Prefix": "logs/", "Tags": [
        {"Key": "a", "Value": "1"}, {"Key": "b", "Value": ""}]}}
    assert got[2]["Filter"]["And"]["Tags"] == [{"Key": "x", "Value": "y"},
                                               {"Key": "z", "Value": "w w"}]
    assert got[2]["Filter"]["And"].get("Prefix", "") == ""


def test_tag_filter_expires_only_matching_objects(s3, bucket):
    s3.put_object(Bucket=bucket, Key="a", Body=b"x", Tagging="class=tmp")
    s3.put_object(Bucket=bucket, Key="b", Body=b"x", Tagging="class=keep")
    s3.put_object(Bucket=bucket, Key="c", Body=b"x")
    s3.put_object(Bucket=bucket, Key="d", Body=b"x", Tagging="other=1&class=tmp")
    s3.put_object(Bucket=bucket, Key="e", Body=b"x", Tagging="class=tmpx")
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
        rule(Filter={"Tag": {"Key": "class", "Value": "tmp"}}, Expiration={"Days": 1})]})
    assert wait_for(lambda: keys(s3, bucket) == ["b", "c", "e"]), keys(s3, bucket)
    # Tagging an object later brings it under the rule.
    s3.put_object_tagging(Bucket=bucket, Key="c",
                          Tagging={"TagSet": [{"Key": "class", "Value": "tmp"}]})
    assert wait_for(lambda: keys(s3, bucket) == ["b", "e"]), keys(s3, bucket)
    time.sleep(0.5)  # five passes
    assert keys(s3, bucket) == ["b", "e"]


def test_and_filter_prefix_and_two_tags(s3, bucket):
    objs = {"logs/both": "a=1&b=2", "logs/one": "a=1", "logs/wrong": "a=1&b=3",
            "logs/extra": "c=0&b=2&a=1", "other/both": "a=1&b=2", "logs/none": ""}
    for k, t in objs.items():
        s3.put_object(Bucket=bucket, Key=k, Body=b"x", Tagging=t)
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
        rule(Filter={"And": {"Prefix": "logs/", "Tags": [
            {"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}]}}, Expiration={"Days": 1})]})
    want = ["logs/none", "logs/one", "logs/wrong", "other/both"]
    assert wait_for(lambda: keys(s3, bucket) == want), keys(s3, bucket)
    time.sleep(0.5)  # five passes
    assert keys(s3, bucket) == want


def test_noncurrent_expiration_with_tag_filter(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    v = [s3.put_object(Bucket=bucket, Key="k", Body=b"%d" % i,
                       Tagging="gen=old" if i % 2 == 0 else "gen=new")["VersionId"]
         for i in range(4)]
    # v0 and v2 carry gen=old; v3 is current (and not matching anyway).
    s3.put_object_tagging(Bucket=bucket, Key="k", VersionId=v[3],
                          Tagging={"TagSet": [{"Key": "gen", "Value": "old"}]})
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
        rule(Filter={"Tag": {"Key": "gen", "Value": "old"}},
             NoncurrentVersionExpiration={"NoncurrentDays": 1})]})
    want = sorted([("k", v[3], False), ("k", v[1], False)])
    assert wait_for(lambda: versions(s3, bucket, "k") == want), versions(s3, bucket, "k")
    # The tag that matters is the version's own: re-tagging v1 lets it go.
    s3.put_object_tagging(Bucket=bucket, Key="k", VersionId=v[1],
                          Tagging={"TagSet": [{"Key": "gen", "Value": "old"}]})
    assert wait_for(lambda: versions(s3, bucket, "k") == [("k", v[3], False)]), \
        versions(s3, bucket, "k")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"3"


# ---- size filters ----

def put_sized(s3, bucket, sizes):
    for k, n in sizes.items():
        s3.put_object(Bucket=bucket, Key=k, Body=b"s" * n)


def test_size_filters_roundtrip(s3, bucket):
    rules = [
        rule(ID="gt", Filter={"ObjectSizeGreaterThan": 1024}, Expiration={"Days": 3}),
        rule(ID="lt", Filter={"ObjectSizeLessThan": 77}, Expiration={"Days": 3}),
        rule(ID="zero", Filter={"ObjectSizeGreaterThan": 0},
             NoncurrentVersionExpiration={"NoncurrentDays": 2}),
        rule(ID="and", Filter={"And": {"Prefix": "logs/", "Tags": [{"Key": "a", "Value": "1"}],
                                       "ObjectSizeGreaterThan": 7,
                                       "ObjectSizeLessThan": 1099511627776000}},
             Expiration={"Days": 1}),
        rule(ID="sizes-only", Filter={"And": {"ObjectSizeGreaterThan": 1,
                                              "ObjectSizeLessThan": 5}},
             Expiration={"Days": 1}),
    ]
    r = s3.put_bucket_lifecycle_configuration(Bucket=bucket,
                                              LifecycleConfiguration={"Rules": rules})
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert [g["ID"] for g in got] == ["gt", "lt", "zero", "and", "sizes-only"]
    assert got[0]["Filter"] == {"ObjectSizeGreaterThan": 1024}
    assert got[1]["Filter"] == {"ObjectSizeLessThan": 77}
    assert got[2]["Filter"] == {"ObjectSizeGreaterThan": 0}
    assert got[3]["Filter"] == {"And": {"Prefix": "logs/", "Tags": [{"Key": "a", "Value": "1"}],
                                        "ObjectSizeGreaterThan": 7,
                                        "ObjectSizeLessThan": 1099511627776000}}
    assert got[4]["Filter"] == {"And": {"ObjectSizeGreaterThan": 1, "ObjectSizeLessThan": 5}}


def lc_doc(filt, action=b"<Expiration><Days>1</Days></Expiration>"):
    return (b"<LifecycleConfiguration><Rule><ID>r</ID><Filter>" + filt + b"</Filter>"
            b"<Status>Enabled</Status>" + action + b"</Rule></LifecycleConfiguration>")


GT = b"ObjectSizeGreaterThan"
LT = b"ObjectSizeLessThan"


def el(name, val):
    return b"<" + name + b">" + val + b"</" + name + b">"


@pytest.mark.parametrize("doc, code", [
    (lc_doc(el(GT, b"-1")), "InvalidRequest"),
    (lc_doc(el(LT, b"0")), "InvalidRequest"),
    (lc_doc(b"<And>" + el(LT, b"-5") + b"</And>"), "InvalidRequest"),
    (lc_doc(el(GT, b"1099511627776001")), "InvalidRequest"),
    (lc_doc(el(GT, b"ten")), "MalformedXML"),
    (lc_doc(el(LT, b"1.5")), "MalformedXML"),
    (lc_doc(el(LT, b"")), "MalformedXML"),
    (lc_doc(b"<And>" + el(GT, b"12x") + b"</And>"), "MalformedXML"),
    (lc_doc(b"<And>" + el(GT, b"100") + el(LT, b"100") + b"</And>"), "InvalidArgument"),
    (lc_doc(b"<And>" + el(GT, b"101") + el(LT, b"100") + b"</And>"), "InvalidArgument"),
    # A Filter holds one predicate directly; several need <And>.
    (lc_doc(el(GT, b"1") + el(LT, b"100")), "MalformedXML"),
    (lc_doc(el(b"Prefix", b"a/") + el(GT, b"1")), "MalformedXML"),
    (lc_doc(b"<Prefix></Prefix>" + el(LT, b"10")), "MalformedXML"),
    (lc_doc(b"<Tag><Key>k</Key><Value>v</Value></Tag>" + el(LT, b"10")), "MalformedXML"),
    (lc_doc(el(GT, b"1") + b"<And><Prefix>a</Prefix></And>"), "MalformedXML"),
    (lc_doc(b"<And>" + el(GT, b"1") + el(GT, b"2") + b"</And>"), "MalformedXML"),
    # S3 refuses size filters on a rule that aborts uploads.
    (lc_doc(el(GT, b"1"), b"<AbortIncompleteMultipartUpload><DaysAfterInitiation>1"
                          b"</DaysAfterInitiation></AbortIncompleteMultipartUpload>"),
     "InvalidRequest"),
])
def test_size_filter_invalid(server, bucket, doc, code):
    r = h.signed_request(server, "PUT", f"/{bucket}?lifecycle", body=doc)
    assert r.status == 400, r
    assert h.parse_error(r.body)["Code"] == code, r.body


def test_size_filter_valid_raw(server, s3, bucket):
    """Whitespace around the number is accepted, as for Days; 0 is a valid GreaterThan."""
    r = h.signed_request(server, "PUT", f"/{bucket}?lifecycle",
                         body=lc_doc(b"<And>" + el(GT, b" 0 ") + el(LT, b"\n10\n") + b"</And>"))
    assert r.status == 200, r
    got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert got[0]["Filter"] == {"And": {"ObjectSizeGreaterThan": 0, "ObjectSizeLessThan": 10}}


def test_size_greater_than_expires_only_larger(s3, bucket):
    put_sized(s3, bucket, {"a": 0, "b": 5, "c": 10, "d": 11, "e": 4096})
    r = s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
        rule(Filter={"ObjectSizeGreaterThan": 10}, Expiration={"Days": 1})]})
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    # Strictly greater: the 10-byte object stays.
    assert wait_for(lambda: keys(s3, bucket) == ["a", "b", "c"]), keys(s3, bucket)
    time.sleep(0.5)  # five passes
    assert keys(s3, bucket) == ["a", "b", "c"]
    # Growing an object past the bound brings it under the rule.
    s3.put_object(Bucket=bucket, Key="b", Body=b"x" * 20)
    assert wait_for(lambda: keys(s3, bucket) == ["a", "c"]), keys(s3, bucket)


def expire_and_expect(s3, bucket, filt, want):
    """Sets one rule (this filter, Expiration after a day), then checks that
    exactly `want` remains, and still remains a moment later."""
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
        rule(Filter=filt, Expiration={"Days": 1})]})
    assert wait_for(lambda: keys(s3, bucket) == want), keys(s3, bucket)
    time.sleep(0.5)  # five passes
    assert keys(s3, bucket) == want


def test_size_less_than_with_prefix(s3, bucket):
    put_sized(s3, bucket, {"logs/tiny": 1, "logs/small": 49, "logs/edge": 50, "logs/big": 500,
                           "other/tiny": 1})
    expire_and_expect(s3, bucket, {"And": {"Prefix": "logs/", "ObjectSizeLessThan": 50}},
                      ["logs/big", "logs/edge", "other/tiny"])


def test_size_range_with_tags(s3, bucket):
    s3.put_object(Bucket=bucket, Key="in", Body=b"x" * 20, Tagging="t=1")
    s3.put_object(Bucket=bucket, Key="untagged", Body=b"x" * 20)
    s3.put_object(Bucket=bucket, Key="small", Body=b"x" * 10, Tagging="t=1")
    s3.put_object(Bucket=bucket, Key="large", Body=b"x" * 30, Tagging="t=1")
    expire_and_expect(s3, bucket, {"And": {"Tags": [{"Key": "t", "Value": "1"}],
                                           "ObjectSizeGreaterThan": 10, "ObjectSizeLessThan": 30}},
                      ["large", "small", "untagged"])


def test_noncurrent_expiration_by_version_size(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    sizes = [1, 100, 2, 200, 300]
    v = [s3.put_object(Bucket=bucket, Key="k", Body=b"v" * n)["VersionId"] for n in sizes]
    # A noncurrent delete marker is not size-filtered: the rule removes it.
    s3.put_object(Bucket=bucket, Key="m", Body=b"m" * 500)
    marker = s3.delete_object(Bucket=bucket, Key="m")["VersionId"]
    m_cur = s3.put_object(Bucket=bucket, Key="m", Body=b"m")["VersionId"]
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
        rule(Filter={"ObjectSizeGreaterThan": 50},
             NoncurrentVersionExpiration={"NoncurrentDays": 1})]})
    # Each noncurrent version's own size decides; the current one (300) stays.
    want = sorted([("k", v[0], False), ("k", v[2], False), ("k", v[4], False)])
    assert wait_for(lambda: versions(s3, bucket, "k") == want), versions(s3, bucket, "k")
    assert wait_for(lambda: versions(s3, bucket, "m") == [("m", m_cur, False)]), \
        versions(s3, bucket, "m")
    assert marker != m_cur
    time.sleep(0.5)  # five passes
    assert versions(s3, bucket, "k") == want
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v" * 300
