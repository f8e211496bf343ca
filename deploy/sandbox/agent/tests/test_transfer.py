"""Tests for streamed transfers (runbox_tools/transfer.py), run as the executor runs them:
`runbox_agent.py transfer-read|transfer-write` in a process of its own, bytes on stdio."""
import hashlib
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import unittest

AGENT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runbox_agent.py")


class TransferTest(unittest.TestCase):
    def setUp(self):
        self.tmp = os.path.realpath(tempfile.mkdtemp(prefix="runbox-transfer-test-"))
        self.ws = os.path.join(self.tmp, "ws")
        self.out = os.path.join(self.tmp, "outside")
        os.makedirs(self.ws)
        os.makedirs(self.out)
        with open(os.path.join(self.out, "secret.txt"), "w") as f:
            f.write("top secret")
        os.symlink(self.out, os.path.join(self.ws, "escape"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def run_agent(self, *args, stdin=b""):
        env = dict(os.environ, RUNBOX_WORKSPACE=self.ws)
        return subprocess.run([sys.executable, AGENT, *args], input=stdin, capture_output=True, env=env, timeout=30)

    def error_of(self, proc):
        self.assertEqual(proc.returncode, 1)
        return json.loads(proc.stderr.decode().strip().splitlines()[-1])["error"]

    def test_read_announces_the_size_then_streams_the_bytes(self):
        data = os.urandom(3 * 1024 * 1024 + 17)
        with open(os.path.join(self.ws, "blob.bin"), "wb") as f:
            f.write(data)
        proc = self.run_agent("transfer-read", "blob.bin", str(10 * 1024 * 1024))
        self.assertEqual(proc.returncode, 0)
        self.assertEqual(json.loads(proc.stderr.decode().splitlines()[0]), {"size": len(data), "path": "blob.bin"})
        self.assertEqual(proc.stdout, data)

    def test_read_refuses_a_file_over_the_cap_before_sending_a_byte(self):
        with open(os.path.join(self.ws, "big"), "wb") as f:
            f.truncate(5000)
        proc = self.run_agent("transfer-read", "big", "4096")
        self.assertEqual(proc.stdout, b"")
        err = self.error_of(proc)
        self.assertEqual(err["code"], "too_large")
        self.assertIn("5000 bytes, over the 4096-byte transfer cap", err["message"])

    def test_read_and_write_refuse_paths_outside_the_workspace(self):
        for path in ("escape/secret.txt", "../outside/secret.txt", "/etc/passwd"):
            proc = self.run_agent("transfer-read", path, "1000")
            self.assertEqual(proc.stdout, b"")
            self.assertEqual(self.error_of(proc)["code"], "path_outside_workspace", path)
        proc = self.run_agent("transfer-write", "escape/new.txt", "3", stdin=b"abc")
        self.assertEqual(self.error_of(proc)["code"], "path_outside_workspace")
        # The refusal is the only line: no acceptance came first for the executor to stream after.
        self.assertEqual(len(proc.stderr.decode().strip().splitlines()), 1)
        self.assertEqual(sorted(os.listdir(self.out)), ["secret.txt"])

    def test_write_accepts_the_path_before_it_reads_a_byte(self):
        env = dict(os.environ, RUNBOX_WORKSPACE=self.ws)
        proc = subprocess.Popen([sys.executable, AGENT, "transfer-write", "sub/new.txt", "3"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            # Nothing was written to stdin yet: the acceptance must come without it.
            readable, _, _ = select.select([proc.stderr], [], [], 30)
            self.assertTrue(readable, "no acceptance line within 30 s")
            self.assertEqual(json.loads(proc.stderr.readline()), {"path": "sub/new.txt"})
            out, _ = proc.communicate(b"abc", timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(proc.returncode, 0)
        self.assertEqual(json.loads(out)["size"], 3)

    def test_write_replaces_the_file_only_when_every_byte_arrived(self):
        data = os.urandom(2 * 1024 * 1024)
        proc = self.run_agent("transfer-write", "sub/dir/got.bin", str(len(data)), stdin=data)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(json.loads(proc.stdout), {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "path": "sub/dir/got.bin"})
        with open(os.path.join(self.ws, "sub/dir/got.bin"), "rb") as f:
            self.assertEqual(f.read(), data)

    def test_a_write_cut_short_leaves_the_old_file_and_no_temp_file(self):
        target = os.path.join(self.ws, "keep.txt")
        with open(target, "w") as f:
            f.write("old content")
        proc = self.run_agent("transfer-write", "keep.txt", "1000", stdin=b"only a part")
        err = self.error_of(proc)
        self.assertEqual(err["code"], "incomplete")
        self.assertIn("after 11 of 1000 bytes", err["message"])
        with open(target) as f:
            self.assertEqual(f.read(), "old content")
        self.assertEqual(sorted(os.listdir(self.ws)), ["escape", "keep.txt"])

    def test_a_write_with_more_bytes_than_announced_is_refused(self):
        proc = self.run_agent("transfer-write", "x.txt", "2", stdin=b"abc")
        self.assertEqual(self.error_of(proc)["code"], "bad_request")
        self.assertFalse(os.path.exists(os.path.join(self.ws, "x.txt")))
        self.assertEqual(sorted(os.listdir(self.ws)), ["escape"])


if __name__ == "__main__":
    unittest.main()
