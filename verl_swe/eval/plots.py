"""PNG plots of an eval report and of training curves, for people who would rather look than read.

Drawn with `matplotlib.figure.Figure` (the Agg canvas, no pyplot): no display, no global backend switch,
safe inside a training process. Training curves come from verl's `file` logger (`trainer.logger` with
`file`): one JSON line `{"step": N, "data": {metric: value}}` per step at `$VERL_FILE_LOGGER_PATH`.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Curve:
    label: str
    patterns: tuple[str, ...]  # regexes over metric keys, first that matches anything wins; each match is a line


@dataclass(frozen=True)
class Panel:
    name: str  # the PNG's file name
    title: str
    ylabel: str
    curves: tuple[Curve, ...]


def _exact(*keys: str) -> tuple[str, ...]:
    return tuple(re.escape(k) for k in keys)


# What `plot_training` draws, and from which keys (README "Evaluation" lists them). verl's validation logs
# reward_extra_info per data source: `val-aux/<data_source>/resolved/mean@<n>` is Pass@1 over n samples.
TRAINING_PANELS = (
    Panel("reward", "Episode reward and resolve rate (training rollouts)", "mean over rollouts", (
        Curve("reward", _exact("swe/reward", "critic/score/mean")),
        Curve("resolved", _exact("swe/resolved")),
    )),
    Panel("pass_at_1_val", "Pass@1 on the validation set", "Pass@1", (
        Curve("pass@1", (r"val-aux/.+/resolved/mean@\d+",)),
        Curve("best of n", (r"val-aux/.+/resolved/best@\d+/mean",)),
    )),
    Panel("format_errors", "Format errors (training rollouts)", "fraction of episodes / turns per episode", (
        Curve("ended by format errors", _exact("swe/exit/format_errors")),
        Curve("format-error turns per episode", _exact("swe/format_error_turns")),
    )),
    Panel("groups_kept", "Groups kept by the zero-advantage filter (P1 Sec. 4.3)", "fraction of groups", (
        Curve("kept", _exact("swe/groups_kept_frac")),
    )),
    Panel("turns", "Turns per episode", "turns", (
        Curve("train", _exact("swe/num_turns")),
        Curve("validation", (r"val-aux/.+/num_turns/mean@\d+",)),
    )),
    Panel("submit_rate", "Episodes ended by submit", "fraction of episodes", (
        Curve("submitted", _exact("swe/submitted")),
        Curve("context exhausted", _exact("swe/exit/context_exhausted")),
        Curve("max turns", _exact("swe/exit/max_turns")),
        Curve("generation cut", _exact("swe/exit/generation_cut")),
    )),
    Panel("mismatch", "Rollout vs trainer log-prob difference (verl)", "|logp diff|", (
        Curve("mean", _exact("training/rollout_probs_diff_mean")),
        Curve("max", _exact("training/rollout_probs_diff_max")),
    )),
)


def read_metrics_jsonl(path: Path) -> dict[str, list[tuple[int, float]]]:
    """metric -> [(step, value)] from verl's file logger; unreadable lines are skipped with a warning."""
    series: dict[str, list[tuple[int, float]]] = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                step, data = int(row["step"]), row["data"]
            except (ValueError, KeyError, TypeError) as e:
                logger.warning("%s:%d: skipped, not a file-logger line (%s)", path, lineno, e)
                continue
            for key, value in data.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    series.setdefault(key, []).append((step, float(value)))
    return series


def _figure(width: float = 7.0, height: float = 4.0):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    return fig, fig.add_subplot()


def plot_training(metrics_jsonl: Path, out_dir: Path) -> list[Path]:
    """One PNG per panel of TRAINING_PANELS that has data; a missing curve or panel is logged, not drawn."""
    series = read_metrics_jsonl(Path(metrics_jsonl))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for panel in TRAINING_PANELS:
        fig, ax = _figure()
        drawn = 0
        for curve in panel.curves:
            keys = next((ks for p in curve.patterns if (ks := sorted(k for k in series if re.fullmatch(p, k)))), [])
            if not keys:
                logger.warning("%s: no %s curve (none of %s in %s)", panel.name, curve.label,
                               ", ".join(curve.patterns), metrics_jsonl)
            for key in keys:
                steps, values = zip(*sorted(series[key]))
                ax.plot(steps, values, marker="o", markersize=3, label=f"{curve.label} ({key})")
                drawn += 1
        if not drawn:
            logger.warning("%s.png not drawn: none of its metrics are in %s", panel.name, metrics_jsonl)
            continue
        ax.set(title=panel.title, xlabel="training step", ylabel=panel.ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        written.append(_save(fig, out_dir / f"{panel.name}.png"))
    return written


def plot_eval(report: dict, out_dir: Path) -> list[Path]:
    """PNGs of a `build_report` result: Pass@k by k, Pass@1 per run (mean +- SEM), per repository, exit statuses."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    runs, mean, sem = report["runs"], report["pass@1"], report["pass@1_sem"]

    fig, ax = _figure()
    ks = sorted(int(k) for k in report["pass@k"])
    ax.plot(ks, [100 * report["pass@k"][str(k)] for k in ks], marker="o")
    ax.errorbar([1], [100 * mean], yerr=[100 * sem], fmt="none", capsize=4, color="black")
    ax.set(title=f"Pass@k over {runs} runs ({report['tasks']} tasks)", xlabel="k", ylabel="Pass@k (%)",
           xticks=ks, ylim=(0, 100))
    ax.grid(alpha=0.3)
    written.append(_save(fig, out_dir / "pass_at_k.png"))

    fig, ax = _figure()
    ax.bar(range(runs), [100 * v for v in report["pass@1_per_run"]], color="tab:blue", alpha=0.7)
    ax.axhline(100 * mean, color="black", label=f"mean {100 * mean:.1f} +- {100 * sem:.2f} (SEM)")
    ax.axhspan(100 * (mean - sem), 100 * (mean + sem), color="black", alpha=0.15)
    ax.set(title="Pass@1 of each run", xlabel="run", ylabel="resolved (%)", xticks=range(runs))
    ax.legend()
    written.append(_save(fig, out_dir / "pass_at_1_runs.png"))

    repos = report["per_repo"]
    if repos:
        names = list(repos)
        fig, ax = _figure(7.0, max(2.5, 0.35 * len(names) + 1.2))
        ax.barh(names, [100 * repos[n]["pass@1"] for n in names], xerr=[100 * repos[n]["pass@1_sem"] for n in names],
                capsize=3, alpha=0.7, label="Pass@1 +- SEM")
        ax.scatter([100 * repos[n][f"pass@{runs}"] for n in names], names, color="tab:red", zorder=3,
                   label=f"Pass@{runs}")
        ax.set(title="By repository", xlabel="%", xlim=(0, 100))
        ax.invert_yaxis()
        ax.legend(fontsize=7)
        written.append(_save(fig, out_dir / "per_repo.png"))

    statuses = report["exit_status"]
    if statuses:
        fig, ax = _figure()
        ax.bar(list(statuses), list(statuses.values()), color="tab:gray")
        ax.set(title="How episodes ended", ylabel="episodes")
        ax.tick_params(axis="x", labelrotation=20)
        written.append(_save(fig, out_dir / "exit_status.png"))
    return written


# What a learning run compares between its arms, one PNG each (training rollouts, per step).
LEARNING_CURVES = (("reward", "swe/reward", "reward (Eq. 3)"), ("resolved", "swe/resolved", "pass@1 of the rollouts"),
                   ("format_errors", "swe/exit/format_errors", "episodes ended by format errors"),
                   ("turns", "swe/num_turns", "turns per episode"))


def plot_learning(arms: dict[str, Path], evals: dict[str, dict], out_dir: Path) -> list[Path]:
    """A learning run against its control: each arm's per-step curves (verl file-logger JSONL per arm) on
    shared axes, and the held-out evaluation before and after RL (`evals[arm] = {"before": e, "after": e}`,
    each with pass@1 and pass@1_sem) with SEM error bars."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    series = {arm: read_metrics_jsonl(path) for arm, path in arms.items()}
    written = []
    for name, key, label in LEARNING_CURVES:
        fig, ax = _figure()
        drawn = 0
        for arm, data in series.items():
            if data.get(key):
                steps, values = zip(*sorted(data[key]))
                ax.plot(steps, values, marker="o", markersize=3, label=arm)
                drawn += 1
        if not drawn:
            logger.warning("learning_%s.png not drawn: no arm logged %s", name, key)
            continue
        ax.set(title=f"{label}, per RL step", xlabel="training step", ylabel=label)
        ax.grid(alpha=0.3)
        ax.legend()
        written.append(_save(fig, out_dir / f"learning_{name}.png"))
    if evals:
        fig, ax = _figure()
        width = 0.8 / len(evals)
        for i, (arm, e) in enumerate(evals.items()):
            xs = [x + i * width for x in (0, 1)]
            points = [e["before"], e["after"]]
            ax.bar(xs, [100 * p["pass@1"] for p in points], width, yerr=[100 * p["pass@1_sem"] for p in points],
                   capsize=4, alpha=0.7, label=arm)
        ax.set(title="Held-out Pass@1 (mean +- SEM over runs)", ylabel="Pass@1 (%)",
               xticks=[0.4 - width / 2, 1.4 - width / 2], xticklabels=["after RFT", "after RL"])
        ax.legend()
        written.append(_save(fig, out_dir / "learning_eval.png"))
    return written


def _save(fig, path: Path) -> Path:
    fig.savefig(path)
    return path
