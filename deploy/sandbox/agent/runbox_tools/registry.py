"""The op registry and the pieces every tool shares."""


class ToolError(Exception):
    """A failure the caller should see as a tool result with is_error=true."""

    def __init__(self, message, code="tool_error", **metadata):
        super().__init__(message)
        self.code = code
        self.metadata = metadata


class _Ops(dict):
    def __init__(self):
        super().__init__()
        self.startup_hooks = []
        # Run after each reply has been sent, on the thread that sent it: work a call makes
        # necessary but its caller need not wait for (terminal's next spare shell).
        self.after_reply_hooks = []

    def register(self, name):
        def deco(fn):
            self[name] = fn
            return fn
        return deco

    def on_startup(self, fn):
        self.startup_hooks.append(fn)
        return fn

    def after_reply(self, fn):
        self.after_reply_hooks.append(fn)
        return fn

    def run_after_reply_hooks(self):
        for hook in self.after_reply_hooks:
            try:
                hook()
            except Exception:  # noqa: BLE001  housekeeping must never take a worker down
                pass


OPS = _Ops()


@OPS.register("ping")
def ping(args, request_id=None):
    return {"output": "pong", "metadata": {}, "is_error": False}

