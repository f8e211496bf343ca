"""Path containment: every path a tool is given stays inside the workspace.

This is the sandbox's security boundary for file tools (read_file, write_file, edit_file,
list_files, read_bytes, glob and grep all resolve their paths here), so it lives apart from
the tools and has its own tests (tests/test_containment.py).

Every path is resolved by walking it one component at a time from an open descriptor of
the workspace root (RUNBOX_WORKSPACE, read at call time), opening each directory with
O_NOFOLLOW|O_DIRECTORY relative to its parent (openat-style). Symlinks are never followed
by the kernel: the walker reads the link and splices its target into the walk itself, so an
absolute or `..` target that leaves the workspace is refused before anything is opened
outside. The walk ends with an open descriptor of the parent directory and a final name
that is opened, again relative and with O_NOFOLLOW, so a symlink swapped in between check
and use fails instead of being followed. Writes go to a temp file in that same directory
and are renamed over the name (atomic_write); a rename replaces a link, never writes
through it. Nothing here calls chdir: requests run concurrently in threads.
"""
import collections
import errno
import os
import secrets
import stat

from .registry import ToolError

DEFAULT_WORKSPACE = "/workspace"
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
MAX_SYMLINK_HOPS = 40

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK so opening a FIFO someone left in the workspace cannot hang the thread.
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def workspace_root():
    return os.path.abspath(os.environ.get("RUNBOX_WORKSPACE") or DEFAULT_WORKSPACE)


def split_components(text):
    """'a//b/./c/..' -> ['a', 'b', 'c', '..']: lexical only; '..' is left to the walk."""
    return [c for c in text.split("/") if c not in ("", ".")]


def _outside(path, why=""):
    msg = "path %r is outside the workspace %s" % (path, workspace_root())
    return ToolError(msg + (": " + why if why else "") + "; only paths inside the workspace can be used",
                     code="path_outside_workspace", path=path)


def _invalid(path, why):
    return ToolError("invalid path %r: %s" % (path, why), code="invalid_path", path=path)


def check_path_text(path):
    if "\x00" in path:
        raise _invalid(path, "it contains a NUL byte")
    try:
        raw = os.fsencode(path)
    except UnicodeError:
        raise _invalid(path, "it is not valid UTF-8")
    if len(raw) > MAX_PATH_BYTES:
        raise _invalid(path[:80] + "…", "it is %d bytes long (limit %d)" % (len(raw), MAX_PATH_BYTES))
    for comp in path.split("/"):
        if len(os.fsencode(comp)) > MAX_NAME_BYTES:
            raise _invalid(path[:80] + "…", "a name in it is longer than %d bytes" % MAX_NAME_BYTES)


def workspace_components(path, root, label=None):
    """Components of `path` relative to the workspace root; absolute paths must lie inside it."""
    if not path.startswith("/"):
        return split_components(path)
    comps = split_components(path)
    for base in (root, os.path.realpath(root)):
        base_comps = split_components(base)
        if comps[:len(base_comps)] == base_comps:
            return comps[len(base_comps):]
    raise _outside(label or path)


def display_path(path):
    """The path as given, relative to the workspace (lexically tidied), for headers and errors."""
    try:
        comps = workspace_components(path, workspace_root())
    except ToolError:
        comps = split_components(path)
    return "/".join(comps) or "."


def join_display(base, rel):
    if not rel:
        return base
    return rel if base in ("", ".") else base.rstrip("/") + "/" + rel


class Resolved:
    """Where a path led. Holds open directory descriptors: use as a context manager.

    kind is "dir" (the path is a directory: dir_fd is it), "file" (any non-directory:
    `name` inside dir_fd) or "missing" (`name` does not exist inside dir_fd).
    """

    def __init__(self, given):
        self.given = given
        self.display = display_path(given)
        self.fds = []
        self.parts = []  # canonical components below the root, symlinks resolved
        self.name = None
        self.kind = None

    @property
    def dir_fd(self):
        return self.fds[-1]

    @property
    def canonical(self):
        return "/".join(self.parts + ([self.name] if self.name else [])) or "."

    def close(self):
        while self.fds:
            os.close(self.fds.pop())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _open_root(root):
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise ToolError("the workspace %s is not available: %s" % (root, e.strerror), code="workspace_unavailable")


def resolve(path, make_dirs=False):
    """Walk `path` inside the workspace without letting the kernel follow any symlink.

    make_dirs creates missing intermediate directories (write_file). Raises ToolError
    for anything that would leave the workspace, dangling links, loops and bad names.
    """
    check_path_text(path)
    root = workspace_root()
    pending = collections.deque((c, None) for c in workspace_components(path, root))
    r = Resolved(path)
    r.fds.append(_open_root(root))
    try:
        _walk(r, pending, root, make_dirs)
    except BaseException:
        r.close()
        raise
    return r


def _walk(r, pending, root, make_dirs):
    hops = 0
    while pending:
        comp, link = pending.popleft()  # link: the symlink whose target produced comp
        if comp == "..":
            if not r.parts:
                raise _outside(r.given, "'..' leads above the workspace root" if link is None
                               else "symbolic link %s points above the workspace root" % link)
            os.close(r.fds.pop())
            r.parts.pop()
            continue
        if len(os.fsencode(comp)) > MAX_NAME_BYTES:
            raise _invalid(r.given, "a name in it is longer than %d bytes" % MAX_NAME_BYTES)
        here = "/".join(r.parts + [comp])
        try:
            st = os.stat(comp, dir_fd=r.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            if link is not None:
                raise _invalid(r.given, "symbolic link %s is dangling (its target does not exist)" % link)
            if pending and make_dirs:
                _mkdir(r, comp)
                pending.appendleft((comp, None))
                continue
            if pending:
                raise ToolError("not found: %s (no such directory: %s)" % (r.display, here), code="not_found",
                                path=r.display)
            r.name, r.kind = comp, "missing"
            return
        except PermissionError:
            raise ToolError("permission denied: %s (at %s)" % (r.display, here), code="permission_denied")
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                raise _invalid(r.given, "too many levels of symbolic links (a loop?)")
            try:
                target = os.readlink(comp, dir_fd=r.dir_fd)
            except OSError as e:
                if e.errno not in (errno.ENOENT, errno.EINVAL):
                    raise
                pending.appendleft((comp, link))  # replaced since the stat: look again (hops bound this)
                continue
            _splice_link(r, pending, target, here, root)
            continue
        if stat.S_ISDIR(st.st_mode):
            _enter_dir(r, comp, here)
            continue
        if pending:
            raise ToolError("not a directory: %s (%s is a file)" % (r.display, here), code="not_a_directory")
        r.name, r.kind = comp, "file"
        return
    r.kind = "dir"


def _splice_link(r, pending, target, here, root):
    label = "%s -> %s" % (here, target)
    if "\x00" in target or not target:
        raise _invalid(r.given, "symbolic link %s has an unusable target" % label)
    if target.startswith("/"):
        try:
            comps = workspace_components(target, root, label=r.given)
        except ToolError:
            raise _outside(r.given, "symbolic link %s points outside the workspace" % label)
        while len(r.fds) > 1:  # an absolute target restarts from the root
            os.close(r.fds.pop())
        del r.parts[:]
    else:
        comps = split_components(target)
    pending.extendleft((c, label) for c in reversed(comps))


def _enter_dir(r, comp, here):
    try:
        fd = os.open(comp, DIR_FLAGS, dir_fd=r.dir_fd)
    except PermissionError:
        raise ToolError("permission denied: %s (at %s)" % (r.display, here), code="permission_denied")
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            raise _invalid(r.given, "%s changed while it was being resolved; try again" % here)
        raise
    r.fds.append(fd)
    r.parts.append(comp)


def _mkdir(r, comp):
    try:
        os.mkdir(comp, 0o777, dir_fd=r.dir_fd)
    except FileExistsError:
        pass  # made concurrently: the retry in _walk inspects whatever is there now
    except PermissionError:
        raise ToolError("permission denied creating directory %s" % "/".join(r.parts + [comp]),
                        code="permission_denied")


def open_final(r, flags=READ_FLAGS, mode=0o666):
    """Open the resolved final name; O_NOFOLLOW makes a symlink swapped in since the walk fail."""
    try:
        return os.open(r.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=r.dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _invalid(r.given, "it became a symbolic link while being opened; not following it")
        if e.errno == errno.ENOENT:
            raise ToolError("not found: %s" % r.display, code="not_found", path=r.display)
        if e.errno in (errno.EACCES, errno.EPERM):
            raise ToolError("permission denied: %s" % r.display, code="permission_denied", path=r.display)
        raise ToolError("cannot open %s: %s" % (r.display, e.strerror), code="io_error", path=r.display)


def resolve_file(path):
    """Resolve a path that must name an existing file (not yet opened)."""
    r = resolve(path)
    if r.kind == "missing":
        r.close()
        raise ToolError("not found: %s (no such file)" % r.display, code="not_found", path=r.display)
    if r.kind == "dir":
        r.close()
        raise ToolError("%s is a directory, not a file; use list_files to see its entries" % r.display,
                        code="is_a_directory", path=r.display)
    return r


def open_regular(r):
    """Open the resolved file for reading; refuse devices, FIFOs and sockets. Returns (fd, stat)."""
    fd = open_final(r)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ToolError("%s is not a regular file (a device, FIFO or socket)" % r.display,
                        code="not_a_regular_file", path=r.display)
    return fd, st


def resolve_existing_file(path):
    """Resolve and open a regular file for reading. Returns (Resolved, fd, stat)."""
    r = resolve_file(path)
    try:
        fd, st = open_regular(r)
    except BaseException:
        r.close()
        raise
    return r, fd, st




def atomic_write(r, data, mode=None):
    """Write `data` to a temp file beside r.name and rename it over the name.

    rename(2) replaces whatever entry is there, a symlink included, so the write can never
    land outside the directory the walk vetted.
    """
    tmp = ".%s.runbox-%s.tmp" % (r.name[:40], secrets.token_hex(4))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=r.dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if mode is not None:
                os.fchmod(fd, stat.S_IMODE(mode))
        finally:
            os.close(fd)
        os.rename(tmp, r.name, src_dir_fd=r.dir_fd, dst_dir_fd=r.dir_fd)
    except BaseException as e:
        try:
            os.unlink(tmp, dir_fd=r.dir_fd)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise ToolError("could not write %s: %s" % (r.display, e.strerror), code="io_error", path=r.display)
        raise
