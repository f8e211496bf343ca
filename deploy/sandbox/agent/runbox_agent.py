#!/usr/bin/env python3
"""Runbox sandbox agent: the one process inside a session container that runs tools.

It is the container's main process (`serve`) and listens on a Unix socket in /run/runbox,
a directory only root may enter. The executor reaches it through one long-lived `docker
exec` (as root) of `attach`, which connects to that socket and hands the exec's stdin and
stdout over to the agent (SCM_RIGHTS), so requests and replies go straight between the
executor and this process. Tools run as the sandbox user (runbox_identity.py), so nothing they start can
reach the socket, the relay or this process. Because shell state and background jobs
live in `serve`, they survive the executor restarting: the new executor attaches again.

Wire format: one JSON object per line, both ways.
  request   {"id": "c1", "op": "read_file", "args": {...}}
  response  {"id": "c1", "result": {"output": "...", "metadata": {...}, "is_error": false}}
  failure   {"id": "c1", "error": {"code": "bad_request", "message": "..."}}
Requests on one connection run concurrently (a thread each, taken from idle ones when there
are: see Workers) and may answer out of order.
A reply never exceeds MAX_REPLY_BYTES: the executor treats a longer line as a broken
protocol and restarts the sandbox, so a result that large is answered as an error instead.
"""
import collections
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SOCKET_PATH = os.environ.get("RUNBOX_AGENT_SOCKET", "/run/runbox/agent.sock")
# Half the executor's frame limit (MAX_FRAME_BYTES in agent-channel.ts): room to spare.
MAX_REPLY_BYTES = 4 * 1024 * 1024
# The first line on a channel: the executor waits for it before it sends a request.
ATTACHED = b'{"id": null, "event": "attached"}\n'


_tools = None


def tools():
    """The tool modules, imported on first use.

    Only `serve` needs them: `attach` and the transfer helpers start faster without them.
    """
    global _tools
    if _tools is None:
        from runbox_tools import OPS, ToolError
        from runbox_tools.output_budget import fit_output
        _tools = (OPS, ToolError, fit_output)
    return _tools


def handle(request):
    OPS, ToolError, fit_output = tools()
    rid = request.get("id")
    op = request.get("op")
    args = request.get("args") or {}
    fn = OPS.get(op)
    if fn is None:
        return {"id": rid, "error": {"code": "unknown_op", "message": "unknown op %r" % (op,)}}
    if not isinstance(args, dict):
        return {"id": rid, "error": {"code": "bad_request", "message": "args must be an object"}}
    try:
        result = fn(args, request_id=rid)
    except ToolError as e:
        result = {"output": str(e), "metadata": dict(e.metadata, error_code=e.code), "is_error": True}
    except Exception as e:  # a bug in a tool must not take the agent down
        result = {"output": "internal error: %s: %s" % (type(e).__name__, e), "metadata": {}, "is_error": True}
    return {"id": rid, "result": fit_output(result, args, rid)}


class Workers:
    """Threads that run requests, kept a while once idle so a request rarely waits for one
    to start (a thread start is a clone and a handshake, on every call otherwise). There
    is no cap: every request gets a thread at once, as before, since a terminal call may
    hold its thread for minutes. Idle threads beyond `keep` end after `idle_s`."""

    def __init__(self, keep=8, idle_s=30.0):
        self.keep = keep
        self.idle_s = idle_s
        self.cond = threading.Condition()
        self.jobs = collections.deque()
        self.idle = 0
        self.threads = 0

    def submit(self, fn, *args):
        with self.cond:
            self.jobs.append((fn, args))
            if self.idle > len(self.jobs) - 1:
                self.cond.notify()
                return
            self.threads += 1
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            with self.cond:
                while not self.jobs:
                    self.idle += 1
                    woken = self.cond.wait(self.idle_s)
                    self.idle -= 1
                    if not woken and not self.jobs and self.threads > self.keep:
                        self.threads -= 1
                        return
                fn, args = self.jobs.popleft()
            try:
                fn(*args)
            except Exception:  # noqa: BLE001  work() answers its own failures; the thread lives on
                pass


WORKERS = Workers()


def serve_connection(conn):
    """Serves one connection to the socket: either the attach relay handing over its exec's
    stdio (then the requests arrive on that stdin and the replies go to that stdout), or a
    client that talks over the socket itself (the local backend, the tests)."""
    first, fds, _flags, _addr = socket.recv_fds(conn, 1, 2)
    if len(fds) == 2:
        serve_stdio(conn, *fds)
        return
    for fd in fds:
        os.close(fd)
    if first:
        serve_lines(lines_after(first, conn.makefile("rb")), conn.sendall)
    conn.close()


def serve_stdio(conn, stdin_fd, stdout_fd):
    """The executor's channel, on the stdio of its `attach` exec, read and written here.

    The relay process stays as `cat` with this connection as its stdin, so the exec lives
    exactly as long as the channel: closing the connection at the end ends it.
    """
    reader = os.fdopen(stdin_fd, "rb")
    out = os.fdopen(stdout_fd, "wb", buffering=0)
    lock = threading.Lock()

    def send(data):
        # Under the lock, so it never writes to a closed (and perhaps reused) descriptor.
        with lock:
            view = memoryview(data)
            while view:
                view = view[out.write(view):]

    try:
        send(ATTACHED)
        conn.sendall(b"\n")  # the relay may now become a placeholder
        serve_lines(reader, send)
    except OSError:
        pass
    finally:
        reader.close()
        with lock:
            out.close()
        conn.close()


def lines_after(first, reader):
    """The lines of a connection whose first byte (`first`) was read already."""
    yield first if first == b"\n" else first + reader.readline()
    yield from reader


def serve_lines(lines, send):
    """Runs each request line on a worker and sends its reply with `send` (bytes)."""

    def reply(obj):
        try:
            data = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            # Text with no UTF-8 form (a lone surrogate, from a "\ud800" escape in the
            # request) cannot go on the wire. The caller gets an error now instead of
            # waiting out its time limit for a reply that never comes. ensure_ascii: the
            # id itself may be what cannot be encoded.
            failure = {"id": obj.get("id"), "result": {
                "output": "error: this call's result holds text with no UTF-8 form (a lone surrogate, "
                          "U+D800 to U+DFFF, as a \\ud800 escape in the arguments makes), so it "
                          "cannot be returned. Send paths, patterns and text as valid Unicode.",
                "metadata": {"error_code": "unencodable_text"},
                "is_error": True,
            }}
            data = (json.dumps(failure) + "\n").encode("ascii")
        if len(data) > MAX_REPLY_BYTES:
            data = (json.dumps(oversized_reply(obj, len(data))) + "\n").encode("utf-8")
        try:
            send(data)
        except (OSError, ValueError):  # the channel is gone (ValueError: already closed here)
            pass

    def work(line):
        try:
            request = json.loads(line)
        except ValueError:
            reply({"id": None, "error": {"code": "bad_request", "message": "invalid JSON"}})
            return
        if not isinstance(request, dict):
            reply({"id": None, "error": {"code": "bad_request", "message": "a request must be a JSON object"}})
            return
        reply(handle(request))
        tools()[0].run_after_reply_hooks()

    for line in lines:
        if line.strip():
            WORKERS.submit(work, line)


def oversized_reply(obj, size):
    message = ("the result is %d bytes, over the %d a reply may carry; ask for less "
               "(a lower max_output_chars, a smaller range)" % (size, MAX_REPLY_BYTES))
    result = {"output": message, "metadata": {"error_code": "result_too_large"}, "is_error": True}
    return {"id": obj.get("id"), "result": result}


def serve():
    import runbox_identity
    OPS = tools()[0]
    tool_user = runbox_identity.tool_user()
    if tool_user:
        # Made by the container (a root-owned 0700 tmpfs); checked rather than created so a
        # directory a tool process made first is never trusted.
        runbox_identity.check_private_directory(os.path.dirname(SOCKET_PATH))
    else:
        os.makedirs(os.path.dirname(SOCKET_PATH), exist_ok=True)
    try:
        os.unlink(SOCKET_PATH)
    except FileNotFoundError:
        pass
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(SOCKET_PATH)
    os.chmod(SOCKET_PATH, 0o600)
    server.listen(16)
    if tool_user:
        # Before any tool code runs: every thread started from here acts as the tool user.
        runbox_identity.act_as_tool_user(*tool_user)
        import runbox_spawner
        from runbox_tools import terminal
        terminal.start_spares_with(runbox_spawner.Spawner(tool_user))
    for hook in OPS.startup_hooks:
        hook()
    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve_connection, args=(conn,), daemon=True).start()


def attach():
    """Hands this exec's stdin and stdout to the agent, which reads and writes them itself,
    then stays only as the exec's placeholder until the agent ends the channel.

    The bytes then pass through no process of their own, and what remains of this one is a
    `cat` (about 0.1 MB) instead of a Python interpreter copying both ways (about 5 MB, in
    every sandbox). The placeholder reads this connection, on which the agent sends nothing,
    and ends when the agent closes it: the executor closed the channel, or the agent died.
    It keeps the exec's stdout open, as the relay did, but writes nothing to it.
    """
    deadline = time.monotonic() + 15
    while True:
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(SOCKET_PATH)
            break
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                sys.stderr.write("runbox agent: no server at %s\n" % SOCKET_PATH)
                sys.exit(3)
            time.sleep(0.01)
    socket.send_fds(sock, [b"\n"], [0, 1])
    if sock.recv(1) != b"\n":
        sys.stderr.write("runbox agent: the agent did not take the channel\n")
        sys.exit(3)
    os.dup2(sock.fileno(), 0)
    os.execv("/bin/cat", ["runbox-attach"])


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else "serve"
    if cmd == "serve":
        serve()
    elif cmd == "attach":
        attach()
    elif cmd in ("transfer-read", "transfer-write"):
        # One streamed file transfer in its own exec (runbox_tools/transfer.py).
        from runbox_tools.transfer import main as transfer_main
        sys.exit(transfer_main(sys.argv[1:]))
    else:
        sys.stderr.write("usage: runbox_agent.py serve|attach|transfer-read|transfer-write\n")
        sys.exit(2)
