"""Instruction sweeps and the instruction optimiser (``rollbench optimize-instruction``).

* :mod:`.perturb`: deterministic rewordings for ``eval --instruction-perturb``;
* :mod:`.lexicon`: the shipped word lists;
* :mod:`.variants`: reading ``eval --instructions FILE``;
* :mod:`.proposers`: candidate instructions from an incumbent (word drop, insertion, reordering, synonyms,
  templates, an OpenAI-compatible LLM);
* :mod:`.search`: the search itself (paired rounds, held-out evaluation, resume).
"""
