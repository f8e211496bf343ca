"""Search tools: glob (find files by name pattern) and grep (ripgrep over contents).

Design
------
Both resolve their `path` with the race-free walker in containment.py and search from the open
directory descriptor it yields, so a search can never start outside the workspace:
glob walks with scandir/openat and never follows symlinks; grep runs `rg` with its
working directory set to /proc/self/fd/<fd> (the vetted directory itself, not a path
that could be swapped) and relies on rg not following links while walking.

Both collect every result first (sorted, so pages are stable across calls), then cut a
page: at most head_limit entries, and never more characters than the output budget the
server will enforce (max_output_chars), always at an entry boundary. The footer gives
the next offset. A deadline (RUNBOX_FILE_SEARCH_TIMEOUT, default 20 s) bounds the walk
or the rg process; what was found by then is returned as an explicitly partial page, and
finding nothing by then is an error suggesting a narrower search.
"""
import base64
import codecs
import hashlib
import json
import os
import re
import signal
import stat
import subprocess
import threading
import time

from .registry import OPS, ToolError
from .containment import (
    check_path_text, display_path, join_display, open_regular, resolve, resolve_existing_file, split_components,
    workspace_components, workspace_root,
)
from .files import arg_bool, arg_int, arg_str, bad_arg, output_budget, read_up_to, result, search_timeout

GLOB_DEFAULT_LIMIT = 100
GREP_DEFAULT_LIMIT = 250
MAX_COLLECTED = 200000  # results kept before a search stops and reports "at least"
GREP_MAX_FILESIZE = 8 * 1024 * 1024
# A folder search takes files up to this size first and the bigger ones after (RgRun._search_folder).
SMALL_FIRST_BYTES = 1024 * 1024
BIG_FILES_PER_RUN = 500  # paths per rg command line in the second pass
GREP_LINE_CHARS = 2000  # a content line longer than this is shown as a window around the match
FOOTER_LIST_MAX = 20
RG_COMMAND = ["rg"]  # tests swap this for a fake to exercise deadlines

_clock = time.monotonic  # tests swap this to make a walk hit its deadline deterministically


# --------------------------------------------------------------------------- paging

def sort_key(rel):
    """Order paths as a directory walk does: component by component, bytewise."""
    return [os.fsencode(c) for c in rel.split("/")]


def paginate(entries, offset, head_limit, budget, footer_for):
    """Choose entries[offset:k] so the page plus its footer fits `budget` characters.

    footer_for(next_offset or None, shown_count) builds the footer. A page always holds at
    least one entry (clipped if it alone exceeds the budget) so paging always progresses.
    Returns (text, shown_count, next_offset).
    """
    end = len(entries) if head_limit == 0 else min(len(entries), offset + head_limit)
    page, chars = [], 0
    i = offset
    while i < end:
        entry = entries[i]
        room = budget - max(len(footer_for(i + 1, len(page) + 1)), len(footer_for(None, len(page) + 1))) - 2
        if chars + len(entry) + (1 if page else 0) > room:
            if page:
                break
            entry = entry[:max(room - 20, 0)] + " … [entry clipped]"
        page.append(entry)
        chars += len(entry) + (1 if len(page) > 1 else 0)
        i += 1
    next_offset = i if i < len(entries) else None
    footer = footer_for(next_offset, len(page))
    text = "\n".join(page + ([""] if page and footer else []) + ([footer] if footer else []))
    return text, len(page), next_offset


def page_footer(offset, shown, total, next_offset, partial_note, at_least=False, extra=""):
    """The paging footer shared by glob and grep."""
    lines = []
    if partial_note:
        lines.append(partial_note)
    total_text = ("at least %d" if at_least else "%d") % total
    if next_offset is not None:
        lines.append("(results %d-%d of %s; more results: call again with offset=%d)" % (
            offset + 1, offset + shown, total_text, next_offset))
    elif offset > 0 or at_least:
        lines.append("(results %d-%d of %s; no more results)" % (offset + 1, offset + shown, total_text)
                     if shown else "(no results at offset %d; there are %s)" % (offset, total_text))
    if extra:
        lines.append(extra)
    return "\n".join(lines)


def paged_result(entries, args, default_limit, partial_note, at_least, extra, meta):
    offset = arg_int(args, "offset", 0, minimum=0)
    head_limit = arg_int(args, "head_limit", default_limit, minimum=0)
    total = len(entries)

    def footer_for(next_offset, shown):
        return page_footer(offset, shown, total, next_offset, partial_note, at_least, extra)

    text, shown, next_offset = paginate(entries, offset, head_limit, output_budget(args), footer_for)
    meta.update(count=shown, total=None if (at_least or partial_note) else total, found=total,
                next_offset=next_offset, offset=offset, partial=bool(partial_note))
    return result(text, **meta)


def deadline_note(found):
    return ("(search stopped at the %g s deadline: partial results, %d found so far; a narrower path or "
            "pattern gives a complete list)" % (search_timeout(), found))


def deadline_error(what):
    return ToolError("the %s hit its %g s deadline before finding anything; narrow it with a more specific path "
                     "or pattern" % (what, search_timeout()), code="search_timeout")


def _search_base(args):
    """Resolve the `path` argument to an open directory or file."""
    path = arg_str(args, "path", ".")
    r = resolve(path)
    if r.kind == "missing":
        r.close()
        raise ToolError("not found: %s" % r.display, code="not_found", path=r.display)
    return r


# --------------------------------------------------------------------------- glob patterns

def expand_braces(pattern, limit=256):
    """'{a,b}/*.{js,ts}' -> four patterns (nested braces allowed; `\\` escapes)."""
    depth, start = 0, None
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                options = _split_top_commas(pattern[start + 1:i])
                if len(options) > 1:
                    out = []
                    for opt in options:
                        for tail in expand_braces(pattern[:start] + opt + pattern[i + 1:], limit):
                            out.append(tail)
                            if len(out) > limit:
                                raise bad_arg("pattern", "expands to more than %d alternatives" % limit)
                    return out
        i += 1
    return [pattern]


def _split_top_commas(text):
    parts, depth, cur, i = [], 0, "", 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            cur += text[i:i + 2]
            i += 2
            continue
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            depth += ch == "{"
            depth -= ch == "}" and depth > 0
            cur += ch
        i += 1
    return parts + [cur]


GLOBSTAR = "**"


def _is_literal(comp):
    return not re.search(r"[*?\[\\]", comp)


def component_matcher(comp):
    """A callable name -> bool for one path component; wildcards never match `.git`."""
    if comp == GLOBSTAR:
        return GLOBSTAR
    if _is_literal(comp):
        return lambda name, lit=comp: name == lit
    rx = re.compile(_component_regex(comp), re.S)
    return lambda name: name != ".git" and rx.fullmatch(name) is not None


def _component_regex(comp):
    out, i = [], 0
    while i < len(comp):
        ch = comp[i]
        if ch == "\\" and i + 1 < len(comp):
            out.append(re.escape(comp[i + 1]))
            i += 2
            continue
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            end, cls = _char_class(comp, i)
            out.append(cls)
            i = end
            continue
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _char_class(comp, i):
    """Translate [..] starting at comp[i]; an unclosed [ is a literal bracket."""
    j = i + 1
    negate = j < len(comp) and comp[j] in "!^"
    if negate:
        j += 1
    if j < len(comp) and comp[j] == "]":
        j += 1
    close = comp.find("]", j)
    if close < 0:
        return i + 1, re.escape("[")
    body = comp[i + 1 + negate:close].replace("\\", "\\\\")
    return close + 1, "[" + ("^" if negate else "") + body + "]"


class GlobMatcher:
    """An NFA over path components for a set of brace-expanded patterns.

    A state is (pattern index, component index); `**` may consume any number of names.
    Walking a directory carries the live states, so subtrees no pattern can reach are
    never opened.
    """

    def __init__(self, patterns):
        self.patterns = [[component_matcher(c) for c in p] for p in patterns]
        self.start = self.closure({(i, 0) for i in range(len(self.patterns))})

    def closure(self, states):
        out, todo = set(states), list(states)
        while todo:
            pi, ci = todo.pop()
            comps = self.patterns[pi]
            if ci < len(comps) and comps[ci] is GLOBSTAR and (pi, ci + 1) not in out:
                out.add((pi, ci + 1))
                todo.append((pi, ci + 1))
        return frozenset(out)

    def step(self, states, name):
        nxt = set()
        for pi, ci in states:
            comps = self.patterns[pi]
            if ci >= len(comps):
                continue
            m = comps[ci]
            if m is GLOBSTAR:
                if name != ".git":
                    nxt.add((pi, ci))
            elif m(name):
                nxt.add((pi, ci + 1))
        return self.closure(nxt)

    def accepts(self, states):
        return any(ci == len(self.patterns[pi]) for pi, ci in states)

    def can_descend(self, states):
        return any(ci < len(self.patterns[pi]) for pi, ci in states)


def split_pattern(pattern):
    """(literal leading components shared by every alternative, remaining component lists)."""
    alternatives = [p.split("/") for p in expand_braces(pattern)]
    alternatives = [[c for c in comps if c not in ("", ".")] for comps in alternatives]
    prefix = []
    while all(len(a) > len(prefix) + 1 for a in alternatives):
        comp = alternatives[0][len(prefix)]
        if not _is_literal(comp) or comp == GLOBSTAR or any(a[len(prefix)] != comp for a in alternatives):
            break
        prefix.append(comp)
    rests = [a[len(prefix):] for a in alternatives]
    for rest in rests:
        if ".." in rest:
            raise ToolError("invalid glob pattern %r: '..' may only appear at its start" % pattern,
                            code="invalid_pattern")
        if not rest:
            raise ToolError("invalid glob pattern %r: it names no files" % pattern, code="invalid_pattern")
    return prefix, rests


# --------------------------------------------------------------------------- glob

@OPS.register("glob")
def glob(args, request_id=None):
    pattern = arg_str(args, "pattern")
    sort = arg_str(args, "sort", "mtime")
    if sort not in ("mtime", "path"):
        raise bad_arg("sort", 'must be "mtime" (newest first) or "path", got %r' % sort)
    arg_int(args, "head_limit", GLOB_DEFAULT_LIMIT, minimum=0)
    arg_int(args, "offset", 0, minimum=0)
    check_path_text(pattern)
    base_given, prefix, rests = _glob_base(args, pattern)
    found, partial, capped = _glob_in(base_given, GlobMatcher(rests))
    if partial and not found:
        raise deadline_error("glob")
    if sort == "path":
        found.sort(key=lambda item: sort_key(item[1]))
    else:
        found.sort(key=lambda item: (-item[0], sort_key(item[1])))
    entries = [path for _, path in found]
    meta = dict(pattern=pattern, path=display_path(arg_str(args, "path", ".")), sort=sort)
    if not entries:
        return result("No files match %r under %s" % (pattern, meta["path"]), count=0, total=0, next_offset=None,
                      partial=False, **meta)
    note = deadline_note(len(entries)) if partial else ""
    extra = "(stopped collecting after %d matches)" % MAX_COLLECTED if capped else ""
    return paged_result(entries, args, GLOB_DEFAULT_LIMIT, note, capped, extra, meta)


def _glob_in(base_given, matcher):
    """Walk the base if it is a directory; a literal prefix that does not exist just matches nothing."""
    try:
        r = resolve(base_given)
    except ToolError as e:
        if e.code in ("not_found", "not_a_directory"):
            return [], False, False
        raise
    with r:
        if r.kind != "dir":
            return [], False, False
        return _glob_walk(r.dir_fd, matcher, r.display)


def _glob_base(args, pattern):
    """The directory to walk (path + the pattern's literal prefix) and the rest of the pattern."""
    if pattern.startswith("/"):
        # An absolute pattern names its own base; it must lie inside the workspace.
        rel = "/".join(workspace_components(pattern, workspace_root()))
        prefix, rests = split_pattern(rel)
        return "/".join(prefix) or ".", prefix, rests
    path = arg_str(args, "path", ".")
    prefix, rests = split_pattern(pattern)
    with resolve(path) as r:  # the path itself must exist and be a directory
        if r.kind == "missing":
            raise ToolError("not found: %s" % r.display, code="not_found", path=r.display)
        if r.kind != "dir":
            raise ToolError("%s is a file; glob needs a directory as path" % r.display, code="not_a_directory")
    if not prefix:
        return path, prefix, rests
    if split_components(path) == [] and not path.startswith("/"):
        return "/".join(prefix), prefix, rests  # keep errors about the pattern free of a "./" the model never wrote
    return path.rstrip("/") + "/" + "/".join(prefix), prefix, rests


def _glob_walk(root_fd, matcher, base_display):
    """Walk from root_fd collecting (mtime_ns, display path) of matching non-directories."""
    deadline = _clock() + search_timeout()
    found, partial, capped = [], False, False
    stack = [(os.dup(root_fd), "", matcher.start)]
    first = True
    try:
        while stack:
            fd, rel, states = stack.pop()
            try:
                # The base folder is always read, so a deadline shorter than one folder's
                # scan still shows what lies directly in it.
                if not first and _clock() > deadline:
                    partial = True
                    break
                first = False
                capped = _glob_dir(fd, rel, states, matcher, base_display, found, stack)
                if capped:
                    break
            finally:
                os.close(fd)
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    return found, partial, capped


def _glob_dir(fd, rel, states, matcher, base_display, found, stack):
    try:
        entries = list(os.scandir(fd))
    except OSError:
        return False  # unreadable directory: nothing in it can be listed
    for e in entries:
        nxt = matcher.step(states, e.name)
        if not nxt:
            continue
        child = rel + e.name
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            if matcher.can_descend(nxt):
                try:
                    stack.append((os.open(e.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                          dir_fd=fd), child + "/", nxt))
                except OSError:
                    pass
        elif matcher.accepts(nxt):
            found.append((st.st_mtime_ns, join_display(base_display, child)))
            if len(found) >= MAX_COLLECTED:
                return True
    return False


# --------------------------------------------------------------------------- grep

@OPS.register("grep")
def grep(args, request_id=None):
    pattern = arg_str(args, "pattern")
    file_glob = arg_str(args, "glob", None)
    mode = arg_str(args, "output_mode", "files_with_matches")
    if mode not in ("files_with_matches", "count", "content"):
        raise bad_arg("output_mode", 'must be "files_with_matches", "count" or "content", got %r' % mode)
    case_insensitive = arg_bool(args, "case_insensitive", False)
    arg_int(args, "head_limit", GREP_DEFAULT_LIMIT, minimum=0)
    arg_int(args, "offset", 0, minimum=0)
    if "\x00" in pattern:
        raise bad_arg("pattern", "must not contain a NUL byte")
    with _search_base(args) as r:
        deadline = time.monotonic() + search_timeout()
        run = RgRun(pattern, file_glob, case_insensitive, r, deadline)
        run.execute()
        if run.capped:
            # rg in path order walks on one thread and costs about 5 % more, so only a search
            # that hit the collection cap pays for it: its first MAX_COLLECTED lines must be
            # the same ones on every call, or paging through them would skip and repeat.
            run = RgRun(pattern, file_glob, case_insensitive, r, deadline, in_path_order=True)
            run.execute()
    if run.fatal:
        raise run.fatal
    entries = _verified_entries(run, mode, args)
    meta = dict(pattern=pattern, path=r.display, output_mode=mode, files_matched=len(run.files))
    extra = run.skipped_footer()
    if run.timed_out and not entries:
        raise deadline_error("search")
    if not entries:
        out = "No matches for %r under %s" % (pattern, r.display)
        return result(out + ("\n\n" + extra if extra else ""), count=0, total=0, next_offset=None, partial=False,
                      **meta)
    note = deadline_note(len(entries)) if run.timed_out else ""
    if run.capped:
        extra = "(stopped collecting after %d matching lines)\n%s" % (MAX_COLLECTED, extra)
    return paged_result(entries, args, GREP_DEFAULT_LIMIT, note, run.capped, extra.strip(), meta)


def _verified_entries(run, mode, args):
    """The entries, once every file that can appear on the requested page has been checked
    (RgRun.verify). A file that fails is dropped, which may bring others onto the page, so
    it repeats until a page holds only checked files; each file is read at most once."""
    while True:
        pairs = run.entries(mode)
        if not run.verify(_paths_on_page(pairs, args)):
            return [text for _, text in pairs]


def _paths_on_page(pairs, args):
    """The files of the entries the page can show: at most head_limit of them from offset, and
    no more than fit the output budget (a superset of what paginate will pick)."""
    offset = arg_int(args, "offset", 0, minimum=0)
    limit = arg_int(args, "head_limit", GREP_DEFAULT_LIMIT, minimum=0)
    budget = output_budget(args)
    paths, used = [], 0
    for i, (path, text) in enumerate(pairs[offset:]):
        if (limit and i >= limit) or used > budget:
            break
        used += len(text) + 1
        if not paths or paths[-1] != path:
            paths.append(path)
    return paths


_UTF16_BOMS = ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


def as_rg_reads_it(data):
    """The bytes rg searched and reported lines of: it sniffs a byte-order mark (its default
    `--encoding auto`), transcodes UTF-16 to UTF-8 and drops a UTF-8 BOM. Comparing its
    report with the raw bytes of such a file would call every match a change."""
    for bom, codec in _UTF16_BOMS:
        if data.startswith(bom):
            return data[len(bom):].decode(codec, "replace").encode("utf-8")
    if data.startswith(codecs.BOM_UTF8):
        return data[len(codecs.BOM_UTF8):]
    return data


def _digest(line):
    return hashlib.blake2b(line, digest_size=16).digest()


class RgRun:
    """One ripgrep process and what it reported: matches per file, skipped files, errors."""

    _TOO_BIG = re.compile(r"ignoring (.+): (\d+) bytes$")
    _FILE_ERROR = re.compile(r"^(?:rg: )?(.+?): (.*\(os error \d+\))$")

    def __init__(self, pattern, file_glob, case_insensitive, resolved, deadline, in_path_order=False):
        self.pattern, self.file_glob, self.case_insensitive = pattern, file_glob, case_insensitive
        self.r = resolved
        self.deadline, self.in_path_order = deadline, in_path_order
        self.files = {}      # display path -> [(line number, text, digest of the raw line)]
        self._checked = set()  # display paths verify() found unchanged
        self.skipped = []    # (display path, reason)
        self.errors = []     # fatal stderr text (bad regex, bad glob)
        self.fatal = None
        self.timed_out = self.capped = False
        self.summary_seen = False
        self._matched_lines = 0
        self._big = None     # rg paths of files the small-files pass skipped, while it runs
        self._prefix, self._single = resolved.display, None

    # -- running

    def command(self, targets, max_filesize="8M"):
        # Results are sorted here, so rg may search in parallel and report in any order.
        # --line-buffered: rg block-buffers its output when it is not a terminal, so what it had
        # found when the deadline killed it would die in its buffer; each line is flushed instead.
        cmd = list(RG_COMMAND) + ["--json", "--line-buffered", "--debug", "--no-config", "--hidden", "--binary",
                                  "--max-filesize", max_filesize]
        if self.in_path_order:
            cmd += ["--sort", "path"]
        if self.case_insensitive:
            cmd.append("--ignore-case")
        else:
            cmd.append("--case-sensitive")
        if self.file_glob:
            cmd += ["--glob", self.file_glob]
        cmd += ["--glob", "!.git", "--regexp", self.pattern, "--"] + list(targets)
        return cmd

    def execute(self):
        if self.r.kind == "dir":
            self._search_folder()
            return
        fd, st = open_regular(self.r)
        try:
            if st.st_size > GREP_MAX_FILESIZE:
                self.skipped.append((self.r.display, "larger than 8 MB (%d bytes); not searched" % st.st_size))
                self.summary_seen = True
                return
            # rg reads the already-open file through its descriptor, so a swapped-in link is never followed.
            self._single = self.r.display
            self._spawn_and_collect(self.r.dir_fd, ["/proc/self/fd/%d" % fd], keep=fd)
        finally:
            os.close(fd)

    def _search_folder(self):
        """Small files first, then the big ones rg skipped, so a deadline never strands them.

        rg's threads take files in whatever order its walk queues them; a few slow big files
        can occupy every thread while small matching files wait behind them, and the
        deadline then finds nothing. The first pass searches files up to SMALL_FIRST_BYTES
        (rg reports each bigger file it skips); the second searches those files by name.
        """
        self._big = []
        self._spawn_and_collect(self.r.dir_fd, ["."], max_filesize=str(SMALL_FIRST_BYTES))
        pending = self._big
        while pending and not (self.timed_out or self.capped or self.fatal):
            chunk, pending = pending[:BIG_FILES_PER_RUN], pending[BIG_FILES_PER_RUN:]
            self._big = None  # the second pass skips nothing it should come back to
            self._spawn_and_collect(self.r.dir_fd, chunk)

    def _spawn_and_collect(self, dir_fd, targets, keep=None, max_filesize="8M"):
        pass_fds = (dir_fd,) + ((keep,) if keep is not None else ())
        try:
            proc = subprocess.Popen(self.command(targets, max_filesize), cwd="/proc/self/fd/%d" % dir_fd, pass_fds=pass_fds,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True)
        except FileNotFoundError:
            raise ToolError("ripgrep (rg) is not installed in this sandbox", code="search_unavailable")
        readers = [threading.Thread(target=self._read_stdout, args=(proc,), daemon=True),
                   threading.Thread(target=self._read_stderr, args=(proc,), daemon=True)]
        # Popen.wait(timeout=...) polls with sleeps growing to 50 ms, which adds ~25 ms to
        # every search on average; a thread blocked in waitpid wakes the moment rg exits.
        exited = threading.Event()
        waiter = threading.Thread(target=self._wait_exit, args=(proc, exited), daemon=True)
        for t in readers + [waiter]:
            t.start()
        try:
            if not exited.wait(max(0.0, self.deadline - time.monotonic())):
                self.timed_out = True
        finally:
            if not exited.is_set():
                self._kill(proc)
            for t in readers + [waiter]:
                t.join()
        self._check_fatal(proc.returncode)

    @staticmethod
    def _wait_exit(proc, exited):
        proc.wait()
        exited.set()

    @staticmethod
    def _kill(proc):
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole group: rg and anything it started
        except ProcessLookupError:
            pass
        proc.wait()

    def _read_stdout(self, proc):
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if self._take(msg):
                # Nothing after the cap is kept, so a capped search holds exactly the
                # first MAX_COLLECTED lines rg reported, whatever was still in the pipe.
                self.capped = True
                self._kill(proc)
                break
        proc.stdout.close()

    def _read_stderr(self, proc):
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if line.startswith("DEBUG|"):
                m = self._TOO_BIG.search(line)
                if m and self._big is not None and int(m.group(2)) <= GREP_MAX_FILESIZE:
                    self._big.append(m.group(1))  # over SMALL_FIRST_BYTES: searched in the second pass
                elif m:
                    self.skipped.append((self._display(m.group(1)), "larger than 8 MB (%s bytes); not searched"
                                         % m.group(2)))
                continue
            m = self._FILE_ERROR.match(line)
            if m:  # "<path>: Permission denied (os error 13)", with or without an "rg: " prefix
                self.skipped.append((self._display(m.group(1)), m.group(2)))
            elif line.strip() and len(self.errors) < 50:
                self.errors.append(line)
        proc.stderr.close()

    def _check_fatal(self, returncode):
        if returncode == 2 and not self.summary_seen and not self.timed_out and not self.capped and self.errors:
            text = "\n".join(self.errors).strip()
            kind = "regular expression" if "regex" in text else ("glob" if "glob" in text else "search")
            self.fatal = ToolError("invalid %s: %s" % (kind, text) if kind != "search" else "grep failed: " + text,
                                   code="invalid_pattern" if kind != "search" else "search_failed")

    # -- parsing rg --json

    def _display(self, rg_path):
        if self._single is not None:
            return self._single
        rel = rg_path[2:] if rg_path.startswith("./") else rg_path
        return join_display(self._prefix, rel)

    @staticmethod
    def _text(field):
        if "text" in field:
            return field["text"]
        return os.fsdecode(base64.b64decode(field.get("bytes", "")))

    def _take(self, msg):
        """Record one rg message; True when enough has been collected to stop."""
        kind, data = msg.get("type"), msg.get("data") or {}
        if kind == "summary":
            self.summary_seen = True
        elif kind == "match":
            path = self._display(self._text(data["path"]))
            raw = self._raw_line(data)
            self.files.setdefault(path, []).append((data.get("line_number") or 0, self._line_text(data, raw), _digest(raw)))
            self._matched_lines += 1
            return self._matched_lines >= MAX_COLLECTED
        elif kind == "end" and data.get("binary_offset") is not None:
            path = self._display(self._text(data["path"]))
            hits = self.files.pop(path, [])
            self.skipped.append((path, "binary file (NUL byte at offset %d): %d matching line%s not shown" % (
                data["binary_offset"], len(hits), "" if len(hits) == 1 else "s")))
        return False

    @staticmethod
    def _raw_line(data):
        """The matching line's bytes, without its line ending."""
        lines = data.get("lines") or {}
        if "text" in lines:
            raw = lines["text"].encode("utf-8", "surrogateescape")
        else:
            raw = base64.b64decode(lines.get("bytes", ""))
        return raw.rstrip(b"\n").rstrip(b"\r")

    @staticmethod
    def _line_text(data, raw):
        if len(raw) > GREP_LINE_CHARS:
            start = max(0, ((data.get("submatches") or [{}])[0].get("start") or 0) - GREP_LINE_CHARS // 4)
            window = raw[start:start + GREP_LINE_CHARS]
            text = window.decode("utf-8", "replace")
            return "%s%s … [line is %d bytes; shown from byte %d]" % ("… " if start else "", text, len(raw), start)
        return raw.decode("utf-8", "replace")

    # -- output

    def entries(self, mode):
        """(path, entry text) pairs in path order."""
        paths = sorted(self.files, key=sort_key)
        if mode == "files_with_matches":
            return [(p, p) for p in paths]
        if mode == "count":
            return [(p, "%s:%d" % (p, len(self.files[p]))) for p in paths]
        return [(p, "%s:%d:%s" % (p, n, text)) for p in paths for n, text, _ in self.files[p]]

    def verify(self, paths):
        """Drops the files among `paths` that no longer hold what rg reported; True if any.

        rg opens the files of a folder by name, so a file swapped for a link between its
        listing and its opening is followed, possibly out of the workspace. Nothing rg
        reported is shown unless the file, opened now by the agent's own walk (which never
        leaves the workspace), holds every reported line at its line number: what is shown
        is then workspace content, whatever rg happened to read. A single file is exempt:
        rg read it through the descriptor the walk opened."""
        dropped = False
        for path in paths:
            if self._single is not None or path in self._checked:
                continue
            if self._still_holds(path, self.files[path]):
                self._checked.add(path)
                continue
            del self.files[path]
            self.skipped.append((path, "changed while it was searched (replaced, or now a link); search again"))
            dropped = True
        return dropped

    @staticmethod
    def _still_holds(path, hits):
        try:
            r, fd, _ = resolve_existing_file(path)
        except ToolError:
            return False
        try:
            with r:
                lines = as_rg_reads_it(read_up_to(fd, GREP_MAX_FILESIZE + 1)).split(b"\n")
        finally:
            os.close(fd)
        return all(0 < n <= len(lines) and _digest(lines[n - 1].rstrip(b"\r")) == digest for n, _, digest in hits)

    def skipped_footer(self):
        if not self.skipped:
            return ""
        items = sorted(set(self.skipped), key=lambda s: sort_key(s[0]))
        lines = ["(files not searched or not shown: %d)" % len(items)]
        lines += ["  %s: %s" % (p[:300], why[:200]) for p, why in items[:FOOTER_LIST_MAX]]
        if len(items) > FOOTER_LIST_MAX:
            lines.append("  … and %d more" % (len(items) - FOOTER_LIST_MAX))
        return "\n".join(lines)
