"""Starting a child process that can read files only below the workspace (Landlock).

rg walks a folder by names: between listing a folder and opening a file in it, the file can
be swapped for a link to somewhere else, and rg would follow it. The agent's own walks are
immune (they open one component at a time with O_NOFOLLOW), but rg's are not. So rg is
started under a Landlock ruleset that lets it read files and list folders only below the
workspace, plus /usr (its own binary and shared libraries, which are the image's, not the
tenant's). A swapped-in link to /etc/passwd then fails with "Permission denied" and lands
in grep's footer like any other unreadable file.

Landlock restricts a thread and the processes it starts, never the rest of the agent, so
the spawn happens on a short-lived thread of its own. A kernel without Landlock (before
5.13, or with it disabled) starts the child unconfined; `available()` tells which.
"""
import ctypes
import os
import subprocess
import threading

# From <linux/landlock.h>; the syscall numbers are the same on every architecture.
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_ACCESS_READ_FILE = 1 << 2
_ACCESS_READ_DIR = 1 << 3
_READ = _ACCESS_READ_FILE | _ACCESS_READ_DIR
_PR_SET_NO_NEW_PRIVS = 38

# Read-only system trees a confined program needs to start (binary, loader, libraries).
SYSTEM_READ_ROOTS = ("/usr", "/etc/ld.so.cache", "/dev/null")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_abi = None


def available():
    """True when this kernel can confine a child's reads."""
    global _abi
    if _abi is None:
        _abi = max(0, _libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)))
    return _abi >= 1


def popen_reading_only(read_roots, *args, **kwargs):
    """subprocess.Popen(*args, **kwargs), whose child may read only below `read_roots` and
    the system's SYSTEM_READ_ROOTS. Raises OSError if the confinement could not be set up
    on a kernel that supports it: a search must never run unconfined by accident."""
    if not available():
        return subprocess.Popen(*args, **kwargs)
    outcome = {}

    def spawn():
        try:
            _restrict_current_thread(tuple(read_roots) + SYSTEM_READ_ROOTS)
            outcome["proc"] = subprocess.Popen(*args, **kwargs)
        except BaseException as e:  # handed to the caller's thread
            outcome["error"] = e

    thread = threading.Thread(target=spawn, name="runbox-confined-spawn", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["proc"]


def _restrict_current_thread(read_roots):
    attr = _RulesetAttr(_READ)
    ruleset = _check(_libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                                   ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        for root in read_roots:
            try:
                fd = os.open(root, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # e.g. no /etc/ld.so.cache: the loader searches its default folders
            try:
                # A file may only carry file rights; a folder gets both.
                access = _READ if os.path.isdir(root) else _ACCESS_READ_FILE
                rule = _PathBeneathAttr(access, fd)
                _check(_libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0)),
                       "landlock_add_rule(%s)" % root)
            finally:
                os.close(fd)
        # Required to restrict oneself without CAP_SYS_ADMIN; the sandbox sets it already.
        _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(_libc.syscall(_SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def _check(ret, what):
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, "%s failed: %s" % (what, os.strerror(err)))
    return ret
