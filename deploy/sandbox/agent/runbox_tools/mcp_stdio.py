"""Long-lived stdio processes (MCP servers) whose stdin and stdout the executor streams.

An MCP server over stdio speaks newline-delimited JSON-RPC on its stdin and stdout. The
gateway's SDK client reaches it through four ops, each an ordinary request on the agent's
channel:

  mcp_start {command, args, env, cwd, limits}  -> metadata {handle, pid}
  mcp_write {handle, data}                     -> metadata {accepted_bytes}
  mcp_read  {handle, after, wait_ms}           -> metadata {lines, last_seq, exited}
  mcp_stop  {handle}                           -> metadata {stderr}

Why this shape:

* The process is the agent's child, started like every tool process (runbox_identity.py
  drops it to the sandbox user) in a session of its own, so stopping it reaches its whole
  process group. Nothing of it runs outside the container, and it dies with the container.

* stdout is cut into lines here, in the container, and each complete line is numbered. A
  read returns the lines after `after` and forgets those up to it: the reader's cursor is
  its acknowledgement, so a read whose reply was lost can be asked again without losing a
  line. A read with nothing to return waits (at most wait_ms) on a condition that every
  new line and the process's end notify: the executor long-polls instead of spinning.

* Everything is bounded. A line longer than max_line_bytes is a broken protocol: the
  process is stopped and the end says why (the client fails its calls instead of waiting).
  Lines nobody has read yet take at most max_buffered_bytes: past it the reader stops
  reading the pipe, so the server blocks on its own writes (backpressure, not loss). A
  read returns at most MAX_READ_BYTES. stdin writes queue at most MAX_PENDING_STDIN_BYTES
  for a writer thread, so a server that never reads its stdin fails the write rather than
  a thread of the agent. stderr is always drained (a full pipe would block the server);
  only its last max_stderr_bytes are kept, for error reports. At most max_processes run
  at once, and one nobody read from or wrote to for idle_seconds is stopped.

* Stopping closes stdin first (the MCP way to ask a stdio server to exit), then sends the
  group SIGTERM after STOP_GRACE_S and SIGKILL after KILL_GRACE_S more, on a thread of its
  own: the caller is answered at once.
"""
import collections
import json
import os
import queue
import secrets
import signal
import subprocess
import threading
import time

from .containment import resolve, workspace_root
from .registry import OPS, ToolError
from .terminal import _signal_group  # a group signal that may find the group gone, as for terminal commands

MAX_READ_BYTES = 2 * 1024 * 1024
MAX_PENDING_STDIN_BYTES = 4 * 1024 * 1024
MAX_WAIT_MS = 30000
STOP_GRACE_S = 1.0
KILL_GRACE_S = 2.0
REAP_EVERY_S = 1.0
# An ended process's record is kept this long for its last read, then forgotten.
ENDED_KEPT_S = 60.0
CHUNK = 65536

DEFAULT_LIMITS = {
    "max_line_bytes": 1024 * 1024,
    "max_buffered_bytes": 8 * 1024 * 1024,
    "max_stderr_bytes": 64 * 1024,
    "max_processes": 8,
    "idle_seconds": 600,
}
# The environment a server starts with, under what the caller passes; npm_config_cache is
# added at start: the root filesystem is read-only, so npm's cache (npx) is the workspace's.
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/home/sandbox",
    "LANG": "C.UTF-8",
    "npm_config_update_notifier": "false",
    "npm_config_fund": "false",
    "npm_config_audit": "false",
}

_lock = threading.Lock()
_processes = {}  # handle -> _Process
_reaper_started = False


def _invalid(message):
    return ToolError(message, code="invalid_arguments")


class _Process:
    """One server: its pipes, the lines it wrote that nobody has read yet, and how it ended."""

    def __init__(self, handle, proc, limits):
        self.handle = handle
        self.proc = proc
        self.limits = limits
        self.changed = threading.Condition()
        self.lines = collections.deque()  # (seq, text, encoded size), oldest first
        self.buffered = 0
        self.last_seq = 0
        self.stderr = bytearray()
        self.stderr_dropped = 0
        self.stdout_done = False
        self.stderr_done = False
        self.exited = False
        self.end_reason = None  # set when the agent stopped it: why
        self.ended_at = None
        self.last_active = time.monotonic()
        self.readers = 0
        self.stdin_queue = queue.Queue()
        self.stdin_pending = 0
        self.stdin_error = None
        self.stopping = False

    # -- state, all under self.changed --------------------------------------------------

    def touch(self):
        self.last_active = time.monotonic()

    def ended(self):
        """Finished for a reader: the process has exited and both its outputs are drained
        (so the report has all of stderr)."""
        return self.stdout_done and self.stderr_done and self.exited

    def end_report(self):
        code = self.proc.returncode if self.exited else None
        if code is not None and code < 0:
            code = 128 - code
        reason = self.end_reason or ("the process exited with code %s" % code)
        return {"exit_code": code, "reason": reason, "stderr": self.stderr_text()}

    def stderr_text(self):
        text = bytes(self.stderr).decode("utf-8", "replace")
        if self.stderr_dropped:
            text = "[%d earlier bytes of stderr dropped]\n%s" % (self.stderr_dropped, text)
        return text


# ---------------------------------------------------------------------------------------
# Threads that move bytes

def _pump_stdout(p):
    """Cut stdout into numbered lines; stop the process if one is too long."""
    fd = p.proc.stdout.fileno()
    limit = p.limits["max_line_bytes"]
    partial = bytearray()
    try:
        while True:
            with p.changed:
                # Backpressure: wait while the reader is behind by max_buffered_bytes.
                while p.buffered >= p.limits["max_buffered_bytes"] and not p.stopping:
                    p.changed.wait()
            chunk = os.read(fd, CHUNK)
            if not chunk:
                break
            start = 0
            while True:
                newline = chunk.find(b"\n", start)
                piece = chunk[start:] if newline < 0 else chunk[start:newline]
                if len(partial) + len(piece) > limit:
                    _break_framing(p, "the server wrote a line of more than %d bytes on stdout; "
                                      "MCP stdio messages are one JSON object per line" % limit)
                    return
                partial += piece
                if newline < 0:
                    break
                _add_line(p, bytes(partial))
                partial.clear()
                start = newline + 1
    except OSError:
        pass
    finally:
        try:
            p.proc.stdout.close()
        except OSError:
            pass
        with p.changed:
            p.stdout_done = True
            lingering = not p.exited and not p.stopping
            _note_end(p)
        # A process that closed its stdout can no longer answer: it is stopped.
        if lingering:
            _stop_in_background(p)


def _watch_exit(p):
    """Waits for the server to exit. What it left in its process group goes with it, so
    nothing it started keeps its stdout open (which would hold the pipe's end back)."""
    p.proc.wait()
    _signal_group(p.proc.pid, signal.SIGKILL)
    with p.changed:
        p.exited = True
        _note_end(p)


def _note_end(p):
    """Under p.changed: wakes readers, and stamps the end once the process and its outputs are done."""
    if p.ended() and p.ended_at is None:
        p.ended_at = time.monotonic()
    p.changed.notify_all()


def _add_line(p, raw):
    text = raw.decode("utf-8", "replace").rstrip("\r")
    if not text.strip():
        return  # blank lines carry nothing (servers sometimes print them)
    size = len(json.dumps(text, ensure_ascii=False).encode("utf-8"))
    if size > p.limits["max_line_bytes"]:
        _break_framing(p, "the server wrote a line of %d bytes (escaped) on stdout, over the %d allowed"
                       % (size, p.limits["max_line_bytes"]))
        return
    with p.changed:
        p.last_seq += 1
        p.lines.append((p.last_seq, text, size))
        p.buffered += size
        p.changed.notify_all()


def _break_framing(p, why):
    with p.changed:
        if p.end_reason is None:
            p.end_reason = why
        p.changed.notify_all()
    _stop_in_background(p)


def _pump_stderr(p):
    """Always drained, so the server never blocks on it; only the tail is kept."""
    keep = p.limits["max_stderr_bytes"]
    try:
        while True:
            chunk = os.read(p.proc.stderr.fileno(), CHUNK)
            if not chunk:
                break
            with p.changed:
                p.stderr += chunk
                over = len(p.stderr) - keep
                if over > 0:
                    del p.stderr[:over]
                    p.stderr_dropped += over
    except OSError:
        pass
    finally:
        try:
            p.proc.stderr.close()
        except OSError:
            pass
        with p.changed:
            p.stderr_done = True
            _note_end(p)


def _pump_stdin(p):
    """Writes queued data in order; a broken pipe is remembered for the next write."""
    while True:
        data = p.stdin_queue.get()
        if data is None:
            break
        try:
            p.proc.stdin.write(data)
            p.proc.stdin.flush()
        except (OSError, ValueError) as e:
            with p.changed:
                first = p.stdin_error is None
                p.stdin_error = "the server's stdin is closed (%s)" % (getattr(e, "strerror", None) or e)
            # Usually the server is exiting; one that closed its stdin and runs on can never
            # be spoken to again, so it is stopped (its exit, if it comes first, is the report).
            if first:
                threading.Thread(target=_stop, args=(p, "the server closed its stdin but kept running"),
                                 daemon=True).start()
        with p.changed:
            p.stdin_pending -= len(data)
    try:
        p.proc.stdin.close()
    except (OSError, ValueError):
        pass


# ---------------------------------------------------------------------------------------
# Stopping and reaping

def _stop(p, reason_if_killed=None):
    """Close stdin, then SIGTERM the group, then SIGKILL it. `reason_if_killed` becomes the
    end's reason if the process had to be signalled (it did not exit by itself first)."""
    with p.changed:
        if p.stopping:
            return
        p.stopping = True
        p.changed.notify_all()  # a stdout reader waiting on backpressure goes on to EOF
    p.stdin_queue.put(None)
    pgid = p.proc.pid
    if _wait_exited(p, STOP_GRACE_S):
        return
    if reason_if_killed:
        with p.changed:
            p.end_reason = p.end_reason or reason_if_killed
    _signal_group(pgid, signal.SIGTERM)
    if not _wait_exited(p, KILL_GRACE_S):
        _signal_group(pgid, signal.SIGKILL)


def _wait_exited(p, timeout):
    with p.changed:
        return p.changed.wait_for(lambda: p.exited, timeout)


def _stop_in_background(p):
    threading.Thread(target=_stop, args=(p,), daemon=True, name="runbox-mcp-stop-%s" % p.handle).start()


def _reap_forever():
    global _reaper_started
    while True:
        time.sleep(REAP_EVERY_S)
        now = time.monotonic()
        with _lock:
            if not _processes:
                # Nothing left to watch: an idle agent wakes for nothing. The next
                # mcp_start (which registers its process first) starts a reaper again.
                _reaper_started = False
                return
            items = list(_processes.items())
        for handle, p in items:
            with p.changed:
                idle = p.readers == 0 and now - p.last_active > p.limits["idle_seconds"]
                ended_long_ago = p.ended_at is not None and now - p.ended_at > ENDED_KEPT_S
                if idle and p.end_reason is None and not p.stopping:
                    p.end_reason = "stopped after %d s without a read or write" % p.limits["idle_seconds"]
            if ended_long_ago:
                with _lock:
                    _processes.pop(handle, None)
            elif idle:
                _stop_in_background(p)


def _ensure_reaper():
    global _reaper_started
    with _lock:
        if _reaper_started:
            return
        _reaper_started = True
    threading.Thread(target=_reap_forever, daemon=True, name="runbox-mcp-reaper").start()


# ---------------------------------------------------------------------------------------
# Arguments

def _string(args, name, required=True, limit=32768):
    value = args.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise _invalid("%s must be a non-empty string" % name)
    if "\x00" in value or len(value) > limit:
        raise _invalid("%s must hold no NUL byte and at most %d characters" % (name, limit))
    return value


def _limits(args):
    given = args.get("limits") or {}
    if not isinstance(given, dict):
        raise _invalid("limits must be an object")
    limits = dict(DEFAULT_LIMITS)
    for name, value in given.items():
        if name not in limits or isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise _invalid("limits.%s must be a known limit and a positive integer" % name)
        limits[name] = value
    return limits


def _argv(args):
    command = _string(args, "command", limit=4096)
    rest = args.get("args") or []
    if not isinstance(rest, list) or len(rest) > 256:
        raise _invalid("args must be a list of at most 256 strings")
    for i, arg in enumerate(rest):
        if not isinstance(arg, str) or "\x00" in arg or len(arg) > 32768:
            raise _invalid("args[%d] must be a string with no NUL byte" % i)
    return [command] + rest


def _environment(args):
    env = dict(BASE_ENV, npm_config_cache=os.path.join(workspace_root(), ".npm"))
    given = args.get("env") or {}
    if not isinstance(given, dict) or len(given) > 128:
        raise _invalid("env must be an object of at most 128 variables")
    for name, value in given.items():
        if not name or "=" in name or "\x00" in name or not isinstance(value, str) or "\x00" in value:
            raise _invalid("env.%s must be a variable name with a string value, no NUL bytes" % name)
        env[name] = value
    # The local backend finds (and, with its session, kills) every process of a session by
    # this variable, which everything the agent starts must carry; the caller cannot drop it.
    if "RUNBOX_AGENT_SOCKET" in os.environ:
        env["RUNBOX_AGENT_SOCKET"] = os.environ["RUNBOX_AGENT_SOCKET"]
    return env


def _working_directory(args):
    """The server's working directory: inside the workspace, resolved like every file tool's path."""
    cwd = _string(args, "cwd", required=False, limit=4096)
    with resolve(cwd or ".") as r:
        if r.kind != "dir":
            raise ToolError("cwd %s is not a directory in the workspace" % r.display, code="not_a_directory")
        root = workspace_root()
        return root if r.canonical == "." else os.path.join(root, r.canonical)


def _process(args):
    handle = _string(args, "handle", limit=128)
    with _lock:
        p = _processes.get(handle)
    if p is None:
        raise ToolError("no MCP server process %s in this sandbox (it ended long ago, or the sandbox "
                        "was restarted)" % handle, code="not_found")
    return p


def _result(message, **metadata):
    return {"output": message, "metadata": metadata, "is_error": False}


# ---------------------------------------------------------------------------------------
# Ops

@OPS.register("mcp_start")
def mcp_start(args, request_id=None):
    argv = _argv(args)
    limits = _limits(args)
    env = _environment(args)
    cwd = _working_directory(args)
    with _lock:
        running = sum(1 for p in _processes.values() if p.ended_at is None)
        if running >= limits["max_processes"]:
            raise ToolError("this sandbox already runs %d MCP server processes, the most it may; stop "
                            "one first" % running, code="too_many_processes")
        handle = "mcp-" + secrets.token_hex(8)
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True, close_fds=True)
        except OSError as e:
            raise ToolError("could not start %s: %s" % (argv[0], e.strerror or e), code="spawn_failed")
        p = _Process(handle, proc, limits)
        _processes[handle] = p
    _ensure_reaper()
    for target, name in ((_pump_stdout, "out"), (_pump_stderr, "err"), (_pump_stdin, "in"), (_watch_exit, "exit")):
        threading.Thread(target=target, args=(p,), daemon=True, name="runbox-mcp-%s-%s" % (name, handle)).start()
    return _result("started %s (pid %d) as %s" % (argv[0], proc.pid, handle), handle=handle, pid=proc.pid)


@OPS.register("mcp_write")
def mcp_write(args, request_id=None):
    p = _process(args)
    data = args.get("data")
    if not isinstance(data, str) or not data:
        raise _invalid("data must be a non-empty string")
    raw = data.encode("utf-8", "surrogateescape")
    with p.changed:
        p.touch()
        if p.stopping or p.ended_at is not None:
            raise ToolError("the MCP server process has ended: %s" % p.end_report()["reason"], code="ended")
        if p.stdin_error:
            raise ToolError(p.stdin_error, code="ended")
        if p.stdin_pending + len(raw) > MAX_PENDING_STDIN_BYTES:
            raise ToolError("the server is not reading its stdin: %d bytes wait for it already"
                            % p.stdin_pending, code="stdin_full")
        p.stdin_pending += len(raw)
        p.stdin_queue.put(raw)
    return _result("queued %d bytes" % len(raw), accepted_bytes=len(raw))


@OPS.register("mcp_read")
def mcp_read(args, request_id=None):
    p = _process(args)
    after = args.get("after", 0)
    wait_ms = args.get("wait_ms", 0)
    for name, value in (("after", after), ("wait_ms", wait_ms)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _invalid("%s must be a non-negative integer" % name)
    deadline = time.monotonic() + min(wait_ms, MAX_WAIT_MS) / 1000.0
    with p.changed:
        p.readers += 1
        p.touch()
        try:
            _acknowledge(p, after)
            while not p.lines and not p.ended():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                p.changed.wait(left)
            lines, size = [], 0
            for seq, text, n in p.lines:
                if lines and size + n > MAX_READ_BYTES:
                    break
                lines.append(text)
                size += n
                last = seq
            last_seq = last if lines else after
            # The end is reported only with (or after) the last line.
            exited = p.end_report() if p.ended() and len(lines) == len(p.lines) else None
        finally:
            p.readers -= 1
            p.touch()
    return _result("%d lines" % len(lines), lines=lines, last_seq=last_seq, exited=exited)


def _acknowledge(p, after):
    """Forget the lines the reader has seen; called under p.changed."""
    dropped = 0
    while p.lines and p.lines[0][0] <= after:
        dropped += p.lines.popleft()[2]
    if dropped:
        p.buffered -= dropped
        p.changed.notify_all()  # the stdout pump may be waiting for room


@OPS.register("mcp_stop")
def mcp_stop(args, request_id=None):
    p = _process(args)
    with p.changed:
        if p.end_reason is None and not p.ended():
            p.end_reason = "stopped by the client"
        stderr = p.stderr_text()
    _stop_in_background(p)
    return _result("stopping %s" % p.handle, stderr=stderr)
