"""Starts the terminal's spare shells without forking the agent.

Why: a process a tool starts must drop to the sandbox user, and CPython 3.11 starts such a
process with fork() rather than vfork() (a vfork child may not change its identity). A fork
of the agent copies its page tables, and the agent then takes copy-on-write faults on every
page it writes: about a millisecond of CPU per terminal call on a virtual machine, more than
the rest of the agent's own work for the call.

So a small helper, started once as the sandbox user, makes them: `serve` below. It clones
itself with CLONE_PARENT, which makes the new process the agent's child, not its own, and
that copy becomes bash. The agent therefore waits for its shells as it waits for any child
(exit codes, pidfds, process groups unchanged), and the helper holds nothing: it may end
when idle, or be killed by a command (it runs as the sandbox user, like the commands, and
gives them nothing they do not have), and is started again when next needed.

Nothing the helper says is trusted: it is as reachable by the session's commands as they
are by each other. A reply is one bounded JSON object, and a pid it names is used only if it
is a live child of the agent owned by the sandbox user; anything else stops the helper and
the call starts its shell the ordinary way (terminal.py).

Wire format, one SOCK_SEQPACKET message each way:
  request  {"argv": [...], "env": {...}, "cwd": "..."} with one descriptor (SCM_RIGHTS),
           which the shell gets as descriptor 3 (stdin is /dev/null, stdout and stderr too)
  reply    {"pid": 123}; {"error": "...", "pid": 123} when the clone could not run the
           program (it has exited, and the agent reaps it); {"error": "..."} when no clone
           was made
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time

# The shell's descriptor for what the request passed (the spare's pipe).
PASSED_FD = 3
MAX_MESSAGE_BYTES = 256 * 1024
# The helper ends after this long without a request; the next spare starts it again.
IDLE_EXIT_S = 60.0
REPLY_TIMEOUT_S = 5.0
_CLONE_PARENT = 0x00008000
_SIGCHLD = 17
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}


class SpawnerUnavailable(OSError):
    """No shell was started; the caller starts its own (an OSError, as a failed spawn is)."""


class Spawner:
    """The agent's side: starts the helper on first use (and again after it ended)."""

    PASSED_FD = PASSED_FD

    def __init__(self, tool_user=None):
        self.tool_user = tool_user  # (uid, gid), or None: the helper keeps the agent's identity
        self.lock = threading.Lock()
        self.proc = None
        self.sock = None

    def spawn(self, argv, env, cwd, fd):
        """The pid of a new process, a child of this one, in a session of its own."""
        request = json.dumps({"argv": argv, "env": env, "cwd": cwd}).encode("utf-8", "surrogateescape")
        if len(request) > MAX_MESSAGE_BYTES:
            raise SpawnerUnavailable("the request is too large for the helper")
        with self.lock:
            for attempt in (1, 2):  # a helper that ended while idle is started again, once
                sock = self._connected()
                try:
                    socket.send_fds(sock, [request], [fd])
                    reply = sock.recv(4096)
                except (OSError, socket.timeout) as e:
                    self._stop()
                    if attempt == 2:
                        raise SpawnerUnavailable("the helper did not answer: %s" % e)
                    continue
                if not reply:
                    self._stop()
                    continue
                return self._checked_pid(reply)
        raise SpawnerUnavailable("the helper ended before it answered")

    def close(self):
        with self.lock:
            self._stop()

    def _checked_pid(self, reply):
        try:
            answer = json.loads(reply)
            pid = answer["pid"]
        except (ValueError, KeyError, TypeError):
            self._stop()
            raise SpawnerUnavailable("the helper's reply is not a pid: %r" % reply[:200])
        if not isinstance(pid, int) or isinstance(pid, bool) or not self._is_own_tool_child(pid):
            self._stop()
            raise SpawnerUnavailable("the helper named a process that is not a new shell of this agent")
        if "error" in answer:
            _reap_soon(pid)
            raise SpawnerUnavailable("the shell did not start: %s" % str(answer["error"])[:300])
        return pid

    def _is_own_tool_child(self, pid):
        if pid <= 1 or (self.proc is not None and pid == self.proc.pid):
            return False
        try:
            # /proc/<pid> belongs to the process's user (a shell is dumpable, so not root).
            owner = os.stat("/proc/%d" % pid).st_uid
            with open("/proc/%d/stat" % pid, "rb") as f:
                stat = f.read()
            # The command name in parentheses may itself hold spaces or parentheses.
            ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        uid = self.tool_user[0] if self.tool_user else os.getuid()
        return ppid == os.getpid() and owner == uid

    def _connected(self):
        if self.sock is None:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                ours.settimeout(REPLY_TIMEOUT_S)
                kwargs = {}
                if self.tool_user:
                    uid, gid = self.tool_user
                    kwargs = {"user": uid, "group": gid, "extra_groups": []}
                # -I -S: none of the sandbox user's site or environment reaches the helper.
                self.proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", os.path.abspath(__file__), "serve", str(theirs.fileno())],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    pass_fds=(theirs.fileno(),), start_new_session=True, cwd="/", **kwargs)
            except BaseException:
                ours.close()
                raise
            finally:
                theirs.close()
            self.sock = ours
        return self.sock

    def _stop(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=REPLY_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired):
                pass
            self.proc = None


def _reap_soon(pid, within_s=1.0):
    """Reaps a clone that could not run its program and is exiting. Bounded, since the
    helper's word is not trusted: a pid it named wrongly is left as it is."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] or time.monotonic() >= deadline:
                return
        except ChildProcessError:
            return
        time.sleep(0.01)


def serve(fd):
    """The helper: one request at a time, until the agent closes its end or it is idle."""
    import ctypes
    sys_clone = _SYS_CLONE.get(os.uname().machine)
    if sys_clone is None:
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    os.set_inheritable(fd, False)  # not into the shells
    sock = socket.socket(fileno=fd)
    sock.settimeout(IDLE_EXIT_S)
    devnull = os.open(os.devnull, os.O_RDWR)
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE_BYTES, 1)
        except (socket.timeout, OSError):
            return 0
        if not message:
            return 0
        try:
            request = json.loads(message.decode("utf-8", "surrogateescape"))
            argv, env, cwd = request["argv"], request["env"], request["cwd"]
            if len(fds) != 1:
                raise ValueError("one descriptor expected")
        except (ValueError, KeyError, TypeError) as e:
            reply = {"error": "bad request: %s" % e}
        else:
            reply = _start(libc, sys_clone, argv, env, cwd, fds[0], devnull)
        for passed in fds:
            os.close(passed)
        try:
            sock.send(json.dumps(reply).encode("ascii"))
        except OSError:
            return 0


def _start(libc, sys_clone, argv, env, cwd, fd, devnull):
    """Clones, and answers once the clone runs the program (or failed to), as Popen does:
    until then it may not have its session yet, and a kill of its process group would miss."""
    import ctypes
    started, failed = os.pipe()  # both close-on-exec: the clone's end closes as it executes
    pid = libc.syscall(sys_clone, _CLONE_PARENT | _SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        os.close(started)
        _become(argv, env, cwd, fd, devnull, failed)
    errno = ctypes.get_errno()
    os.close(failed)
    try:
        if pid < 0:
            return {"error": os.strerror(errno)}
        why = b""
        while True:
            chunk = os.read(started, 512)
            if not chunk:
                break
            why += chunk
    finally:
        os.close(started)
    # A clone that failed has exited; the agent, its parent, reaps it.
    return {"error": why.decode("utf-8", "replace"), "pid": pid} if why else {"pid": pid}


def _become(argv, env, cwd, fd, devnull, failed):
    """In the clone: a session of its own, the passed descriptor as 3, then the program."""
    try:
        os.setsid()
        os.chdir(cwd)
        for target in (0, 1, 2):
            os.dup2(devnull, target)
        if fd == PASSED_FD:
            os.set_inheritable(fd, True)
        else:
            os.dup2(fd, PASSED_FD)  # devnull may have been 3: it is on 0-2 by now
            os.close(fd)
        os.execve(argv[0], argv, env)
    except BaseException as e:
        try:
            os.write(failed, ("%s: %s" % (type(e).__name__, e)).encode("utf-8", "replace")[:512])
        except OSError:
            pass
    finally:
        os._exit(127)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        sys.exit(serve(int(sys.argv[2])))
    sys.stderr.write("usage: runbox_spawner.py serve FD\n")
    sys.exit(2)
