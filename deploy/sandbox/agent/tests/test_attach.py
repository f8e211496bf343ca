"""Tests for the channel handed over by `attach`: the agent serves the exec's stdio itself.

Run from deploy/sandbox/agent:  python3 -m unittest discover -s tests -t .

A socket pair stands for the agent's socket and two pipes for the exec's stdin and stdout,
passed over the socket as `attach` passes them.
"""
import json
import os
import select
import socket
import threading
import unittest

import runbox_agent


def read_line(fd, timeout=10):
    data = b""
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            raise AssertionError("no line within %s s (got %r)" % (timeout, data))
        chunk = os.read(fd, 1)
        if not chunk:
            raise AssertionError("the stream ended (got %r)" % (data,))
        data += chunk
    return json.loads(data)


class AttachTest(unittest.TestCase):
    def setUp(self):
        self.relay, server = socket.socketpair()
        self.relay.settimeout(10)
        self.stdin_r, self.stdin_w = os.pipe()
        self.stdout_r, self.stdout_w = os.pipe()
        socket.send_fds(self.relay, [b"\n"], [self.stdin_r, self.stdout_w])
        # The agent holds its own copies now, as the relay's would be after it became `cat`.
        os.close(self.stdin_r)
        os.close(self.stdout_w)
        self.thread = threading.Thread(target=runbox_agent.serve_connection, args=(server,), daemon=True)
        self.thread.start()

    def tearDown(self):
        for fd in (self.stdin_w, self.stdout_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.relay.close()
        self.thread.join(timeout=10)

    def test_says_attached_then_answers_requests_on_the_exec_stdout(self):
        self.assertEqual(read_line(self.stdout_r), {"id": None, "event": "attached"})
        self.assertEqual(self.relay.recv(1), b"\n")
        os.write(self.stdin_w, b'{"id": "p1", "op": "ping", "args": {}}\n')
        self.assertEqual(read_line(self.stdout_r), {"id": "p1", "result": {"output": "pong", "metadata": {}, "is_error": False}})

    def test_closes_the_relay_connection_when_the_exec_stdin_ends(self):
        read_line(self.stdout_r)
        self.assertEqual(self.relay.recv(1), b"\n")
        os.close(self.stdin_w)
        # The placeholder reads this connection: its end is what ends the exec.
        self.assertEqual(self.relay.recv(1), b"")
        self.thread.join(timeout=10)
        self.assertFalse(self.thread.is_alive())
        # And the agent let go of the exec's stdout.
        self.assertEqual(os.read(self.stdout_r, 1), b"")


class DirectConnectionTest(unittest.TestCase):
    def test_a_client_that_sends_no_descriptors_is_served_on_the_socket(self):
        client, server = socket.socketpair()
        client.settimeout(10)
        thread = threading.Thread(target=runbox_agent.serve_connection, args=(server,), daemon=True)
        thread.start()
        client.sendall(b'{"id": "p2", "op": "ping", "args": {}}\n')
        lines = client.makefile("rb")
        self.assertEqual(json.loads(lines.readline())["id"], "p2")
        lines.close()
        client.close()
        thread.join(timeout=10)


if __name__ == "__main__":
    unittest.main()
