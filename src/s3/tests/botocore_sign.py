#!/usr/bin/python3
"""Signs S3 requests with botocore's SigV4 signer, for sigv4_test.cc to compare with.

Reads one JSON document on stdin:
  {"access_key", "secret_key", "token", "region", "amz_date": "20130524T000000Z",
   "requests": [{"method", "url" (scheme://host[:port]), "path" (raw, not encoded),
                 "params": [[name, value], ...], "headers": [[name, value], ...],
                 "body"}]}
Writes one JSON object per request and line: {"authorization", "canonical_request"}.
The path is encoded here with urllib, not by the C++ code under test.
"""
import datetime
import json
import sys
import urllib.parse
from unittest import mock

try:
    import botocore.auth
    import botocore.awsrequest
    import botocore.credentials
except ImportError as e:
    sys.exit(f"botocore_sign.py: botocore is not installed ({e}); apt-get install python3-botocore")


class RecordingSigner(botocore.auth.S3SigV4Auth):
    def string_to_sign(self, request, canonical_request):
        self.last_canonical_request = canonical_request
        return super().string_to_sign(request, canonical_request)


def main():
    spec = json.load(sys.stdin)
    now = datetime.datetime.strptime(spec["amz_date"], "%Y%m%dT%H%M%SZ")
    creds = botocore.credentials.Credentials(
        spec["access_key"], spec["secret_key"], spec.get("token") or None
    )
    # botocore reads the clock inside add_auth; fix it to the test's timestamp.
    fake = mock.MagicMock(wraps=datetime)
    fake.datetime = mock.MagicMock(wraps=datetime.datetime)
    fake.datetime.utcnow.return_value = now
    fake.datetime.now.return_value = now.replace(tzinfo=datetime.timezone.utc)
    patches = [mock.patch.object(botocore.auth, "datetime", fake)]
    if hasattr(botocore.auth, "get_current_datetime"):
        patches.append(mock.patch.object(botocore.auth, "get_current_datetime", lambda *a, **k: now))
    for p in patches:
        p.start()
    for r in spec["requests"]:
        url = r["url"] + urllib.parse.quote(r["path"], safe="/~")
        request = botocore.awsrequest.AWSRequest(
            method=r["method"],
            url=url,
            headers=dict(r.get("headers", [])),
            data=r.get("body", "").encode("utf-8"),
            params=[tuple(p) for p in r.get("params", [])],
        )
        signer = RecordingSigner(creds, "s3", spec["region"])
        signer.add_auth(request)
        print(json.dumps({
            "authorization": request.headers["Authorization"],
            "canonical_request": signer.last_canonical_request,
        }))
    for p in patches:
        p.stop()


if __name__ == "__main__":
    main()
