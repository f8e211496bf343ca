"""Tests for the file ops (runbox_tools/files.py); path containment is in test_containment.py.

Run from deploy/sandbox/agent:  python3 -m unittest discover -s tests -t .

Each test gets a fresh temp directory holding `ws/` (the workspace, set through
RUNBOX_WORKSPACE, which the ops read on every call) and, beside it, `outside/` with a
secret file, which the containment tests check is never read or written.
"""
import base64
import os
import shutil
import stat
import struct
import tempfile
import threading
import unittest
import uuid
import zlib
from unittest import mock

from runbox_tools import OPS, ToolError
from runbox_tools import files as files_module

class WorkspaceTest(unittest.TestCase):
    """A temp workspace plus an `outside` directory holding a secret."""

    def setUp(self):
        self.tmp = os.path.realpath(tempfile.mkdtemp(prefix="runbox-files-test-"))
        self.ws = os.path.join(self.tmp, "ws")
        self.out = os.path.join(self.tmp, "outside")
        os.makedirs(self.ws)
        os.makedirs(self.out)
        self.secret = "SECRET-" + uuid.uuid4().hex
        with open(os.path.join(self.out, "secret.txt"), "w") as f:
            f.write(self.secret + "\n")
        env = mock.patch.dict(os.environ, {"RUNBOX_WORKSPACE": self.ws})
        env.start()
        self.addCleanup(env.stop)
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def put(self, rel, data=b""):
        path = os.path.join(self.ws, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return path

    def get(self, rel):
        with open(os.path.join(self.ws, rel), "rb") as f:
            return f.read()

    def call(self, op, **args):
        return OPS[op](args)

    def fail_with(self, code, op, **args):
        with self.assertRaises(ToolError) as cm:
            OPS[op](args)
        self.assertEqual(cm.exception.code, code, str(cm.exception))
        return cm.exception

    def snapshot_outside(self):
        """Every path under the temp dir except the workspace, with its bytes."""
        snap = {}
        for dirpath, dirnames, filenames in os.walk(self.tmp):
            if dirpath == self.tmp:
                dirnames[:] = [d for d in dirnames if d != "ws"]
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                data = None
                if os.path.isfile(path) and not os.path.islink(path):
                    with open(path, "rb") as f:
                        data = f.read()
                snap[path] = data
        return snap


def make_png(width, height):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    raw = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def make_jpeg(width, height):
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


def make_webp(kind, width, height):
    if kind == "VP8X":
        body = b"\x00\x00\x00\x00" + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    elif kind == "VP8L":
        body = b"\x2f" + ((width - 1) | ((height - 1) << 14)).to_bytes(4, "little") + b"\x00" * 4
    else:
        body = b"\x00\x00\x00\x9d\x01\x2a" + struct.pack("<HH", width, height) + b"\x00" * 4
    chunk = kind.encode() + struct.pack("<I", len(body)) + body
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def make_pdf(page_streams):
    """A small valid PDF; page_streams is a list of (content bytes, compress?)."""
    objects = {1: b"<< /Type /Catalog /Pages 2 0 R >>",
               3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"}
    kids = []
    num = 4
    for content, compress in page_streams:
        page, stream = num, num + 1
        num += 2
        kids.append(page)
        objects[page] = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                         b"/Contents %d 0 R >>" % stream)
        data = zlib.compress(content) if compress else content
        filt = b" /Filter /FlateDecode" if compress else b""
        objects[stream] = b"<< /Length %d%s >>\nstream\n" % (len(data), filt) + data + b"\nendstream"
    objects[2] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), len(kids))
    out, offsets = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"), {}
    for n in sorted(objects):
        offsets[n] = len(out)
        out += b"%d 0 obj\n" % n + objects[n] + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (num,)
    out += b"".join(b"%010d 00000 n \n" % offsets[n] for n in range(1, num))
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (num, xref)
    return bytes(out)


# --------------------------------------------------------------------------- read_file

class ReadFileTest(WorkspaceTest):

    def test_header_and_bytes_unaltered(self):
        data = b"a\tb\r\nlone\rcr\n\xff\xfe invalid utf-8\n\xc3\xa9t\xc3\xa9 no newline"
        self.put("d/t.txt", data)
        res = self.call("read_file", path="d/t.txt")
        self.assertFalse(res["is_error"])
        header, body = res["output"].split("\n\n", 1)
        self.assertEqual(header, "d/t.txt — lines 1-4 of 4")
        # The server re-encodes with surrogateescape: the bytes come back exactly.
        self.assertEqual(body.encode("utf-8", "surrogateescape"), data)
        self.assertEqual(res["metadata"], {"path": "d/t.txt", "first_line": 1, "last_line": 4, "total_lines": 4})

    def test_absolute_path_inside_is_shown_relative(self):
        self.put("a.txt", "x\n")
        res = self.call("read_file", path=os.path.join(self.ws, "a.txt"))
        self.assertTrue(res["output"].startswith("a.txt — lines 1-1 of 1\n\nx\n"))

    def test_offset_limit_and_continuation_note(self):
        self.put("n.txt", "".join("line %d\n" % i for i in range(1, 11)))
        res = self.call("read_file", path="n.txt", offset=3, limit=4)
        self.assertEqual(res["output"],
                         "n.txt — lines 3-6 of 10\n\nline 3\nline 4\nline 5\nline 6\n"
                         "… 4 more lines (use offset=7 to continue)")
        self.assertEqual(res["metadata"]["first_line"], 3)
        self.assertEqual(res["metadata"]["last_line"], 6)
        self.assertEqual(res["metadata"]["total_lines"], 10)
        tail = self.call("read_file", path="n.txt", offset=7)
        self.assertEqual(tail["output"], "n.txt — lines 7-10 of 10\n\nline 7\nline 8\nline 9\nline 10\n")

    def test_default_limit_is_2000_lines(self):
        self.put("long.txt", "".join("%d\n" % i for i in range(2500)))
        res = self.call("read_file", path="long.txt")
        self.assertEqual(res["metadata"]["last_line"], 2000)
        self.assertTrue(res["output"].endswith("\n… 500 more lines (use offset=2001 to continue)"))

    def test_empty_file(self):
        self.put("empty.txt")
        res = self.call("read_file", path="empty.txt")
        self.assertTrue(res["output"].startswith("empty.txt — lines 0-0 of 0\n\n"))
        self.assertEqual(res["metadata"]["total_lines"], 0)

    def test_offset_past_end_is_an_error(self):
        self.put("n.txt", "a\nb\n")
        err = self.fail_with("offset_out_of_range", "read_file", path="n.txt", offset=3)
        self.assertIn("past the end", str(err))
        self.assertIn("2 lines", str(err))

    def test_directory_missing_and_binary(self):
        os.makedirs(os.path.join(self.ws, "dir"))
        self.assertIn("directory", str(self.fail_with("is_a_directory", "read_file", path="dir")))
        self.assertIn("not found", str(self.fail_with("not_found", "read_file", path="nope.txt")))
        self.assertIn("not found", str(self.fail_with("not_found", "read_file", path="nodir/x.txt")))
        self.put("blob.bin", b"abc\x00def")
        self.fail_with("binary_file", "read_file", path="blob.bin")

    def test_byte_cap_truncates_and_says_so(self):
        line = b"line %06d\n"  # 12 bytes a line
        self.put("big.txt", b"".join(line % i for i in range(1, 50001)))
        cap_lines = -(-400 * 1024 // 12)  # lines that start inside the first 400 KB
        res = self.call("read_file", path="big.txt", limit=10 ** 6, max_output_chars=10 ** 7)
        out, meta = res["output"], res["metadata"]
        self.assertTrue(out.startswith("big.txt — lines 1-%d of ≥%d\n\n" % (cap_lines, cap_lines)))
        self.assertTrue(out.endswith("\n… file truncated at 400 KB"))
        self.assertNotIn("more lines", out)
        body = out.split("\n\n", 1)[1][:-len("\n… file truncated at 400 KB")]
        self.assertEqual(len(body.encode()), 400 * 1024)
        self.assertEqual(meta, {"path": "big.txt", "first_line": 1, "last_line": cap_lines, "truncated": True,
                                "total_lines_at_least": cap_lines})

    def test_byte_cap_with_line_limit_says_at_least(self):
        self.put("big.txt", b"".join(b"line %06d\n" % i for i in range(1, 50001)))
        cap_lines = -(-400 * 1024 // 12)
        res = self.call("read_file", path="big.txt", limit=10)
        lines = res["output"].split("\n")
        self.assertEqual(lines[0], "big.txt — lines 1-10 of ≥%d" % cap_lines)
        self.assertEqual(lines[-2], "… at least %d more lines (use offset=11 to continue)" % (cap_lines - 10))
        self.assertEqual(lines[-1], "… file truncated at 400 KB")
        self.assertNotIn("total_lines", res["metadata"])
        self.assertEqual(res["metadata"]["total_lines_at_least"], cap_lines)
        self.assertEqual(res["metadata"]["last_line"], 10)

    def test_offset_beyond_cap_is_refused_naming_it(self):
        self.put("big.txt", b"".join(b"line %06d\n" % i for i in range(1, 50001)))
        err = self.fail_with("offset_beyond_cap", "read_file", path="big.txt", offset=40000)
        self.assertIn("400 KB", str(err))
        self.assertIn("grep", str(err))

    def test_output_budget_clips_at_a_line_boundary(self):
        self.put("w.txt", "".join("%04d %s\n" % (i, "x" * 90) for i in range(100)))
        res = self.call("read_file", path="w.txt", max_output_chars=1000)
        out = res["output"]
        self.assertLessEqual(len(out), 1000)
        last = res["metadata"]["last_line"]
        self.assertGreater(last, 1)
        self.assertTrue(out.endswith("\n… %d more lines (use offset=%d to continue)" % (100 - last, last + 1)))
        self.assertIn("%04d %s\n…" % (last - 1, "x" * 90), out)

    def test_offset_zero_and_bad_arguments(self):
        self.put("a.txt", "a\n")
        self.assertEqual(self.call("read_file", path="a.txt", offset=0)["metadata"]["first_line"], 1)
        for args, field in [({}, "path"), ({"path": 3}, "path"), ({"path": ""}, "path"),
                            ({"path": "a.txt", "offset": "2"}, "offset"), ({"path": "a.txt", "limit": 0}, "limit"),
                            ({"path": "a.txt", "offset": -1}, "offset"), ({"path": "a.txt", "limit": True}, "limit")]:
            with self.subTest(args=args):
                err = self.fail_with("invalid_arguments", "read_file", **args)
                self.assertIn(field, str(err))

    def test_workspace_is_read_at_call_time(self):
        self.put("a.txt", "first\n")
        other = os.path.join(self.tmp, "ws2")
        os.makedirs(other)
        with open(os.path.join(other, "a.txt"), "w") as f:
            f.write("second\n")
        self.assertIn("first", self.call("read_file", path="a.txt")["output"])
        with mock.patch.dict(os.environ, {"RUNBOX_WORKSPACE": other}):
            self.assertIn("second", self.call("read_file", path="a.txt")["output"])


class ImageAndPdfTest(WorkspaceTest):

    def test_images_report_format_and_size(self):
        cases = [("a.png", make_png(3, 2), "PNG", 3, 2),
                 ("a.gif", b"GIF89a" + struct.pack("<HH", 5, 7) + b"\x00" * 20, "GIF", 5, 7),
                 ("a.jpg", make_jpeg(11, 9), "JPEG", 11, 9),
                 ("x.webp", make_webp("VP8X", 640, 480), "WebP", 640, 480),
                 ("l.webp", make_webp("VP8L", 300, 200), "WebP", 300, 200),
                 ("s.webp", make_webp("VP8 ", 17, 19), "WebP", 17, 19),
                 ("misnamed.txt", make_png(8, 4), "PNG", 8, 4)]
        for name, data, fmt, w, h in cases:
            with self.subTest(name=name):
                self.put(name, data)
                res = self.call("read_file", path=name)
                self.assertIn("%s image, %dx%d" % (fmt, w, h), res["output"])
                self.assertNotIn("IHDR", res["output"])
                self.assertEqual((res["metadata"]["format"], res["metadata"]["width"], res["metadata"]["height"]),
                                 (fmt, w, h))

    def pdf(self):
        return make_pdf([
            (b"BT /F1 12 Tf 72 720 Td (Hello PDF world) Tj 0 -14 Td (Second \\(line\\)) Tj ET", False),
            (b"BT /F1 12 Tf 72 720 Td [(Com) 20 (pressed) -300 (text)] TJ ET", True),
            (b"0 0 m 100 100 l S", True),
        ])

    def test_pdf_text_by_page_range(self):
        self.put("doc.pdf", self.pdf())
        res = self.call("read_file", path="doc.pdf", pages="1-3")
        out = res["output"]
        self.assertTrue(out.startswith("doc.pdf — PDF, pages 1-3 of 3\n\n--- page 1 ---\n"), out)
        self.assertRegex(out, r"--- page 1 ---\nHello PDF world\n+Second \(line\)\n")
        self.assertIn("--- page 2 ---\nCompressed text", out)
        self.assertIn("--- page 3 ---\n(no text layer on this page", out)
        self.assertEqual(res["metadata"]["pages_without_text"], [3])
        only = self.call("read_file", path="doc.pdf", pages="2")["output"]
        self.assertIn("Compressed text", only)
        self.assertNotIn("Hello", only)
        self.assertIn("Hello", self.call("read_file", path="doc.pdf")["output"])
        self.assertEqual(self.call("read_file", path="doc.pdf", pages="3,1")["metadata"]["pages"], [1, 3])

    def test_pdf_bad_pages(self):
        self.put("doc.pdf", self.pdf())
        self.fail_with("invalid_arguments", "read_file", path="doc.pdf", pages="two")
        self.fail_with("invalid_arguments", "read_file", path="doc.pdf", pages="3-1")
        self.fail_with("offset_out_of_range", "read_file", path="doc.pdf", pages="9")

    def test_pdf_pages_are_clipped_to_the_document_and_twenty_per_call(self):
        self.put("long.pdf", make_pdf([(b"BT /F1 12 Tf 72 720 Td (Page %d) Tj ET" % n, n % 2 == 0)
                                       for n in range(1, 26)]))
        res = self.call("read_file", path="long.pdf", pages="3-999999999")
        self.assertEqual(res["metadata"]["pages"], list(range(3, 23)))
        self.assertIn("--- page 22 ---\nPage 22", res["output"])
        self.assertTrue(res["output"].endswith('… 3 more pages (use pages="23-25" to continue)'), res["output"][-200:])

    def test_damaged_pdf_is_reported_not_guessed(self):
        self.put("bad.pdf", b"%PDF-1.4\n" + b"not a PDF object " * 200)
        err = self.fail_with("pdf_unreadable", "read_file", path="bad.pdf")
        self.assertIn("bad.pdf", str(err))

    def test_pdf_larger_than_the_limit_is_refused_before_poppler_runs(self):
        self.put("big.pdf", self.pdf())
        with mock.patch("runbox_tools.pdf.PDF_MAX_BYTES", 100), \
                mock.patch("runbox_tools.pdf.subprocess.Popen", side_effect=AssertionError("poppler ran")):
            self.fail_with("file_too_large", "read_file", path="big.pdf")

    def test_poppler_output_is_bounded(self):
        self.put("doc.pdf", self.pdf())
        with mock.patch("runbox_tools.pdf.PDFTOTEXT_MAX_OUTPUT", 10):
            self.fail_with("output_too_large", "read_file", path="doc.pdf")


# --------------------------------------------------------------------------- write_file

class WriteFileTest(WorkspaceTest):

    def no_temp_files(self, rel_dir=""):
        leftovers = [n for n in os.listdir(os.path.join(self.ws, rel_dir)) if ".runbox-" in n]
        self.assertEqual(leftovers, [])

    def test_create_with_parents_then_overwrite(self):
        content = "héllo\r\nwörld\ttab\rlone\n"
        res = self.call("write_file", path="a/b/c.txt", content=content)
        self.assertEqual(self.get("a/b/c.txt"), content.encode("utf-8"))
        self.assertIn("Created a/b/c.txt", res["output"])
        self.assertIn("%d bytes" % len(content.encode()), res["output"])
        self.assertTrue(res["metadata"]["created"])
        res = self.call("write_file", path="a/b/c.txt", content="")
        self.assertEqual(self.get("a/b/c.txt"), b"")
        self.assertIn("Overwrote", res["output"])
        self.assertFalse(res["metadata"]["created"])
        self.no_temp_files("a/b")

    def test_round_trips_read_file_bytes(self):
        data = b"bad \xff\xfe bytes\r\n"
        self.put("raw.txt", data)
        body = self.call("read_file", path="raw.txt")["output"].split("\n\n", 1)[1]
        self.call("write_file", path="copy.txt", content=body)
        self.assertEqual(self.get("copy.txt"), data)

    def test_keeps_mode_and_writes_through_an_inside_link(self):
        path = self.put("script.sh", "old\n")
        os.chmod(path, 0o751)
        os.symlink("script.sh", os.path.join(self.ws, "link.sh"))
        self.call("write_file", path="link.sh", content="new\n")
        self.assertTrue(os.path.islink(os.path.join(self.ws, "link.sh")))
        self.assertEqual(self.get("script.sh"), b"new\n")
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o751)

    def test_directory_target_and_bad_arguments(self):
        os.makedirs(os.path.join(self.ws, "d"))
        self.fail_with("is_a_directory", "write_file", path="d", content="x")
        self.fail_with("invalid_arguments", "write_file", path="d/", content="x")
        self.fail_with("invalid_arguments", "write_file", path="x.txt")
        self.fail_with("invalid_arguments", "write_file", path="x.txt", content=5)
        self.fail_with("invalid_arguments", "write_file", content="x")
        self.assertFalse(os.path.exists(os.path.join(self.ws, "x.txt")))

    def test_failed_write_leaves_the_old_file_and_no_temp(self):
        self.put("keep.txt", "original\n")
        real_write = os.write

        def failing_write(fd, data):
            real_write(fd, bytes(data[:3]))
            raise OSError(28, "No space left on device")

        with mock.patch.object(files_module.os, "write", failing_write):
            self.fail_with("io_error", "write_file", path="keep.txt", content="replacement\n")
        self.assertEqual(self.get("keep.txt"), b"original\n")
        self.no_temp_files()

    def test_atomic_readers_never_see_a_partial_file(self):
        old, new = b"A" * 300000, b"B" * 300000
        self.put("big.txt", old)
        seen, stop = set(), threading.Event()

        def reader():
            while not stop.is_set():
                with open(os.path.join(self.ws, "big.txt"), "rb") as f:
                    seen.add(f.read() in (old, new))

        t = threading.Thread(target=reader)
        t.start()
        try:
            for i in range(20):
                self.call("write_file", path="big.txt", content=(new if i % 2 == 0 else old).decode())
        finally:
            stop.set()
            t.join()
        self.assertEqual(seen, {True})


# --------------------------------------------------------------------------- edit_file

class EditFileTest(WorkspaceTest):

    def test_unique_replacement(self):
        self.put("e.py", "def f():\n    return 1\n\ndef g():\n    return 2\n")
        res = self.call("edit_file", path="e.py", old_string="    return 2\n", new_string="    return 3\n")
        self.assertEqual(self.get("e.py"), b"def f():\n    return 1\n\ndef g():\n    return 3\n")
        self.assertIn("replaced 1 occurrence", res["output"])
        self.assertEqual(res["metadata"]["first_line"], 5)
        self.assertFalse(res["metadata"]["crlf_recovery"])

    def test_not_found_and_not_unique_are_distinct_and_leave_file_untouched(self):
        original = b"x = 1\nx = 1\ny = 2\n"
        self.put("e.py", original)
        err = self.fail_with("anchor_not_found", "edit_file", path="e.py", old_string="z = 3", new_string="z = 4")
        self.assertIn("read_file", str(err))
        err = self.fail_with("anchor_not_unique", "edit_file", path="e.py", old_string="x = 1", new_string="x = 9")
        self.assertIn("2 times", str(err))
        self.assertIn("replace_all", str(err))
        self.assertEqual(err.metadata["occurrences"], 2)
        self.assertEqual(self.get("e.py"), original)

    def test_replace_all(self):
        self.put("e.py", "x = 1\nx = 1\ny = 2\n")
        res = self.call("edit_file", path="e.py", old_string="x = 1", new_string="x = 9", replace_all=True)
        self.assertEqual(self.get("e.py"), b"x = 9\nx = 9\ny = 2\n")
        self.assertEqual(res["metadata"]["replacements"], 2)

    def test_crlf_recovery_translates_both_strings_and_says_so(self):
        self.put("w.txt", b"one\r\ntwo\r\nthree\r\n")
        res = self.call("edit_file", path="w.txt", old_string="one\ntwo\n", new_string="uno\ndos\n")
        self.assertEqual(self.get("w.txt"), b"uno\r\ndos\r\nthree\r\n")
        self.assertTrue(res["metadata"]["crlf_recovery"])
        self.assertIn("CRLF", res["output"])

    def test_exact_match_in_crlf_file_writes_lf_verbatim_and_notes_it(self):
        self.put("w.txt", b"one\r\ntwo\r\nthree\r\n")
        res = self.call("edit_file", path="w.txt", old_string="two", new_string="2a\n2b")
        self.assertEqual(self.get("w.txt"), b"one\r\n2a\n2b\r\nthree\r\n")
        self.assertFalse(res["metadata"]["crlf_recovery"])
        self.assertTrue(res["metadata"]["lf_into_crlf_file"])
        self.assertIn("LF", res["output"])

    def test_exact_lf_anchor_in_crlf_file_is_used_as_given_without_recovery(self):
        # The anchor spans the file's one LF break, so it matches byte for byte: no CRLF
        # recovery, and the LF in new_string is written verbatim and reported.
        self.put("w.txt", b"a\nb\r\nc\r\nd\r\n")
        res = self.call("edit_file", path="w.txt", old_string="a\nb", new_string="x\ny")
        self.assertEqual(self.get("w.txt"), b"x\ny\r\nc\r\nd\r\n")
        self.assertFalse(res["metadata"]["crlf_recovery"])
        self.assertTrue(res["metadata"]["lf_into_crlf_file"])
        self.assertIn("written exactly as given (LF)", res["output"])
        self.assertNotIn("converting its LF breaks to CRLF", res["output"])

    def test_no_recovery_for_lf_files_or_crlf_anchors(self):
        self.put("lf.txt", b"one\ntwo\n")
        self.fail_with("anchor_not_found", "edit_file", path="lf.txt", old_string="one\r\ntwo", new_string="x")
        self.put("crlf.txt", b"one\r\ntwo\r\n")
        self.fail_with("anchor_not_found", "edit_file", path="crlf.txt", old_string="one\r\ntwo\nx", new_string="x")
        self.assertEqual(self.get("crlf.txt"), b"one\r\ntwo\r\n")

    def test_recovered_anchor_that_is_not_unique(self):
        self.put("w.txt", b"a\r\nb\r\na\r\nb\r\n")
        self.fail_with("anchor_not_unique", "edit_file", path="w.txt", old_string="a\nb", new_string="c\nd")
        self.assertEqual(self.get("w.txt"), b"a\r\nb\r\na\r\nb\r\n")

    def test_argument_errors(self):
        self.put("e.txt", "abc")
        self.fail_with("invalid_arguments", "edit_file", path="e.txt", old_string="", new_string="x")
        self.fail_with("invalid_arguments", "edit_file", path="e.txt", old_string="abc")
        self.fail_with("invalid_arguments", "edit_file", path="e.txt", old_string="a", new_string="b",
                       replace_all="yes")
        self.fail_with("invalid_arguments", "edit_file", path="e.txt", old_string="a", new_string="a")
        self.fail_with("not_found", "edit_file", path="none.txt", old_string="a", new_string="b")
        self.assertEqual(self.get("e.txt"), b"abc")

    def test_concurrent_edits_of_one_file_are_all_kept(self):
        self.put("c.txt", "".join("slot%d\n" % i for i in range(16)))
        errors = []

        def edit(i):
            try:
                self.call("edit_file", path="c.txt", old_string="slot%d\n" % i, new_string="done%d\n" % i)
            except Exception as e:  # noqa: BLE001 - collected for the assertion below
                errors.append(e)

        threads = [threading.Thread(target=edit, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(self.get("c.txt"), "".join("done%d\n" % i for i in range(16)).encode())


# --------------------------------------------------------------------------- list_files / read_bytes

class ListFilesTest(WorkspaceTest):

    def setUp(self):
        super().setUp()
        for rel in ["b.txt", "a/z.txt", "a/b/c.txt", ".git/config", ".runbox/jobs/1/status.json", ".env"]:
            self.put(rel, "x")
        os.symlink("b.txt", os.path.join(self.ws, "ln"))

    def test_top_level_sorted_with_folder_slashes(self):
        res = self.call("list_files")
        self.assertEqual(res["output"].split("\n"), [".env", ".git/", ".runbox/", "a/", "b.txt", "ln -> b.txt"])

    def test_recursive_lists_git_but_does_not_enter_it(self):
        out = self.call("list_files", recursive=True)["output"].split("\n")
        self.assertEqual(out, [".env", ".git/", ".runbox/", ".runbox/jobs/", ".runbox/jobs/1/",
                               ".runbox/jobs/1/status.json", "a/", "a/b/", "a/b/c.txt", "a/z.txt", "b.txt",
                               "ln -> b.txt"])

    def test_subfolder_paths_are_workspace_relative(self):
        self.assertEqual(self.call("list_files", path="a", recursive=True)["output"].split("\n"),
                         ["a/b/", "a/b/c.txt", "a/z.txt"])

    def test_output_budget_caps_entries_with_a_note(self):
        for i in range(300):
            self.put("many/f%03d.txt" % i)
        res = self.call("list_files", path="many", max_output_chars=2000)
        out = res["output"]
        self.assertLessEqual(len(out), 2000)
        lines = out.split("\n")
        shown = res["metadata"]["count"]
        self.assertEqual(lines[:shown], ["many/f%03d.txt" % i for i in range(shown)])
        self.assertRegex(lines[-1], r"^… %d more entries not shown" % (300 - shown))
        self.assertEqual(res["metadata"]["total"], 300)

    def test_errors(self):
        self.fail_with("not_a_directory", "list_files", path="b.txt")
        self.fail_with("not_found", "list_files", path="nope")
        self.fail_with("invalid_arguments", "list_files", recursive="yes")
        self.fail_with("invalid_arguments", "list_files", path=["a"])
        os.makedirs(os.path.join(self.ws, "empty"))
        self.assertEqual(self.call("list_files", path="empty")["output"], "(empty directory)")


class ReadBytesTest(WorkspaceTest):

    def test_base64_and_truncation(self):
        data = bytes(range(256)) * 10
        self.put("doc.bin", data)
        res = self.call("read_bytes", path="doc.bin", max_bytes=10 ** 6)
        self.assertEqual(base64.b64decode(res["output"]), data)
        self.assertFalse(res["metadata"]["truncated"])
        res = self.call("read_bytes", path="doc.bin", max_bytes=100)
        self.assertEqual(base64.b64decode(res["output"]), data[:100])
        self.assertTrue(res["metadata"]["truncated"])
        self.assertEqual(res["metadata"]["size_bytes"], 2560)
        self.fail_with("invalid_arguments", "read_bytes", path="doc.bin", max_bytes="100")
        self.fail_with("invalid_arguments", "read_bytes", max_bytes=5)


class WriteBytesTest(WorkspaceTest):

    def test_writes_then_appends_binary_content(self):
        first, second = bytes(range(256)), b"\x00\xff tail"
        res = self.call("write_bytes", path="shots/a.png", content=base64.b64encode(first).decode())
        self.assertEqual(res["metadata"]["size_bytes"], 256)
        res = self.call("write_bytes", path="shots/a.png", content=base64.b64encode(second).decode(), append=True)
        self.assertEqual(res["metadata"]["size_bytes"], 256 + len(second))
        with open(os.path.join(self.ws, "shots/a.png"), "rb") as f:
            self.assertEqual(f.read(), first + second)

    def test_refuses_bad_base64_and_appending_to_a_missing_file(self):
        self.fail_with("invalid_arguments", "write_bytes", path="x.bin", content="not base64!")
        self.fail_with("not_found", "write_bytes", path="x.bin", content="AAAA", append=True)

    def test_append_never_follows_a_link_out(self):
        secret = os.path.join(self.out, "secret.txt")
        os.symlink(secret, os.path.join(self.ws, "ln"))
        with open(secret, "rb") as f:
            before = f.read()
        with self.assertRaises(ToolError) as cm:
            OPS["write_bytes"]({"path": "ln", "content": "QUFB", "append": True})
        self.assertIn(cm.exception.code, {"path_outside_workspace", "invalid_path", "not_a_file"})
        with open(secret, "rb") as f:
            self.assertEqual(f.read(), before)


if __name__ == "__main__":
    unittest.main()
