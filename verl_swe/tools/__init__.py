"""The agent-computer interface: action parsing, the paper's command set, registrable tool sets."""

from verl_swe.tools.toolsets import ToolSet, get_tool_set, register_tool_set

__all__ = ["ToolSet", "get_tool_set", "register_tool_set"]
