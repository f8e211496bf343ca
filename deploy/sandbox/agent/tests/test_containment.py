"""Tests for path containment (runbox_tools/containment.py): the module itself, and every
file op refusing every escaping path, including check-then-use races with swapped links.
"""
import contextlib
import os
import threading
import unittest
from unittest import mock

import runbox_agent
from runbox_tools import ToolError
from runbox_tools import containment
from runbox_tools import files as files_module
from tests.test_files import WorkspaceTest

CONTAINMENT_CODES = {"path_outside_workspace", "invalid_path"}


@contextlib.contextmanager
def _patch_all(racing):
    with mock.patch.object(containment, "resolve", racing), mock.patch.object(files_module, "resolve", racing):
        yield


class ResolveTest(WorkspaceTest):
    """The walker on its own: where a path leads, and what it refuses."""

    def test_components_of_absolute_and_relative_paths(self):
        self.assertEqual(containment.workspace_components("a//b/./c", self.ws), ["a", "b", "c"])
        self.assertEqual(containment.workspace_components(self.ws + "/x/y", self.ws), ["x", "y"])
        with self.assertRaises(ToolError) as cm:
            containment.workspace_components(self.ws + "2/x", self.ws)
        self.assertEqual(cm.exception.code, "path_outside_workspace")

    def test_kinds_and_canonical_path_through_an_inside_link(self):
        self.put("sub/f.txt", "x")
        os.symlink("sub", os.path.join(self.ws, "alias"))
        with containment.resolve("alias/f.txt") as r:
            self.assertEqual((r.kind, r.canonical, r.display), ("file", "sub/f.txt", "alias/f.txt"))
        with containment.resolve("alias") as r:
            self.assertEqual((r.kind, r.canonical), ("dir", "sub"))
        with containment.resolve("sub/new.txt") as r:
            self.assertEqual((r.kind, r.name), ("missing", "new.txt"))

    def test_dotdot_stays_inside_until_it_would_leave(self):
        self.put("a/b/f.txt", "x")
        with containment.resolve("a/b/../b/f.txt") as r:
            self.assertEqual(r.canonical, "a/b/f.txt")
        for path in ("..", "a/../..", "a/b/../../../outside"):
            with self.subTest(path=path), self.assertRaises(ToolError) as cm:
                containment.resolve(path)
            self.assertEqual(cm.exception.code, "path_outside_workspace")

    def test_links_out_loops_and_bad_names_are_refused(self):
        os.symlink(self.out, os.path.join(self.ws, "out"))
        os.symlink("loop2", os.path.join(self.ws, "loop1"))
        os.symlink("loop1", os.path.join(self.ws, "loop2"))
        cases = {"out/secret.txt": "path_outside_workspace", "loop1": "invalid_path", "a\x00b": "invalid_path",
                 "n" * 256: "invalid_path"}
        for path, code in cases.items():
            with self.subTest(path=path[:20]), self.assertRaises(ToolError) as cm:
                containment.resolve(path)
            self.assertEqual(cm.exception.code, code)

    def test_make_dirs_creates_only_inside(self):
        with containment.resolve("new/deep/file.txt", make_dirs=True) as r:
            self.assertEqual(r.kind, "missing")
        self.assertTrue(os.path.isdir(os.path.join(self.ws, "new", "deep")))

    def test_every_descriptor_is_closed(self):
        before = len(os.listdir("/proc/self/fd"))
        self.put("a/b/c/f.txt", "x")
        for _ in range(50):
            with containment.resolve("a/b/c/f.txt"):
                pass
            with self.assertRaises(ToolError):
                containment.resolve("a/b/../../../x")
        self.assertEqual(len(os.listdir("/proc/self/fd")), before)

    def test_open_final_refuses_a_link_swapped_in_after_the_walk(self):
        self.put("victim.txt", "harmless\n")
        with containment.resolve_file("victim.txt") as r:
            os.unlink(os.path.join(self.ws, "victim.txt"))
            os.symlink(os.path.join(self.out, "secret.txt"), os.path.join(self.ws, "victim.txt"))
            with self.assertRaises(ToolError) as cm:
                containment.open_final(r)
        self.assertEqual(cm.exception.code, "invalid_path")

    def test_atomic_write_replaces_a_link_instead_of_writing_through_it(self):
        self.put("victim.txt", "harmless\n")
        with containment.resolve("victim.txt") as r:
            # Swapped for a link out after the walk vetted the name.
            os.unlink(os.path.join(self.ws, "victim.txt"))
            os.symlink(os.path.join(self.out, "secret.txt"), os.path.join(self.ws, "victim.txt"))
            containment.atomic_write(r, b"new")
        self.assertFalse(os.path.islink(os.path.join(self.ws, "victim.txt")))
        self.assertEqual(self.get("victim.txt"), b"new")
        with open(os.path.join(self.out, "secret.txt")) as f:
            self.assertEqual(f.read(), self.secret + "\n")
        self.assertEqual([n for n in os.listdir(self.ws) if n.endswith(".tmp")], [])

    def test_special_files_are_not_opened_as_regular(self):
        os.mkfifo(os.path.join(self.ws, "fifo"))
        with self.assertRaises(ToolError) as cm:
            containment.resolve_existing_file("fifo")
        self.assertEqual(cm.exception.code, "not_a_regular_file")


def _escaping_paths(ws, out):
    """(label, path) pairs that every file op must refuse."""
    return [
        ("dotdot", "../outside/secret.txt"),
        ("dotdot dir", "../outside"),
        ("dotdot through subdir", "sub/../../outside/secret.txt"),
        ("many dotdots", "sub/../../../../../../etc/passwd"),
        ("absolute /etc/passwd", "/etc/passwd"),
        ("absolute /etc", "/etc"),
        ("absolute outside file", os.path.join(out, "secret.txt")),
        ("absolute via ws/..", ws + "/../outside/secret.txt"),
        ("sibling with same prefix", ws + "2/secret.txt"),
        ("proc self environ", "/proc/self/environ"),
        ("proc self root", "/proc/self/root/etc/passwd"),
        ("proc self cwd", "/proc/self/cwd/secret.txt"),
        ("link to outside dir (absolute)", "esc_abs_dir/secret.txt"),
        ("link to outside dir (relative)", "esc_rel_dir/secret.txt"),
        ("link itself to outside dir", "esc_abs_dir"),
        ("link to outside file", "esc_file"),
        ("link chain to outside", "esc_chain"),
        ("link up two levels", "sub/esc_up/outside/secret.txt"),
        ("deep relative link", "sub/esc_deep"),
        ("link to /proc/self/root", "esc_proc/etc/passwd"),
        ("link to /", "esc_root/etc/passwd"),
        ("inside link then dotdots", "ok_link/../../outside/secret.txt"),
        ("link with ws/.. target", "esc_dotdot_abs"),
        ("link to sibling prefix dir", "esc_sibling/secret.txt"),
        ("symlink loop", "loop_a"),
        ("dangling link inside", "dangling"),
        ("dangling link outside", "dangling_out"),
        ("NUL byte", "sub/a\x00b"),
        ("name over 255 bytes", "x" * 256),
        ("path over 4096 bytes", "a/" * 2100 + "f"),
        ("new file via dotdot", "../outside/new_file.txt"),
        ("new file via outside link", "esc_abs_dir/new_file.txt"),
        ("new dirs via relative outside link", "esc_rel_dir/newdir/new_file.txt"),
    ]


class ContainmentTest(WorkspaceTest):
    """Every op refuses every escaping path, and nothing outside is read or written."""

    OPS_UNDER_TEST = [
        ("read_file", lambda p: {"path": p}),
        ("read_bytes", lambda p: {"path": p, "max_bytes": 4096}),
        ("write_file", lambda p: {"path": p, "content": "PWNED"}),
        ("edit_file", lambda p: {"path": p, "old_string": "SECRET", "new_string": "PWNED"}),
        ("list_files", lambda p: {"path": p, "recursive": True}),
        ("glob", lambda p: {"pattern": "**/*", "path": p}),
        ("grep", lambda p: {"pattern": "SECRET|root", "path": p, "output_mode": "content"}),
    ]

    def setUp(self):
        super().setUp()
        ws, out = self.ws, self.out
        sibling = ws + "2"
        os.makedirs(sibling)
        with open(os.path.join(sibling, "secret.txt"), "w") as f:
            f.write(self.secret + "\n")
        os.makedirs(os.path.join(ws, "sub"))
        self.put("sub/inside.txt", "SECRET-looking but inside\n")
        links = {
            "esc_abs_dir": out, "esc_rel_dir": "../outside", "esc_file": os.path.join(out, "secret.txt"),
            "esc_chain": "esc_chain2", "esc_chain2": "esc_file", "sub/esc_up": "../..",
            "sub/esc_deep": "../../outside/secret.txt", "esc_proc": "/proc/self/root", "esc_root": "/",
            "ok_link": "sub", "esc_dotdot_abs": ws + "/../outside/secret.txt", "esc_sibling": sibling,
            "loop_a": "loop_b", "loop_b": "loop_a", "dangling": "nothing_here",
            "dangling_out": os.path.join(out, "nothing"),
        }
        for name, target in links.items():
            os.symlink(target, os.path.join(ws, name))

    def run_through_server(self, op, args):
        return runbox_agent.handle({"id": "t", "op": op, "args": args})["result"]

    def assert_refused(self, op, args, before):
        res = self.run_through_server(op, args)
        self.assertTrue(res["is_error"], res["output"][:300])
        self.assertIn(res["metadata"].get("error_code"), CONTAINMENT_CODES, res["output"][:300])
        self.assertNotIn(self.secret, res["output"])
        self.assertNotIn("root:x:0:0", res["output"])
        self.assertEqual(self.snapshot_outside(), before, "something outside the workspace changed")

    def test_every_op_refuses_every_escaping_path(self):
        before = self.snapshot_outside()
        cases = 0
        for label, path in _escaping_paths(self.ws, self.out):
            for op, make_args in self.OPS_UNDER_TEST:
                with self.subTest(op=op, case=label):
                    self.assert_refused(op, make_args(path), before)
                    cases += 1
        self.assertFalse(os.path.exists(os.path.join(self.out, "new_file.txt")))
        self.assertFalse(os.path.exists(os.path.join(self.out, "nothing")))
        self.assertFalse(os.path.exists(os.path.join(self.out, "newdir")))
        self.assertGreaterEqual(cases, 200)

    def test_glob_patterns_cannot_escape(self):
        before = self.snapshot_outside()
        for pattern in ["../outside/*", "../*/secret.txt", os.path.join(self.out, "*"), "/etc/*",
                        "esc_abs_dir/*", "esc_rel_dir/**/*", "sub/../../outside/*", self.ws + "/../outside/*",
                        "/proc/self/root/etc/*"]:
            with self.subTest(pattern=pattern):
                self.assert_refused("glob", {"pattern": pattern}, before)

    def test_walks_do_not_follow_links_out(self):
        before = self.snapshot_outside()
        listing = self.call("list_files", recursive=True)["output"]
        for entered in ("esc_abs_dir/", "esc_rel_dir/", "esc_root/", "esc_proc/", "sub/esc_up/", "esc_sibling/"):
            self.assertNotIn(entered, listing)  # links are listed with their target, never entered
        found = self.call("glob", pattern="**/*", sort="path")["output"]
        self.assertNotIn("/secret.txt", found)
        self.assertNotIn("/etc/passwd", found)
        grep = self.call("grep", pattern="SECRET", output_mode="content")["output"]
        self.assertNotIn(self.secret, grep)
        self.assertIn("sub/inside.txt", grep)
        self.assertEqual(self.snapshot_outside(), before)

    def test_inside_links_still_work(self):
        self.put("sub/data.txt", "inside data\n")
        self.assertIn("inside data", self.call("read_file", path="ok_link/data.txt")["output"])
        os.symlink(os.path.join(self.ws, "sub", "data.txt"), os.path.join(self.ws, "abs_inside"))
        self.assertIn("inside data", self.call("read_file", path="abs_inside")["output"])
        self.call("write_file", path="ok_link/new.txt", content="n")
        self.assertEqual(self.get("sub/new.txt"), b"n")

    # -- check-then-use races: the final open must not follow a link swapped in after the walk

    def swap_after_resolve(self, rel, target):
        """Patch resolve so that, right after the walk, `rel` becomes a symlink to `target`."""
        # The ops reach resolve through containment (read, edit) and through files (write).
        return _patch_all(self.racing_resolve(rel, target))

    def racing_resolve(self, rel, target):
        """resolve, except that right after the walk `rel` becomes a symlink to `target`."""
        real = containment.resolve

        def racing(path, *a, **kw):
            r = real(path, *a, **kw)
            victim = os.path.join(self.ws, rel)
            if os.path.isdir(victim) and not os.path.islink(victim):
                os.rename(victim, victim + ".moved")
            elif os.path.lexists(victim):
                os.unlink(victim)
            os.symlink(target, victim)
            return r

        return racing

    def test_read_does_not_follow_a_link_swapped_in_after_the_check(self):
        secret_file = os.path.join(self.out, "secret.txt")
        for op, args in [("read_file", {"path": "victim.txt"}), ("read_bytes", {"path": "victim.txt"}),
                         ("edit_file", {"path": "victim.txt", "old_string": "SECRET", "new_string": "PWNED"})]:
            with self.subTest(op=op):
                victim = os.path.join(self.ws, "victim.txt")
                if os.path.lexists(victim):  # a failed subtest may leave the link behind
                    os.unlink(victim)
                self.put("victim.txt", "harmless\n")
                before = self.snapshot_outside()
                with self.swap_after_resolve("victim.txt", secret_file):
                    self.assert_refused(op, args, before)

    def test_grep_of_a_file_does_not_follow_a_swapped_link(self):
        self.put("victim.txt", "harmless\n")
        before = self.snapshot_outside()
        with mock.patch("runbox_tools.search.resolve", self.racing_resolve(
                "victim.txt", os.path.join(self.out, "secret.txt"))):
            self.assert_refused("grep", {"pattern": "SECRET", "path": "victim.txt"}, before)

    def test_write_replaces_a_swapped_link_instead_of_writing_through_it(self):
        self.put("victim.txt", "harmless\n")
        before = self.snapshot_outside()
        with self.swap_after_resolve("victim.txt", os.path.join(self.out, "secret.txt")):
            self.call("write_file", path="victim.txt", content="PWNED")
        self.assertEqual(self.snapshot_outside(), before)
        self.assertFalse(os.path.islink(os.path.join(self.ws, "victim.txt")))
        self.assertEqual(self.get("victim.txt"), b"PWNED")

    def test_directory_swapped_for_a_link_after_the_walk(self):
        self.put("d/keep.txt", "k")
        before = self.snapshot_outside()
        with self.swap_after_resolve("d", self.out):
            self.call("write_file", path="d/new.txt", content="PWNED")
        self.assertEqual(self.snapshot_outside(), before)
        self.assertEqual(self.get("d.moved/new.txt"), b"PWNED")
        with mock.patch("runbox_tools.search.resolve", self.racing_resolve("d.moved", self.out)):
            out = self.call("grep", pattern="SECRET|PWNED", path="d.moved", output_mode="content")["output"]
        self.assertNotIn(self.secret, out)

    def test_race_loop_flipping_file_and_link(self):
        """A bounded race: a thread keeps flipping a name between a file and a link out."""
        victim = os.path.join(self.ws, "flip")
        secret_file = os.path.join(self.out, "secret.txt")
        stop = threading.Event()

        def flipper():
            n = 0
            while not stop.is_set() and n < 1000000:  # bounded even if stop is never set
                n += 1
                tmp = victim + ".tmp"
                if n % 2:
                    os.symlink(secret_file, tmp)
                else:
                    with open(tmp, "w") as f:
                        f.write("SAFE\n")
                os.replace(tmp, victim)

        self.put("flip", "SAFE\n")
        t = threading.Thread(target=flipper)
        t.start()
        outcomes = set()
        try:
            for _ in range(200):
                for op in ("read_file", "grep", "write_file"):
                    res = self.run_through_server(op, {"path": "flip", "pattern": "SAFE|SECRET",
                                                       "output_mode": "content", "content": "SAFE\n"})
                    self.assertNotIn(self.secret, res["output"])
                    outcomes.add(res["metadata"].get("error_code") if res["is_error"] else "ok")
        finally:
            stop.set()
            t.join()
        self.assertLessEqual(outcomes, {"ok", "path_outside_workspace", "invalid_path", "not_found"})
        self.assertEqual(self.snapshot_outside()[secret_file], (self.secret + "\n").encode())


if __name__ == "__main__":
    unittest.main()
