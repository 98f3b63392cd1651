#!/usr/bin/python3
"""The HTTP port's logins and browser safety (docs/design/0021-http-tokens-and-browser-safety.md).

1. `http.auth: basic` with a warehouse: a token from POST /v1/oauth/tokens (urllib, the
   form and the Basic header forms of the client credentials; the spec's answer and
   OAuthError bodies) opens the REST catalog; no token, a tampered one, an expired one
   (expires_in=1) and a removed user's are refused with 401 in the Iceberg error shape and
   both WWW-Authenticate challenges; a lifetime above http.token_max_ttl is capped;
   `sluice user token` prints a token alone (and --ttl); iceberg-js with the bearer token
   creates, lists and drops; after a restart the tokens still hold (the secret is in
   users.json, never in the logs); a simulated cross-site page (a foreign Origin, a
   text/plain POST, a form POST to the token endpoint from another origin, a rebinding
   Host) is refused with 403.
2. `http.auth: none`: the browser guard still holds (curl as another site's page: a form
   POST, a DELETE without a custom header, a foreign Origin, a rebinding Host), while
   iceberg-js without a token creates and drops (its Idempotency-Key and JSON bodies are
   its proof) and curl with a JSON body or X-Sluice-Request passes.
3. Refused at start: an unknown http.auth, http.token_ttl above http.token_max_ttl, an
   http.allowed_hosts entry with a port.

usage: /usr/bin/python3 http_auth_test.py path/to/sluice
"""

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, HERE)
from sluice_broker import FAST_GROUPS, Broker, TestFailure, check, wait_until  # noqa: E402

TOKEN_PATH = "/v1/oauth/tokens"


def config(auth, extra=""):
    return FAST_GROUPS + f"""query:
  users: ["alice:alice-pw", "bob:bob-pw"]
http:
  auth: {auth}
  token_ttl: 1h
  token_max_ttl: 2h
{extra}"""


def http_base(broker):
    def banner():
        with open(broker.out_path) as f:
            text = f.read()
        m = re.search(r"^sluice: Iceberg REST catalog on (http://127\.0\.0\.1:\d+)/v1 ", text, re.M)
        return m.group(1) if m else None
    return wait_until(banner, 30, "the REST catalog's banner line")


def call(base, path, method="GET", headers=None, body=None):
    """(status, headers, body bytes) without raising on HTTP errors."""
    req = urllib.request.Request(base + path, method=method, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def token_request(base, fields, headers=None):
    h = {"Content-Type": "application/x-www-form-urlencoded"}
    h.update(headers or {})
    return call(base, TOKEN_PATH, "POST", h, urllib.parse.urlencode(fields).encode())


def get_token(base, user, password, **more):
    status, _, body = token_request(base, {"grant_type": "client_credentials", "client_id": user,
                                           "client_secret": password, "scope": "catalog", **more})
    check(status == 200, f"token for {user}: {status} {body!r}")
    return json.loads(body)


def bearer(token):
    return {"Authorization": "Bearer " + token}


def check_401(status, headers, body, what, token_error):
    check(status == 401, f"{what}: {status} {body!r}")
    challenges = headers.get_all("WWW-Authenticate") or []
    check(any(c.startswith("Bearer realm=") for c in challenges) and
          any(c.startswith("Basic realm=") for c in challenges), f"{what}: challenges {challenges}")
    check(any('error="invalid_token"' in c for c in challenges) == token_error,
          f"{what}: invalid_token in {challenges}")
    err = json.loads(body)["error"]
    check(err["type"] == "NotAuthorizedException" and err["code"] == 401, f"{what}: {body!r}")
    return err["message"]


def curl(*args):
    return subprocess.run(["curl", "-sS", "--max-time", "20", "-o", "/dev/stderr", "-w", "%{http_code}",
                           *args], capture_output=True, timeout=60)


def curl_status(*args):
    p = curl(*args)
    check(p.returncode == 0, f"curl {args}: {p.stderr!r}")
    return int(p.stdout), p.stderr.decode(errors="replace")


def node(script):
    exe = shutil.which("node") or shutil.which("nodejs")
    check(exe is not None, "node is missing (scripts/setup.sh installs nodejs)")
    p = subprocess.run([exe, "-e", script], capture_output=True, timeout=120, cwd=ROOT)
    check(p.returncode == 0 and b"OK" in p.stdout,
          f"iceberg-js: {p.stdout.decode(errors='replace')} {p.stderr.decode(errors='replace')[-1500:]}")


def iceberg_js(base, ns, token=None):
    """iceberg-js creates, lists and drops namespace `ns` (a bearer token when given)."""
    auth = f"{{ type: 'bearer', token: {json.dumps(token)} }}" if token else "undefined"
    node(f"""
const {{ IcebergRestCatalog }} = require('iceberg-js')
const c = new IcebergRestCatalog({{ baseUrl: {json.dumps(base)}, auth: {auth} }})
;(async () => {{
  await c.createNamespace({{ namespace: [{json.dumps(ns)}] }}, {{ properties: {{ by: 'iceberg-js' }} }})
  const {{ namespaces }} = await c.listNamespaces()
  if (!namespaces.some(n => n.namespace[0] === {json.dumps(ns)})) throw new Error('not listed')
  await c.updateNamespaceProperties({{ namespace: [{json.dumps(ns)}] }}, {{ updates: {{ a: 'b' }} }})
  await c.dropNamespace({{ namespace: [{json.dumps(ns)}] }})
  console.log('OK')
}})().catch(e => {{ console.log('FAIL', e.status, e.message); process.exit(1) }})
""")


def cross_site(base, headers_for_auth):
    """What another site's page could make a browser send: each refused with 403."""
    port = base.rsplit(":", 1)[1]
    a = headers_for_auth
    s, _, b = call(base, "/v1/config", headers={**a, "Origin": "http://evil.example"})
    check(s == 403 and b"other sites" in b, f"a foreign Origin: {s} {b!r}")
    s, _, b = call(base, "/v1/config", headers={**a, "Origin": "http://localhost:3000"})
    check(s == 403, f"another port's Origin: {s} {b!r}")
    s, _, b = call(base, "/v1/config", headers={**a, "Origin": "null"})
    check(s == 403, f"Origin null: {s} {b!r}")
    s, _, b = call(base, "/v1/config", headers={**a, "Host": f"rebind.evil.example:{port}"})
    check(s == 403 and b"DNS rebinding" in b, f"a rebinding Host: {s} {b!r}")
    s, _, b = call(base, "/metrics", headers={"Host": f"rebind.evil.example:{port}"})
    check(s == 403, f"/metrics by a rebinding Host: {s} {b!r}")
    # A simple cross-site POST: text/plain, no custom header (a form's or no-cors fetch's).
    s, _, b = call(base, "/v1/namespaces", "POST", {"Content-Type": "text/plain"},
                   b'{"namespace":["x"]}')
    check(s == 403 and b"X-Sluice-Request" in b and b.count(b"\n") == 1, f"a text/plain POST: {s} {b!r}")
    # The token endpoint takes forms, but not from another origin.
    s, _, b = token_request(base, {"grant_type": "client_credentials", "client_id": "alice",
                                   "client_secret": "alice-pw"}, {"Origin": "http://evil.example"})
    check(s == 403, f"a token form from another origin: {s} {b!r}")
    # This port's own origin is fine.
    s, _, b = call(base, "/v1/config", headers={**a, "Origin": f"http://localhost:{port}"})
    check(s == 200, f"this port's Origin: {s} {b!r}")


def with_auth(sluice):
    broker = Broker(sluice, config("basic"))
    try:
        broker.extra_args = ["--warehouse", os.path.join(broker.tmp, "lake")]
        broker.start()
        base = http_base(broker)

        # The token endpoint: the spec's answer.
        t = get_token(base, "alice", "alice-pw")
        check(t["token_type"] == "bearer" and t["expires_in"] == 3600 and
              t["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token" and
              t["access_token"].startswith("sluice.v1."), f"token answer: {t}")
        alice = t["access_token"]
        basic = "Basic " + base64.b64encode(b"alice:alice-pw").decode()
        s, _, b = token_request(base, {"grant_type": "client_credentials"}, {"Authorization": basic})
        check(s == 200 and json.loads(b)["access_token"] != alice, f"Basic client credentials: {s} {b!r}")
        capped = get_token(base, "alice", "alice-pw", expires_in="999999")
        check(capped["expires_in"] == 7200, f"capped at http.token_max_ttl: {capped}")
        for fields, status, error in (
                ({"grant_type": "client_credentials", "client_id": "alice", "client_secret": "no"},
                 401, "invalid_client"),
                ({"grant_type": "password", "username": "alice", "password": "alice-pw"},
                 400, "unsupported_grant_type"),
                ({"client_id": "alice", "client_secret": "alice-pw"}, 400, "invalid_request")):
            s, _, b = token_request(base, fields)
            e = json.loads(b)
            check(s == status and e["error"] == error and e["error_description"],
                  f"{fields}: {s} {b!r}")

        # The token opens the catalog; Basic still does; nothing else does.
        s, _, b = call(base, "/v1/config", headers=bearer(alice))
        check(s == 200 and b"endpoints" in b, f"config with a token: {s} {b!r}")
        s, _, b = call(base, "/v1/namespaces", "POST", {**bearer(alice), "Content-Type": "application/json"},
                       b'{"namespace":["sales"]}')
        check(s == 200, f"create a namespace with a token: {s} {b!r}")
        s, _, b = call(base, "/v1/namespaces", headers={"Authorization": basic})
        check(s == 200 and b"sales" in b, f"list with Basic: {s} {b!r}")
        check_401(*call(base, "/v1/namespaces"), "no token", False)
        for path in ("/healthz", "/metrics"):  # open without http.auth_metrics
            s, _, b = call(base, path)
            check(s == 200, f"{path} stays open: {s}")
        tampered = alice[:-3] + ("AAA" if not alice.endswith("AAA") else "BBB")
        check_401(*call(base, "/v1/namespaces", headers=bearer(tampered)), "a tampered token", True)
        payload = alice.split(".")[2]
        forged = alice.replace(payload, payload[:-2] + ("xy" if not payload.endswith("xy") else "zw"))
        check_401(*call(base, "/v1/namespaces", headers=bearer(forged)), "a changed payload", True)
        check_401(*call(base, "/v1/namespaces", headers=bearer("not-a-token")), "garbage", True)

        # An expired token (a one-second one, tried until it has expired).
        short = get_token(base, "alice", "alice-pw", expires_in="1")
        check(short["expires_in"] == 1, f"a one-second token: {short}")

        def expired():
            s, h, b = call(base, "/v1/namespaces", headers=bearer(short["access_token"]))
            return (s, h, b) if s == 401 else None
        msg = check_401(*wait_until(expired, 30, "the one-second token to expire", 0.2),
                        "an expired token", True)
        check("expired" in msg, f"expired: {msg}")

        # sluice user token: the token alone on stdout.
        def user_token(*args, password="bob-pw", addr=base):
            return subprocess.run([sluice, "user", "token", "bob", "--password-stdin", "--http-addr",
                                   addr, *args], input=(password + "\n").encode(),
                                  capture_output=True, timeout=60)
        p = user_token()
        bob = p.stdout.decode().strip()
        check(p.returncode == 0 and p.stdout.decode() == bob + "\n" and bob.startswith("sluice.v1."),
              f"sluice user token: {p.returncode} {p.stdout!r} {p.stderr!r}")
        s, _, b = call(base, "/v1/namespaces", headers=bearer(bob))
        check(s == 200, f"bob's token: {s} {b!r}")
        p = user_token("--ttl", "3h", addr=base.replace("http://", ""))
        check(p.returncode == 0 and b"cut the lifetime to 7200" in p.stderr and
              p.stdout.startswith(b"sluice.v1."), f"--ttl 3h: {p.returncode} {p.stdout!r} {p.stderr!r}")
        p = user_token(password="wrong")
        check(p.returncode == 1 and p.stdout == b"" and b"401" in p.stderr,
              f"a wrong password: {p.returncode} {p.stdout!r} {p.stderr!r}")
        p = user_token("--ttl", "soon")
        check(p.returncode == 1 and b"--ttl" in p.stderr, f"--ttl soon: {p.stderr!r}")

        # iceberg-js with the token.
        iceberg_js(base, "js_with_token", alice)

        # The simulated cross-site page, even with a token.
        cross_site(base, bearer(alice))

        # A removed user's token is refused.
        p = subprocess.run([sluice, "user", "remove", "bob", "--bootstrap", broker.bootstrap],
                           capture_output=True, timeout=60)
        check(p.returncode == 0, f"sluice user remove bob: {p.stderr!r}")

        def bob_refused():
            s, h, b = call(base, "/v1/namespaces", headers=bearer(bob))
            return (s, h, b) if s == 401 else None
        msg = check_401(*wait_until(bob_refused, 30, "bob's token refused"), "a removed user", True)
        check("no longer exists" in msg, f"removed user: {msg}")

        # A restart keeps the secret: alice's token still works.
        check(broker.stop() == 0, "sluice serve after SIGTERM:\n" + broker.logs())
        broker.start()
        base = http_base(broker)
        s, _, b = call(base, "/v1/namespaces", headers=bearer(alice))
        check(s == 200 and b"sales" in b, f"alice's token after a restart: {s} {b!r}")
        with open(os.path.join(broker.data_dir, "meta", "users.json")) as f:
            users = json.load(f)
        secret = users.get("token_secret", "")
        check(len(base64.b64decode(secret)) == 32, "users.json has a 32-byte token_secret")
        logs = broker.logs(lines=100000)
        for text in (secret, alice, bob, "alice-pw", "bob-pw"):
            check(text not in logs, f"{text[:12]}… is in the logs")
        check("failed login as 'alice'" in logs, "failed logins are logged")
        check(broker.stop() == 0, "sluice serve after SIGTERM:\n" + broker.logs())
        print("PASS: tokens from /v1/oauth/tokens and sluice user token on the REST catalog; "
              "refusals (none, tampered, expired, removed user); iceberg-js with a token; "
              "cross-site requests refused; the secret survives a restart")
    except Exception:
        print(broker.logs())
        raise
    finally:
        broker.cleanup()


def without_auth(sluice):
    broker = Broker(sluice, config("none"))
    try:
        broker.extra_args = ["--warehouse", os.path.join(broker.tmp, "lake")]
        broker.start()
        base = http_base(broker)
        port = base.rsplit(":", 1)[1]
        iceberg_js(base, "js_without_token")
        cross_site(base, {})
        # curl as another site's page, then as a client.
        url = base + "/v1/namespaces"
        for args, what in (
                (["-d", '{"namespace":["f"]}', url], "a form POST"),
                (["-X", "DELETE", url + "/sales"], "a DELETE without a custom header"),
                (["-H", "Origin: https://evil.example", url], "a foreign Origin"),
                (["-H", f"Host: 127.0.0.1.evil.example:{port}", url], "a rebinding Host")):
            s, body = curl_status(*args)
            check(s == 403 and body.startswith("sluice: ") and body.count("\n") == 1,
                  f"curl {what}: {s} {body!r}")
        s, body = curl_status("-H", "Content-Type: application/json", "-d", '{"namespace":["c"]}', url)
        check(s == 200, f"curl with a JSON body: {s} {body}")
        s, body = curl_status("-X", "DELETE", "-H", "X-Sluice-Request: 1", url + "/c")
        check(s == 204, f"curl DELETE with X-Sluice-Request: {s} {body}")
        s, _, b = call(base, "/v1/namespaces")
        check(s == 200, f"no login needed with http.auth: none: {s} {b!r}")
        # The token endpoint works in every mode (clients given credentials ask it first).
        get_token(base, "alice", "alice-pw")
        check(broker.stop() == 0, "sluice serve after SIGTERM:\n" + broker.logs())
        print("PASS: http.auth none: iceberg-js and JSON clients served, cross-site requests refused")
    except Exception:
        print(broker.logs())
        raise
    finally:
        broker.cleanup()


def refused_at_start(sluice):
    for extra_config, want in (
            (config("password"), "'password' is not none, basic or token"),
            (config("token").replace("token_ttl: 1h", "token_ttl: 3h"), "http.token_ttl"),
            (config("basic", "  allowed_hosts: [\"sluice:8181\"]\n"), "is not a host name")):
        broker = Broker(sluice, extra_config)
        try:
            try:
                broker.start(timeout=30)
                raise TestFailure(f"started with {want}")
            except TestFailure as e:
                check(want in str(e), f"refused for {want}: {e}")
        finally:
            broker.cleanup()
    print("PASS: bad http.* settings refused at start")


def main():
    sluice = os.path.abspath(sys.argv[1])
    try:
        with_auth(sluice)
        without_auth(sluice)
        refused_at_start(sluice)
    except TestFailure as e:
        print(f"FAIL: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
