# One spelling of a target, sent to the proxy by every Python client:
# urllib, http.client (absolute form and CONNECT tunnel) and raw sockets.
# argv: proxy port, the authority as hex bytes. Prints `client=outcome`
# pairs separated by " | "; an outcome is a status code, `client:...` when
# the library refused to send it, or `closed`.
import binascii
import http.client
import socket
import sys
import urllib.error
import urllib.request

port = int(sys.argv[1])
raw_authority = binascii.unhexlify(sys.argv[2])
authority = raw_authority.decode("utf-8", "surrogateescape")
url = "http://%s/" % authority
proxy = "http://127.0.0.1:%d" % port
out = []


def attempt(name, f):
    try:
        out.append("%s=%s" % (name, f()))
    except Exception as e:  # noqa: BLE001 - every failure is an outcome
        out.append("%s=client:%s:%s" % (name, type(e).__name__, str(e)[:60]))


def via_urllib():
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy}))
    try:
        return opener.open(url, timeout=20).status
    except urllib.error.HTTPError as e:
        return e.code


def hc_absolute():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    c.request("GET", url)
    return c.getresponse().status


def hc_tunnel():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    c.set_tunnel(authority)
    c.request("GET", "/")
    return c.getresponse().status


def raw(request):
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(request)
    data = b""
    while b"\r\n" not in data:
        chunk = s.recv(256)
        if not chunk:
            break
        data += chunk
    s.close()
    line = data.split(b"\r\n", 1)[0]
    return line.split(b" ")[1].decode() if line.startswith(b"HTTP/") else "closed"


attempt("urllib", via_urllib)
attempt("http.client", hc_absolute)
attempt("http.client-tunnel", hc_tunnel)
attempt(
    "socket",
    lambda: raw(b"GET http://" + raw_authority + b"/ HTTP/1.1\r\nHost: " + raw_authority + b"\r\n\r\n"),
)
attempt(
    "socket-connect",
    lambda: raw(b"CONNECT " + raw_authority + b" HTTP/1.1\r\nHost: " + raw_authority + b"\r\n\r\n"),
)
print(" | ".join(out))
