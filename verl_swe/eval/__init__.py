"""Evaluation (paper 1.8): Pass@1 over runs with its standard error, unbiased Pass@k, training-time `swe/`
metrics, plots, and a static trajectory viewer. Each module is one concern:

    runs.py     a run directory read back (corrupt files reported, not fatal), the fixed-seed subset
    subsets.py  named subsets (`--subset verified-50`, P1 App. B) and files of instance ids
    setting.py  which decoding and context a run's episodes ran with (what produced the report's numbers)
    report.py   Pass@1 +- SEM, Pass@k, per-repository and exit-status breakdowns, swebench predictions
    metrics.py  per-episode `swe/` metrics and their batch means (training, through the sampler)
    plots.py    PNGs of eval reports and of training curves (verl's `file` logger JSONL)
    viewer.py   `verl-swe view`: a static HTML site over a run's trajectories
"""
