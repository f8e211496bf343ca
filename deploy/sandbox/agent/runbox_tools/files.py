"""File tools: read_file, write_file, edit_file, list_files, read_bytes and write_bytes.

Design
------
Containment. Every path is resolved by walking it one component at a time from an open
descriptor of the workspace root (RUNBOX_WORKSPACE, read at call time), opening each
directory with O_NOFOLLOW|O_DIRECTORY relative to its parent (openat-style). Symlinks are
never followed by the kernel: the walker reads the link and splices its target into the
walk itself, so an absolute or `..` target that leaves the workspace is refused before
anything is opened outside. The walk ends with an open descriptor of the parent directory
and a final name that is opened, again relative and with O_NOFOLLOW, so a symlink swapped
in between check and use fails instead of being followed. Writes go to a temp file in that
same directory and are renamed over the name; a rename replaces a link, never writes
through it. Nothing here calls chdir: requests run concurrently in threads.

Text fidelity. read_file returns the file's bytes decoded as UTF-8 with surrogateescape,
which the server re-encodes the same way, so tabs, CRLF, lone CR and even invalid UTF-8
come back unaltered and a region can be used verbatim as an edit_file anchor. Notes the
tool adds sit on lines of their own starting with "…".

Byte cap. read_file reads at most the first 400 KB of a file and counts only the lines
that start there (the header then says "of ≥N"); paging to a line past the cap is refused
and points at grep, which searches files up to 8 MB. Reading the whole file to count its
lines would make every read of a huge log cost the whole log.

Budget. The server cuts every output at max_output_chars; read_file and list_files stop
at a line/entry boundary before that (with a continuation note) so the cut never lands
inside a line the model might copy.
"""
import base64
import collections
import errno
import os
import re
import secrets
import stat
import struct
import threading
import time
import zlib

from .registry import OPS, ToolError

DEFAULT_WORKSPACE = "/workspace"
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
MAX_SYMLINK_HOPS = 40
DEFAULT_OUTPUT_BUDGET = 30000  # the server's default max_output_chars

READ_CAP_BYTES = 400 * 1024
DEFAULT_READ_LIMIT = 2000
BINARY_SNIFF_BYTES = 8192
EDIT_MAX_BYTES = 32 * 1024 * 1024
PDF_MAX_BYTES = 64 * 1024 * 1024
PDF_MAX_PAGES_PER_CALL = 20
READ_BYTES_DEFAULT = 8 * 1024 * 1024
READ_BYTES_MAX = 64 * 1024 * 1024
LIST_MAX_COUNTED = 100000
DEFAULT_SEARCH_TIMEOUT = 20.0

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK so opening a FIFO someone left in the workspace cannot hang the thread.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK

_REQUIRED = object()


# --------------------------------------------------------------------------- arguments

def bad_arg(name, message):
    return ToolError("invalid arguments: `%s` %s" % (name, message), code="invalid_arguments", field=name)


def arg_str(args, name, default=_REQUIRED, allow_empty=False):
    value = args.get(name)
    if value is None:
        if default is _REQUIRED:
            raise bad_arg(name, "is required (a string)")
        return default
    if not isinstance(value, str):
        raise bad_arg(name, "must be a string, got %s" % type(value).__name__)
    if not value and not allow_empty:
        if default is _REQUIRED:
            raise bad_arg(name, "must not be empty")
        return default
    return value


def arg_int(args, name, default, minimum=0, maximum=None):
    value = args.get(name)
    if value is None:
        return default
    # JSON has one number type: accept 5.0, refuse 5.5, "5" and true (bool is an int in Python).
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_arg(name, "must be an integer, got %s" % type(value).__name__)
    if value < minimum:
        raise bad_arg(name, "must be at least %d, got %d" % (minimum, value))
    if maximum is not None and value > maximum:
        raise bad_arg(name, "must be at most %d, got %d" % (maximum, value))
    return value


def arg_bool(args, name, default=False):
    value = args.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad_arg(name, "must be true or false, got %s" % type(value).__name__)
    return value


def output_budget(args):
    """The character limit the server will cut at (same rule as runbox_agent.handle)."""
    limit = args.get("max_output_chars")
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        return limit
    return DEFAULT_OUTPUT_BUDGET


def search_timeout():
    """Seconds a walk or search may take (RUNBOX_FILE_SEARCH_TIMEOUT, read per call)."""
    raw = os.environ.get("RUNBOX_FILE_SEARCH_TIMEOUT", "")
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_SEARCH_TIMEOUT
    # "nan" and "inf" parse too; neither is a deadline.
    return value if 0 < value < float("inf") else DEFAULT_SEARCH_TIMEOUT


def result(output, **metadata):
    return {"output": output, "metadata": metadata, "is_error": False}


# --------------------------------------------------------------------------- containment

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
        fd = os.open(comp, _DIR_FLAGS, dir_fd=r.dir_fd)
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


def open_final(r, flags=_READ_FLAGS, mode=0o666):
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


def read_up_to(fd, limit):
    chunks, total = [], 0
    while total < limit:
        chunk = os.read(fd, min(1 << 20, limit - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


# --------------------------------------------------------------------------- read_file

@OPS.register("read_file")
def read_file(args, request_id=None):
    path = arg_str(args, "path")
    offset = max(arg_int(args, "offset", 1, minimum=0), 1)  # 0 is read as "from the start"
    limit = arg_int(args, "limit", DEFAULT_READ_LIMIT, minimum=1)
    pages = arg_str(args, "pages", None)
    r, fd, st = resolve_existing_file(path)
    with r:
        try:
            head = os.pread(fd, 64, 0)
            kind = _sniff(head)
            if kind == "pdf":
                return _read_pdf(r.display, read_up_to(fd, PDF_MAX_BYTES + 1), pages)
            if kind:
                return _read_image(r.display, kind, read_up_to(fd, READ_CAP_BYTES), st.st_size)
            data = read_up_to(fd, READ_CAP_BYTES + 1)
        finally:
            os.close(fd)
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise ToolError("%s looks like a binary file (%d bytes, contains NUL bytes); it is not shown as text. "
                        "Inspect it with the terminal (e.g. `file`, `xxd | head`)." % (r.display, st.st_size),
                        code="binary_file", path=r.display, size_bytes=st.st_size)
    return _read_text(r.display, data, offset, limit, output_budget(args))


def _line_parts(data):
    """Split on LF only (CR is content); returns (parts, line count)."""
    parts = data.split(b"\n")
    total = len(parts) - (1 if parts[-1] == b"" else 0)
    return parts, total


def _read_text(display, data, offset, limit, budget):
    truncated = len(data) > READ_CAP_BYTES
    if truncated:
        data = data[:READ_CAP_BYTES]
    parts, total = _line_parts(data)
    total_text = ("≥%d" if truncated else "%d") % total
    if total == 0:
        if offset > 1:
            raise ToolError("offset %d is past the end of %s: the file is empty" % (offset, display),
                            code="offset_out_of_range", path=display)
        return result("%s — lines 0-0 of 0\n\n… the file is empty" % display,
                      path=display, first_line=0, last_line=0, total_lines=0)
    if offset > total:
        if truncated:
            raise ToolError(
                "offset %d is beyond the 400 KB read cap of %s: read_file only reaches the lines that start "
                "in the first 400 KB (at least %d lines). Use grep to find text further on (it searches files up "
                "to 8 MB), or the terminal (e.g. sed -n '%d,%dp' %s)." % (
                    offset, display, total, offset, offset + 99, display),
                code="offset_beyond_cap", path=display, total_lines_at_least=total)
        raise ToolError("offset %d is past the end of %s, which has %d line%s" % (
            offset, display, total, "" if total == 1 else "s"), code="offset_out_of_range", path=display,
            total_lines=total)
    last = min(total, offset + limit - 1)
    header_for = lambda l: "%s — lines %d-%d of %s" % (display, offset, l, total_text)  # noqa: E731
    last = _fit_lines(parts, offset, last, header_for, budget, truncated)
    body = b"\n".join(parts[offset - 1:last]) + (b"\n" if last < len(parts) else b"")
    text = body.decode("utf-8", "surrogateescape")
    notes = _read_notes(total, last, truncated)
    out = header_for(last) + "\n\n" + text
    for i, note in enumerate(notes):
        # The tool's own newline starts a note's line; none is added if the content already ended one.
        out += ("" if i == 0 and out.endswith("\n") else "\n") + note
    meta = dict(path=display, first_line=offset, last_line=last)
    if truncated:
        meta.update(truncated=True, total_lines_at_least=total)
    else:
        meta["total_lines"] = total
    return result(out, **meta)


def _read_notes(total, last, truncated):
    notes = []
    if last < total:
        more = total - last
        notes.append("… %s%d more line%s (use offset=%d to continue)" % (
            "at least " if truncated else "", more, "" if more == 1 else "s", last + 1))
    if truncated:
        notes.append("… file truncated at 400 KB")
    return notes


def _fit_lines(parts, first, last, header_for, budget, truncated):
    """Lower `last` so header, lines and notes fit the output budget (at least one line is kept)."""
    reserve = len(header_for(last)) + 2 + 120  # 120: room for both notes
    if sum(len(p) + 1 for p in parts[first - 1:last]) + reserve <= budget:
        return last  # decoding never makes more characters than there are bytes
    chars = 0
    for n in range(first, last + 1):
        chars += len(parts[n - 1].decode("utf-8", "surrogateescape")) + 1
        if chars + reserve > budget and n > first:
            return n - 1
    return last


# --------------------------------------------------------------------------- images

def _sniff(head):
    if head.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if head.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WebP"
    return None


def image_size(kind, data):
    """(width, height) parsed from the header, or None when the header is unusual."""
    try:
        if kind == "PNG" and data[12:16] == b"IHDR":
            return struct.unpack(">II", data[16:24])
        if kind == "GIF":
            return struct.unpack("<HH", data[6:10])
        if kind == "JPEG":
            return _jpeg_size(data)
        if kind == "WebP":
            return _webp_size(data)
    except struct.error:
        return None
    return None


def _jpeg_size(data):
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker == 0xFF or marker == 0x01 or 0xD0 <= marker <= 0xD8:
            i += 1 if marker == 0xFF else 2  # fill byte or a marker without a length
            continue
        # SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC) carry the frame size.
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[i + 5:i + 9])
            return width, height
        i += 2 + struct.unpack(">H", data[i + 2:i + 4])[0]
    return None


def _webp_size(data):
    chunk = data[12:16]
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L" and data[20:21] == b"\x2f":
        b0, b1, b2, b3 = data[21:25]
        return 1 + (((b1 & 0x3F) << 8) | b0), 1 + (((b3 & 0x0F) << 10) | (b2 << 2) | ((b1 & 0xC0) >> 6))
    if chunk == b"VP8X":
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return w, h
    return None


def _read_image(display, kind, data, size):
    dims = image_size(kind, data)
    dims_text = "%dx%d" % dims if dims else "size unknown"
    out = "%s — %s image, %s, %d bytes\n\n… image pixels are not returned as text, only the format and size" % (
        display, kind, dims_text, size)
    meta = dict(path=display, kind="image", format=kind, size_bytes=size)
    if dims:
        meta.update(width=dims[0], height=dims[1])
    return result(out, **meta)


# --------------------------------------------------------------------------- PDF

def _read_pdf(display, data, pages_arg):
    if len(data) > PDF_MAX_BYTES:
        raise ToolError("%s is larger than %d MB; PDF text extraction is limited to that size" % (
            display, PDF_MAX_BYTES >> 20), code="file_too_large", path=display)
    doc = PdfText(data)
    count = len(doc.pages)
    if count == 0:
        raise ToolError("%s: no pages could be found in this PDF (damaged or an unsupported structure)" % display,
                        code="pdf_unreadable", path=display)
    wanted, clipped = _page_selection(pages_arg, count)
    chunks, empty = [], []
    for n in wanted:
        text = doc.page_text(n - 1).strip()
        if not text:
            empty.append(n)
            text = "(no extractable text on this page: it may be scanned or use an unsupported font encoding)"
        chunks.append("--- page %d ---\n%s" % (n, text))
    header = "%s — PDF, pages %s of %d" % (display, _ranges_text(wanted), count)
    out = header + "\n\n" + "\n\n".join(chunks)
    if doc.encrypted:
        out += "\n… this PDF is encrypted; its text could not be decoded"
    if clipped:
        out += "\n… %d more pages (use pages=\"%d-%d\" to continue)" % (
            clipped, wanted[-1] + 1, min(count, wanted[-1] + PDF_MAX_PAGES_PER_CALL))
    return result(out, path=display, kind="pdf", total_pages=count, pages=wanted, pages_without_text=empty)


def _page_selection(pages_arg, count):
    """Parse "1-3,5" into page numbers; at most PDF_MAX_PAGES_PER_CALL per call."""
    if pages_arg is None or not pages_arg.strip():
        wanted = list(range(1, count + 1))
    else:
        wanted = []
        for piece in pages_arg.split(","):
            m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d*)\s*)?", piece)
            if not m:
                raise bad_arg("pages", 'must look like "3", "1-5" or "1-3,7", got %r' % pages_arg)
            lo = int(m.group(1))
            hi = lo if m.group(2) is None else (int(m.group(2)) if m.group(2) else count)
            if lo < 1 or hi < lo:
                raise bad_arg("pages", "has an empty or invalid range %r" % piece.strip())
            wanted.extend(n for n in range(lo, hi + 1) if n not in wanted)
        if not wanted or wanted[0] > count:
            raise ToolError("pages %r is past the end of the document, which has %d pages" % (pages_arg, count),
                            code="offset_out_of_range")
        wanted = [n for n in wanted if n <= count]
    clipped = max(0, len(wanted) - PDF_MAX_PAGES_PER_CALL)
    return wanted[:PDF_MAX_PAGES_PER_CALL], clipped


def _ranges_text(nums):
    spans, start = [], None
    for i, n in enumerate(nums):
        if start is None:
            start = n
        if i + 1 == len(nums) or nums[i + 1] != n + 1:
            spans.append(str(start) if start == n else "%d-%d" % (start, n))
            start = None
    return ",".join(spans)


class PdfText:
    """A best-effort PDF text extractor: enough for text PDFs written by common tools.

    Reads objects (also those packed in object streams), walks the page tree, inflates
    FlateDecode content streams and collects the strings of the Tj, TJ, ' and " operators.
    Fonts with custom CID encodings come out as whatever bytes they hold.
    """

    _OBJ = re.compile(rb"(\d+)\s+(\d+)\s+obj\b")
    _REF = re.compile(rb"(\d+)\s+\d+\s+R\b")

    def __init__(self, data):
        self.data = data
        self.objects = {}  # number -> (dictionary bytes, stream bytes or None)
        self._scan_objects()
        self._unpack_object_streams()
        self.encrypted = b"/Encrypt" in data[-4096:] or any(b"/Encrypt" in d for d, _ in self._trailers())
        self.pages = self._page_list()

    def _scan_objects(self):
        data = self.data
        pos = 0
        while True:
            m = self._OBJ.search(data, pos)
            if not m:
                return
            body_start = m.end()
            end = data.find(b"endobj", body_start)
            if end < 0:
                end = len(data)
            body, stream, pos = data[body_start:end], None, end + 6
            s = re.search(rb"stream\r?\n", body)
            if s:
                dictionary = body[:s.start()]
                stream, pos = self._stream_bytes(dictionary, body_start + s.end())
                body = dictionary
            self.objects[int(m.group(1))] = (body, stream)
            pos = max(pos, body_start)  # always move forward, whatever a damaged file says

    def _stream_bytes(self, dictionary, start):
        data = self.data
        m = re.search(rb"/Length\s+(\d+)(\s+\d+\s+R)?", dictionary)
        if m and not m.group(2):
            length = int(m.group(1))
            tail = data[start + length:start + length + 20]
            if tail.lstrip(b"\r\n ").startswith(b"endstream"):
                end = start + length
                return data[start:end], data.find(b"endobj", end) + 6
        end = data.find(b"endstream", start)
        if end < 0:
            end = len(data)
        stream = data[start:end]
        if stream.endswith(b"\r\n"):
            stream = stream[:-2]
        elif stream.endswith(b"\n") or stream.endswith(b"\r"):
            stream = stream[:-1]
        after = data.find(b"endobj", end)
        return stream, (after + 6 if after >= 0 else len(data))

    def _unpack_object_streams(self):
        for body, stream in list(self.objects.values()):
            if stream is None or not re.search(rb"/Type\s*/ObjStm", body):
                continue
            raw = self.decode_stream(body, stream)
            n = re.search(rb"/N\s+(\d+)", body)
            first = re.search(rb"/First\s+(\d+)", body)
            if raw is None or not n or not first:
                continue
            nums = [int(x) for x in raw[:int(first.group(1))].split()]
            pairs = list(zip(nums[0::2], nums[1::2]))[:int(n.group(1))]
            base = int(first.group(1))
            for i, (num, off) in enumerate(pairs):
                end = base + pairs[i + 1][1] if i + 1 < len(pairs) else len(raw)
                self.objects.setdefault(num, (raw[base + off:end], None))

    def decode_stream(self, dictionary, stream):
        filters = re.findall(rb"/(\w+Decode)\b", dictionary)
        data = stream
        for name in filters:
            if name != b"FlateDecode":
                return None  # image and exotic filters carry no text we can read
            try:
                data = zlib.decompressobj().decompress(data)
            except zlib.error:
                return None
        return data

    def _trailers(self):
        for m in re.finditer(rb"trailer\s*(<<.*?>>)", self.data, re.S):
            yield m.group(1), None
        for body, stream in self.objects.values():
            if stream is not None and re.search(rb"/Type\s*/XRef", body):
                yield body, None

    def _ref(self, text, key):
        m = re.search(rb"/" + key + rb"\s+(\d+)\s+\d+\s+R", text)
        return int(m.group(1)) if m else None

    def _page_list(self):
        root = None
        for trailer, _ in self._trailers():
            root = self._ref(trailer, b"Root") or root
        pages = []
        catalog = self.objects.get(root, (b"", None))[0] if root else b""
        top = self._ref(catalog, b"Pages")
        if top is not None:
            self._collect_pages(top, pages, set())
        if not pages:  # no usable page tree: fall back to page objects in number order
            pages = sorted(n for n, (body, _) in self.objects.items() if re.search(rb"/Type\s*/Page(?![a-zA-Z])", body))
        return pages

    def _collect_pages(self, num, pages, seen):
        if num in seen or num not in self.objects or len(seen) > 100000:
            return
        seen.add(num)
        body = self.objects[num][0]
        kids = re.search(rb"/Kids\s*\[(.*?)\]", body, re.S)
        if kids and not re.search(rb"/Type\s*/Page(?![a-zA-Z])", body):
            for ref in self._REF.finditer(kids.group(1)):
                self._collect_pages(int(ref.group(1)), pages, seen)
        elif re.search(rb"/Type\s*/Page(?![a-zA-Z])", body):
            pages.append(num)

    def page_text(self, index):
        body = self.objects[self.pages[index]][0]
        m = re.search(rb"/Contents\s*(\[(.*?)\]|(\d+)\s+\d+\s+R)", body, re.S)
        if not m:
            return ""
        refs = [int(x) for x in self._REF.findall(m.group(2))] if m.group(2) is not None else [int(m.group(3))]
        content = b""
        for ref in refs:
            dictionary, stream = self.objects.get(ref, (b"", None))
            decoded = self.decode_stream(dictionary, stream) if stream is not None else None
            if decoded:
                content += decoded + b"\n"
        return content_text(content)


_PDF_TOKEN = re.compile(rb"\((?:\\.|[^\\()]|\((?:\\.|[^\\()])*\))*\)|<[0-9A-Fa-f\s]*>|\[|\]|/[^\s/\[\]()<>{}%]*"
                        rb"|[-+]?(?:\d+\.?\d*|\.\d+)|[A-Za-z'\"*]+|<<|>>|%[^\r\n]*", re.S)
_PDF_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f"}


def _pdf_string(token):
    if token.startswith(b"<"):
        hexdigits = re.sub(rb"\s", b"", token[1:-1])
        raw = bytes.fromhex((hexdigits + b"0" * (len(hexdigits) % 2)).decode())
    else:
        raw = re.sub(rb"\\([0-7]{1,3}|\r\n|.)", _unescape, token[1:-1], flags=re.S)
    if raw.startswith(b"\xfe\xff"):
        return raw[2:].decode("utf-16-be", "replace")
    return raw.decode("latin-1")


def _unescape(m):
    s = m.group(1)
    if s[:1].isdigit():
        return bytes([int(s, 8) & 0xFF])
    if s in (b"\n", b"\r", b"\r\n"):
        return b""  # a backslash at the end of a line continues the string
    return _PDF_ESCAPES.get(s, s)


def content_text(content):
    """Text shown by a page content stream, with line breaks where the text moves down."""
    out, operands = [], []
    for m in _PDF_TOKEN.finditer(content):
        tok = m.group(0)
        if tok[:1] in b"(<" and tok != b"<<":
            operands.append(_pdf_string(tok))
        elif tok == b"[":
            operands.append("[")
        elif tok == b"]":
            items = []
            while operands and operands[-1] != "[":
                items.append(operands.pop())
            if operands:
                operands.pop()
            operands.append(list(reversed(items)))
        elif tok[:1].isalpha() or tok in (b"'", b'"', b"T*"):
            _pdf_operator(tok, operands, out)
            operands = []
        elif tok[:1] in b"-+.0123456789":
            operands.append(float(tok))
    return re.sub(r"[ \t]+\n", "\n", "".join(out))


def _pdf_operator(op, operands, out):
    strings = [o for o in operands if isinstance(o, str) and o != "["]
    if op == b"Tj" and strings:
        out.append(strings[-1])
    elif op in (b"'", b'"') and strings:
        out.append("\n" + strings[-1])
    elif op == b"TJ" and operands and isinstance(operands[-1], list):
        for item in operands[-1]:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, float) and item < -250:
                out.append(" ")  # a large negative kern is how many producers write a space
    elif op in (b"T*", b"ET"):
        out.append("\n")
    elif op in (b"Td", b"TD") and len(operands) >= 2 and isinstance(operands[-1], float):
        out.append("\n" if operands[-1] != 0 else " ")


# --------------------------------------------------------------------------- read_bytes

@OPS.register("read_bytes")
def read_bytes(args, request_id=None):
    """Raw bytes as base64, for indexing documents. The caller must raise max_output_chars
    to at least metadata.base64_chars, or the server's cut corrupts the encoding."""
    path = arg_str(args, "path")
    max_bytes = arg_int(args, "max_bytes", READ_BYTES_DEFAULT, minimum=1, maximum=READ_BYTES_MAX)
    r, fd, st = resolve_existing_file(path)
    with r:
        try:
            data = read_up_to(fd, max_bytes)
        finally:
            os.close(fd)
    encoded = base64.b64encode(data).decode("ascii")
    return result(encoded, path=r.display, encoding="base64", size_bytes=st.st_size, bytes_returned=len(data),
                  truncated=len(data) < st.st_size, base64_chars=len(encoded))


# --------------------------------------------------------------------------- writing

_WRITE_LOCKS = [threading.Lock() for _ in range(64)]


def _lock_for(r):
    """Serialise writers of one file (dir inode + name) so concurrent edits cannot lose updates."""
    st = os.fstat(r.dir_fd)
    return _WRITE_LOCKS[hash((st.st_dev, st.st_ino, r.name)) % len(_WRITE_LOCKS)]


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


def _existing(r):
    """lstat of the final name, or None when absent."""
    try:
        return os.stat(r.name, dir_fd=r.dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _encode_text(text, field):
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise bad_arg(field, "contains characters that cannot be encoded as UTF-8")


@OPS.register("write_file")
def write_file(args, request_id=None):
    path = arg_str(args, "path")
    content = arg_str(args, "content", allow_empty=True)
    if path.endswith("/"):
        raise bad_arg("path", "must name a file, not end with '/'")
    data = _encode_text(content, "content")
    with resolve(path, make_dirs=True) as r:
        if r.kind == "dir":
            raise ToolError("%s is a directory; give a file path" % r.display, code="is_a_directory", path=r.display)
        with _lock_for(r):
            before = _existing(r)
            if before is not None and stat.S_ISDIR(before.st_mode):
                raise ToolError("%s is a directory; give a file path" % r.display, code="is_a_directory")
            atomic_write(r, data, before.st_mode if before is not None and stat.S_ISREG(before.st_mode) else None)
    action = "overwrote" if before is not None else "created"
    out = "%s %s (%d bytes written)" % (action.capitalize(), r.display, len(data))
    if before is not None:
        out += "; it was %d bytes before" % before.st_size
    return result(out, path=r.display, bytes_written=len(data), created=before is None, action=action)


@OPS.register("write_bytes")
def write_bytes(args, request_id=None):
    """Binary content as base64 (screenshots, downloaded documents), for the gateway's tools.
    With append, the bytes go to the end of an existing regular file, so a large file can be
    written in pieces that each fit one message."""
    path = arg_str(args, "path")
    content = arg_str(args, "content", allow_empty=True)
    append = arg_bool(args, "append")
    if path.endswith("/"):
        raise bad_arg("path", "must name a file, not end with '/'")
    try:
        data = base64.b64decode(content.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise bad_arg("content", "must be base64")
    with resolve(path, make_dirs=True) as r:
        if r.kind == "dir":
            raise ToolError("%s is a directory; give a file path" % r.display, code="is_a_directory", path=r.display)
        with _lock_for(r):
            if append:
                _append(r, data)
            else:
                before = _existing(r)
                if before is not None and stat.S_ISDIR(before.st_mode):
                    raise ToolError("%s is a directory; give a file path" % r.display, code="is_a_directory")
                atomic_write(r, data, before.st_mode if before is not None and stat.S_ISREG(before.st_mode) else None)
            size = os.stat(r.name, dir_fd=r.dir_fd, follow_symlinks=False).st_size
    return result("Wrote %d bytes to %s (%d bytes now)" % (len(data), r.display, size),
                  path=r.display, bytes_written=len(data), size_bytes=size)


def _append(r, data):
    # O_NOFOLLOW: a link planted at the final name is refused, never followed out.
    try:
        fd = os.open(r.name, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=r.dir_fd)
    except FileNotFoundError:
        raise ToolError("%s does not exist; write it without append first" % r.display, code="not_found", path=r.display)
    except OSError:
        raise ToolError("%s cannot be appended to" % r.display, code="not_a_file", path=r.display)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError("%s is not a regular file" % r.display, code="not_a_file", path=r.display)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- edit_file

def _uses_crlf(data):
    crlf = data.count(b"\r\n")
    return crlf > 0 and crlf >= data.count(b"\n") - crlf


def _find_anchor(data, old, new, replace_all, display):
    """Return (old, new, count, recovered) per the single CRLF recovery rule, or raise."""
    count = data.count(old)
    recovered = False
    if count == 0 and b"\n" in old and b"\r" not in old and _uses_crlf(data):
        crlf_old = old.replace(b"\n", b"\r\n")
        count = data.count(crlf_old)
        if count:
            old, new, recovered = crlf_old, new.replace(b"\n", b"\r\n"), True
    if count == 0:
        raise ToolError(
            "old_string was not found in %s, so nothing was changed. It must match the file byte for byte "
            "(whitespace, indentation and line breaks included). The anchor is stale or misremembered: "
            "read the file again with read_file and copy the exact text." % display,
            code="anchor_not_found", path=display)
    if count > 1 and not replace_all:
        raise ToolError(
            "old_string occurs %d times in %s, so nothing was changed. Add surrounding lines to old_string so "
            "it matches exactly one place, or set replace_all to true to replace every occurrence." % (
                count, display), code="anchor_not_unique", path=display, occurrences=count)
    return old, new, count, recovered


@OPS.register("edit_file")
def edit_file(args, request_id=None):
    path = arg_str(args, "path")
    old_text = arg_str(args, "old_string", allow_empty=True)
    new_text = arg_str(args, "new_string", allow_empty=True)
    replace_all = arg_bool(args, "replace_all", False)
    if old_text == "":
        raise bad_arg("old_string", "must not be empty; to create or replace a whole file use write_file")
    if old_text == new_text:
        raise bad_arg("new_string", "is identical to old_string; there is nothing to change")
    old, new = _encode_text(old_text, "old_string"), _encode_text(new_text, "new_string")
    with resolve_file(path) as r, _lock_for(r):
        # Read under the lock: a writer that renamed a new version in first must be seen.
        data, mode = _read_for_edit(r)
        old, new, count, recovered = _find_anchor(data, old, new, replace_all, r.display)
        first_line = data.count(b"\n", 0, data.find(old)) + 1
        updated = data.replace(old, new) if replace_all else data.replace(old, new, 1)
        atomic_write(r, updated, mode)
    return _edit_result(r.display, data, new, count, first_line, recovered, len(updated))


def _read_for_edit(r):
    fd, st = open_regular(r)
    try:
        if st.st_size > EDIT_MAX_BYTES:
            raise ToolError("%s is larger than %d MB; edit it with the terminal" % (
                r.display, EDIT_MAX_BYTES >> 20), code="file_too_large", path=r.display)
        return read_up_to(fd, EDIT_MAX_BYTES + 1), st.st_mode
    finally:
        os.close(fd)


def _edit_result(display, data, new, count, first_line, recovered, size):
    out = "Edited %s: replaced %d occurrence%s (first at line %d); the file is now %d bytes." % (
        display, count, "" if count == 1 else "s", first_line, size)
    lf_into_crlf = not recovered and _uses_crlf(data) and b"\n" in new.replace(b"\r\n", b"")
    if recovered:
        out += ("\nNote: the file uses CRLF line breaks and old_string (with LF breaks) did not match as given; "
                "it matched after converting its LF breaks to CRLF, and new_string was converted the same way.")
    elif lf_into_crlf:
        out += ("\nNote: the file uses CRLF line breaks but new_string contains LF-only breaks; they were "
                "written exactly as given (LF), so the file now mixes line endings.")
    return result(out, path=display, replacements=count, first_line=first_line, crlf_recovery=recovered,
                  lf_into_crlf_file=lf_into_crlf, size_bytes=size)


# --------------------------------------------------------------------------- list_files

def scan_dir(fd):
    """Sorted [(name, is_dir, link_target or None)] of an open directory, without following links."""
    entries = []
    with os.scandir(fd) as it:
        for e in it:
            try:
                is_link = e.is_symlink()
                is_dir = not is_link and e.is_dir(follow_symlinks=False)
                target = os.readlink(e.name, dir_fd=fd) if is_link else None
            except OSError:
                is_dir, target = False, None
            entries.append((e.name, is_dir, target))
    entries.sort(key=lambda x: os.fsencode(x[0]))
    return entries


def _entry_line(rel, is_dir, target):
    if is_dir:
        return rel + "/"
    return rel + (" -> " + target if target is not None else "")


def _walk_listing(fd, prefix, recursive, deadline, state):
    """Yield display lines depth-first in sorted order; .git is listed but never entered."""
    for name, is_dir, target in scan_dir(fd):
        rel = prefix + name
        yield _entry_line(rel, is_dir, target)
        if not (recursive and is_dir) or name == ".git":
            continue
        if time.monotonic() > deadline:
            state["deadline"] = True
            return
        try:
            sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as e:
            yield "… %s/ could not be opened (%s)" % (rel, e.strerror)
            continue
        try:
            yield from _walk_listing(sub, rel + "/", recursive, deadline, state)
        finally:
            os.close(sub)
        if state.get("deadline"):
            return


@OPS.register("list_files")
def list_files(args, request_id=None):
    path = arg_str(args, "path", ".")
    recursive = arg_bool(args, "recursive", False)
    budget = output_budget(args)
    with resolve(path) as r:
        if r.kind == "missing":
            raise ToolError("not found: %s (no such directory)" % r.display, code="not_found", path=r.display)
        if r.kind != "dir":
            raise ToolError("%s is a file, not a directory; use read_file to read it" % r.display,
                            code="not_a_directory", path=r.display)
        prefix = "" if r.display == "." else r.display.rstrip("/") + "/"
        state = {}
        walker = _walk_listing(r.dir_fd, prefix, recursive, time.monotonic() + search_timeout(), state)
        shown, counted, chars = [], 0, 0
        for line in walker:
            counted += 1
            if chars + len(line) + 1 + 200 <= budget or not shown:
                if len(shown) == counted - 1:  # entries stay contiguous: once one is dropped, all later are
                    shown.append(line)
                    chars += len(line) + 1
            if counted >= LIST_MAX_COUNTED:
                state["capped"] = True
                break
        walker.close()
    return _list_result(r.display, shown, counted, state, recursive)


def _list_result(display, shown, counted, state, recursive):
    out = "\n".join(shown) if shown else "(empty directory)"
    hidden = counted - len(shown)
    at_least = "at least " if state.get("capped") or state.get("deadline") else ""
    if hidden:
        out += "\n… %s%d more entries not shown (output budget); list a subfolder or use glob to narrow it" % (
            at_least, hidden)
    if state.get("deadline"):
        out += "\n… listing stopped at the %g s deadline; the list is incomplete" % search_timeout()
    return result(out, path=display, recursive=recursive, count=len(shown),
                  total=None if at_least else counted, truncated=bool(hidden or at_least))
