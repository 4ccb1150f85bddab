"""LLM agent policies: ``--policy agent:PROVIDER/MODEL`` (entry point ``agent``). Modules:

* :mod:`.policy`: the rollbench Policy, its options and its episode transcript format (``make_agent_policy``);
* :mod:`.client`: the OpenAI-compatible chat-completions client (retries, cost, wire capture);
* :mod:`.tools`: the tool set of each env family (moves, gripper, ``take_picture``, ``done``, ``give_up``).
"""
