"""Tests for the wire replies of runbox_agent.serve_connection.

Run from deploy/sandbox/agent:  python3 -m unittest discover -s tests -t .

Each test drives a real connection (a socket pair) and reads the agent's answer lines with
a bounded wait, as the executor would.
"""
import json
import os
import shutil
import socket
import tempfile
import threading
import unittest

import runbox_agent

_ROOT = tempfile.mkdtemp(prefix="runbox-replies-test-")
_ENV = {"RUNBOX_WORKSPACE": os.path.join(_ROOT, "workspace"), "RUNBOX_AGENT_STATE": os.path.join(_ROOT, "state")}


def tearDownModule():
    shutil.rmtree(_ROOT, ignore_errors=True)


class RepliesTest(unittest.TestCase):
    def setUp(self):
        # The tools read these on each call; other test modules set their own at import.
        self.saved_env = {name: os.environ.get(name) for name in _ENV}
        os.environ.update(_ENV)
        os.makedirs(_ENV["RUNBOX_WORKSPACE"], exist_ok=True)
        self.client, server = socket.socketpair()
        self.client.settimeout(10)
        self.thread = threading.Thread(target=runbox_agent.serve_connection, args=(server,), daemon=True)
        self.thread.start()
        self.lines = self.client.makefile("rb")

    def tearDown(self):
        self.lines.close()  # it holds the socket open too
        self.client.close()
        self.thread.join(timeout=10)
        for name, value in self.saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def ask(self, raw):
        self.client.sendall(raw + b"\n")
        return json.loads(self.lines.readline())

    def test_a_result_holding_a_lone_surrogate_is_answered_with_an_error_at_once(self):
        for op, args in [("read_file", {"path": "\\ud800"}), ("glob", {"pattern": "\\ud800*"}), ("list_files", {"path": "a\\udfff"})]:
            raw = ('{"id": "c1", "op": "%s", "args": %s}' % (op, json.dumps(args).replace("\\\\", "\\"))).encode()
            reply = self.ask(raw)
            self.assertEqual(reply["id"], "c1", op)
            self.assertTrue(reply["result"]["is_error"], op)
            self.assertEqual(reply["result"]["metadata"]["error_code"], "unencodable_text", op)

    def test_an_unencodable_id_still_gets_an_answer(self):
        reply = self.ask(b'{"id": "\\ud800", "op": "read_file", "args": {"path": "\\ud800"}}')
        self.assertEqual(reply["id"], "\ud800")
        self.assertEqual(reply["result"]["metadata"]["error_code"], "unencodable_text")

    def test_a_request_that_is_not_an_object_is_refused(self):
        self.assertEqual(self.ask(b"[1, 2]")["error"]["code"], "bad_request")
        self.assertEqual(self.ask(b"not json")["error"]["code"], "bad_request")

    def test_ordinary_text_is_returned_as_sent(self):
        path = os.path.join(os.environ["RUNBOX_WORKSPACE"], "caf\u00e9.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("cr\u00e8me \U0001F600\n")
        reply = self.ask(json.dumps({"id": "ok", "op": "read_file", "args": {"path": "caf\u00e9.txt"}}, ensure_ascii=False).encode())
        self.assertFalse(reply["result"]["is_error"], reply)
        self.assertIn("cr\u00e8me \U0001F600", reply["result"]["output"])


if __name__ == "__main__":
    unittest.main()
