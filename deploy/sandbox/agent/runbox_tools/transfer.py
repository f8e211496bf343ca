"""Streamed file transfers between the workspace and the executor (vps_upload, vps_download).

A transfer is too big for the JSON-lines channel, so the executor runs one `docker exec` of
`runbox_agent.py transfer-read PATH MAX_BYTES` or `transfer-write PATH SIZE` per transfer,
as the sandbox user, and streams the file's bytes over that exec's stdout or stdin. Paths
are resolved by containment.py exactly as the file tools resolve them, so symlinks and `..`
cannot reach outside the workspace.

transfer-read   stderr: one JSON line {"size": N, "path": ...}, then stdout carries exactly N
                bytes. A file larger than MAX_BYTES is refused before a byte is sent.
transfer-write  stderr: one JSON line {"path": ...} once the path is accepted and its temp
                file made, before a byte is read: the executor sends nothing until then,
                so a refusal (a path outside the workspace) is always what it reports.
                stdin: exactly SIZE bytes, then EOF. They go to a temp file beside the
                target, renamed over it only when SIZE bytes arrived: a transfer cut short
                (the connection died, the executor gave up) leaves no partial file, and
                the temp file is removed. stdout: one JSON line {"size": N, "sha256": "..."}.
Failures: exit 1 and one JSON line {"error": {"code", "message"}} on stderr.
"""
import hashlib
import json
import os
import secrets
import sys

from .containment import resolve, resolve_existing_file
from .registry import ToolError

CHUNK = 1 << 20


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def transfer_read(path, max_bytes):
    r, fd, st = resolve_existing_file(path)
    with r:
        try:
            if st.st_size > max_bytes:
                raise ToolError("%s is %d bytes, over the %d-byte transfer cap" % (r.display, st.st_size, max_bytes),
                                code="too_large", path=r.display)
            size = st.st_size
            _write_all(2, (json.dumps({"size": size, "path": r.display}) + "\n").encode())
            left = size
            while left > 0:
                chunk = os.read(fd, min(CHUNK, left))
                if not chunk:
                    raise ToolError("%s shrank while it was read" % r.display, code="io_error", path=r.display)
                _write_all(1, chunk)
                left -= len(chunk)
        finally:
            os.close(fd)


def transfer_write(path, size):
    with resolve(path, make_dirs=True) as r:
        if r.kind == "dir":
            raise ToolError("%s is a directory; give the file's path" % r.display, code="is_a_directory", path=r.display)
        tmp = ".%s.runbox-%s.tmp" % (r.name[:40], secrets.token_hex(4))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=r.dir_fd)
        digest = hashlib.sha256()
        received = 0
        try:
            _write_all(2, (json.dumps({"path": r.display}) + "\n").encode())
            try:
                while True:
                    chunk = os.read(0, CHUNK)
                    if not chunk:
                        break
                    received += len(chunk)
                    if received > size:
                        raise ToolError("more than the announced %d bytes arrived" % size, code="bad_request")
                    digest.update(chunk)
                    _write_all(fd, chunk)
            finally:
                os.close(fd)
            if received != size:
                raise ToolError("the transfer stopped after %d of %d bytes; %s was left unchanged"
                                % (received, size, r.display), code="incomplete", path=r.display)
            os.rename(tmp, r.name, src_dir_fd=r.dir_fd, dst_dir_fd=r.dir_fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=r.dir_fd)
            except OSError:
                pass
            raise
        _write_all(1, (json.dumps({"size": received, "sha256": digest.hexdigest(), "path": r.display}) + "\n").encode())


def main(argv):
    try:
        if len(argv) == 3 and argv[0] == "transfer-read":
            transfer_read(argv[1], int(argv[2]))
        elif len(argv) == 3 and argv[0] == "transfer-write":
            transfer_write(argv[1], int(argv[2]))
        else:
            raise ToolError("usage: transfer-read PATH MAX_BYTES | transfer-write PATH SIZE", code="bad_request")
    except ToolError as e:
        sys.stderr.write(json.dumps({"error": {"code": e.code, "message": str(e)}}) + "\n")
        return 1
    except OSError as e:
        sys.stderr.write(json.dumps({"error": {"code": "io_error", "message": "%s" % e.strerror}}) + "\n")
        return 1
    return 0
