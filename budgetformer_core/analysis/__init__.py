"""What a model did with its inputs: per-input analyses and whole-split evaluation, budget
attribution to tokens, the head atlas, adaptivity against an outside difficulty, the offline
HTML report."""
