"""Tests for the files API's ops in the sandbox (runbox_tools/workspace_files.py).

The executor extracts Docker's tar into the staging folder files_stage makes; here a test
writes into it directly, as the extraction would.
"""
import os

from tests.test_files import WorkspaceTest


class WorkspaceFilesTest(WorkspaceTest):
    def stage(self, path, kind):
        staging = self.call("files_stage", path=path, kind=kind)["metadata"]["staging"]
        self.assertRegex(staging, r"^\.runbox-staging-[0-9a-f]{16}$")
        self.assertTrue(os.path.isdir(os.path.join(self.ws, staging)))
        return staging

    def staged_file(self, staging, data):
        with open(os.path.join(self.ws, staging, "content"), "wb") as f:
            f.write(data)

    def test_stat_resolves_inside_links_and_refuses_outside_ones(self):
        self.put("a/b.txt", "12345")
        os.symlink("a", os.path.join(self.ws, "inside"))
        os.symlink(self.out, os.path.join(self.ws, "escape"))
        self.assertEqual(self.call("files_stat", path="inside/b.txt")["metadata"],
                         {"path": "inside/b.txt", "canonical": "a/b.txt", "kind": "file", "size": 5})
        self.assertEqual(self.call("files_stat", path=".")["metadata"]["canonical"], ".")
        self.fail_with("path_outside_workspace", "files_stat", path="escape/secret.txt")
        self.fail_with("path_outside_workspace", "files_stat", path="../outside/secret.txt")
        self.fail_with("path_outside_workspace", "files_stat", path="/etc/passwd")
        self.fail_with("not_found", "files_stat", path="nope.txt")

    def test_a_staged_file_lands_with_its_folders_only_at_commit(self):
        staging = self.stage("new/deep/f.bin", "file")
        self.assertFalse(os.path.exists(os.path.join(self.ws, "new")))
        self.staged_file(staging, b"\x00\x01binary")
        meta = self.call("files_commit", path="new/deep/f.bin", kind="file", staging=staging, size=8)["metadata"]
        self.assertEqual(meta["path"], "new/deep/f.bin")
        self.assertEqual(self.get("new/deep/f.bin"), b"\x00\x01binary")
        self.assertEqual(sorted(os.listdir(self.ws)), ["new"])

    def test_a_short_upload_is_not_committed(self):
        self.put("keep.txt", "old")
        staging = self.stage("keep.txt", "file")
        self.staged_file(staging, b"ne")
        self.fail_with("incomplete", "files_commit", path="keep.txt", kind="file", staging=staging, size=3)
        self.call("files_discard", staging=staging)
        self.assertEqual(self.get("keep.txt"), b"old")
        self.assertEqual(os.listdir(self.ws), ["keep.txt"])

    def test_staging_refuses_outside_paths_and_kind_mismatches(self):
        os.symlink(self.out, os.path.join(self.ws, "escape"))
        self.put("d/f.txt", "x")
        self.fail_with("path_outside_workspace", "files_stage", path="escape/new.txt", kind="file")
        self.fail_with("path_outside_workspace", "files_stage", path="../x.txt", kind="file")
        self.fail_with("is_a_directory", "files_stage", path="d", kind="file")
        self.fail_with("not_a_directory", "files_stage", path="d/f.txt", kind="dir")
        self.assertEqual(sorted(os.listdir(self.ws)), ["d", "escape"])
        self.assertEqual(os.listdir(self.out), ["secret.txt"])

    def test_an_imported_tree_becomes_a_new_folder_or_merges_into_one(self):
        staging = self.stage("imp", "dir")
        os.makedirs(os.path.join(self.ws, staging, "sub"))
        with open(os.path.join(self.ws, staging, "sub", "a.txt"), "w") as f:
            f.write("A")
        self.call("files_commit", path="imp", kind="dir", staging=staging)
        self.assertEqual(self.get("imp/sub/a.txt"), b"A")
        staging = self.stage("imp", "dir")
        os.makedirs(os.path.join(self.ws, staging, "sub"))
        with open(os.path.join(self.ws, staging, "sub", "b.txt"), "w") as f:
            f.write("B")
        self.call("files_commit", path="imp", kind="dir", staging=staging)
        self.assertEqual(sorted(os.listdir(os.path.join(self.ws, "imp", "sub"))), ["a.txt", "b.txt"])
        self.assertEqual(os.listdir(self.ws), ["imp"])

    def test_delete_removes_a_link_not_its_target_and_folders_only_when_recursive(self):
        os.symlink(self.out, os.path.join(self.ws, "escape"))
        self.put("d/f.txt", "x")
        self.assertEqual(self.call("files_delete", path="escape")["metadata"], {"path": "escape", "kind": "file"})
        self.assertEqual(os.listdir(self.out), ["secret.txt"])
        self.fail_with("is_a_directory", "files_delete", path="d")
        self.assertEqual(self.call("files_delete", path="d", recursive=True)["metadata"], {"path": "d", "kind": "dir"})
        self.fail_with("not_found", "files_delete", path="d")
        self.fail_with("invalid_path", "files_delete", path=".")
        self.fail_with("invalid_path", "files_delete", path=self.ws)

    def test_discard_takes_only_staging_folders(self):
        self.put("precious/f.txt", "x")
        self.fail_with("bad_request", "files_discard", staging="precious")
        self.fail_with("bad_request", "files_discard", staging="../outside")
        self.assertEqual(self.get("precious/f.txt"), b"x")
