"""Virtual-hosted-style requests (Host: bucket.DOMAIN) with `domain localhost`.

bucket.localhost does not resolve everywhere, so requests go to 127.0.0.1
with the Host header set by hand."""

import os
import urllib.parse

import helpers as h

SERVER_CONFIG = {"domain": "localhost"}


def _vhost(server, bucket):
    return f"{bucket}.localhost:{server.port}"


def test_put_get_through_virtual_host(server, s3, bucket):
    data = os.urandom(2000)
    host = _vhost(server, bucket)
    r = h.signed_request(server, "PUT", "/dir/obj", body=data, host=host)
    assert r.status == 200, r
    assert r.header("etag") == f'"{h.md5_hex(data)}"'
    # It landed in the bucket: path-style sees it.
    assert s3.get_object(Bucket=bucket, Key="dir/obj")["Body"].read() == data
    r = h.signed_request(server, "GET", "/dir/obj", host=host)
    assert r.status == 200 and r.body == data
    r = h.signed_request(server, "HEAD", "/dir/obj", host=host)
    assert r.status == 200 and r.header("content-length") == str(len(data))


def test_list_bucket_through_virtual_host(server, s3, bucket):
    for k in ["a", "b/c"]:
        s3.put_object(Bucket=bucket, Key=k, Body=b"x")
    r = h.signed_request(server, "GET", "/?list-type=2&prefix=", host=_vhost(server, bucket))
    assert r.status == 200, r
    assert h.xml_find_all(r.body, "Name") == [bucket]
    assert h.xml_find_all(r.body, "Key") == ["a", "b/c"]


def test_virtual_host_missing_bucket(server):
    r = h.signed_request(server, "GET", "/k", host=_vhost(server, h.unique_bucket("nob")))
    assert r.status == 404
    assert h.parse_error(r.body)["Code"] == "NoSuchBucket"


def test_path_style_still_works(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="p", Body=b"path")
    r = h.signed_request(server, "GET", f"/{bucket}/p", host=f"localhost:{server.port}")
    assert r.status == 200 and r.body == b"path"
    r = h.signed_request(server, "GET", f"/{bucket}/p")  # Host: 127.0.0.1:port
    assert r.status == 200 and r.body == b"path"


def test_botocore_virtual_presigned(server, s3, bucket):
    # botocore builds and signs the virtual-hosted URL itself.
    data = os.urandom(500)
    s3.put_object(Bucket=bucket, Key="v key", Body=data)
    vclient = h.make_client(f"http://localhost:{server.port}", addressing="virtual")
    url = vclient.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "v key"})
    u = urllib.parse.urlsplit(url)
    assert u.hostname == f"{bucket}.localhost", url
    r = h.http_request(server, "GET", h.split_url(url)[2], host=f"{u.hostname}:{u.port}")
    assert r.status == 200, r
    assert r.body == data
    put_url = vclient.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "vp"})
    r = h.http_request(server, "PUT", h.split_url(put_url)[2], body=b"via vhost",
                       host=f"{u.hostname}:{u.port}")
    assert r.status == 200, r
    assert s3.get_object(Bucket=bucket, Key="vp")["Body"].read() == b"via vhost"
