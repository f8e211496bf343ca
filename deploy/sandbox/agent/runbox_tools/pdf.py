"""read_file of a PDF: its embedded text, page by page, through poppler.

poppler-utils (`pdfinfo`, `pdftotext`) is in the sandbox image because real PDFs map glyphs
through ToUnicode CMaps, use CID fonts and compress content in ways only a real PDF library
decodes. poppler reads the file through the descriptor the containment walk opened
(/dev/fd/N, passed to the child), never by name, so a path swapped after the walk cannot
redirect it.

Every byte poppler prints comes from an untrusted file: each run has a time limit and its
output is read up to a bound, then the process is killed. A page with no text layer (a
scanned page) is shown as such; no text recognition is attempted.
"""
import re
import subprocess
import threading

from .registry import ToolError

PDF_MAX_BYTES = 64 * 1024 * 1024
PDF_MAX_PAGES_PER_CALL = 20
POPPLER_TIMEOUT_SECONDS = 30.0
PDFINFO_MAX_OUTPUT = 64 * 1024
# Twenty pages of dense text are well under this; more means the file is hostile.
PDFTOTEXT_MAX_OUTPUT = 8 * 1024 * 1024
NO_TEXT_NOTE = "(no text layer on this page: it is probably a scanned image; its text cannot be extracted)"


def read_pdf(display, fd, size, pages_arg, bad_arg, result):
    """The result of read_file for the PDF open at `fd` (size bytes)."""
    if size > PDF_MAX_BYTES:
        raise ToolError("%s is larger than %d MB; PDF text extraction is limited to that size" % (
            display, PDF_MAX_BYTES >> 20), code="file_too_large", path=display)
    info = _pdfinfo(display, fd)
    count = info["pages"]
    if count == 0:
        raise ToolError("%s: this PDF has no pages" % display, code="pdf_unreadable", path=display)
    wanted, clipped = page_selection(pages_arg, count, bad_arg)
    texts = {}
    for lo, hi in _spans(wanted):
        for n, text in zip(range(lo, hi + 1), _pdftotext(display, fd, lo, hi)):
            texts[n] = text
    chunks, empty = [], []
    for n in wanted:
        text = texts.get(n, "")
        if not text:
            empty.append(n)
            text = NO_TEXT_NOTE
        chunks.append("--- page %d ---\n%s" % (n, text))
    header = "%s — PDF, pages %s of %d" % (display, ranges_text(wanted), count)
    out = header + "\n\n" + "\n\n".join(chunks)
    if clipped:
        out += "\n… %d more pages (use pages=\"%d-%d\" to continue)" % (
            clipped, wanted[-1] + 1, min(count, wanted[-1] + PDF_MAX_PAGES_PER_CALL))
    meta = dict(path=display, kind="pdf", total_pages=count, pages=wanted, pages_without_text=empty)
    if info["encrypted"]:
        meta["encrypted"] = True
    return result(out, **meta)


def page_selection(pages_arg, count, bad_arg):
    """Parse "1-3,5" into page numbers (pages past the end dropped); at most PDF_MAX_PAGES_PER_CALL."""
    if pages_arg is None or not pages_arg.strip():
        wanted = list(range(1, count + 1))
    else:
        chosen = set()
        for piece in pages_arg.split(","):
            m = re.fullmatch(r"\s*(\d{1,9})\s*(?:-\s*(\d{0,9})\s*)?", piece)
            if not m:
                raise bad_arg("pages", 'must look like "3", "1-5" or "1-3,7", got %r' % pages_arg[:100])
            lo = int(m.group(1))
            hi = lo if m.group(2) is None else (int(m.group(2)) if m.group(2) else count)
            if lo < 1 or hi < lo:
                raise bad_arg("pages", "has an empty or invalid range %r" % piece.strip())
            # Clipped to the document, so "1-999999999" costs no more than the document has pages.
            chosen.update(range(lo, min(hi, count) + 1))
        if not chosen:
            raise ToolError("pages %r is past the end of the document, which has %d pages" % (pages_arg, count),
                            code="offset_out_of_range")
        wanted = sorted(chosen)
    clipped = max(0, len(wanted) - PDF_MAX_PAGES_PER_CALL)
    return wanted[:PDF_MAX_PAGES_PER_CALL], clipped


def ranges_text(nums):
    return ",".join(str(lo) if lo == hi else "%d-%d" % (lo, hi) for lo, hi in _spans(nums))


def _spans(nums):
    """[1,2,3,7] -> [(1,3),(7,7)] (nums sorted)."""
    spans = []
    for n in nums:
        if spans and spans[-1][1] == n - 1:
            spans[-1] = (spans[-1][0], n)
        else:
            spans.append((n, n))
    return spans


def _pdfinfo(display, fd):
    out = _poppler(display, fd, ["pdfinfo"], PDFINFO_MAX_OUTPUT)
    pages = re.search(r"^Pages:\s+(\d+)\s*$", out, re.M)
    if not pages:
        raise ToolError("%s: poppler found no page count in this PDF (damaged or not a PDF)" % display,
                        code="pdf_unreadable", path=display)
    encrypted = re.search(r"^Encrypted:\s+yes", out, re.M) is not None
    return {"pages": int(pages.group(1)), "encrypted": encrypted}


def _pdftotext(display, fd, first, last):
    """The text of pages first..last, one string per page (trailing blanks stripped)."""
    out = _poppler(display, fd, ["pdftotext", "-q", "-layout", "-enc", "UTF-8", "-f", str(first), "-l", str(last)],
                   PDFTOTEXT_MAX_OUTPUT, to_stdout=True)
    # pdftotext ends every page with a form feed.
    pages = out.split("\f")
    return [_tidy(p) for p in pages[:last - first + 1]]


def _tidy(page):
    lines = [line.rstrip() for line in page.split("\n")]
    return "\n".join(lines).strip("\n")


def _drain_tail(stream, tail, keep=4096):
    for chunk in iter(lambda: stream.read(65536), b""):
        tail.extend(chunk)
        del tail[:-keep]


def _poppler(display, fd, argv, max_output, to_stdout=False):
    """Runs a poppler tool on the open PDF; its stdout as text, bounded in size and time."""
    source = "/dev/fd/%d" % fd
    cmd = argv + [source] + (["-"] if to_stdout else [])
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                pass_fds=(fd,), start_new_session=True)
    except FileNotFoundError:
        raise ToolError("%s: PDF support is not installed in this sandbox (poppler-utils)" % display,
                        code="pdf_unsupported", path=display)
    timer = threading.Timer(POPPLER_TIMEOUT_SECONDS, proc.kill)
    timer.start()
    # A damaged file can make poppler warn without end: stderr is drained beside stdout
    # (keeping its tail) so a full stderr pipe never stalls the stdout read.
    err_tail = bytearray()
    drain = threading.Thread(target=_drain_tail, args=(proc.stderr, err_tail), daemon=True)
    drain.start()
    try:
        out = proc.stdout.read(max_output + 1)
        overflow = len(out) > max_output
        if overflow:
            proc.kill()
        proc.wait()
        drain.join()
    finally:
        timer.cancel()
        proc.stdout.close()
        proc.stderr.close()
    err = bytes(err_tail)
    if overflow:
        raise ToolError("%s: the text of these pages is larger than %d MB; ask for fewer pages" % (
            display, max_output >> 20), code="output_too_large", path=display)
    if proc.returncode < 0:
        raise ToolError("%s: reading this PDF took longer than %d s and was stopped" % (
            display, POPPLER_TIMEOUT_SECONDS), code="pdf_timeout", path=display)
    if proc.returncode != 0:
        why = err.decode("utf-8", "replace").strip().splitlines()
        reason = why[-1][:300] if why else "exit status %d" % proc.returncode
        if proc.returncode == 3 or "password" in reason.lower():
            raise ToolError("%s is encrypted with a password; its text cannot be read" % display,
                            code="pdf_encrypted", path=display)
        raise ToolError("%s: this PDF could not be read (damaged or not a PDF): %s" % (display, reason),
                        code="pdf_unreadable", path=display)
    return out.decode("utf-8", "replace")
