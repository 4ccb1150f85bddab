"""LLM agent policies: ``--policy agent:PROVIDER/MODEL`` (entry point ``agent``). Modules:

* :mod:`.policy`: the rollbench Policy, its options and its episode transcript format (``make_agent_policy``);
* :mod:`.client`: the OpenAI-compatible chat-completions client (retries, cost, wire capture);
* :mod:`.replies`: what one model reply may add to the conversation and transcript (tool calls kept, text cut);
* :mod:`.tools`: the tool set of each env family (moves, gripper, ``take_picture``, ``done``, ``give_up``).
"""
