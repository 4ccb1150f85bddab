"""Review: hand labels on recorded episodes (:mod:`.labels`), the rubrics they follow (:mod:`.rubrics`), and the
review dashboard (:mod:`.app`) that shows every episode's videos and writes labels to a sidecar file."""
