"""Tests for the MCP stdio process ops (runbox_tools/mcp_stdio.py).

The servers here are small Python programs: what is under test is the agent's handling of
a process's pipes (framing, bounds, ending), not MCP itself, which the end-to-end test
(test/mcp-stdio.e2e-spec.ts) speaks with the real SDK inside a sandbox container.
Every process a test starts is stopped in tearDown. Waits are bounded polls or the ops'
own long-poll, never fixed sleeps.
"""
import os
import shutil
import sys
import tempfile
import time
import unittest

from unittest import mock

from runbox_tools import OPS, ToolError
from runbox_tools import mcp_stdio

_ROOT = tempfile.mkdtemp(prefix="runbox-mcp-test-")

ECHO = "import sys\nfor line in sys.stdin:\n    sys.stdout.write('echo ' + line)\n    sys.stdout.flush()\n"


def tearDownModule():
    shutil.rmtree(_ROOT, ignore_errors=True)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def wait_until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


class McpStdioTest(unittest.TestCase):
    def setUp(self):
        self.handles = []
        # Per test: other suites point RUNBOX_WORKSPACE at directories of their own.
        workspace = tempfile.mkdtemp(dir=_ROOT)
        environment = mock.patch.dict(os.environ, {"RUNBOX_WORKSPACE": workspace})
        environment.start()
        self.addCleanup(environment.stop)

    def tearDown(self):
        for handle in self.handles:
            try:
                OPS["mcp_stop"]({"handle": handle})
            except ToolError:
                pass

    def start(self, program, **extra):
        args = dict({"command": sys.executable, "args": ["-c", program]}, **extra)
        meta = OPS["mcp_start"](args)["metadata"]
        self.handles.append(meta["handle"])
        return meta

    def read(self, handle, after=0, wait_ms=5000):
        return OPS["mcp_read"]({"handle": handle, "after": after, "wait_ms": wait_ms})["metadata"]

    def read_to_end(self, handle):
        after, lines = 0, []
        for _ in range(10000):  # a read returns at least one line, or the end, or waits
            got = self.read(handle, after)
            lines += got["lines"]
            after = got["last_seq"]
            if got["exited"]:
                return lines, got["exited"]
        self.fail("the process never ended")

    def test_lines_written_to_stdin_come_back_in_order_and_are_forgotten_once_acknowledged(self):
        handle = self.start(ECHO)["handle"]
        OPS["mcp_write"]({"handle": handle, "data": '{"a": 1}\n{"b": 2}\n'})
        lines, after = [], 0
        while len(lines) < 2:
            got = self.read(handle, after)
            lines += got["lines"]
            after = got["last_seq"]
        self.assertEqual(lines, ['echo {"a": 1}', 'echo {"b": 2}'])
        # Asked again from an earlier cursor, a line already acknowledged is gone for good.
        OPS["mcp_write"]({"handle": handle, "data": "c\n"})
        got = self.read(handle, after)
        self.assertEqual(got["lines"], ["echo c"])
        self.assertEqual(self.read(handle, 0, wait_ms=0)["lines"], ["echo c"])
        self.assertEqual(self.read(handle, got["last_seq"], wait_ms=0)["lines"], [])

    def test_runs_in_the_workspace_with_npm_cache_there_and_the_callers_env(self):
        program = "import os, json; print(json.dumps([os.getcwd(), os.environ.get('X'), os.environ['npm_config_cache']]))"
        lines, exited = self.read_to_end(self.start(program, env={"X": "y"})["handle"])
        workspace = os.environ["RUNBOX_WORKSPACE"]
        self.assertEqual(lines, ['["%s", "y", "%s/.npm"]' % (os.path.realpath(workspace), workspace)])
        self.assertEqual(exited["exit_code"], 0)

    def test_carries_the_agents_socket_variable_that_marks_a_local_sessions_processes(self):
        program = "import os; print(os.environ.get('RUNBOX_AGENT_SOCKET'))"
        with mock.patch.dict(os.environ, {"RUNBOX_AGENT_SOCKET": "/tmp/s/agent.sock"}):
            handle = self.start(program, env={"RUNBOX_AGENT_SOCKET": "elsewhere"})["handle"]
        lines, _ = self.read_to_end(handle)
        self.assertEqual(lines, ["/tmp/s/agent.sock"])

    def test_a_cwd_outside_the_workspace_is_refused(self):
        with self.assertRaises(ToolError) as caught:
            self.start(ECHO, cwd="../..")
        self.assertEqual(caught.exception.code, "path_outside_workspace")

    def test_a_server_that_exits_at_start_reports_its_code_and_stderr(self):
        handle = self.start("import sys; sys.stderr.write('missing config file\\n'); sys.exit(3)")["handle"]
        lines, exited = self.read_to_end(handle)
        self.assertEqual(lines, [])
        self.assertEqual(exited["exit_code"], 3)
        self.assertIn("missing config file", exited["stderr"])
        with self.assertRaises(ToolError) as caught:
            OPS["mcp_write"]({"handle": handle, "data": "x\n"})
        self.assertEqual(caught.exception.code, "ended")

    def test_a_command_that_does_not_exist_fails_to_start(self):
        with self.assertRaises(ToolError) as caught:
            OPS["mcp_start"]({"command": "/no/such/server"})
        self.assertEqual(caught.exception.code, "spawn_failed")

    def test_a_line_over_the_limit_stops_the_server_and_says_why(self):
        program = "import sys, time\nsys.stdout.write('x' * 5000)\nsys.stdout.flush()\ntime.sleep(60)\n"
        meta = self.start(program, limits={"max_line_bytes": 1000})
        lines, exited = self.read_to_end(meta["handle"])
        self.assertEqual(lines, [])
        self.assertIn("more than 1000 bytes", exited["reason"])
        self.assertTrue(wait_until(lambda: not alive(meta["pid"])))

    def test_the_reader_falling_behind_stalls_the_server_instead_of_growing_the_buffer(self):
        # 2,000 lines of about 100 bytes; the buffer may hold 1,000 bytes of unread lines.
        program = "import sys\nfor i in range(2000):\n    print('%05d' % i + 'y' * 95, flush=True)\n"
        handle = self.start(program, limits={"max_buffered_bytes": 1000})["handle"]
        process = mcp_stdio._processes[handle]
        self.assertTrue(wait_until(lambda: process.buffered >= 1000))
        # Held back: far less than the whole output sits in the agent.
        self.assertLess(process.buffered, 1000 + mcp_stdio.CHUNK + 200)
        lines, exited = self.read_to_end(handle)
        self.assertEqual(len(lines), 2000)
        self.assertEqual(lines[1999][:5], "01999")
        self.assertEqual(exited["exit_code"], 0)

    def test_stderr_keeps_only_its_tail(self):
        program = "import sys\nsys.stderr.write('a' * 10000 + 'THE END')\n"
        _, exited = self.read_to_end(self.start(program, limits={"max_stderr_bytes": 100})["handle"])
        self.assertTrue(exited["stderr"].endswith("THE END"))
        self.assertTrue(exited["stderr"].startswith("[9907 earlier bytes of stderr dropped]"), exited["stderr"][:80])

    def test_stop_ends_the_process_group_even_when_it_ignores_stdin_closing(self):
        program = ("import signal, subprocess, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                   "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                   "print(child.pid, flush=True)\ntime.sleep(60)\n")
        meta = self.start(program)
        child = int(self.read(meta["handle"])["lines"][0])
        OPS["mcp_stop"]({"handle": meta["handle"]})
        self.assertTrue(wait_until(lambda: not alive(meta["pid"]) and not alive(child)))
        _, exited = self.read_to_end(meta["handle"])
        self.assertEqual(exited["reason"], "stopped by the client")

    def test_no_more_than_max_processes_run_at_once(self):
        # Other tests' processes may still be ending; only running ones count.
        others = list(mcp_stdio._processes.values())
        self.assertTrue(wait_until(lambda: all(p.ended_at is not None for p in others)))
        limits = {"max_processes": 2}
        for _ in range(2):
            self.start(ECHO, limits=limits)
        with self.assertRaises(ToolError) as caught:
            self.start(ECHO, limits=limits)
        self.assertEqual(caught.exception.code, "too_many_processes")

    def test_a_server_nobody_talks_to_is_stopped_after_its_idle_time(self):
        meta = self.start(ECHO, limits={"idle_seconds": 1})
        self.assertTrue(wait_until(lambda: not alive(meta["pid"])))
        _, exited = self.read_to_end(meta["handle"])
        self.assertIn("without a read or write", exited["reason"])

    def test_an_unknown_handle_is_not_found(self):
        with self.assertRaises(ToolError) as caught:
            self.read("mcp-0000")
        self.assertEqual(caught.exception.code, "not_found")


if __name__ == "__main__":
    unittest.main()
