"""Tests for glob and grep (runbox_tools/search.py): matching, ordering, paging, deadlines.

Run from deploy/sandbox/agent:  python3 -m unittest discover -s tests -t .

grep runs the real `rg` (installed in the sandbox image). Deadline tests swap in a fake
rg that prints a result and then hangs, so they are deterministic and take well under a
second; glob's deadline is driven by a fake clock for the same reason. Containment of the
`path` argument is covered, with the other ops, in test_files.ContainmentTest.
"""
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

from runbox_tools import OPS, ToolError
from runbox_tools import files as files_module
from runbox_tools import search as search_module


def alive(pid):
    """True while pid runs; a zombie counts as dead (PID 1 in a container may never reap it)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read()
    except OSError:
        return False
    return state[state.rfind(")") + 2] != "Z"


class SearchTest(unittest.TestCase):

    def setUp(self):
        self.tmp = os.path.realpath(tempfile.mkdtemp(prefix="runbox-search-test-"))
        self.ws = os.path.join(self.tmp, "ws")
        os.makedirs(self.ws)
        env = mock.patch.dict(os.environ, {"RUNBOX_WORKSPACE": self.ws})
        env.start()
        self.addCleanup(env.stop)
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def put(self, rel, data="", mtime=None):
        path = os.path.join(self.ws, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        if mtime is not None:
            os.utime(path, (mtime, mtime))
        return path

    def call(self, op, **args):
        return OPS[op](args)

    def lines(self, op, **args):
        out = self.call(op, **args)["output"]
        return out.split("\n\n")[0].split("\n")

    def fail_with(self, code, op, **args):
        with self.assertRaises(ToolError) as cm:
            OPS[op](args)
        self.assertEqual(cm.exception.code, code, str(cm.exception))
        return cm.exception

    def page_through(self, op, **args):
        """Follow next_offset to the end; return every page's entries and outputs."""
        entries, outputs, offset = [], [], 0
        for _ in range(1000):
            res = self.call(op, offset=offset, **args)
            outputs.append(res["output"])
            shown = res["output"].split("\n\n")[0].split("\n")[:res["metadata"]["count"]]
            entries.extend(shown)
            if res["metadata"]["next_offset"] is None:
                return entries, outputs
            self.assertEqual(res["metadata"]["next_offset"], offset + res["metadata"]["count"])
            offset = res["metadata"]["next_offset"]
        self.fail("paging did not end")


# --------------------------------------------------------------------------- glob

class GlobTest(SearchTest):

    def setUp(self):
        super().setUp()
        for rel in ["src/a.py", "src/b.ts", "src/deep/x/c.py", "src/.hidden.py", "docs/readme.md",
                    "a1.txt", "a2.txt", "ab.txt", ".git/hooks/x.py"]:
            self.put(rel, "x")

    def test_pattern_syntax(self):
        cases = {
            "**/*.py": ["src/.hidden.py", "src/a.py", "src/deep/x/c.py"],
            "*.txt": ["a1.txt", "a2.txt", "ab.txt"],
            "a?.txt": ["a1.txt", "a2.txt", "ab.txt"],
            "a[0-9].txt": ["a1.txt", "a2.txt"],
            "a[!0-9].txt": ["ab.txt"],
            "src/**/*.{py,ts}": ["src/.hidden.py", "src/a.py", "src/b.ts", "src/deep/x/c.py"],
            "{src,docs}/*": ["docs/readme.md", "src/.hidden.py", "src/a.py", "src/b.ts"],
            "src/deep/**": ["src/deep/x/c.py"],
            "**/x/*": ["src/deep/x/c.py"],
            ".git/hooks/*": [".git/hooks/x.py"],
            "./src/a.py": ["src/a.py"],
        }
        for pattern, expected in cases.items():
            with self.subTest(pattern=pattern):
                self.assertEqual(self.lines("glob", pattern=pattern, sort="path"), expected)

    def test_relative_to_path_and_absolute_patterns(self):
        self.assertEqual(self.lines("glob", pattern="*.py", path="src", sort="path"), ["src/.hidden.py", "src/a.py"])
        self.assertEqual(self.lines("glob", pattern="**/*.py", path=os.path.join(self.ws, "src/deep")),
                         ["src/deep/x/c.py"])
        self.assertEqual(self.lines("glob", pattern=self.ws + "/src/*.ts"), ["src/b.ts"])

    def test_newest_first_by_default(self):
        for i, rel in enumerate(["n/old.txt", "n/mid.txt", "n/new.txt"]):
            self.put(rel, "x", mtime=1_000_000 + i * 1000)
        self.assertEqual(self.lines("glob", pattern="n/*"), ["n/new.txt", "n/mid.txt", "n/old.txt"])
        self.assertEqual(self.lines("glob", pattern="n/*", sort="path"), ["n/mid.txt", "n/new.txt", "n/old.txt"])

    def test_no_match_is_not_an_error(self):
        res = self.call("glob", pattern="**/*.rs")
        self.assertFalse(res["is_error"])
        self.assertIn("No files match", res["output"])
        self.assertEqual(res["metadata"]["count"], 0)
        self.assertIn("No files match", self.call("glob", pattern="missing/dir/*.py")["output"])

    def test_paging_with_head_limit_and_offset(self):
        for i in range(25):
            self.put("p/f%02d.txt" % i, "x")
        res = self.call("glob", pattern="p/*", sort="path", head_limit=10)
        self.assertTrue(res["output"].endswith("(results 1-10 of 25; more results: call again with offset=10)"))
        self.assertEqual((res["metadata"]["count"], res["metadata"]["total"], res["metadata"]["next_offset"]),
                         (10, 25, 10))
        last = self.call("glob", pattern="p/*", sort="path", head_limit=10, offset=20)
        self.assertTrue(last["output"].endswith("(results 21-25 of 25; no more results)"))
        self.assertIsNone(last["metadata"]["next_offset"])
        entries, _ = self.page_through("glob", pattern="p/*", sort="path", head_limit=10)
        self.assertEqual(entries, ["p/f%02d.txt" % i for i in range(25)])

    def test_default_head_limit_is_100(self):
        for i in range(120):
            self.put("q/f%03d" % i)
        res = self.call("glob", pattern="q/*")
        self.assertEqual(res["metadata"]["count"], 100)
        self.assertEqual(res["metadata"]["next_offset"], 100)

    def test_output_budget_ends_pages_between_entries(self):
        names = ["b/%s_%03d.txt" % ("n" * 40, i) for i in range(60)]
        for name in names:
            self.put(name)
        entries, outputs = self.page_through("glob", pattern="b/*", sort="path", head_limit=0, max_output_chars=400)
        self.assertEqual(entries, names)  # nothing skipped, nothing repeated, no partial entry
        self.assertGreater(len(outputs), 5)
        for out in outputs:
            self.assertLessEqual(len(out), 400)

    def test_deadline_returns_a_partial_page(self):
        for i in range(10):
            self.put("t/d%d/f.txt" % i)
        ticks = iter(range(10 ** 6))
        with mock.patch.dict(os.environ, {"RUNBOX_FILE_SEARCH_TIMEOUT": "4"}), \
                mock.patch.object(search_module, "_clock", lambda: next(ticks)):
            res = self.call("glob", pattern="t/**/*.txt", sort="path")
        self.assertTrue(res["metadata"]["partial"])
        self.assertIsNone(res["metadata"]["total"])
        self.assertIn("deadline", res["output"])
        self.assertIn("partial", res["output"])
        self.assertTrue(1 <= res["metadata"]["count"] < 10)

    def test_deadline_with_nothing_found_is_an_error(self):
        self.put("t/d/f.txt")
        ticks = iter([0] + [100] * 1000)
        with mock.patch.object(search_module, "_clock", lambda: next(ticks)):
            # The base folder is always read; the deadline strikes before t/d, where the match is.
            err = self.fail_with("search_timeout", "glob", pattern="**/*.txt", path="t")
        self.assertIn("narrow", str(err))

    def test_argument_errors(self):
        self.fail_with("invalid_arguments", "glob")
        self.fail_with("invalid_arguments", "glob", pattern=7)
        self.fail_with("invalid_arguments", "glob", pattern="*", sort="size")
        self.fail_with("invalid_arguments", "glob", pattern="*", head_limit=-1)
        self.fail_with("invalid_arguments", "glob", pattern="*", offset="3")
        self.fail_with("not_found", "glob", pattern="*", path="nope")
        self.fail_with("not_a_directory", "glob", pattern="*", path="a1.txt")
        self.fail_with("invalid_pattern", "glob", pattern="src/*/../x")


class SearchTimeoutTest(unittest.TestCase):
    """The walk and search deadline comes from RUNBOX_FILE_SEARCH_TIMEOUT, read on every call."""

    def timeout_with(self, raw):
        env = {} if raw is None else {"RUNBOX_FILE_SEARCH_TIMEOUT": raw}
        with mock.patch.dict(os.environ, env):
            if raw is None:
                os.environ.pop("RUNBOX_FILE_SEARCH_TIMEOUT", None)
            return files_module.search_timeout()

    def test_unset_or_invalid_means_20_seconds(self):
        for raw in (None, "", "soon", "0", "-5", "nan", "inf"):
            self.assertEqual(self.timeout_with(raw), 20.0, raw)

    def test_a_positive_number_is_used(self):
        self.assertEqual(self.timeout_with("4"), 4.0)
        self.assertEqual(self.timeout_with("0.5"), 0.5)


# --------------------------------------------------------------------------- grep

class GrepTest(SearchTest):

    def setUp(self):
        super().setUp()
        self.put("b.py", "alpha\nBeta\nalpha beta\n")
        self.put("a/x.txt", "alpha\n")
        self.put(".hidden/h.txt", "alpha\n")
        self.put(".git/config", "alpha\n")
        self.put("c.md", "nothing here\n")

    def test_output_modes_sorted_by_path(self):
        self.assertEqual(self.lines("grep", pattern="alpha"), [".hidden/h.txt", "a/x.txt", "b.py"])
        self.assertEqual(self.lines("grep", pattern="alpha", output_mode="count"),
                         [".hidden/h.txt:1", "a/x.txt:1", "b.py:2"])
        self.assertEqual(self.lines("grep", pattern="alpha", output_mode="content"),
                         [".hidden/h.txt:1:alpha", "a/x.txt:1:alpha", "b.py:1:alpha", "b.py:3:alpha beta"])

    def test_case_glob_and_path(self):
        self.assertEqual(self.lines("grep", pattern="beta", output_mode="content"), ["b.py:3:alpha beta"])
        self.assertEqual(self.lines("grep", pattern="beta", output_mode="content", case_insensitive=True),
                         ["b.py:2:Beta", "b.py:3:alpha beta"])
        self.assertEqual(self.lines("grep", pattern="alpha", glob="*.py"), ["b.py"])
        self.assertEqual(self.lines("grep", pattern="alpha", path="a"), ["a/x.txt"])
        self.assertEqual(self.lines("grep", pattern="alpha", path="b.py", output_mode="content"),
                         ["b.py:1:alpha", "b.py:3:alpha beta"])
        self.assertEqual(self.lines("grep", pattern="alpha", path=os.path.join(self.ws, "a")), ["a/x.txt"])

    def test_pattern_starting_with_dash_and_no_matches(self):
        self.put("flags.txt", "use -v for verbose\n")
        self.assertEqual(self.lines("grep", pattern="-v", output_mode="content"), ["flags.txt:1:use -v for verbose"])
        res = self.call("grep", pattern="zzz_absent")
        self.assertFalse(res["is_error"])
        self.assertIn("No matches", res["output"])

    def test_invalid_regex_is_a_clear_error(self):
        err = self.fail_with("invalid_pattern", "grep", pattern="(unclosed")
        self.assertIn("regular expression", str(err))
        self.fail_with("invalid_pattern", "grep", pattern="x", glob="{a")

    def test_a_capped_search_keeps_the_first_lines_in_path_order_on_every_call(self):
        # rg reports in any order when it searches in parallel; a search that hits the
        # collection cap is run again in path order, so its pages are stable.
        for d in range(6):
            for f in range(6):
                self.put("many/d%d/f%d.txt" % (d, f), "alpha %d %d\n" % (d, f))
        with mock.patch.object(search_module, "MAX_COLLECTED", 7):
            first = self.call("grep", pattern="alpha", path="many", output_mode="content")
            second = self.call("grep", pattern="alpha", path="many", output_mode="content", head_limit=3, offset=3)
        shown = first["output"].split("\n\n")[0].split("\n")
        self.assertEqual(shown, ["many/d0/f%d.txt:1:alpha 0 %d" % (f, f) for f in range(6)] + ["many/d1/f0.txt:1:alpha 1 0"])
        self.assertIn("stopped collecting after 7 matching lines", first["output"])
        self.assertEqual(second["output"].split("\n\n")[0].split("\n"), shown[3:6])

    def test_finds_text_past_the_read_file_cap(self):
        lines = ["filler line %06d" % i for i in range(1, 80001)]
        lines[59999] = "UNIQUE_NEEDLE_HERE"
        self.put("big.log", "\n".join(lines) + "\n")
        self.assertGreater(os.path.getsize(os.path.join(self.ws, "big.log")), 1024 * 1024)
        self.assertEqual(self.lines("grep", pattern="UNIQUE_NEEDLE", output_mode="content"),
                         ["big.log:60000:UNIQUE_NEEDLE_HERE"])
        with self.assertRaises(ToolError) as cm:
            self.call("read_file", path="big.log", offset=60000)
        self.assertEqual(cm.exception.code, "offset_beyond_cap")

    def test_footer_lists_files_too_large_binary_or_unreadable(self):
        with open(os.path.join(self.ws, "huge.dat"), "wb") as f:
            f.truncate(9 * 1024 * 1024)  # sparse: no disk used
        self.put("bin.dat", b"alpha\x00\x01\x02 alpha\n")
        unreadable = None
        if os.geteuid() != 0:  # root reads anything; the image runs tests as uid 1000
            unreadable = self.put("locked.txt", "alpha\n")
            os.chmod(unreadable, 0)
        res = self.call("grep", pattern="alpha")
        out = res["output"]
        self.assertEqual(out.split("\n\n")[0].split("\n"), [".hidden/h.txt", "a/x.txt", "b.py"])
        self.assertIn("(files not searched or not shown:", out)
        self.assertRegex(out, r"huge\.dat: larger than 8 MB")
        self.assertRegex(out, r"bin\.dat: binary file")
        if unreadable:
            self.assertRegex(out, r"locked\.txt: .*[Pp]ermission denied")
        single = self.call("grep", pattern="alpha", path="huge.dat")["output"]
        self.assertIn("huge.dat: larger than 8 MB", single)

    def test_odd_bytes_and_long_lines(self):
        self.put("latin1.txt", b"caf\xe9 alpha\n")
        self.assertEqual(self.lines("grep", pattern="alpha", path="latin1.txt", output_mode="content"),
                         ["latin1.txt:1:caf\ufffd alpha"])
        self.put("min.js", "x" * 5000 + "NEEDLE" + "y" * 5000 + "\n")
        [entry] = self.lines("grep", pattern="NEEDLE", path="min.js", output_mode="content")
        self.assertIn("NEEDLE", entry)
        self.assertIn("[line is 10006 bytes", entry)
        self.assertLess(len(entry), 2200)

    def test_paging_content_never_cuts_an_entry(self):
        expected = []
        for f in range(3):
            body = "".join("match %d-%02d %s\n" % (f, i, "z" * 30) for i in range(20))
            self.put("pg/f%d.txt" % f, body)
            expected += ["pg/f%d.txt:%d:match %d-%02d %s" % (f, i + 1, f, i, "z" * 30) for i in range(20)]
        res = self.call("grep", pattern="match", path="pg", output_mode="content", head_limit=25)
        self.assertEqual(res["metadata"]["next_offset"], 25)
        self.assertEqual(res["metadata"]["total"], 60)
        self.assertTrue(res["output"].endswith("(results 1-25 of 60; more results: call again with offset=25)"))
        entries, outputs = self.page_through("grep", pattern="match", path="pg", output_mode="content",
                                             head_limit=0, max_output_chars=500)
        self.assertEqual(entries, expected)
        for out in outputs:
            self.assertLessEqual(len(out), 500)

    def test_default_head_limit_is_250(self):
        self.put("many.txt", "".join("hit %d\n" % i for i in range(300)))
        res = self.call("grep", pattern="hit", output_mode="content", max_output_chars=10 ** 6)
        self.assertEqual(res["metadata"]["count"], 250)
        self.assertEqual(res["metadata"]["next_offset"], 250)

    def test_argument_errors(self):
        self.fail_with("invalid_arguments", "grep")
        self.fail_with("invalid_arguments", "grep", pattern="x", output_mode="lines")
        self.fail_with("invalid_arguments", "grep", pattern="x", case_insensitive="yes")
        self.fail_with("invalid_arguments", "grep", pattern="x", head_limit="5")
        self.fail_with("invalid_arguments", "grep", pattern="x", glob=3)
        self.fail_with("not_found", "grep", pattern="x", path="nope")

    # -- deadline, with a fake rg that prints and then hangs

    def fake_rg(self, messages):
        script = os.path.join(self.tmp, "fake_rg.py")
        pidfile = os.path.join(self.tmp, "pids")
        with open(script, "w") as f:
            f.write("import json, os, subprocess, sys, time\n"
                    "child = subprocess.Popen(['sleep', '30'])\n"
                    "open(%r, 'w').write('%%d %%d' %% (os.getpid(), child.pid))\n"
                    "for m in %r:\n"
                    "    print(json.dumps(m), flush=True)\n"
                    "time.sleep(30)\n" % (pidfile, messages))

        patch = mock.patch.object(search_module, "RG_COMMAND", [sys.executable, script])
        return patch, pidfile

    def test_deadline_returns_partial_results_and_kills_rg(self):
        found = [{"type": "begin", "data": {"path": {"text": "./found.txt"}}},
                 {"type": "match", "data": {"path": {"text": "./found.txt"}, "lines": {"text": "alpha\n"},
                                            "line_number": 7, "submatches": []}}]
        patch, pidfile = self.fake_rg(found)
        self.put("found.txt", "x\n" * 6 + "alpha\n")  # what the fake reports is checked against the file
        started = time.monotonic()
        with patch, mock.patch.dict(os.environ, {"RUNBOX_FILE_SEARCH_TIMEOUT": "0.7"}):
            res = self.call("grep", pattern="alpha", output_mode="content")
        # Well before the fake rg's 30 s, with room for a loaded machine.
        self.assertLess(time.monotonic() - started, 15)
        self.assertTrue(res["metadata"]["partial"])
        self.assertEqual(res["output"].split("\n")[0], "found.txt:7:alpha")
        self.assertIn("deadline", res["output"])
        with open(pidfile) as f:
            pids = [int(p) for p in f.read().split()]
        for pid in pids:  # rg and whatever it started are gone
            deadline = time.monotonic() + 3
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.02)
            self.assertFalse(alive(pid), "process %d survived the deadline" % pid)

    def test_deadline_with_nothing_found_is_an_error(self):
        patch, _ = self.fake_rg([])
        with patch, mock.patch.dict(os.environ, {"RUNBOX_FILE_SEARCH_TIMEOUT": "0.5"}):
            err = self.fail_with("search_timeout", "grep", pattern="alpha")
        self.assertIn("narrow", str(err))


class RealRgDeadlineTest(SearchTest):
    """The real rg, killed at the deadline: what it had already found must not be lost."""

    SLOW = r"(\b\w{1,10}\b\s){40}[0-9]"  # Unicode \b keeps rg off its fast engines: seconds per MB

    def test_small_files_are_found_even_when_slow_big_files_hold_every_rg_thread(self):
        names = ["s%02d.txt" % i for i in range(20)]
        line = " ".join("w%d" % i for i in range(40)) + " 7\n"
        for name in names:
            self.put(name, "head\n" + line)
        # The first pass (20 small files) alone, timed here and now: on a busy machine it takes
        # seconds (compiling this pattern is most of it), so the deadline below is ten times
        # what it took, at least 8 s and at most 20 s.
        started = time.monotonic()
        self.call("grep", pattern=self.SLOW, head_limit=0)
        deadline = min(20.0, max(8.0, 10 * (time.monotonic() - started)))
        # 6 MB of non-ASCII words: seconds of CPU per MB for this pattern, and no match. Eight
        # of them take far longer than 20 s even on an idle machine.
        slow = ("grüße straße ünïcödé wörds ça één " * 200 + "\n").encode() * 780
        assert search_module.SMALL_FIRST_BYTES < len(slow) < search_module.GREP_MAX_FILESIZE
        for i in range(8):
            self.put("zz/%d.txt" % i, slow)
        with mock.patch.dict(os.environ, {"RUNBOX_FILE_SEARCH_TIMEOUT": "%.1f" % deadline}):
            res = self.call("grep", pattern=self.SLOW, head_limit=0)
        self.assertTrue(res["metadata"]["partial"], res["output"][-300:])
        self.assertEqual(res["output"].split("\n\n")[0].split("\n"), names)
        self.assertIn("partial results, 20 found so far", res["output"])

    def test_big_files_are_searched_after_the_small_ones(self):
        self.put("a.txt", "needle small\n")
        self.put("big/b.txt", "x" * (search_module.SMALL_FIRST_BYTES + 10) + "\nneedle big\n")
        self.put("huge.txt", "x" * (search_module.GREP_MAX_FILESIZE + 10) + "\nneedle huge\n")
        res = self.call("grep", pattern="needle", output_mode="content")
        self.assertEqual(res["output"].split("\n\n")[0].split("\n"), ["a.txt:1:needle small", "big/b.txt:2:needle big"])
        self.assertIn("huge.txt: larger than 8 MB", res["output"])
        self.assertFalse(res["metadata"]["partial"])


class RealClockDeadlineTest(SearchTest):
    """glob and recursive list_files on a tree too big for a 1 ms deadline: a marked partial answer."""

    def setUp(self):
        super().setUp()
        self.put("top.txt", "t")
        for i in range(1500):
            self.put("tree/d%04d/f.txt" % i, "x")

    def test_glob_returns_what_it_found_marked_partial(self):
        with mock.patch.dict(os.environ, {"RUNBOX_FILE_SEARCH_TIMEOUT": "0.001"}):
            res = self.call("glob", pattern="**/*.txt", sort="path", head_limit=0)
        self.assertTrue(res["metadata"]["partial"])
        self.assertIsNone(res["metadata"]["total"])
        found = res["output"].split("\n\n")[0].split("\n")
        self.assertIn("top.txt", found)  # the base folder is always read
        self.assertLess(len(found), 1501)
        self.assertIn("partial results, %d found so far" % len(found), res["output"])

    def test_recursive_list_files_returns_what_it_listed_marked_partial(self):
        with mock.patch.dict(os.environ, {"RUNBOX_FILE_SEARCH_TIMEOUT": "0.001"}):
            res = self.call("list_files", recursive=True, max_output_chars=10 ** 7)
        self.assertTrue(res["metadata"]["partial"])
        self.assertIsNone(res["metadata"]["total"])
        self.assertTrue(res["output"].startswith("top.txt\ntree/\n"), res["output"][:100])
        self.assertLess(res["metadata"]["count"], 1 + 1 + 1500 * 2)
        self.assertTrue(res["output"].endswith("… listing stopped at the 0.001 s deadline; the list is incomplete"))
        complete = self.call("list_files", recursive=True, max_output_chars=10 ** 7)
        self.assertFalse(complete["metadata"]["partial"])
        self.assertEqual(complete["metadata"]["total"], 1 + 1 + 1500 * 2)


class EncodingTest(SearchTest):
    """rg decodes files with a byte-order mark; a folder search shows them like a single-file one."""

    def test_utf16_and_utf8_bom_files_are_found_in_a_folder_search(self):
        text = "first line\r\nnäive needle here\r\nlast\r\n"
        self.put("docs/le.txt", b"\xff\xfe" + text.encode("utf-16-le"))
        self.put("docs/be.txt", b"\xfe\xff" + text.encode("utf-16-be"))
        self.put("docs/bom8.txt", b"\xef\xbb\xbf" + "needle on line one\n".encode())
        self.put("docs/plain.txt", "plain needle\n")
        res = self.call("grep", pattern="needle", path="docs", output_mode="content")
        body = res["output"].split("\n\n")[0].split("\n")
        self.assertEqual(body, ["docs/be.txt:2:näive needle here", "docs/bom8.txt:1:needle on line one",
                                "docs/le.txt:2:näive needle here", "docs/plain.txt:1:plain needle"])
        self.assertNotIn("changed while it was searched", res["output"])
        single = self.call("grep", pattern="needle", path="docs/le.txt", output_mode="content")["output"]
        self.assertEqual(single.split("\n\n")[0], "docs/le.txt:2:näive needle here")


class SwappedLinkTest(SearchTest):
    """rg opens a folder's files by name: what it reports is shown only if the workspace holds it."""

    def setUp(self):
        super().setUp()
        self.secret_file = os.path.join(self.tmp, "outside.txt")
        with open(self.secret_file, "w") as f:
            f.write("TOPSECRET line\n")

    def test_a_file_that_became_a_link_out_is_dropped_and_named(self):
        self.put("d/a.txt", "SAFE line\n")
        self.put("d/b.txt", "SAFE line\n")
        run = search_module.RgRun("SAFE", None, False, files_module.resolve("d"), time.monotonic() + 20)
        try:
            run.execute()
        finally:
            run.r.close()
        # b.txt is swapped for a link out after rg read it: as if rg had followed the link.
        os.unlink(os.path.join(self.ws, "d/b.txt"))
        os.symlink(self.secret_file, os.path.join(self.ws, "d/b.txt"))
        self.assertTrue(run.verify(["d/a.txt", "d/b.txt"]))
        self.assertEqual(list(run.files), ["d/a.txt"])
        self.assertIn(("d/b.txt", "changed while it was searched (replaced, or now a link); search again"), run.skipped)
        # A file rewritten with other content is dropped too; one left alone is read once only.
        self.put("d/a.txt", "other\n")
        self.assertFalse(run.verify(["d/a.txt"]))

    def test_grep_never_reads_through_links_swapped_in_during_its_walk(self):
        names = ["race/f%04d.txt" % i for i in range(2000)]
        for name in names:
            self.put(name, "SAFE line\n")
        stop = threading.Event()

        def flipper():
            rounds = 0
            while not stop.is_set() and rounds < 50:  # bounded even if stop is never set
                rounds += 1
                for name in names:
                    path = os.path.join(self.ws, name)
                    tmp = path + ".tmp"
                    if rounds % 2:
                        os.symlink(self.secret_file, tmp)
                    else:
                        with open(tmp, "w") as f:
                            f.write("SAFE line\n")
                    os.replace(tmp, path)

        thread = threading.Thread(target=flipper)
        thread.start()
        denied = 0
        try:
            for _ in range(15):
                # The pattern is echoed when nothing matches, so it must not spell the secret.
                res = self.call("grep", pattern="TOP[S]ECRET|SAFE", path="race", output_mode="content", head_limit=0)
                self.assertFalse("TOPSECRET" in res["output"], "grep read a file outside the workspace")
                denied += res["output"].count("changed while it was searched")
        finally:
            stop.set()
            thread.join()
        # The race was really run: files changed under rg and were dropped.
        self.assertGreater(denied, 0)


if __name__ == "__main__":
    unittest.main()
