"""File tools: read_file, write_file, edit_file, list_files, read_bytes and write_bytes.

Design
------
Containment. Every path is resolved by containment.py (its own module, with its own
tests): a walk from the workspace root that never lets the kernel follow a symlink, and
writes that rename a temp file over the name, so no tool can reach outside the workspace.

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
import os
import stat
import struct
import threading
import time

from .containment import DIR_FLAGS, atomic_write, open_regular, resolve, resolve_existing_file, resolve_file
from . import pdf
from .registry import OPS, ToolError

DEFAULT_OUTPUT_BUDGET = 30000  # the server's default max_output_chars

READ_CAP_BYTES = 400 * 1024
DEFAULT_READ_LIMIT = 2000
BINARY_SNIFF_BYTES = 8192
EDIT_MAX_BYTES = 32 * 1024 * 1024
READ_BYTES_DEFAULT = 8 * 1024 * 1024
READ_BYTES_MAX = 64 * 1024 * 1024
LIST_MAX_COUNTED = 100000
DEFAULT_SEARCH_TIMEOUT = 20.0

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
                return pdf.read_pdf(r.display, fd, st.st_size, pages, bad_arg, result)
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
            sub = os.open(name, DIR_FLAGS, dir_fd=fd)
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
                  total=None if at_least else counted, truncated=bool(hidden or at_least),
                  partial=bool(state.get("deadline")))
