"""Tool implementations the sandbox agent serves, registered by op name."""
from .registry import OPS, ToolError  # noqa: F401
from . import terminal, files, search, mcp_stdio, workspace_files  # noqa: F401  (each registers its ops)
