"""Rebuild everything under ``precomputed/``: checkpoints, sweeps, per-example analyses, manifest.

``make precompute`` runs ``python -m rebuild`` (:mod:`rebuild.__main__`). The recipes are typed
config overrides per dataset (:mod:`rebuild.recipes`); the engine (``budgetformer_core``) never
imports this package. The rebuild has four stages:

1. **Train** (:mod:`rebuild.jobs`). Every model of every dataset is one job — a ``budgetformer
   train`` or ``prune`` command. Jobs run in parallel worker processes of one thread each, a job
   after the jobs it starts from. A job whose checkpoint already records an equivalent command
   (and, for a tokenizer trained here, canonical token ids) is skipped unless what it starts
   from was rebuilt, so an unchanged model is neither retrained nor rewritten (files are
   deterministic: the same run writes the same bytes). ``--dry-run`` lists what would be
   trained and why. The shipped models go to ``precomputed/checkpoints/<dataset>-<model>/``;
   the per-budget baselines (static gates, post-hoc pruning, recovered specialists) go to
   ``runs/precompute/`` and only their results are shipped. So do the first stages of the
   models fine-tuned in two (:attr:`rebuild.recipes.Pretrained.stage`), which are neither
   evaluated nor shipped, and made only when the model going on from one is to be made.
2. **Evaluate** (:mod:`rebuild.measure`). Every model on the test split, in parallel workers: its
   own operating point, and for the models that take a budget the sweep 0.05 … 1.0. Accuracy,
   macro-F1, heads run, estimated attention cost and FLOPs. Shipped models also get a
   per-example table and the head relevance p of every test input. TF-IDF + logistic
   regression on the same training rows is a row beside them.
3. **Time.** A phase of its own, once every other stage is done: one process, one thread, one
   dataset after the other. Every operating point of a dataset's models is timed with its
   dense reference in the same interleaved rounds (each dense reference's points in rounds of
   their own) on the same test texts, at batch 1 and batch 32
   (:func:`budgetformer_core.measure.latency.time_dataset`); the speed-up of a row is its dense
   reference's latency over its own. ``--retime`` runs this stage alone on the rows sweeps.csv
   has.
4. **Manifest** (:mod:`rebuild.manifest`). ``precomputed/manifest.json``: every file with its
   sha256 and size, the command and seed of every run, each checkpoint's accuracy on a slice of
   the test split, how each dataset was timed, library versions and the machine.
"""
