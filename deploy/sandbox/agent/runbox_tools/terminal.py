"""The `terminal` op (a shell command in a persistent session) plus `cancel`.

Design, and why:

* One process group per call. Each call is `bash --noprofile --norc` started with
  start_new_session=True, so its pid is also its process-group id. Timeouts, `cancel` and
  the model's own `kill -- -<pid>` then reach the command's children and grandchildren too,
  not just the shell. stdin is /dev/null: nothing can wait for input that never comes.

* Persistent shell state without a long-lived shell. A single interactive shell shared
  by concurrent calls would serialise them and could be wedged by one bad command, so
  every call is a fresh bash that first sources a saved state file and, from an EXIT trap,
  writes the state it ended with: shell variables (exported or not, minus bash's own),
  functions, aliases and the working directory. That is what makes `cd sub`, `export X=1`
  and `source venv/bin/activate` (whose `deactivate` needs unexported variables) carry
  over to the next call. Restoring and saving spawn nothing (no `$(...)`, no external
  command): the save unsets bash's own variables as the shell exits and writes one
  `declare -p`, `declare -f` and `alias -p`; a call after the first starts with an empty
  environment, which the saved one then fills. The trap writes a per-call file and the agent renames it over
  the state file (atomic; the last call to finish wins), and only for a call that finished
  inline: a call that became a background job, timed out or was cancelled saves nothing,
  so a job ending hours later cannot roll the session back to its old state. Shell options
  (`set -e`, `shopt`) and traps are not carried over, and a command that replaces the EXIT
  trap or ends in `exec` saves nothing. The state lives under RUNBOX_AGENT_STATE (default
  /tmp/runbox), outside the workspace the model sees.

* A spare shell waits for the next call. Starting bash (fork, exec, the dynamic linker,
  bash's own start-up) is most of what a short command costs, so one bash is started ahead
  of time, with the same argv, environment, working directory and session of its own that
  a call's shell gets, and blocks reading a pipe. A call hands it its job id there: it
  points its stdout and stderr at the call's files, resets SECONDS and only then sources the
  runner, so the saved state it restores is the one current when the call starts, exactly
  as for a shell started then. The call then starts the next spare. A spare is only used
  if it was made for the same workspace, state directory and starting environment (the
  first call's, or the empty one later calls get); any other, or one that is gone (a
  command may kill every process of its user), is dropped and the call starts its shell
  the ordinary way. While idle a spare costs one sleeping bash and two descriptors here.
  Where tools run as the sandbox user, spares are started by runbox_spawner.py, a helper
  of that user, rather than by a fork of the agent (about a millisecond of CPU each);
  each is still the agent's own child, waited for and killed as any call's shell.

* Output goes straight to files. stdout and stderr are opened onto hidden files
  <workspace>/.runbox/jobs/.<job_id>.stdout.txt and .stderr.txt before the process
  starts, and nothing is ever buffered in the agent. A call that outlives its wait window
  gets its directory <workspace>/.runbox/jobs/<job_id>/ then: the two files are renamed
  into it as stdout.txt and stderr.txt (same filesystem, so the command keeps writing
  them), next to command.sh and status.json. A call that ends inline never makes a
  directory, which saves a few file operations on every call. We read back at most about
  max_output_chars from each file (head kept, the rest only counted).

* The wait window never kills. The call waits min(max_wait_ms, timeout_seconds) in poll()
  on a pidfd of the command (readable the moment it exits; Popen.wait(timeout) polls with
  growing sleeps, and a thread per call blocked in waitpid costs a thread start on every
  call). Where pidfds are not available, a thread blocked in waitpid sets an Event instead.
  If the command ends first, its result is returned inline and its files removed. If the
  timeout comes first, the group gets SIGTERM, then SIGKILL after KILL_GRACE_S. If the
  wait window comes first, the command becomes a background job: a thread waits for it
  and records the end in status.json; background jobs are not subject to the timeout.
  A trailing `&` is stripped: backgrounding is what the wait window is for, and a shell
  that exits at once would return "exited" while the command runs on unobserved.

* Job directories are reclaimed 24 h after they finished, at startup and then hourly.
  A job whose status.json still says running but whose process is gone (the container
  restarted) is marked `lost` first, so it is reclaimed a day later too. The model follows
  a job by reading its status.json and output files (the handle names them).

* Where the agent is the container's PID 1 it inherits every orphaned process, so it
  reaps the zombies of terminal commands' children itself (see _reap_orphans).

Result layout (`output`), one `key: value` per line, then the streams:

    status: exited                  exited | timed_out | cancelled | running
    exit_code: 0                    a signal-killed command reports 128 + signal
    note: ...                       timed_out / cancelled / running only
    stdout:                         only if non-empty ("stdout so far:" when running)
    <text>
    stderr:                         only if non-empty
    <text>

A background result has no exit_code line; it lists job_id, pid, status_file,
stdout_file and stderr_file between the note and the streams. Trailing newlines of a
stream are dropped. A stream cut to fit ends with a line
`… N characters cut (max_output_chars=M)`; when both are long the budget is shared, so a
flood on stdout cannot hide stderr. A non-zero exit code is not an error (is_error false:
the model reads the code); a timeout or a cancellation is. metadata: exit_code, timed_out,
cancelled, background, job_id, pid, duration_ms, plus the three file paths if background.
"""
import json
import math
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import threading
import time
from collections import namedtuple
from datetime import datetime, timedelta, timezone

from .registry import OPS, ToolError

DEFAULT_TIMEOUT_S = 120
MAX_TIMEOUT_S = 900
DEFAULT_WAIT_MS = 10000
MIN_WAIT_MS = 250
MAX_WAIT_MS = 600000
KILL_GRACE_S = 2.0
DEFAULT_MAX_OUTPUT_CHARS = 30000
RECLAIM_AFTER = timedelta(hours=24)
RECLAIM_EVERY_S = 3600
BASH = shutil.which("bash") or "/bin/bash"  # looked up once: later calls pass no PATH
STATE_COMPLETE_MARK = b"# runbox: state complete\n"
JOB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
INLINE_OUTPUT_RE = re.compile(r"^\.([0-9]{8}-[0-9]{6}-[0-9a-f]+)\.(stdout|stderr)\.txt$")

# Every call runs `bash -c BOOTSTRAP bash <runner file> <saved state> <state to write>
# <command file>`. The command is run with eval on line 1 of the -c script, so bash reports
# a syntax error like any other error, with the command's own line numbers, and so `cd`,
# `export` and `source` act on this shell, whose state the EXIT trap then saves. RUNNER
# lives in a file rather than in argv so `ps` shows a short command line.
BOOTSTRAP = '. "$1"; eval "$__runbox_cmd"'

# Nothing in the runner spawns a process (no $(...), pipes or external commands) and it
# loops over nothing: each fork, or a loop over every variable, costs about a millisecond
# on every call. The saved state is three builtin dumps behind one redirection.
RUNNER = r"""# runbox terminal runner: restores the session's shell state, saves it on exit.
__runbox_saved=$2 __runbox_pending=$3
IFS= builtin read -r -d '' __runbox_cmd <"$4"
set --
shopt -s expand_aliases

# Runs as the shell exits, so bash's own variables (restoring them would be refused, or
# would freeze RANDOM, SECONDS and the like) and ours can be unset first, and one
# `declare -p` holds just the session's. The few read-only ones that survive the unset
# are refused, harmlessly, on restore. `declare -f` includes the runner's functions;
# restoring those redefines them as they are. $1: the file to write, $2: the directory.
__runbox_save_state() {
  builtin unset -v "${!BASH@}" "${!COMP_@}" "${!__runbox_@}" BASHOPTS SHELLOPTS SHLVL \
    PWD IFS _ COLUMNS LINES DIRSTACK EUID UID PPID GROUPS FUNCNAME HISTCMD LINENO \
    OPTARG OPTIND OPTERR PIPESTATUS RANDOM SRANDOM SECONDS EPOCHREALTIME EPOCHSECONDS \
    PS1 PS2 PS3 PS4 HOSTNAME HOSTTYPE MACHTYPE OSTYPE 2>/dev/null
  {
    builtin declare -p
    builtin declare -f
    builtin alias -p
    builtin printf '__runbox_cwd=%q\n' "$2"
    builtin echo '# runbox: state complete'
  } >"$1" 2>/dev/null
}

# Options the command set (errexit, xtrace, nounset) must not break or litter the save;
# `exit "$1"` keeps the command's own exit status. `builtin` everywhere from here on:
# the session may have defined functions named cd, exit, set (rvm and others do).
__runbox_exit() {
  { builtin set +xeu; } 2>/dev/null
  __runbox_save_state "$__runbox_pending" "$PWD"
  builtin exit "$1"
}

if [[ -f $__runbox_saved ]]; then
  # The agent started this shell with an empty environment: the saved variables replace
  # its own, so `unset X` carries over. These are the defaults bash made up instead.
  builtin unset -v PATH SHELL TERM OLDPWD
  # Sourced at top level, not in a function, so `declare` makes globals.
  builtin . "$__runbox_saved" 2>/dev/null
  builtin cd -- "$__runbox_cwd" 2>/dev/null \
    || builtin echo "runbox: the previous working directory $__runbox_cwd is gone; now in $PWD" >&2
fi
# The braces send xtrace's trace of the trap itself to /dev/null.
builtin trap '{ __runbox_exit "$?"; } 2>/dev/null' EXIT
"""


# A spare shell runs `bash -c BOOTSTRAP bash <this file> <pipe fd> <runner file> <saved state>
# <pending directory> <jobs directory>`. Until its call comes it reads the pipe; the line it
# gets is the call's job id, from which the call's file names follow (as _Call makes them).
# Sourced with no arguments, so its `set --` (and the runner's) are the shell's own.
SPARE = r"""# runbox terminal spare: a shell started before its call, waiting for the call's job id.
__runbox_go=$2
IFS= read -r -u "$__runbox_go" __runbox_job || exit 0
exec {__runbox_go}<&- >"$6/.$__runbox_job.stdout.txt" 2>"$6/.$__runbox_job.stderr.txt"
set -- "$3" "$4" "$5/$__runbox_job.sh" "$5/$__runbox_job.cmd"
unset -v __runbox_go __runbox_job
SECONDS=0
. "$1"
"""


class _Call:
    """One terminal call, from spawn until its result (inline) or its end (background)."""

    def __init__(self, job_id, command, request_id):
        self.job_id = job_id
        self.command = command
        self.request_id = request_id
        self.dir = os.path.join(_jobs_dir(), job_id)
        pending = os.path.join(_state_dir(), "pending", job_id)
        self.pending_state = pending + ".sh"
        self.command_file = pending + ".cmd"
        # Output goes to hidden files beside the job directories; only a call that becomes a
        # background job gets its directory, and they are moved into it (same filesystem,
        # so the running command keeps writing the same files).
        self.files = {name: os.path.join(_jobs_dir(), ".%s.%s.txt" % (job_id, name))
                      for name in ("stdout", "stderr")}
        self.proc = None
        # Readable once the command has exited; None where pidfd_open is not available
        # (then _wait_exit's thread sets `exited`). Only the thread that owns the call waits
        # on it: the request's, then a background job's watcher.
        self.pidfd = None
        self.exited = threading.Event()
        self.status = {}
        self.started = time.monotonic()
        self.started_at = _now_iso()
        self.background = False
        self.finished = False
        self.cancelled = False
        self.timed_out = False

    def path(self, name):
        return os.path.join(self.dir, name)

    def wait(self, timeout=None):
        """True once the process has exited (and been waited for)."""
        if self.pidfd is None or self.exited.is_set():
            return self.exited.wait(timeout)
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        if not poller.poll(None if timeout is None else max(0, int(math.ceil(timeout * 1000)))):
            return False
        self.proc.wait()
        self.exited.set()
        return True

    def close(self):
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


_lock = threading.Lock()
_calls = {}  # job_id -> _Call, for every call this agent is running or watching
# Cancels that arrived before their call: request id -> time.monotonic() of the cancel.
# Requests run in threads of their own, so a cancel sent right after its call may be
# handled first; the call then finds its cancel here and never starts.
_early_cancels = {}
EARLY_CANCEL_TTL_S = 600
EARLY_CANCEL_MAX = 1000
_reclaimer_started = False


# ---------------------------------------------------------------------------------------
# Locations. Read from the environment on every use, not at import: tests (and the agent)
# may point them elsewhere after this module was imported.

def _workspace():
    return os.environ.get("RUNBOX_WORKSPACE", "/workspace")


def _state_dir():
    return os.environ.get("RUNBOX_AGENT_STATE", "/tmp/runbox")


def _jobs_dir():
    return os.path.join(_workspace(), ".runbox", "jobs")


def _state_file():
    return os.path.join(_state_dir(), "shell_state.sh")


def _now_iso():
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ---------------------------------------------------------------------------------------
# Arguments

def _invalid(message):
    return ToolError(message, code="invalid_arguments")


def _number(args, name, default):
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise _invalid("%s must be a number" % name)
    return value


def _strip_trailing_ampersand(command):
    # `a &&`, `|&`, `>&` and an escaped `\&` are not a trailing background operator.
    return re.sub(r"(?<![&|>\\])&\s*$", "", command.rstrip()).rstrip()


def _parse_args(args):
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        raise _invalid("command is required and must be a non-empty string")
    command = _strip_trailing_ampersand(command)
    if not command:
        raise _invalid("command is empty once its trailing `&` is removed")
    timeout_s = _number(args, "timeout_seconds", DEFAULT_TIMEOUT_S)
    if not 1 <= timeout_s <= MAX_TIMEOUT_S:
        raise _invalid("timeout_seconds must be between 1 and %d" % MAX_TIMEOUT_S)
    wait_ms = min(max(_number(args, "max_wait_ms", DEFAULT_WAIT_MS), MIN_WAIT_MS), MAX_WAIT_MS)
    return command, timeout_s, wait_ms / 1000.0


def _output_limit(args):
    # The same budget the server cuts the whole output to.
    limit = args.get("max_output_chars", DEFAULT_MAX_OUTPUT_CHARS)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        return DEFAULT_MAX_OUTPUT_CHARS
    return limit


# ---------------------------------------------------------------------------------------
# Processes and process groups

_ProcStat = namedtuple("_ProcStat", "state ppid pgrp session starttime")


def _proc_stat(pid):
    """A few fields of /proc/<pid>/stat, or None if there is no such process."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read().decode("ascii", "replace")
    except (OSError, ValueError):
        return None
    # The command name in parentheses may itself hold spaces or parentheses.
    fields = data[data.rfind(")") + 2:].split()
    return _ProcStat(fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))


def _all_procs():
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _proc_stat(int(name))
            if stat:
                yield int(name), stat


def _alive(pid):
    """A zombie counts as dead: where the agent is PID 1 orphans are never reaped."""
    if not os.path.isdir("/proc/self"):
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
    stat = _proc_stat(pid)
    return stat is not None and stat.state != "Z"


def _group_alive(pgid):
    if not os.path.isdir("/proc/self"):
        try:
            os.killpg(pgid, 0)
            return True
        except ProcessLookupError:
            return False
    return any(stat.pgrp == pgid and stat.state != "Z" for _, stat in _all_procs())


def _reap_orphans():
    """Reap the zombies of terminal commands' children that were reparented to the agent.

    Only needed where the agent is PID 1, the container's init, which inherits every
    orphan. Only zombies outside the agent's session that are not session leaders: those
    descend from a terminal call (each call is a session of its own) and no op waits for
    them. Popen children that some op will still wait() for are session leaders or share
    the agent's session, and are left alone so their exit codes are not stolen.
    """
    if os.getpid() != 1 or not os.path.isdir("/proc/self"):
        return
    own_session = os.getsid(0)
    for pid, stat in list(_all_procs()):
        if stat.state == "Z" and stat.ppid == 1 and stat.session not in (pid, own_session):
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def _signal_group(pgid, sig):
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _finish_kill(pgid, grace=KILL_GRACE_S):
    """After a SIGTERM, give the group `grace` seconds, then SIGKILL whatever is left."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(0.02)
    _signal_group(pgid, signal.SIGKILL)


def _kill_group(pgid):
    if _signal_group(pgid, signal.SIGTERM):
        _finish_kill(pgid)


def _kill_group_in_background(pgid):
    """SIGTERM now; the escalation to SIGKILL runs on its own thread so the caller answers at once."""
    if not _signal_group(pgid, signal.SIGTERM):
        return False
    threading.Thread(target=_finish_kill, args=(pgid,), daemon=True).start()
    return True


def _exit_code(returncode):
    if returncode is None:
        return None
    return 128 - returncode if returncode < 0 else returncode


# ---------------------------------------------------------------------------------------
# Job directories and status.json

def _new_job_id():
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def _write_json_atomic(path, data):
    # Readers (the model's `cat`, read_file) must never see a half-written file.
    tmp = "%s.%d.tmp" % (path, threading.get_ident())
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def _read_status(job_dir):
    try:
        with open(os.path.join(job_dir, "status.json"), encoding="utf-8") as f:
            status = json.load(f)
    except (OSError, ValueError):
        return None
    return status if isinstance(status, dict) else None


def _update_status(call, **changes):
    call.status.update(changes)
    try:
        _write_json_atomic(call.path("status.json"), call.status)
    except OSError:
        pass  # the model deleted the job directory; nothing left to record into


def _prepare(call):
    os.makedirs(_jobs_dir(), exist_ok=True)
    os.makedirs(os.path.dirname(call.pending_state), mode=0o700, exist_ok=True)
    with open(call.command_file, "w", encoding="utf-8") as f:
        f.write(call.command)


def _environment():
    """The first call's environment; later ones start empty and source the saved one."""
    if os.path.exists(_state_file()):
        return {}
    return dict(os.environ, TERM="dumb", PAGER="cat", GIT_PAGER="cat")


def _spawn(call):
    env = _environment()
    # Made by the agent even for a spare shell, which only truncates them: a full or
    # read-only workspace fails the call here, as "could not start the command".
    with open(call.files["stdout"], "wb") as out, open(call.files["stderr"], "wb") as err:
        if not _SPARES.hand_over(call, _spare_key(env)):
            argv = [BASH, "--noprofile", "--norc", "-c", BOOTSTRAP, "bash",
                    _runner_file(), _state_file(), call.pending_state, call.command_file]
            call.proc = subprocess.Popen(
                argv, cwd=_workspace(), env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True, close_fds=True)
            call.pidfd = _open_pidfd(call.proc.pid)
    if call.pidfd is None:
        # No pidfds here (an old kernel, or a seccomp profile without pidfd_open): a thread
        # blocked in waitpid wakes the moment the command exits.
        threading.Thread(target=_wait_exit, args=(call,), daemon=True,
                         name="runbox-wait-%s" % call.job_id).start()


def _open_pidfd(pid):
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _spare_key(env):
    """What a spare must have been started with to serve a call now."""
    return (_workspace(), _state_dir(), BASH, tuple(sorted(env.items())))


class _Spare:
    """One bash started ahead of its call (see the module docstring), and its pipe. Started
    by `spawner` (runbox_spawner.py) when there is one, and by a fork of the agent otherwise
    or when the spawner fails."""

    def __init__(self, key, spawner=None):
        self.key = key
        read_end, self.go = os.pipe()
        try:
            self.proc = self._spawned(spawner, read_end) or self._forked(read_end)
        except BaseException:
            os.close(self.go)
            raise
        finally:
            os.close(read_end)
        self.pidfd = _open_pidfd(self.proc.pid)

    def _argv(self, fd):
        workspace, state_dir, bash, _env = self.key
        return [bash, "--noprofile", "--norc", "-c", BOOTSTRAP, "bash",
                _script_file("spare.sh", SPARE), str(fd), _runner_file(),
                os.path.join(state_dir, "shell_state.sh"), os.path.join(state_dir, "pending"),
                os.path.join(workspace, ".runbox", "jobs")]

    def _spawned(self, spawner, read_end):
        if spawner is None:
            return None
        workspace, _state_dir, _bash, env = self.key
        try:
            pid = spawner.spawn(self._argv(spawner.PASSED_FD), dict(env), workspace, read_end)
        except OSError:
            return None  # the helper is gone or misbehaved (it was stopped): fork this once
        return _Child(pid)

    def _forked(self, read_end):
        workspace, _state_dir, _bash, env = self.key
        return subprocess.Popen(
            self._argv(read_end), cwd=workspace, env=dict(env), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            close_fds=True, pass_fds=(read_end,))

    def start(self, job_id):
        """Sends the job id; False when the shell is gone (the pipe has no reader)."""
        go, self.go = self.go, None
        try:
            os.write(go, (job_id + "\n").encode("ascii"))
            return True
        except OSError:
            return False
        finally:
            os.close(go)

    def discard(self):
        """Not used after all: killed and reaped (rare: only when the starting point changed
        or the shell was killed, so the short wait is no burden)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass  # stuck in the kernel; subprocess reaps it with a later Popen
        if self.go is not None:
            os.close(self.go)
            self.go = None
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class _Child:
    """A child of the agent that the spawner started: waited for as a Popen is."""

    def __init__(self, pid):
        self.pid = pid
        self.returncode = None

    def wait(self, timeout=None):
        if self.returncode is not None:
            return self.returncode
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                pid, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            except ChildProcessError:
                return None  # reaped elsewhere: its exit code is unknown
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                return self.returncode
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(0.005)


class _SpareShells:
    """Keeps one spare shell ready. The next one is started after the reply of the call
    that took the last one has gone out (an after-reply hook, on that call's thread): a
    spawn is Python work holding the interpreter lock, which would otherwise hold up the
    call it overlaps for as long."""

    def __init__(self):
        self.lock = threading.Lock()
        self.spare = None
        self.wanted = False  # set by the first terminal call: no spare before then
        self.refilling = False
        # Starts spares without forking the agent (runbox_spawner.py), once the agent has
        # one: only worth it where tools run as another user (see start_spares_with).
        self.spawner = None

    def hand_over(self, call, key):
        """Starts `call` in the spare if one fits; False if the caller must spawn its own."""
        with self.lock:
            spare, self.spare = self.spare, None
            self.wanted = True
        if spare is None:
            return False
        if spare.key != key:
            spare.discard()
            return False
        call.proc, call.pidfd = spare.proc, spare.pidfd
        if spare.start(call.job_id):
            return True
        spare.discard()
        call.proc = call.pidfd = None
        return False

    def refill(self):
        """Starts a spare, made for what the next call would start with now, if there is none."""
        with self.lock:
            if self.spare is not None or not self.wanted or self.refilling:
                return
            self.refilling = True
        spare = None
        try:
            spare = _Spare(_spare_key(_environment()), self.spawner)
        except OSError:
            pass  # out of processes or space: calls spawn their own meanwhile
        finally:
            with self.lock:
                self.refilling = False
                if spare is not None and self.spare is None:
                    self.spare, spare = spare, None
        if spare is not None:
            spare.discard()

    def drop(self):
        """Discards the spare, if any (the next call starts its own shell)."""
        with self.lock:
            spare, self.spare = self.spare, None
        if spare is not None:
            spare.discard()


_SPARES = _SpareShells()
OPS.after_reply(_SPARES.refill)


def start_spares_with(spawner):
    """Spare shells are started by `spawner` from now on (runbox_spawner.Spawner). The agent
    does this where tools run as the sandbox user: such a process is otherwise a fork of
    the whole agent, while one of its own identity is a vfork and gains nothing."""
    _SPARES.drop()
    _SPARES.spawner = spawner


def _wait_exit(call):
    call.proc.wait()
    call.exited.set()


def _start(command, request_id):
    """The running call, or None when a cancel for its request id came first."""
    call = _Call(_new_job_id(), command, request_id)
    # Registered before the spawn so the reclaimer never takes its files or state file.
    with _lock:
        if request_id is not None and _early_cancels.pop(request_id, None) is not None:
            return None
        _calls[call.job_id] = call
    try:
        _prepare(call)
        _spawn(call)
    except OSError as e:
        _forget(call)
        _discard_state(call)
        _remove_call_files(call)
        raise ToolError("could not start the command: %s" % e, code="spawn_failed")
    with _lock:
        cancelled_during_spawn = call.cancelled
    if cancelled_during_spawn:
        _kill_group_in_background(call.proc.pid)
    return call


def _remember_early_cancel(target):
    """Called under _lock. Old entries go first, so a flood of cancels cannot grow it without end;
    the dict is in arrival order, so the pruning stops at the first young entry."""
    now = time.monotonic()
    while _early_cancels:
        oldest, at = next(iter(_early_cancels.items()))
        if now - at <= EARLY_CANCEL_TTL_S and len(_early_cancels) < EARLY_CANCEL_MAX:
            break
        del _early_cancels[oldest]
    _early_cancels[target] = now


def _remove_call_files(call):
    for path in call.files.values():
        try:
            os.unlink(path)
        except OSError:
            pass


def _promote(call):
    """Give a call that outlives its wait window its job directory and status.json."""
    try:
        os.makedirs(call.dir, exist_ok=True)
        for name, path in list(call.files.items()):
            moved = call.path(name + ".txt")
            os.replace(path, moved)
            call.files[name] = moved
        with open(call.path("command.sh"), "w", encoding="utf-8") as f:
            f.write(call.command + "\n")
    except OSError:
        pass  # the workspace is full or read-only: the output stays where it is
    stat = _proc_stat(call.proc.pid)
    call.status = {
        "job_id": call.job_id, "status": "running", "pid": call.proc.pid,
        "command": call.command, "started_at": call.started_at, "finished_at": None,
        "exit_code": None, "pid_start_ticks": stat.starttime if stat else None,
    }
    _update_status(call)


def _forget(call):
    with _lock:
        _calls.pop(call.job_id, None)
    call.close()


# ---------------------------------------------------------------------------------------
# Shell state

def _runner_file():
    """The runner script in the state directory, (re)written when missing or changed."""
    return _script_file("runner.sh", RUNNER)


# path -> (inode, mtime, size) of a script file as last read or written with the right text.
_scripts_seen = {}


def _script_file(name, text):
    path = os.path.join(_state_dir(), name)
    try:
        st = os.stat(path)
        # The same file, untouched since it was found right: no need to read it again.
        if _scripts_seen.get(path) == (st.st_ino, st.st_mtime_ns, st.st_size):
            return path
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                _scripts_seen[path] = (st.st_ino, st.st_mtime_ns, st.st_size)
                return path
    except OSError:
        pass
    os.makedirs(_state_dir(), mode=0o700, exist_ok=True)
    tmp = "%s.%d.tmp" % (path, threading.get_ident())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    st = os.stat(tmp)
    os.replace(tmp, path)
    _scripts_seen[path] = (st.st_ino, st.st_mtime_ns, st.st_size)
    return path


def _adopt_state(call):
    """Make the state this call ended with the session's, if it was written completely."""
    try:
        with open(call.pending_state, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - len(STATE_COMPLETE_MARK)))
            complete = f.read() == STATE_COMPLETE_MARK
        if complete:
            os.replace(call.pending_state, _state_file())
    except OSError:
        pass
    _discard_state(call)


def _discard_state(call):
    """Drop the call's pending state and its command file (read by bash as it starts)."""
    for path in (call.pending_state, call.command_file):
        try:
            os.unlink(path)
        except OSError:
            pass


# ---------------------------------------------------------------------------------------
# Reading output back without holding more than the budget

def _read_head(path, cap):
    """(first `cap` chars, total chars). The rest is counted in chunks, never held."""
    try:
        f = open(path, encoding="utf-8", errors="replace", newline="")
    except OSError:
        return "", 0
    with f:
        head = f.read(cap)
        total = len(head)
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            total += len(chunk)
    return head, total


def _split_budget(out_len, err_len, budget):
    """Share the budget so a flood on one stream cannot hide the other entirely."""
    if out_len + err_len <= budget:
        return out_len, err_len
    half = budget // 2
    if err_len <= half:
        return budget - err_len, err_len
    if out_len <= half:
        return out_len, budget - out_len
    return half, budget - half


def _cut_note(cut, limit):
    return "\n… %d characters cut (max_output_chars=%d)" % (cut, limit)


def _streams(call, limit, header_len, suffix=""):
    """The stdout/stderr sections of a result, cut to what is left of `limit`."""
    budget = max(limit - header_len - 120, limit // 2)
    out, out_total = _read_head(call.files["stdout"], budget)
    err, err_total = _read_head(call.files["stderr"], budget)
    out_keep, err_keep = _split_budget(out_total, err_total, budget)
    parts = []
    for name, text, total, keep in (("stdout", out, out_total, out_keep),
                                    ("stderr", err, err_total, err_keep)):
        if total:
            body = text[:keep].rstrip("\n")
            if total > keep:
                body += _cut_note(total - keep, limit)
            parts.append("%s%s:\n%s" % (name, suffix, body))
    return parts


# ---------------------------------------------------------------------------------------
# Results

def _result(call, lines, limit, is_error, suffix="", **metadata):
    header = "\n".join(lines)
    output = "\n".join([header] + _streams(call, limit, len(header), suffix))
    metadata.setdefault("job_id", call.job_id)
    metadata.setdefault("pid", call.proc.pid)
    metadata["duration_ms"] = int((time.monotonic() - call.started) * 1000)
    return {"output": output, "metadata": metadata, "is_error": is_error}


def _finished_result(call, outcome, limit, timeout_s):
    code = _exit_code(call.proc.returncode)
    code_text = "unknown" if code is None else str(code)
    lines = ["status: %s" % outcome, "exit_code: %s" % code_text]
    if outcome == "timed_out":
        lines.append("note: timed out after %g seconds; the command and its child processes "
                     "were killed (output so far below)" % timeout_s)
    elif outcome == "cancelled":
        lines.append("note: cancelled; the command and its child processes were killed")
    return _result(call, lines, limit, is_error=outcome != "exited", exit_code=code,
                   timed_out=outcome == "timed_out", cancelled=outcome == "cancelled",
                   background=False)


def _background_result(call, limit, wait_s):
    pid = call.proc.pid
    files = {"status_file": call.path("status.json"), "stdout_file": call.files["stdout"],
             "stderr_file": call.files["stderr"]}
    lines = [
        "status: running",
        "note: still running after %d ms, so it goes on as a background job (not killed). "
        "Its files keep being written; stop it with: kill -- -%d" % (wait_s * 1000, pid),
        "job_id: %s" % call.job_id,
        "pid: %d" % pid,
    ] + ["%s: %s" % item for item in files.items()]
    return _result(call, lines, limit, is_error=False, suffix=" so far", exit_code=None,
                   timed_out=False, cancelled=False, background=True, **files)


# ---------------------------------------------------------------------------------------
# Waiting

def _wait(call, timeout_s, wait_s):
    """Wait for the call; return "exited", "timed_out", "cancelled" or "background"."""
    if not call.wait(min(timeout_s, wait_s)):
        with _lock:
            # Under the lock so a cancel cannot slip in between the check and the change.
            if not call.cancelled and timeout_s > wait_s:
                call.background = True
                return "background"
        if not call.cancelled:
            call.timed_out = True
            _kill_group(call.proc.pid)
        # A cancelled call is being killed by `cancel`; this only waits for that. One that
        # outlives even SIGKILL (uninterruptible I/O) reports its exit code as unknown.
        call.wait(KILL_GRACE_S + 5)
    with _lock:
        call.finished = True
        if call.cancelled:
            return "cancelled"
    return "timed_out" if call.timed_out else "exited"


def _watch(call):
    """Background job: record its end in status.json once it exits."""
    call.wait()
    _update_status(call, status="exited", exit_code=_exit_code(call.proc.returncode),
                   finished_at=_now_iso())
    # Its state is not adopted: newer calls have moved the session on since.
    _discard_state(call)
    _forget(call)
    _reap_orphans()


def _go_background(call):
    threading.Thread(target=_watch, args=(call,), daemon=True,
                     name="runbox-job-%s" % call.job_id).start()


def _finish_inline(call, outcome):
    if outcome == "exited":
        _adopt_state(call)
    else:
        _discard_state(call)
    _remove_call_files(call)
    _forget(call)
    _reap_orphans()


# ---------------------------------------------------------------------------------------
# Ops

@OPS.register("terminal")
def terminal(args, request_id=None):
    command, timeout_s, wait_s = _parse_args(args)
    limit = _output_limit(args)
    call = _start(command, request_id)
    if call is None:
        return {"output": "status: cancelled\nnote: cancelled before it started; nothing ran",
                "metadata": {"exit_code": None, "timed_out": False, "cancelled": True, "background": False},
                "is_error": True}
    outcome = _wait(call, timeout_s, wait_s)
    if outcome == "background":
        _promote(call)
        result = _background_result(call, limit, wait_s)
        _go_background(call)
        return result
    # Read the output before its files go away.
    result = _finished_result(call, outcome, limit, timeout_s)
    _finish_inline(call, outcome)
    return result


@OPS.register("cancel")
def cancel(args, request_id=None):
    """Kill the process group of the in-flight terminal call whose request id is target_id."""
    target = args.get("target_id")
    if not isinstance(target, str) or not target:
        raise _invalid("target_id is required and must be a non-empty string")
    with _lock:
        call = next((c for c in _calls.values() if c.request_id == target
                     and not c.background and not c.finished), None)
        if call:
            call.cancelled = True
            spawning = call.proc is None  # _start kills it the moment the spawn returns
        else:
            _remember_early_cancel(target)
    if call is None:
        return {"output": "no running terminal call %s; it will not start if it arrives later" % target,
                "metadata": {"target_id": target, "killed": False, "pending": True}, "is_error": False}
    if spawning:
        return {"output": "cancelled terminal call %s while it was starting" % target,
                "metadata": {"target_id": target, "killed": True}, "is_error": False}
    killed = _kill_group_in_background(call.proc.pid)
    output = ("cancelled terminal call %s (process group %d)" % (target, call.proc.pid)
              if killed else "no running terminal call %s" % target)
    return {"output": output, "metadata": {"target_id": target, "killed": killed},
            "is_error": False}


def _tracked(job_id):
    with _lock:
        return job_id in _calls


def _is_lost(status):
    """A job that says running but whose process is gone, or is some other process now."""
    pid = status.get("pid")
    if not isinstance(pid, int) or not _alive(pid):
        return True
    stat = _proc_stat(pid)
    ticks = status.get("pid_start_ticks")
    return bool(stat and isinstance(ticks, int) and stat.starttime != ticks)


def _refresh(job_dir, job_id):
    """status.json of a job, marking it lost first if its process vanished unrecorded."""
    status = _read_status(job_dir)
    if status and status.get("status") == "running" and not _tracked(job_id) and _is_lost(status):
        status.update(status="lost", finished_at=_now_iso())
        try:
            _write_json_atomic(os.path.join(job_dir, "status.json"), status)
        except OSError:
            pass
    return status


# ---------------------------------------------------------------------------------------
# Reclaiming finished jobs

def _finished_long_ago(status, now):
    try:
        finished = datetime.fromisoformat(status["finished_at"])
    except (KeyError, TypeError, ValueError):
        return False
    return now - finished > RECLAIM_AFTER


def _reclaim_one(job_dir, job_id, now):
    if _tracked(job_id):
        return  # running, or finishing right now
    status = _refresh(job_dir, job_id)
    if status is None:
        # No status.json: left over from a crash between mkdir and spawn.
        old = time.time() - os.path.getmtime(job_dir) > RECLAIM_AFTER.total_seconds()
        if old:
            shutil.rmtree(job_dir, ignore_errors=True)
    elif status.get("status") != "running" and _finished_long_ago(status, now):
        shutil.rmtree(job_dir, ignore_errors=True)


def _drop_stale_output(path, job_id):
    # .<job_id>.stdout.txt of an inline call that an agent before this one never finished.
    if not _tracked(job_id):
        try:
            os.unlink(path)
        except OSError:
            pass


def _drop_stale_pending_states():
    # Left by calls of an agent that is gone; ours are tracked until used or dropped.
    pending = os.path.join(_state_dir(), "pending")
    for name in os.listdir(pending) if os.path.isdir(pending) else ():
        if not _tracked(name.partition(".")[0]):
            try:
                os.unlink(os.path.join(pending, name))
            except OSError:
                pass


def reclaim_jobs():
    """Remove job directories finished more than 24 h ago; mark vanished ones lost."""
    jobs = _jobs_dir()
    now = datetime.now(timezone.utc)
    for job_id in os.listdir(jobs) if os.path.isdir(jobs) else ():
        job_dir = os.path.join(jobs, job_id)
        inline_output = INLINE_OUTPUT_RE.match(job_id)
        if inline_output:
            _drop_stale_output(job_dir, inline_output.group(1))
            continue
        if JOB_ID_RE.match(job_id) and os.path.isdir(job_dir):
            try:
                _reclaim_one(job_dir, job_id, now)
            except OSError:
                pass  # one unreadable directory must not stop the sweep
    _drop_stale_pending_states()
    _reap_orphans()


def _reclaim_forever():
    while True:
        time.sleep(RECLAIM_EVERY_S)
        try:
            reclaim_jobs()
        except Exception:  # noqa: BLE001  the sweeper must outlive any one bad sweep
            pass


@OPS.on_startup
def start_job_reclaimer():
    global _reclaimer_started
    reclaim_jobs()
    with _lock:
        if _reclaimer_started:
            return
        _reclaimer_started = True
    threading.Thread(target=_reclaim_forever, daemon=True, name="runbox-job-reclaimer").start()
