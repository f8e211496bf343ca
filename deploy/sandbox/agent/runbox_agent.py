#!/usr/bin/env python3
"""Runbox sandbox agent: the one process inside a session container that runs tools.

It is the container's main process (`serve`) and listens on a Unix socket in /tmp. The
executor reaches it through one long-lived `docker exec` of `attach`, which only relays
bytes between the exec's stdio and that socket. Because shell state and background jobs
live in `serve`, they survive the executor restarting: the new executor attaches again.

Wire format: one JSON object per line, both ways.
  request   {"id": "c1", "op": "read_file", "args": {...}}
  response  {"id": "c1", "result": {"output": "...", "metadata": {...}, "is_error": false}}
  failure   {"id": "c1", "error": {"code": "bad_request", "message": "..."}}
Requests on one connection run concurrently (a thread each) and may answer out of order.
"""
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from runbox_tools import OPS, ToolError, truncate_output  # noqa: E402

SOCKET_PATH = os.environ.get("RUNBOX_AGENT_SOCKET", "/tmp/runbox/agent.sock")
DEFAULT_MAX_OUTPUT_CHARS = 30000


def handle(request):
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
    limit = args.get("max_output_chars", DEFAULT_MAX_OUTPUT_CHARS)
    if isinstance(limit, int) and limit > 0:
        result["output"] = truncate_output(result["output"], limit)
    return {"id": rid, "result": result}


def serve_connection(conn):
    lock = threading.Lock()
    reader = conn.makefile("rb")

    def reply(obj):
        data = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8", "surrogateescape")
        with lock:
            try:
                conn.sendall(data)
            except OSError:
                pass

    def work(line):
        try:
            request = json.loads(line)
        except ValueError:
            reply({"id": None, "error": {"code": "bad_request", "message": "invalid JSON"}})
            return
        reply(handle(request))

    for line in reader:
        if line.strip():
            threading.Thread(target=work, args=(line,), daemon=True).start()
    conn.close()


def serve():
    os.makedirs(os.path.dirname(SOCKET_PATH), exist_ok=True)
    try:
        os.unlink(SOCKET_PATH)
    except FileNotFoundError:
        pass
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(SOCKET_PATH)
    os.chmod(SOCKET_PATH, 0o600)
    server.listen(16)
    for hook in OPS.startup_hooks:
        hook()
    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve_connection, args=(conn,), daemon=True).start()


def attach():
    """Relay stdin -> socket and socket -> stdout until either side closes."""
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
    write_all(1, b'{"id": null, "event": "attached"}\n')

    def upstream():
        while True:
            chunk = os.read(0, 65536)
            if not chunk:
                break
            sock.sendall(chunk)
        sock.shutdown(socket.SHUT_WR)

    threading.Thread(target=upstream, daemon=True).start()
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        write_all(1, chunk)


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


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
