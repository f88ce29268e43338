"""``selfheal mcp``: the sandbox and the verifier as MCP tools for the agents people already run.

An agent's code runs in the sandbox, never in the user's kernel or on the host; a fix it
proposes is judged by the loop's own verdict (the user's asserts, the spec guard, the
minimal hand-over and what the fix newly can do) before the agent hands it over. The
same tools are served by the class service under ``/services/selfheal/mcp`` with the
hub's token, so a student's agent gets what the student may get.
"""
