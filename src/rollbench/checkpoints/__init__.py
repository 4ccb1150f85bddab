"""``rollbench checkpoints``: which checkpoint of a training run is best. Finding a run's checkpoints
(:mod:`.discover`), evaluating each on the same planned episodes (:mod:`.runner`), ranking them with paired
differences to the best (:mod:`.rank`), and early elimination with a stated guarantee (:mod:`.eliminate`)."""
