"""The `verl-swe` command: one typer app, a sub-app per area."""

import typer

from verl_swe.cli.agent import rollout
from verl_swe.cli.sandbox import sandbox_app
from verl_swe.cli.tasks import envs_app, evaluate
from verl_swe.cli.train import curriculum, plan

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Train SWE agents with verl: sandboxes, tasks, RL.")
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(envs_app, name="envs")
app.command("evaluate")(evaluate)
app.command("rollout")(rollout)
app.command("plan")(plan)
app.command("curriculum")(curriculum)
