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

    def register(self, name):
        def deco(fn):
            self[name] = fn
            return fn
        return deco

    def on_startup(self, fn):
        self.startup_hooks.append(fn)
        return fn


OPS = _Ops()


@OPS.register("ping")
def ping(args, request_id=None):
    return {"output": "pong", "metadata": {}, "is_error": False}

