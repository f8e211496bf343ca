"""Who the agent is, and who the processes and file operations of its tools are.

In a container the agent runs as root with only CAP_SETUID, CAP_SETGID and CAP_KILL
(see docs/sandbox.md for the threat model). That identity is what keeps the code a tool
runs away from the agent: a uid-1000 process cannot signal, ptrace or open the /proc fds
of a uid-0 one, nor enter the root-only directory that holds the agent's socket. Tools
themselves must never act as root, so once the socket is bound:

* every file operation of the agent is made as the sandbox user: setfsuid/setfsgid on the
  serving thread, inherited by every thread it starts (credentials are per thread in Linux
  and a new thread copies its creator's). The kernel also clears the file-system
  capabilities from a thread's effective set when its fsuid leaves 0;
* every process any tool starts, today's or a future one's, drops to the sandbox user
  before it executes anything: supplementary groups emptied, then gid, then uid (real,
  effective and saved), which leaves it no capabilities; no-new-privileges, set on the
  container, keeps it that way across execve.

The executor asks for this with RUNBOX_TOOL_USER=uid:gid. Without it (the local backend,
the agent's own tests) the agent and its tools share the identity it was started with.
"""
import ctypes
import os
import subprocess

TOOL_USER_ENV = "RUNBOX_TOOL_USER"


class IdentityError(Exception):
    pass


def tool_user():
    """(uid, gid) tools must run as, or None when they share the agent's identity."""
    spec = os.environ.get(TOOL_USER_ENV, "")
    if not spec:
        return None
    uid, _, gid = spec.partition(":")
    try:
        ids = (int(uid), int(gid or uid))
    except ValueError:
        raise IdentityError("%s must be uid:gid, not %r" % (TOOL_USER_ENV, spec))
    if min(ids) <= 0:
        raise IdentityError("%s must name an unprivileged user, not %r" % (TOOL_USER_ENV, spec))
    return ids


def check_private_directory(path):
    """The socket's directory must be root's alone, or a tool could replace the socket."""
    st = os.lstat(path)
    if st.st_uid != 0 or st.st_mode & 0o077:
        raise IdentityError("%s must be owned by root with mode 0700 (uid %d, mode %o)"
                            % (path, st.st_uid, st.st_mode & 0o7777))


def act_as_tool_user(uid, gid):
    """From here on, this thread and every thread and process it starts act as uid:gid."""
    _set_fs_identity(uid, gid)
    _drop_children_to(uid, gid)


def _set_fs_identity(uid, gid):
    libc = ctypes.CDLL(None, use_errno=True)
    # setfsuid reports nothing on failure: a second call returns the value now in force.
    libc.setfsgid(gid)
    libc.setfsuid(uid)
    if libc.setfsgid(gid) != gid or libc.setfsuid(uid) != uid:
        raise IdentityError("could not switch file access to %d:%d (is CAP_SETUID/CAP_SETGID missing?)" % (uid, gid))


def _drop_children_to(uid, gid):
    base = subprocess.Popen

    class ToolUserPopen(base):
        """subprocess.Popen whose children start as the sandbox user unless told otherwise."""

        def __init__(self, *args, **kwargs):
            kwargs.setdefault("user", uid)
            kwargs.setdefault("group", gid)
            kwargs.setdefault("extra_groups", [])
            super().__init__(*args, **kwargs)

    # Replaced on the module so every tool's `subprocess.Popen(...)` (and subprocess.run)
    # goes through it: no tool can forget to drop its children's privileges.
    subprocess.Popen = ToolUserPopen
