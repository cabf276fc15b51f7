"""The `verl-swe` command: one typer app, a sub-app per area."""

import typer

from verl_swe.cli.agent import rollout
from verl_swe.cli.curate import curate
from verl_swe.cli.eval import eval_cmd, plot_training, view
from verl_swe.cli.mine import mine
from verl_swe.cli.pipeline import tiny_cpu
from verl_swe.cli.rft import rft_app
from verl_swe.cli.sandbox import sandbox_app
from verl_swe.cli.tasks import envs_app, evaluate
from verl_swe.cli.train import curriculum, doctor, export, plan, rehearse

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Train SWE agents with verl: sandboxes, tasks, RL.")
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(envs_app, name="envs")
app.add_typer(rft_app, name="rft")
app.command("evaluate")(evaluate)
app.command("rollout")(rollout)
app.command("eval")(eval_cmd)
app.command("view")(view)
app.command("plot-training")(plot_training)
app.command("plan")(plan)
app.command("rehearse")(rehearse)
app.command("doctor")(doctor)
app.command("curriculum")(curriculum)
app.command("export")(export)
app.command("curate")(curate)
app.command("mine")(mine)
app.command("tiny-cpu")(tiny_cpu)
