"""The sandbox's half of the files API (GET/PUT/DELETE /v1/sessions/{id}/files/..., archives).

The bytes travel through Docker's archive API, which the executor points at paths these ops
have resolved with containment.py, exactly as the file tools resolve theirs: a symlink that
leaves the workspace is refused, never followed. Uploads are extracted into a fresh staging
folder (`.runbox-staging-<hex>`) at the workspace root (the same file system as the rest of
it) and moved into place only once every byte arrived, so a transfer that fails or is
refused leaves nothing behind: not even the folders on the way, which commit makes.

files_stat     {path}                     -> {path, canonical, kind: file|dir, size}
files_stage    {path, kind: file|dir}     -> {path, staging}: checks the destination, makes the staging folder
files_commit   {path, kind, staging[, size]} -> makes missing folders, moves the staged file or tree into place
files_discard  {staging}                  -> removes a staging folder and all in it
files_delete   {path, recursive}          -> {path, kind}
Paths in answers are relative to the workspace root ("." for the root itself).
"""
import os
import re
import secrets
import shutil
import stat

from .containment import DIR_FLAGS, resolve, split_components, workspace_components, workspace_root
from .registry import OPS, ToolError

STAGING_RE = re.compile(r"^\.runbox-staging-[0-9a-f]{16}$")
# The one entry of a staged single-file upload (the gateway names it so in its tar).
UPLOAD_ENTRY = "content"


def _arg(args, name, kind=str):
    value = args.get(name)
    if not isinstance(value, kind):
        raise ToolError("%s is required" % name, code="bad_request")
    return value


def _canonical(parts, name=None):
    return "/".join(list(parts) + ([name] if name else [])) or "."


@OPS.register("files_stat")
def files_stat(args, request_id=None):
    with resolve(_arg(args, "path")) as r:
        if r.kind == "missing":
            raise ToolError("not found: %s" % r.display, code="not_found", path=r.display)
        if r.kind == "dir":
            return _ok(path=r.display, canonical=r.canonical, kind="dir", size=0)
        st = os.stat(r.name, dir_fd=r.dir_fd, follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            raise ToolError("%s is not a regular file (a device, FIFO or socket)" % r.display,
                            code="not_a_regular_file", path=r.display)
        return _ok(path=r.display, canonical=r.canonical, kind="file", size=st.st_size)


@OPS.register("files_stage")
def files_stage(args, request_id=None):
    """Checks the destination (missing folders on the way are fine: commit makes them), then
    makes the staging folder at the workspace root, so a refused upload leaves no trace."""
    path, kind = _arg(args, "path"), _arg(args, "kind")
    if kind != "dir" and path.endswith("/"):
        raise ToolError("%s names a folder; give the file's path" % path, code="is_a_directory", path=path)
    try:
        with resolve(path) as r:
            if kind == "dir" and r.kind == "file":
                raise ToolError("%s is a file, not a folder" % r.display, code="not_a_directory", path=r.display)
            if kind != "dir" and r.kind == "dir":
                raise ToolError("%s is a folder; give a file's path" % r.display, code="is_a_directory", path=r.display)
            display = r.display
    except ToolError as e:
        if e.code != "not_found":
            raise
        display = e.metadata.get("path", path)
    with resolve(".") as root:
        name = ".runbox-staging-%s" % secrets.token_hex(8)
        try:
            os.mkdir(name, 0o700, dir_fd=root.dir_fd)
        except PermissionError:
            raise ToolError("permission denied: cannot write in the workspace", code="permission_denied")
    return _ok(path=display, staging=name)


@OPS.register("files_commit")
def files_commit(args, request_id=None):
    path, kind, staging = _arg(args, "path"), _arg(args, "kind"), _arg(args, "staging")
    with _open_staging(staging) as (staging_parent, name):
        if kind == "dir":
            with resolve(path, make_dirs=True) as r:
                if r.kind == "file":
                    raise ToolError("%s is a file, not a folder" % r.display, code="not_a_directory", path=r.display)
                if r.kind == "missing":
                    # The staged tree becomes the folder in one rename.
                    os.chmod(name, 0o755, dir_fd=staging_parent)
                    os.rename(name, r.name, src_dir_fd=staging_parent, dst_dir_fd=r.dir_fd)
                    return _ok(path=r.display)
                src = os.open(name, DIR_FLAGS, dir_fd=staging_parent)
                try:
                    _merge(src, r.dir_fd)
                finally:
                    os.close(src)
                result = _ok(path=r.display)
        else:
            src = os.open(name, DIR_FLAGS, dir_fd=staging_parent)
            try:
                st = os.stat(UPLOAD_ENTRY, dir_fd=src, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    raise ToolError("the staged upload is not a regular file", code="bad_request")
                if isinstance(args.get("size"), int) and st.st_size != args["size"]:
                    raise ToolError("the staged upload has %d bytes, not the %d announced" % (st.st_size, args["size"]),
                                    code="incomplete")
                with resolve(path, make_dirs=True) as r:
                    if r.kind == "dir":
                        raise ToolError("%s is a folder; give a file's path" % r.display, code="is_a_directory", path=r.display)
                    before = _lstat(r.name, r.dir_fd)
                    if before is not None and stat.S_ISREG(before.st_mode):
                        os.chmod(UPLOAD_ENTRY, stat.S_IMODE(before.st_mode), dir_fd=src, follow_symlinks=False)
                    os.rename(UPLOAD_ENTRY, r.name, src_dir_fd=src, dst_dir_fd=r.dir_fd)
                    result = _ok(path=r.display, size=st.st_size, created=before is None)
            finally:
                os.close(src)
        shutil.rmtree(name, dir_fd=staging_parent)
        return result


@OPS.register("files_discard")
def files_discard(args, request_id=None):
    with _open_staging(_arg(args, "staging")) as (parent_fd, name):
        shutil.rmtree(name, dir_fd=parent_fd)
    return _ok()


@OPS.register("files_delete")
def files_delete(args, request_id=None):
    path = _arg(args, "path")
    recursive = args.get("recursive") is True
    comps = workspace_components(path, workspace_root())
    if not comps or comps[-1] in ("..",):
        raise ToolError("%s is the workspace itself or leads above it; name what to delete inside it" % path,
                        code="invalid_path", path=path)
    # The parent is resolved; the last name is removed as it is (a symlink itself, never its target).
    with resolve("/".join(comps[:-1]) or ".") as r:
        if r.kind != "dir":
            raise ToolError("not found: %s" % "/".join(comps), code="not_found", path="/".join(comps))
        name = comps[-1]
        display = _canonical(r.parts, name)
        st = _lstat(name, r.dir_fd)
        if st is None:
            raise ToolError("not found: %s" % display, code="not_found", path=display)
        if stat.S_ISDIR(st.st_mode):
            if not recursive:
                raise ToolError("%s is a folder; pass recursive=true to delete it and all in it" % display,
                                code="is_a_directory", path=display)
            shutil.rmtree(name, dir_fd=r.dir_fd)
            return _ok(path=display, kind="dir")
        os.unlink(name, dir_fd=r.dir_fd)
        return _ok(path=display, kind="file")


class _open_staging:
    """Opens the parent of a staging folder named by its canonical path; checks the name's form."""

    def __init__(self, staging):
        comps = split_components(staging)
        if not comps or not STAGING_RE.match(comps[-1]) or ".." in comps:
            raise ToolError("%r is not a staging folder" % staging, code="bad_request")
        self.name = comps[-1]
        self.r = resolve("/".join(comps[:-1]) or ".")

    def __enter__(self):
        if self.r.kind != "dir":
            self.r.close()
            raise ToolError("the staging folder's parent is gone", code="not_found")
        return self.r.dir_fd, self.name

    def __exit__(self, *exc):
        self.r.close()


def _merge(src_fd, dst_fd):
    """Moves every entry of src into dst: folders merge, anything else replaces what is there."""
    for name in os.listdir(src_fd):
        st = os.stat(name, dir_fd=src_fd, follow_symlinks=False)
        there = _lstat(name, dst_fd)
        if stat.S_ISDIR(st.st_mode) and there is not None and stat.S_ISDIR(there.st_mode):
            inner_src = os.open(name, DIR_FLAGS, dir_fd=src_fd)
            try:
                inner_dst = os.open(name, DIR_FLAGS, dir_fd=dst_fd)
                try:
                    _merge(inner_src, inner_dst)
                finally:
                    os.close(inner_dst)
            finally:
                os.close(inner_src)
            continue
        if there is not None and stat.S_ISDIR(there.st_mode):
            shutil.rmtree(name, dir_fd=dst_fd)
        os.rename(name, name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)


def _lstat(name, dir_fd):
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _ok(**metadata):
    return {"output": "ok", "metadata": metadata, "is_error": False}
