"""Inside a sandbox container: `terminal true` started in a spare shell against a shell
started for the call (the ordinary spawn), alternated call by call in one process, so the
machine's load weighs on both alike. Run by bench/terminal-shell.bench.ts."""
import os
import sys
import time

sys.path.insert(0, "/opt/runbox")
os.environ.setdefault("RUNBOX_WORKSPACE", "/workspace")
os.environ.setdefault("RUNBOX_AGENT_STATE", "/tmp/runbox")

from runbox_tools import OPS  # noqa: E402
from runbox_tools import terminal  # noqa: E402

SAMPLES = int(sys.argv[1]) if len(sys.argv) > 1 else 300
# The gap a client leaves between calls (its own round trip); the spare is started in it.
GAP_S = 0.003


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def call(command, spare):
    if not spare:
        # The ordinary spawn, exactly as a call that finds no spare.
        terminal._SPARES.drop()
    started = time.perf_counter()
    result = OPS["terminal"]({"command": command})
    elapsed = (time.perf_counter() - started) * 1000
    if result["is_error"]:
        raise SystemExit("terminal failed: %s" % result["output"])
    OPS.run_after_reply_hooks()  # as the agent does once the reply is out
    return elapsed


def main():
    # A session with some state to restore, as a real one has.
    call("cd /tmp && export BENCH=1 && alias ll='ls -l' && f() { echo hi; }", True)
    for _ in range(20):
        call("true", True)
        call("true", False)
    spare, fresh = [], []
    for _ in range(SAMPLES):
        time.sleep(GAP_S)
        spare.append(call("true", True))
        time.sleep(GAP_S)
        fresh.append(call("true", False))
    print("terminal `true` inside the sandbox, %d calls each way" % SAMPLES)
    print("  %-22s p50 %6.2f ms  p99 %6.2f ms" % ("spare shell", percentile(spare, 50), percentile(spare, 99)))
    print("  %-22s p50 %6.2f ms  p99 %6.2f ms" % ("shell started per call", percentile(fresh, 50), percentile(fresh, 99)))
    print("  spare / per call (p50) %.2f" % (percentile(spare, 50) / percentile(fresh, 50)))


main()
