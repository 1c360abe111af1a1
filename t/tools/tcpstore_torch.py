# SPDX-License-Identifier: BSD-3-Clause
# PyTorch's TCPStore (use_libuv=False: the server in TCPStoreBackend.cpp) against ctrain's
# (t/28-tcpstore-torch.t):
#
#   tcpstore_torch.py PEER torch-client   ctrain's store (PEER serve), torch's client on it
#   tcpstore_torch.py PEER torch-master   torch's master store, ctrain's client (PEER client) on it
#
# Both run the same exchange: torch's side runs every query it has, then PEER's client reads what
# torch wrote and runs every query of its own, and each waits for a key the other sets.
# Prints TAP lines without a plan ("ok - ..."), PEER's included.
import datetime
import subprocess
import sys

from torch.distributed import TCPStore

failed = False


def check(cond, what):
    global failed
    print(("ok" if cond else "not ok") + " - torch: " + what, flush=True)
    failed |= not cond


def torch_side(s):
    s.set("t", "from torch")
    check(s.add("n", 5) == 5, "add n 5 = 5")
    check(s.compare_set("cs", "", "v1") == b"v1", "compare_set of a missing key with '' sets it")
    check(s.compare_set("cs", "zz", "v2") == b"v1", "compare_set with the wrong value keeps it")
    s.append("ap", "a")
    s.append("ap", "b")
    check(s.get("ap") == b"ab", "append twice, get")
    check(s.check(["t", "ap"]), "check [t, ap]")
    check(not s.check(["nope"]), "check [nope] is false")
    s.multi_set(["m1", "m2"], ["x", "y"])
    check(s.multi_get(["m1", "m2"]) == [b"x", b"y"], "multi_set, multi_get")
    check(s.delete_key("m2"), "delete_key m2")
    check(not s.delete_key("m2"), "delete_key m2 again is false")
    try:
        s.wait(["never"], datetime.timedelta(milliseconds=300))
        check(False, "wait [never] times out")
    except Exception as e:  # DistStoreError: after CANCEL_WAIT and its WAIT_CANCELED
        check("timeout" in str(e).lower(), "wait [never] times out (" + str(e).splitlines()[0] + ")")
    check(s.get("t") == b"from torch", "the connection works after the cancelled wait")


def after_peer(s, peer):
    s.wait(["c"], datetime.timedelta(seconds=30))
    check(s.get("c") == b"from ctrain", "get c (set by ctrain)")
    s.set("go", "1")
    s.wait(["late"], datetime.timedelta(seconds=30))
    check(s.get("ap") == b"abc", "ap = abc after ctrain's append")
    check(s.get("cs") == b"v3", "cs = v3 after ctrain's compare_set")
    check(s.add("n", 0) == 15, "n = 15 after ctrain's add")
    check(not s.check(["cs2", "m1"]), "cs2 never set, m1 deleted by ctrain")
    check(s.num_keys() == 7, "7 keys (t n cs ap c go late), got %d" % s.num_keys())
    out, _ = peer.communicate(timeout=60)
    print(out, end="", flush=True)
    check(peer.returncode == 0, "ctrain's client exited 0")


def main():
    tool, mode = sys.argv[1], sys.argv[2]
    timeout = datetime.timedelta(seconds=30)
    if mode == "torch-client":
        server = subprocess.Popen([tool, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        port = int(server.stdout.readline().split()[1])
        store = TCPStore("127.0.0.1", port, is_master=False, timeout=timeout, use_libuv=False)
    else:
        server = None
        store = TCPStore("127.0.0.1", 0, is_master=True, timeout=timeout, use_libuv=False,
                         wait_for_workers=False)
        port = store.port
    try:
        torch_side(store)
        peer = subprocess.Popen([tool, "client", "127.0.0.1", str(port)], stdout=subprocess.PIPE, text=True)
        try:
            after_peer(store, peer)
        finally:
            if peer.poll() is None:
                peer.kill()
                peer.wait()
    finally:
        if server:
            server.stdin.close()
            server.wait(timeout=30)
    sys.exit(1 if failed else 0)


main()
