"""``rollbench mcp``: rollbench as a Model Context Protocol tool for agents."""
