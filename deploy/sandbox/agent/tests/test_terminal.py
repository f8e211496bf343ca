"""Tests for the terminal and cancel ops (runbox_tools/terminal.py).

Run from deploy/sandbox/agent:  python3 -m unittest discover -s tests -t .

Every test gets its own workspace and agent-state directory (the module reads both from the
environment on each call), so shell state never leaks between tests. Every process a test
starts is killed in tearDown, whether or not the test got as far as stopping it itself.
Waits for something asynchronous are bounded polls, never fixed sleeps.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest
from datetime import datetime, timedelta, timezone

_ROOT = tempfile.mkdtemp(prefix="runbox-terminal-test-")
# Set before the import, as the agent would have them.
os.environ["RUNBOX_WORKSPACE"] = os.path.join(_ROOT, "workspace")
os.environ["RUNBOX_AGENT_STATE"] = os.path.join(_ROOT, "state")

import runbox_agent  # noqa: E402
import runbox_spawner  # noqa: E402
from runbox_tools import OPS, ToolError  # noqa: E402
from runbox_tools import terminal as terminal_module  # noqa: E402

CUT_NOTE = re.compile(r"… (\d+) characters cut \(max_output_chars=(\d+)\)$")


def tearDownModule():
    shutil.rmtree(_ROOT, ignore_errors=True)


def alive(pid):
    """True while pid runs. A zombie is dead: as PID 1 in a container nobody reaps it."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat[stat.rfind(")") + 2] != "Z"


def own_zombies():
    """This process's children that have exited and not been reaped."""
    found = []
    for name in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % name) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            found.append(int(name))
    return found


def wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


class TerminalTestCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=_ROOT)
        self.workspace = os.path.join(self.dir, "workspace")
        os.makedirs(self.workspace)
        self._saved_env = {k: os.environ.get(k) for k in ("RUNBOX_WORKSPACE", "RUNBOX_AGENT_STATE")}
        os.environ["RUNBOX_WORKSPACE"] = self.workspace
        os.environ["RUNBOX_AGENT_STATE"] = os.path.join(self.dir, "state")
        self.pgids = []
        self.pids = []

    def tearDown(self):
        terminal_module._SPARES.drop()
        for call in list(terminal_module._calls.values()):
            if call.proc is not None:
                self.pgids.append(call.proc.pid)
        for pgid in self.pgids:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        # Background watchers finish once their process is dead; let them, so no thread of
        # this test writes into the next one's files.
        wait_until(lambda: not terminal_module._calls, timeout=5)
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_cmd(self, command, **args):
        result = OPS["terminal"](dict(args, command=command))
        pid = result["metadata"].get("pid")
        if pid:
            self.pgids.append(pid)
        return result

    def stdout_of(self, result):
        """The text of the stdout section (None when there is none)."""
        match = re.search(r"^stdout(?: so far)?:\n(.*?)(?:\nstderr(?: so far)?:\n|\Z)",
                          result["output"], re.S | re.M)
        return match.group(1) if match else None

    def jobs_dir(self):
        return os.path.join(self.workspace, ".runbox", "jobs")

    def read_status(self, job_id):
        try:
            with open(os.path.join(self.jobs_dir(), job_id, "status.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def wait_for_exit(self, job_id, timeout=5.0):
        ok = wait_until(lambda: (self.read_status(job_id) or {}).get("status") == "exited", timeout)
        self.assertTrue(ok, "job %s never recorded its exit: %r" % (job_id, self.read_status(job_id)))
        return self.read_status(job_id)


class ShellStateTests(TerminalTestCase):
    def test_first_call_starts_in_the_workspace(self):
        self.assertEqual(self.stdout_of(self.run_cmd("pwd")), self.workspace)

    def test_a_runner_script_a_command_overwrote_is_restored_for_the_next_call(self):
        self.run_cmd("export RB_KEPT=1")
        # Rewritten in place (the same file, newer), as a careless command might.
        self.run_cmd("printf 'exit 3\\n' > \"$RUNBOX_AGENT_STATE/runner.sh\"; "
                     "[ ! -f \"$RUNBOX_AGENT_STATE/spare.sh\" ] || printf 'exit 3\\n' > \"$RUNBOX_AGENT_STATE/spare.sh\"")
        result = self.run_cmd("echo \"ran $RB_KEPT\"")
        self.assertEqual(self.stdout_of(result), "ran 1", result["output"])
        self.assertEqual(result["metadata"]["exit_code"], 0)

    def test_cd_persists(self):
        self.run_cmd("mkdir -p sub/deeper && cd sub/deeper")
        self.assertEqual(self.stdout_of(self.run_cmd("pwd")),
                         os.path.join(self.workspace, "sub", "deeper"))

    def test_export_and_unset_persist(self):
        self.run_cmd("export RB_TEST_VAR='a b'")
        self.assertEqual(self.stdout_of(self.run_cmd("echo \"[$RB_TEST_VAR]\"; printenv RB_TEST_VAR")),
                         "[a b]\na b")
        self.run_cmd("unset RB_TEST_VAR")
        self.assertEqual(self.stdout_of(self.run_cmd("echo \"[$RB_TEST_VAR]\"")), "[]")

    def test_unset_of_a_variable_the_agent_passes_persists(self):
        os.environ["RB_AGENT_VAR"] = "from-agent"
        self.addCleanup(os.environ.pop, "RB_AGENT_VAR", None)
        self.assertEqual(self.stdout_of(self.run_cmd("echo \"[$RB_AGENT_VAR]\"; unset RB_AGENT_VAR")),
                         "[from-agent]")
        self.assertEqual(self.stdout_of(self.run_cmd("echo \"[$RB_AGENT_VAR]\"")), "[]")

    def test_function_and_alias_persist(self):
        self.run_cmd("greet() { echo \"hello $1\"; }\nalias shout='echo LOUD'")
        result = self.run_cmd("greet world\nshout")
        self.assertEqual(self.stdout_of(result), "hello world\nLOUD", result["output"])

    def test_venv_like_activate_persists_until_deactivate(self):
        bin_dir = os.path.join(self.workspace, "venv", "bin")
        os.makedirs(bin_dir)
        # Like a real venv: the saved PATH is an unexported shell variable.
        with open(os.path.join(bin_dir, "activate"), "w") as f:
            f.write('deactivate () {\n'
                    '  PATH="$_OLD_VIRTUAL_PATH"; export PATH; unset _OLD_VIRTUAL_PATH\n'
                    '  unset VIRTUAL_ENV; unset -f deactivate\n'
                    '}\n'
                    'VIRTUAL_ENV="%s"; export VIRTUAL_ENV\n'
                    '_OLD_VIRTUAL_PATH="$PATH"\n'
                    'PATH="$VIRTUAL_ENV/bin:$PATH"; export PATH\n' % os.path.dirname(bin_dir))
        # PATH is compared rather than a tool run from it: /tmp may be mounted noexec.
        original_path = self.stdout_of(self.run_cmd("echo \"$PATH\""))

        self.run_cmd("source venv/bin/activate")
        result = self.run_cmd("echo \"$PATH\"; echo \"$VIRTUAL_ENV\"; type -t deactivate")
        self.assertEqual(self.stdout_of(result), "%s:%s\n%s\nfunction" % (
            bin_dir, original_path, os.path.dirname(bin_dir)), result["output"])
        self.run_cmd("deactivate")
        result = self.run_cmd("echo \"$PATH\"; echo \"[$VIRTUAL_ENV]\"; "
                              "declare -F deactivate || echo no-deactivate")
        self.assertEqual(self.stdout_of(result), "%s\n[]\nno-deactivate" % original_path,
                         result["output"])

    def test_arrays_integers_and_multiline_values_persist(self):
        self.run_cmd("arr=(a 'b c'); declare -A m=([k]=v); declare -i n=5; x=$'two\\nlines'")
        result = self.run_cmd("echo \"${arr[1]}|${m[k]}|$((n + 1))\"; echo \"$x\"")
        self.assertEqual(self.stdout_of(result), "b c|v|6\ntwo\nlines", result["output"])

    def test_bash_own_variables_are_not_frozen(self):
        self.run_cmd("true")
        first = self.stdout_of(self.run_cmd("echo $RANDOM$RANDOM $SHLVL"))
        second = self.stdout_of(self.run_cmd("echo $RANDOM$RANDOM $SHLVL"))
        self.assertNotEqual(first, second)
        self.assertEqual((first.split()[1], second.split()[1]), ("1", "1"))

    def test_unset_path_persists(self):
        self.run_cmd("unset PATH")
        self.assertEqual(self.stdout_of(self.run_cmd("echo \"[${PATH-unset}]\"")), "[unset]")

    def test_background_job_does_not_save_its_state(self):
        result = self.run_cmd("sleep 0.4; cd /", max_wait_ms=250)
        self.assertTrue(result["metadata"]["background"], result["output"])
        self.wait_for_exit(result["metadata"]["job_id"])
        self.assertEqual(self.stdout_of(self.run_cmd("pwd")), self.workspace)


class ResultTests(TerminalTestCase):
    def assert_exit(self, command, code):
        result = self.run_cmd(command)
        self.assertTrue(result["output"].startswith("status: exited\nexit_code: %d" % code),
                        result["output"])
        self.assertEqual(result["metadata"]["exit_code"], code)
        self.assertFalse(result["is_error"])  # the model reads the code; not a tool error
        self.assertFalse(result["metadata"]["timed_out"])
        self.assertFalse(result["metadata"]["background"])
        return result

    def test_exit_zero_without_output_has_no_stream_sections(self):
        result = self.assert_exit("true", 0)
        self.assertEqual(result["output"], "status: exited\nexit_code: 0")

    def test_exit_code(self):
        self.assert_exit("echo partial; exit 3", 3)

    def test_sigkill_is_137(self):
        self.assert_exit("kill -9 $$", 137)

    def test_sigterm_is_143(self):
        self.assert_exit("kill -TERM $$", 143)

    def test_stdout_then_stderr(self):
        result = self.assert_exit("echo out; echo err >&2", 0)
        self.assertEqual(result["output"], "status: exited\nexit_code: 0\nstdout:\nout\nstderr:\nerr")

    def test_stderr_only(self):
        result = self.assert_exit("echo oops >&2", 0)
        self.assertEqual(result["output"], "status: exited\nexit_code: 0\nstderr:\noops")

    def test_syntax_error_reported_like_bash(self):
        result = self.run_cmd("echo before\nif true; then")
        self.assertNotEqual(result["metadata"]["exit_code"], 0)
        self.assertIn("stdout:\nbefore", result["output"])
        # Line numbers are the command's own (bash reports this one at the end of input).
        self.assertRegex(result["output"], r"stderr:\nbash: eval: line 3: syntax error")

    def test_inline_completion_removes_job_dir(self):
        result = self.run_cmd("echo hi")
        job_id = result["metadata"]["job_id"]
        self.assertTrue(job_id)
        self.assertFalse(os.path.exists(os.path.join(self.jobs_dir(), job_id)))
        self.assertEqual(os.listdir(self.jobs_dir()), [])

    def test_environment_has_no_pager_and_no_stdin(self):
        result = self.run_cmd("echo \"$TERM $PAGER $GIT_PAGER\"; readlink /proc/$$/fd/0")
        self.assertEqual(self.stdout_of(result), "dumb cat cat\n/dev/null")

    def test_trailing_ampersand_is_stripped(self):
        # Not stripped, bash would put the whole list in the background and exit at once.
        result = self.run_cmd("sleep 0.3 && echo waited &", max_wait_ms=5000)
        self.assertEqual(self.stdout_of(result), "waited", result["output"])


class WaitingTests(TerminalTestCase):
    def test_a_call_waits_on_a_pidfd_without_a_thread_of_its_own(self):
        before = set(os.listdir("/proc/self/fd"))
        seen = {}

        def spawned():
            # A call is registered before its shell starts: wait until it has either way of
            # being waited for, a pidfd or a waitpid thread.
            calls = list(terminal_module._calls.values())
            waiters = {t.name for t in threading.enumerate()}
            return calls and all(c.pidfd is not None or "runbox-wait-%s" % c.job_id in waiters for c in calls)

        def watch():
            # While the call runs: no waitpid thread, and one more descriptor (its pidfd).
            wait_until(spawned, timeout=5)
            seen["waiters"] = [t.name for t in threading.enumerate() if t.name.startswith("runbox-wait-")]
            seen["pidfds"] = [c.pidfd for c in terminal_module._calls.values()]

        watcher = threading.Thread(target=watch)
        watcher.start()
        result = self.run_cmd("sleep 0.5; echo done")
        watcher.join()
        self.assertEqual(self.stdout_of(result), "done")
        self.assertEqual(seen["waiters"], [])
        self.assertEqual(len(seen["pidfds"]), 1)
        self.assertIsNotNone(seen["pidfds"][0])
        # The pidfd is closed once the call is done with.
        self.assertEqual(set(os.listdir("/proc/self/fd")) - before, set())

    def test_a_background_job_is_watched_to_its_end_through_its_pidfd(self):
        result = self.run_cmd("sleep 0.6; exit 3", max_wait_ms=250)
        self.assertTrue(result["metadata"]["background"])
        job_id = result["metadata"]["job_id"]
        self.assertTrue(wait_until(lambda: (self.read_status(job_id) or {}).get("status") == "exited", 10))
        self.assertEqual(self.read_status(job_id)["exit_code"], 3)


class TruncationTests(TerminalTestCase):
    def handle(self, command, **args):
        response = runbox_agent.handle({"id": "t1", "op": "terminal",
                                        "args": dict(args, command=command)})
        self.pgids.append(response["result"]["metadata"]["pid"])
        return response["result"]

    def test_large_output_is_cut_with_a_note(self):
        result = self.handle("head -c 100000 /dev/zero | tr '\\0' x", max_output_chars=1000)
        output = result["output"]
        self.assertTrue(output.startswith("status: exited\nexit_code: 0\nstdout:\n"), output[:100])
        match = CUT_NOTE.search(output)
        self.assertIsNotNone(match, output[-200:])
        self.assertEqual(match.group(2), "1000")
        self.assertLessEqual(len(output), 1000 + len(match.group(0)) + 1)
        kept = output[:match.start()].split("stdout:\n", 1)[1]
        self.assertEqual(set(kept.strip()), {"x"})
        self.assertEqual(len(kept.strip()) + int(match.group(1)), 100000)

    def test_stderr_survives_a_stdout_flood(self):
        result = self.handle("head -c 100000 /dev/zero | tr '\\0' x; "
                             "head -c 290 /dev/zero | tr '\\0' e >&2; echo END-ERR >&2",
                             max_output_chars=1000)
        self.assertRegex(result["output"], r"\nstderr:\ne{290}END-ERR$")


class TimeoutTests(TerminalTestCase):
    def test_timeout_kills_the_whole_group_and_next_call_works(self):
        started = time.monotonic()
        result = self.run_cmd("sleep 60 & echo child=$!; sleep 60", timeout_seconds=1,
                              max_wait_ms=5000)
        child = int(re.search(r"child=(\d+)", result["output"]).group(1))
        self.pids.append(child)
        # Ended by its 1 s limit, not by the command (60 s): the bound is loose on purpose,
        # since a loaded machine may take seconds to kill and reap the group.
        self.assertLess(time.monotonic() - started, 30)
        self.assertTrue(result["is_error"])
        self.assertTrue(result["metadata"]["timed_out"])
        self.assertTrue(result["output"].startswith("status: timed_out"), result["output"])
        self.assertIn("timed out after 1 seconds", result["output"])
        self.assertTrue(wait_until(lambda: not alive(child), 15), "child sleep survived")
        self.assertFalse(alive(result["metadata"]["pid"]))
        after = self.run_cmd("echo ok")
        self.assertEqual(self.stdout_of(after), "ok")
        self.assertFalse(after["is_error"])


    @unittest.skipUnless(os.getpid() == 1, "orphans reach the agent only when it is PID 1")
    def test_orphans_are_reaped_when_the_agent_is_init(self):
        # The shell dies first, so its child is reparented to PID 1, the agent (here: us).
        result = self.run_cmd("sleep 60 & echo child=$!; kill -9 $$")
        child = int(re.search(r"child=(\d+)", result["output"]).group(1))
        self.pids.append(child)
        os.kill(child, signal.SIGKILL)
        self.assertTrue(wait_until(lambda: not alive(child)))
        self.run_cmd("true")
        # Not even a zombie is left behind.
        self.assertFalse(os.path.exists("/proc/%d" % child))


class BackgroundTests(TerminalTestCase):
    def test_wait_window_makes_a_background_job_that_records_its_exit(self):
        result = self.run_cmd("sleep 1; echo done", max_wait_ms=300)
        meta = result["metadata"]
        self.assertTrue(result["output"].startswith("status: running"), result["output"])
        self.assertFalse(result["is_error"])
        self.assertTrue(meta["background"])
        job_dir = os.path.join(self.jobs_dir(), meta["job_id"])
        for key, name in (("status_file", "status.json"), ("stdout_file", "stdout.txt"),
                          ("stderr_file", "stderr.txt")):
            self.assertEqual(meta[key], os.path.join(job_dir, name))
            self.assertIn(meta[key], result["output"])
        self.assertIn("pid: %d" % meta["pid"], result["output"])
        status = self.read_status(meta["job_id"])
        self.assertEqual((status["status"], status["pid"]), ("running", meta["pid"]))
        self.assertEqual(status["command"], "sleep 1; echo done")
        self.assertTrue(alive(meta["pid"]))  # the wait window did not kill it

        status = self.wait_for_exit(meta["job_id"])
        self.assertEqual(status["exit_code"], 0)
        self.assertTrue(status["finished_at"])
        with open(meta["stdout_file"]) as f:
            self.assertEqual(f.read(), "done\n")

    def test_kill_group_of_a_background_job(self):
        result = self.run_cmd("sleep 60 & echo child=$!; sleep 60", max_wait_ms=250)
        meta = result["metadata"]
        self.assertTrue(meta["background"], result["output"])

        def child_pid():
            with open(meta["stdout_file"]) as f:
                match = re.search(r"child=(\d+)", f.read())
            return int(match.group(1)) if match else None

        self.assertTrue(wait_until(lambda: child_pid() is not None))
        child = child_pid()
        self.pids.append(child)
        killed = self.run_cmd("kill -- -%d" % meta["pid"])
        self.assertEqual(killed["metadata"]["exit_code"], 0, killed["output"])
        status = self.wait_for_exit(meta["job_id"])
        self.assertEqual(status["exit_code"], 128 + signal.SIGTERM)
        self.assertTrue(wait_until(lambda: not alive(child) and not alive(meta["pid"]), 3))

    def test_a_job_is_followed_through_its_files_not_an_op(self):
        # The model has no job_status tool: the handle names status.json and the output
        # files, which record the end of the job.
        result = self.run_cmd("echo first; sleep 0.3; echo second >&2", max_wait_ms=250)
        job_id = result["metadata"]["job_id"]
        status = self.wait_for_exit(job_id)
        self.assertEqual(status["exit_code"], 0)
        self.assertNotIn("job_status", OPS)
        reply = runbox_agent.handle({"id": "j", "op": "job_status", "args": {"job_id": job_id}})
        self.assertEqual(reply["error"]["code"], "unknown_op")


class ArgumentTests(TerminalTestCase):
    def assert_invalid(self, args):
        with self.assertRaises(ToolError) as ctx:
            OPS["terminal"](args)
        self.assertEqual(ctx.exception.code, "invalid_arguments")

    def test_command_required(self):
        for args in ({}, {"command": ""}, {"command": "   "}, {"command": 5}, {"command": " & "}):
            self.assert_invalid(args)

    def test_timeout_range(self):
        for timeout in (0, 0.5, 901, "10", True):
            self.assert_invalid({"command": "true", "timeout_seconds": timeout})

    def test_max_wait_must_be_a_number(self):
        self.assert_invalid({"command": "true", "max_wait_ms": "soon"})

    def test_max_wait_is_clamped_up_to_250(self):
        # A lower bound only: a loaded machine can make any call slower, never faster.
        started = time.monotonic()
        result = self.run_cmd("sleep 30", max_wait_ms=1)
        self.assertGreaterEqual(time.monotonic() - started, 0.25)
        self.assertTrue(result["output"].startswith("status: running"), result["output"])

    def test_max_wait_defaults_to_10_s_and_is_clamped_down_to_600_s(self):
        wait_s = lambda args: terminal_module._parse_args(dict(args, command="true"))[2]
        self.assertEqual(wait_s({}), 10.0)
        self.assertEqual(wait_s({"max_wait_ms": None}), 10.0)
        self.assertEqual(wait_s({"max_wait_ms": 600000}), 600.0)
        self.assertEqual(wait_s({"max_wait_ms": 600001}), 600.0)
        self.assertEqual(wait_s({"max_wait_ms": 10 ** 12}), 600.0)
        self.assertEqual(wait_s({"max_wait_ms": 1}), 0.25)
        self.assertEqual(wait_s({"max_wait_ms": 1500}), 1.5)

    def test_error_through_the_server(self):
        response = runbox_agent.handle({"id": "a", "op": "terminal", "args": {}})
        self.assertTrue(response["result"]["is_error"])
        self.assertEqual(response["result"]["metadata"]["error_code"], "invalid_arguments")


class CancelTests(TerminalTestCase):
    def test_cancel_kills_the_inflight_call(self):
        results = {}
        thread = threading.Thread(target=lambda: results.update(OPS["terminal"](
            {"command": "sleep 60 & echo $! > child.pid; sleep 60", "max_wait_ms": 30000},
            request_id="req-cancel")))
        thread.start()
        pid_file = os.path.join(self.workspace, "child.pid")
        self.assertTrue(wait_until(lambda: os.path.exists(pid_file) and os.path.getsize(pid_file)))
        with open(pid_file) as f:
            child = int(f.read())
        self.pids.append(child)

        answer = OPS["cancel"]({"target_id": "req-cancel"})
        self.assertTrue(answer["metadata"]["killed"], answer["output"])
        thread.join(5)
        self.assertFalse(thread.is_alive(), "the cancelled call did not return")
        # 143 (SIGTERM) as a rule; 137 when the SIGTERM lands while bash is forking and the
        # escalation to SIGKILL has to finish the job.
        self.assertRegex(results["output"], r"^status: cancelled\nexit_code: 1(43|37)\n")
        self.assertTrue(results["metadata"]["cancelled"])
        self.assertTrue(wait_until(lambda: not alive(child), 3), "child sleep survived")

    def test_cancel_unknown_target(self):
        answer = OPS["cancel"]({"target_id": "nothing-runs"})
        self.assertFalse(answer["metadata"]["killed"])
        self.assertTrue(answer["metadata"]["pending"])
        with self.assertRaises(ToolError) as ctx:
            OPS["cancel"]({})
        self.assertEqual(ctx.exception.code, "invalid_arguments")


    def test_a_cancel_that_arrives_first_keeps_its_call_from_starting(self):
        # Each request runs in a thread of its own, so the cancel sent right after a call
        # can be handled before it: the call must then not run at all.
        OPS["cancel"]({"target_id": "req-early"})
        result = OPS["terminal"]({"command": "touch ran.txt"}, request_id="req-early")
        self.assertTrue(result["is_error"])
        self.assertTrue(result["metadata"]["cancelled"])
        self.assertIn("cancelled before it started", result["output"])
        self.assertFalse(os.path.exists(os.path.join(self.workspace, "ran.txt")))
        # The cancel is used up: the same id later runs normally.
        again = OPS["terminal"]({"command": "echo fine"}, request_id="req-early")
        self.assertFalse(again["is_error"], again["output"])

    def test_a_cancel_during_the_spawn_kills_the_call_once_it_exists(self):
        real_spawn = terminal_module._spawn
        cancelled = {}

        def spawn_with_cancel(call):
            cancelled.update(OPS["cancel"]({"target_id": "req-spawning"}))
            real_spawn(call)

        terminal_module._spawn = spawn_with_cancel
        try:
            started = time.monotonic()
            result = OPS["terminal"]({"command": "sleep 30; touch late.txt", "max_wait_ms": 20000}, request_id="req-spawning")
        finally:
            terminal_module._spawn = real_spawn
        self.assertTrue(cancelled["metadata"]["killed"], cancelled["output"])
        self.assertTrue(result["metadata"]["cancelled"], result["output"])
        self.assertLess(time.monotonic() - started, 10)
        self.assertFalse(os.path.exists(os.path.join(self.workspace, "late.txt")))

    def test_early_cancels_are_bounded(self):
        for i in range(terminal_module.EARLY_CANCEL_MAX + 50):
            OPS["cancel"]({"target_id": "flood-%d" % i})
        self.assertLessEqual(len(terminal_module._early_cancels), terminal_module.EARLY_CANCEL_MAX)
        terminal_module._early_cancels.clear()


class ReclaimTests(TerminalTestCase):
    def fake_job(self, job_id, **status):
        job_dir = os.path.join(self.jobs_dir(), job_id)
        os.makedirs(job_dir)
        with open(os.path.join(job_dir, "status.json"), "w") as f:
            json.dump(dict(status, job_id=job_id), f)
        return job_dir

    def dead_pid(self):
        proc = subprocess.Popen(["true"])
        proc.wait()
        return proc.pid

    def test_reclaim(self):
        now = datetime.now(timezone.utc)
        old = self.fake_job("20000101-000000-000001", status="exited", exit_code=0, pid=1,
                            finished_at=(now - timedelta(hours=25)).isoformat())
        recent = self.fake_job("20000101-000000-000002", status="exited", exit_code=0, pid=1,
                               finished_at=(now - timedelta(hours=1)).isoformat())
        vanished = self.fake_job("20000101-000000-000003", status="running",
                                 pid=self.dead_pid(), finished_at=None)
        running = self.run_cmd("sleep 60", max_wait_ms=250)["metadata"]

        terminal_module.reclaim_jobs()

        self.assertFalse(os.path.exists(old))
        self.assertTrue(os.path.exists(recent))
        self.assertEqual(self.read_status(os.path.basename(vanished))["status"], "lost")
        self.assertEqual(self.read_status(running["job_id"])["status"], "running")
        self.assertTrue(alive(running["pid"]))

    def test_reclaimer_runs_at_startup(self):
        self.assertIn(terminal_module.start_job_reclaimer, OPS.startup_hooks)


class InSpareShells:
    """Runs a test class's calls as the agent does: after each reply the next spare shell
    is started, so every call after the first starts in one (each promise, kept there too)."""

    def run_cmd(self, command, **args):
        result = super().run_cmd(command, **args)
        OPS.run_after_reply_hooks()
        return result


class SpareShellStateTests(InSpareShells, ShellStateTests):
    pass


class SpareResultTests(InSpareShells, ResultTests):
    pass


class SpareTimeoutTests(InSpareShells, TimeoutTests):
    pass


class SpareBackgroundTests(InSpareShells, BackgroundTests):
    pass


class SpareCancelTests(InSpareShells, CancelTests):
    pass


class SpareShellTests(InSpareShells, TerminalTestCase):
    def spare_pid(self):
        spare = terminal_module._SPARES.spare
        self.assertIsNotNone(spare, "no spare shell was started after the reply")
        return spare.proc.pid

    def test_the_next_call_runs_in_the_spare_started_after_the_reply(self):
        self.run_cmd("cd /; export RB_SPARE=1")
        pid = self.spare_pid()
        result = self.run_cmd("echo \"$$ $PWD $RB_SPARE $SECONDS $#\"; readlink /proc/$$/fd/0")
        self.assertEqual(result["metadata"]["pid"], pid)
        self.assertEqual(self.stdout_of(result), "%d / 1 0 0\n/dev/null" % pid, result["output"])
        # Nothing of the spare's pipe is left open in the command. (No pipeline: the shell
        # holds a pipeline's pipes while it starts its parts.)
        fds = self.stdout_of(self.run_cmd("ls /proc/$$/fd"))
        self.assertEqual(sorted(fds.split()), ["0", "1", "2"], fds)

    def test_a_spare_that_was_killed_is_replaced_by_a_fresh_shell(self):
        self.run_cmd("true")
        pid = self.spare_pid()
        os.kill(pid, signal.SIGKILL)
        self.assertTrue(wait_until(lambda: not alive(pid)))
        result = self.run_cmd("echo ok")
        self.assertNotEqual(result["metadata"]["pid"], pid)
        self.assertEqual(self.stdout_of(result), "ok", result["output"])
        self.assertNotEqual(self.spare_pid(), pid)

    def test_a_spare_made_for_another_workspace_is_not_used(self):
        self.run_cmd("true")
        pid = self.spare_pid()
        other = os.path.join(self.dir, "other-workspace")
        os.makedirs(other)
        os.environ["RUNBOX_WORKSPACE"] = other
        os.environ["RUNBOX_AGENT_STATE"] = os.path.join(self.dir, "other-state")
        result = self.run_cmd("pwd")
        self.assertNotEqual(result["metadata"]["pid"], pid)
        self.assertEqual(self.stdout_of(result), other)
        self.assertTrue(wait_until(lambda: not alive(pid)))

    def test_the_first_call_may_start_in_a_spare_with_the_agent_environment(self):
        os.environ["RB_AGENT_VAR"] = "from-agent"
        self.addCleanup(os.environ.pop, "RB_AGENT_VAR", None)
        # A call that became a background job saved no state: the next one is still a first.
        job = self.run_cmd("sleep 0.5", max_wait_ms=250)
        self.assertTrue(job["metadata"]["background"])
        pid = self.spare_pid()
        result = self.run_cmd("echo \"$RB_AGENT_VAR $TERM $PWD\"")
        self.assertEqual(result["metadata"]["pid"], pid)
        self.assertEqual(self.stdout_of(result), "from-agent dumb %s" % self.workspace)


class InSpawnedSpareShells(InSpareShells):
    """As InSpareShells, with the spares started by the spawner (runbox_spawner.py), as the
    agent starts them where tools run as the sandbox user: every promise holds there too."""

    def setUp(self):
        super().setUp()
        self.spawner = runbox_spawner.Spawner()
        terminal_module.start_spares_with(self.spawner)

    def tearDown(self):
        terminal_module.start_spares_with(None)
        self.spawner.close()
        super().tearDown()


class SpawnedSpareShellStateTests(InSpawnedSpareShells, ShellStateTests):
    pass


class SpawnedSpareResultTests(InSpawnedSpareShells, ResultTests):
    pass


class SpawnedSpareTimeoutTests(InSpawnedSpareShells, TimeoutTests):
    pass


class SpawnedSpareBackgroundTests(InSpawnedSpareShells, BackgroundTests):
    pass


class SpawnedSpareCancelTests(InSpawnedSpareShells, CancelTests):
    pass


class SpawnedSpareShellTests(InSpawnedSpareShells, SpareShellTests):
    def test_the_spare_is_a_child_of_the_agent_not_of_the_spawner(self):
        self.run_cmd("true")
        pid = self.spare_pid()
        self.assertIsInstance(terminal_module._SPARES.spare.proc, terminal_module._Child)
        with open("/proc/%d/status" % pid) as f:
            ppid = int(next(line for line in f if line.startswith("PPid:")).split()[1])
        self.assertEqual(ppid, os.getpid())
        result = self.run_cmd("exit 7")
        self.assertEqual(result["metadata"]["pid"], pid)
        self.assertEqual(result["metadata"]["exit_code"], 7)

    def test_a_spawner_that_was_killed_is_started_again(self):
        self.run_cmd("true")
        helper = self.spawner.proc.pid
        os.kill(helper, signal.SIGKILL)
        self.run_cmd("true")
        self.assertNotEqual(self.spawner.proc.pid, helper)
        pid = self.spare_pid()
        self.assertEqual(self.run_cmd("echo ok")["metadata"]["pid"], pid)

    def test_a_program_that_cannot_start_is_reported_and_its_clone_reaped(self):
        read_end, write_end = os.pipe()
        self.addCleanup(os.close, read_end)
        self.addCleanup(os.close, write_end)
        with self.assertRaises(runbox_spawner.SpawnerUnavailable) as caught:
            self.spawner.spawn(["/nonexistent/bash"], {}, self.workspace, read_end)
        self.assertIn("did not start", str(caught.exception))
        self.assertEqual(own_zombies(), [])
        # The helper goes on serving.
        self.run_cmd("true")
        self.assertEqual(self.stdout_of(self.run_cmd("echo ok")), "ok")

    def test_a_pid_that_is_not_a_new_shell_of_the_agent_is_refused(self):
        self.run_cmd("true")
        for lie in (os.getpid(), 1, self.spawner.proc.pid):
            with self.assertRaises(runbox_spawner.SpawnerUnavailable):
                self.spawner._checked_pid(json.dumps({"pid": lie}).encode())
        with self.assertRaises(runbox_spawner.SpawnerUnavailable):
            self.spawner._checked_pid(b"not json")
        # Refusing stops the helper; the next spare starts another.
        self.assertIsNone(self.spawner.proc)
        self.run_cmd("true")
        self.assertIsNotNone(self.spawner.proc)
        self.assertIsInstance(terminal_module._SPARES.spare.proc, terminal_module._Child)


if __name__ == "__main__":
    unittest.main()
