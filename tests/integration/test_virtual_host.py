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


def test_sigv2_virtual_host(server, s3, bucket):
    # SigV2 signs "/bucket" + path when the bucket is in the Host header:
    # a presigned URL and the header form, both built by botocore.
    from botocore.config import Config
    import boto3
    data = os.urandom(700)
    s3.put_object(Bucket=bucket, Key="v2 key", Body=data)
    host = f"{bucket}.localhost:{server.port}"
    for kw in ({}, {"signature_version": "s3"}):
        c = boto3.client("s3", endpoint_url=f"http://localhost:{server.port}",
                         region_name=h.REGION, aws_access_key_id=h.ACCESS_KEY,
                         aws_secret_access_key=h.SECRET_KEY,
                         config=Config(s3={"addressing_style": "virtual"}, **kw))
        url = c.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "v2 key"})
        assert "AWSAccessKeyId=" in url, url
        r = h.http_request(server, "GET", h.split_url(url)[2], host=host)
        assert r.status == 200 and r.body == data, r
        # Path style names the same resource, so the signature holds...
        r = h.http_request(server, "GET", f"/{bucket}" + h.split_url(url)[2])
        assert r.status == 200 and r.body == data, r
        # ... and another bucket in the Host is another resource.
        r = h.http_request(server, "GET", h.split_url(url)[2], host=f"x{host}")
        assert r.status == 403 and h.parse_error(r.body)["Code"] == "SignatureDoesNotMatch", r
    # The header form, signed by hand for the virtual-hosted resource.
    date = h.http_date()
    sts = h.sigv2_string_to_sign("GET", "/v2%20key", {}, date, bucket_from_host=bucket)
    hdrs = {"Date": date, "Authorization": f"AWS {h.ACCESS_KEY}:{h.sigv2_sign(sts)}"}
    r = h.http_request(server, "GET", "/v2%20key", hdrs, host=host)
    assert r.status == 200 and r.body == data, r
    # Listing the bucket: resource "/bucket/".
    sts = h.sigv2_string_to_sign("GET", "/", {}, date, bucket_from_host=bucket)
    hdrs = {"Date": date, "Authorization": f"AWS {h.ACCESS_KEY}:{h.sigv2_sign(sts)}"}
    r = h.http_request(server, "GET", "/", hdrs, host=host)
    assert r.status == 200 and h.xml_find_all(r.body, "Key") == ["v2 key"], r
