"""Making models: the training loop, its saved state (resumable), several processes under
``torchrun``, post-hoc pruning, and ranking a classifier's heads so that it takes budgets."""
