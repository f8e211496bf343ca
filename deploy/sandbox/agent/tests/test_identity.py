"""Tests for the agent's identity settings (runbox_identity.py) and its reply bound.

The switch itself (root to the sandbox user) needs a root agent with CAP_SETUID, which
this suite, run as the sandbox user, is not: test/agent-identity.e2e-spec.ts checks it in
a real container.
"""
import os
import tempfile
import unittest
from unittest import mock

import runbox_agent
import runbox_identity


class ToolUserTest(unittest.TestCase):
    def test_no_setting_means_tools_share_the_agents_identity(self):
        with mock.patch.dict(os.environ, {runbox_identity.TOOL_USER_ENV: ""}):
            self.assertIsNone(runbox_identity.tool_user())

    def test_reads_uid_and_gid(self):
        with mock.patch.dict(os.environ, {runbox_identity.TOOL_USER_ENV: "1000:1001"}):
            self.assertEqual(runbox_identity.tool_user(), (1000, 1001))

    def test_refuses_root_and_nonsense(self):
        for spec in ("0:0", "1000:0", "sandbox", "-1:5"):
            with mock.patch.dict(os.environ, {runbox_identity.TOOL_USER_ENV: spec}):
                with self.assertRaises(runbox_identity.IdentityError, msg=spec):
                    runbox_identity.tool_user()


class PrivateDirectoryTest(unittest.TestCase):
    def test_refuses_a_socket_directory_root_does_not_own_alone(self):
        with tempfile.TemporaryDirectory() as path:
            os.chmod(path, 0o700)
            if os.getuid() != 0:
                with self.assertRaises(runbox_identity.IdentityError):
                    runbox_identity.check_private_directory(path)
            os.chmod(path, 0o755)
            with self.assertRaises(runbox_identity.IdentityError):
                runbox_identity.check_private_directory(path)


class OversizedReplyTest(unittest.TestCase):
    def test_a_result_over_the_frame_bound_becomes_an_error_for_the_same_id(self):
        reply = runbox_agent.oversized_reply({"id": "c9", "result": {"output": "x"}}, 9_000_000)
        self.assertEqual(reply["id"], "c9")
        self.assertTrue(reply["result"]["is_error"])
        self.assertEqual(reply["result"]["metadata"]["error_code"], "result_too_large")
        self.assertIn("9000000 bytes", reply["result"]["output"])


if __name__ == "__main__":
    unittest.main()
