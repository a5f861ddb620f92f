#!/usr/bin/env python3
"""Cost per write-intent open under landlock-run, with and without --ask-fd.

LR=target/release/landlock-run python3 crates/landlock-run/bench/ask-open.py [DIR]

DIR (default /var/tmp/askbench) holds ws/ (the writable root) and out/
(outside every root). Prints the median of 7 runs of 20000 opens each, in
microseconds per open: O_WRONLY of a file in the root (plain Landlock,
supervised, supervised with a mounted channel), then a refused O_CREAT
outside (supervised, and with a channel whose answerer has gone).
"""
import os, socket, subprocess, sys

LR = os.environ.get("LR", "target/release/landlock-run")
BASE = sys.argv[1] if len(sys.argv) > 1 else "/var/tmp/askbench"
W = f"{BASE}/ws"
OUT = f"{BASE}/out"
os.makedirs(W, exist_ok=True)
os.makedirs(OUT, exist_ok=True)
N = 20000

def inner(target, refused):
    body = (
        f"    try: os.open({target!r}, os.O_WRONLY | os.O_CREAT)\n    except OSError: pass\n"
        if refused
        else f"    os.close(os.open({target!r}, os.O_WRONLY))\n"
    )
    return (
        "import os, time\n"
        f"n = {N}\n"
        "t = time.perf_counter()\n"
        "for _ in range(n):\n" + body +
        "print((time.perf_counter() - t) / n * 1e6)\n"
    )

def run(extra, code, channel):
    cmd = [LR, "--ro", "/", "--rw", "/dev/null", "--rw", W] + extra
    fds = ()
    if channel:
        a, b = socket.socketpair()
        # The answerer is gone: every question is refused at once.
        a.shutdown(socket.SHUT_WR)
        cmd += ["--ask-fd", str(b.fileno())]
        fds = (b.fileno(),)
    cmd += ["--", "/usr/bin/python3", "-c", code]
    r = subprocess.run(cmd, pass_fds=fds, capture_output=True, text=True, check=True)
    if channel:
        a.close()
        b.close()
    return float(r.stdout)

def report(name, extra, code, channel):
    v = sorted(run(extra, code, channel) for _ in range(7))
    print(f"{name}: median {v[3]:.2f} us/open (min {v[0]:.2f}, max {v[-1]:.2f})")

inside = f"{W}/f"
open(inside, "a").close()
report("inside, --no-supervise", ["--no-supervise"], inner(inside, False), False)
report("inside, supervised", [], inner(inside, False), False)
report("inside, supervised --ask-fd", [], inner(inside, False), True)
report("outside refused, supervised", [], inner(f"{OUT}/f", True), False)
report("outside refused, supervised --ask-fd", [], inner(f"{OUT}/f", True), True)
