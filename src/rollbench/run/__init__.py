"""Running planned episodes: the episode loop, lockstep batching, the policy deadline, the worker and the runners."""
