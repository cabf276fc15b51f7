"""Host-side overhead per agent turn: our episode loop beside verl's ToolAgentLoop, same scripted episode.

    .venv/bin/python bench/agent_loop.py --out bench/agent-loop-results.json

Both loops run the same episode: a prompt (system prompt, the 10 native tool schemas, a filler issue text) of
C tokens (C = 1k, 32k, 131k), then 40 turns, each the same pre-tokenized assistant reply (a Hermes
`<tool_call>` to bash, ended by <|im_end|>) and the same ~200-token observation; the two token streams are
checked to be the same. The scripted model and the tool time themselves from inside (no tokenizing there), so
host overhead per turn is measured identically for both:

    (entry of the last generate - entry of the first - time inside the model and the tool in between) / 39

i.e. the steady-state cycle (merge the reply, decode, parse, call the tool, template and tokenize the
observation, extend the token lists), without the one-off prompt build (reported apart as episode start) and
output assembly. Median of 7 episodes per loop, loops interleaved. Ours also runs with the paper tool set
(```command blocks, no schemas), ToolAgentLoop also with the bash tool alone (one schema to re-render).

Concurrency: 128 episodes of ours in one event loop, model and environment each sleeping 10 ms per call,
against one episode alone; a 1 ms sleeper records the event loop's lag, every callback is timed (wall and CPU)
to find the longest single step that held the loop (a step that blocks, as opposed to many ready steps taking
turns), and the garbage collector's pauses are timed apart; at 1k and 32k. Then a full collection of the
process's heap (verl, torch and transformers imported) is timed, as is, and after gc.freeze().
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import io
import json
import os
import platform
import random
import statistics
import sys
import time
from datetime import datetime, timezone

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.workers.rollout.replica import TokenOutput

from verl_swe.agent.episode import EpisodeLimits, run_episode
from verl_swe.agent.llm import Generation, Sampling
from verl_swe.agent.prompts import system_prompt
from verl_swe.agent.tokens import ChatTokens
from verl_swe.testing.envs import ScriptedEnv
from verl_swe.testing.tokenizer import qwen_tokenizer
from verl_swe.tools.toolsets import NATIVE_SCHEMAS, get_tool_set
from verl_swe.types import ExitStatus

TURNS, REPEATS, CONTEXTS, EPISODES, DELAY_S = 40, 7, (1_024, 32_768, 131_072), 128, 0.01
CALL = '{"name": "bash", "arguments": {"command": "ls -la /testbed/src/package"}}'
REPLIES = {"native": f"Let me look at the package first.\n<tool_call>\n{CALL}\n</tool_call>",
           "paper": "Let me look at the package first.\n```command\nls -la /testbed/src/package\n```"}
OBS = "total 96\n" + "".join(f"-rw-r--r-- 1 root root {1000 + 37 * i} Nov 29 12:{i:02d} module_{i}.py\n"
                             for i in range(7))
PERF = time.perf_counter


class Clock:
    """Spans spent inside the scripted model and the tool, recorded by themselves."""

    def __init__(self):
        self.start = PERF()  # the episode's start: up to the first generate, the one-off prompt build
        self.gen: list[tuple[float, float]] = []
        self.tool: list[tuple[float, float]] = []

    def per_turn_ms(self) -> float:
        first, last = self.gen[0][0], self.gen[-1][0]
        inside = sum(b - a for a, b in self.gen[:-1]) + sum(b - a for a, b in self.tool if a < last)
        return (last - first - inside) / (len(self.gen) - 1) * 1e3

    def start_ms(self) -> float:
        return (self.gen[0][0] - self.start) * 1e3


class Model:
    """Pre-tokenized replies behind both interfaces: ours (`LLMClient`) and verl's server manager."""

    def __init__(self, ids: list[int], clock: Clock, delay: float = 0.0):
        self.ids, self.clock, self.delay = ids, clock, delay

    async def generate(self, prompt_ids, sampling=None, request_id=None) -> Generation:
        t0 = PERF()
        if self.delay:
            await asyncio.sleep(self.delay)
        out = Generation(list(self.ids), [-0.5] * len(self.ids), "stop")
        self.clock.gen.append((t0, PERF()))
        return out


class Server(Model):
    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs) -> TokenOutput:
        t0 = PERF()
        out = TokenOutput(token_ids=list(self.ids), log_probs=[-0.5] * len(self.ids), stop_reason="completed")
        self.clock.gen.append((t0, PERF()))
        return out


class Env(ScriptedEnv):
    """ScriptedEnv, timed, with the observation exactly as ToolAgentLoop shows it (no prompt line)."""

    def __init__(self, task_text: str, clock: Clock, delay: float = 0.0):
        super().__init__(lambda i, a: OBS, task_text=task_text)
        self.clock, self.delay = clock, delay

    async def step(self, action):
        t0 = PERF()
        if self.delay:
            await asyncio.sleep(self.delay)
        out = await super().step(action)
        self.clock.tool.append((t0, PERF()))
        return out

    def prompt_line(self) -> str:
        return ""


class FixedTool(BaseTool):
    clock: Clock = Clock()  # set per episode (episodes of ToolAgentLoop run one at a time)

    async def execute(self, instance_id, parameters, **kwargs):
        t0 = PERF()
        out = ToolResponse(text=OBS), 0.0, {}
        FixedTool.clock.tool.append((t0, PERF()))
        return out


class Bench:
    def __init__(self):
        self.tok = qwen_tokenizer()
        self.eot = self.tok.convert_tokens_to_ids("<|im_end|>")
        self.sets = {name: get_tool_set(name) for name in REPLIES}
        self.chats = {n: ChatTokens(self.tok, s.schemas(), s.observation_role) for n, s in self.sets.items()}
        self.systems = {n: system_prompt(s.instructions()) for n, s in self.sets.items()}
        self.reply_ids = {n: self.tok.encode(r, add_special_tokens=False) + [self.eot] for n, r in REPLIES.items()}
        with contextlib.redirect_stdout(io.StringIO()):  # BaseTool prints its schema
            self.verl_tools = [FixedTool({}, OpenAIFunctionToolSchema.model_validate(s)) for s in NATIVE_SCHEMAS]
        rng = random.Random(0)
        words = ("the issue when calling parse() with None raises TypeError in module config loader value "
                 "returns expected got self args kwargs file line 42 traceback def class import").split()
        filler = " ".join(rng.choice(words) for _ in range(max(CONTEXTS)))
        enc = self.tok(filler, add_special_tokens=False, return_offsets_mapping=True)
        self.filler, self.offsets = filler, enc["offset_mapping"]
        self.limits = EpisodeLimits(max_turns=TURNS, context_tokens=400_000, max_response_tokens=200_000)

    def task(self, context: int) -> str:
        base = len(self.chats["native"].prompt(self.messages("")))
        return self.filler[: self.offsets[context - base][0]]

    def messages(self, task: str) -> list[dict]:
        return [{"role": "system", "content": self.systems["native"]}, {"role": "user", "content": task}]

    async def ours(self, tool_set: str, task: str, delay: float = 0.0) -> tuple[Clock, tuple[list, list]]:
        clock = Clock()
        model, env = Model(self.reply_ids[tool_set], clock, delay), Env(task, clock, delay)
        res = await run_episode(env, self.sets[tool_set], model, self.chats[tool_set], self.systems[tool_set],
                                self.limits, Sampling(max_tokens=4096), "bench")
        traj = res.trajectory
        assert traj.exit_status == ExitStatus.MAX_TURNS and not any(t.format_error for t in traj.turns), traj
        return clock, (res.prompt_ids, res.response_ids)

    async def verl(self, task: str, n_tools: int = len(NATIVE_SCHEMAS)) -> tuple[Clock, tuple[list, list]]:
        clock = FixedTool.clock = Clock()
        cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {
            "prompt_length": 400_000, "response_length": 200_000, "full_determinism": False,
            "multi_turn": {"format": "hermes", "max_assistant_turns": TURNS, "max_user_turns": TURNS,
                           "max_parallel_calls": 1, "max_tool_response_length": 1_000_000,
                           "tool_response_truncate_side": "middle"}}}})
        server = Server(self.reply_ids["native"], clock)
        loop = ToolAgentLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=self.tok,
                             processor=None, dataset_cls=None, data_config=DictConfigWrap(OmegaConf.create({})),
                             hf_model_type="qwen3", tools=ToolListWrap(self.verl_tools[:n_tools]))
        out = await loop.run({"temperature": 1.0, "top_p": 1.0, "logprobs": True},
                             raw_prompt=self.messages(task), tools_kwargs={})
        assert len(clock.gen) == TURNS and len(clock.tool) == TURNS - 1, (len(clock.gen), len(clock.tool))
        return clock, (out.prompt_ids, out.response_ids)

    async def per_turn(self) -> dict:
        runs = {"ours_native": lambda t: self.ours("native", t), "ours_paper": lambda t: self.ours("paper", t),
                "tool_agent_loop": self.verl, "tool_agent_loop_bash_only": lambda t: self.verl(t, 1)}
        for run in runs.values():  # warm-up (template compilation, first allocations)
            await run(self.task(CONTEXTS[0]))
        results = {}
        for context in CONTEXTS:
            task, ms, start, info = self.task(context), {k: [] for k in runs}, {k: [] for k in runs}, {}
            for _ in range(REPEATS):
                for name, run in runs.items():
                    gc.collect()
                    clock, info[name] = await run(task)
                    ms[name].append(clock.per_turn_ms())
                    start[name].append(clock.start_ms())
            (prompt, response), (their_prompt, their_response) = info["ours_native"], info["tool_agent_loop"]
            ours, theirs = prompt + response, their_prompt + their_response
            results[str(context)] = {
                "prompt_tokens": len(prompt), "final_context_tokens": len(ours),
                # ToolAgentLoop stops after the last reply; ours also runs that action and appends its observation
                "same_tokens_as_tool_agent_loop": ours[: len(theirs)] == theirs,
                "ours_trailing_observation_tokens": len(ours) - len(theirs),
                **{f"{k}_ms_per_turn": round(statistics.median(v), 3) for k, v in ms.items()},
                "episode_start_ms": {k: round(statistics.median(v), 1) for k, v in start.items()},
                "samples_ms": {k: [round(x, 3) for x in v] for k, v in ms.items()}}
            print(context, {k: v for k, v in results[str(context)].items() if k != "samples_ms"}, flush=True)
        return results

    async def concurrency(self, context: int) -> dict:
        """Split at the moment the last episode first called the model: before it, all episodes build their
        prompts at once (start); after it, the turns. The garbage collector's pauses are timed apart."""
        task = self.task(context)
        t0 = PERF()
        await self.ours("native", task, DELAY_S)
        single = PERF() - t0
        lags, steps, gcs, gc_t = [], [], [], [0.0]  # (began, seconds [, CPU seconds])
        run_handle = asyncio.events.Handle._run

        def timed(handle):  # every callback, i.e. every task step, that held the loop: wall and CPU
            t, c = PERF(), time.thread_time()
            run_handle(handle)
            steps.append((t, PERF() - t, time.thread_time() - c))

        def on_gc(phase, info):
            gc_t[0] = PERF() if phase == "start" else gc_t[0]
            if phase == "stop":
                gcs.append((info["generation"], PERF() - gc_t[0]))

        async def sampler():
            while True:
                t = PERF()
                await asyncio.sleep(0.001)
                lags.append((t, PERF() - t - 0.001))

        watch = asyncio.create_task(sampler())
        asyncio.events.Handle._run = timed
        gc.callbacks.append(on_gc)
        try:
            t0 = PERF()
            clocks = [c for c, _ in await asyncio.gather(*(self.ours("native", task, DELAY_S)
                                                           for _ in range(EPISODES)))]
            wall = PERF() - t0
        finally:
            asyncio.events.Handle._run = run_handle
            gc.callbacks.remove(on_gc)
            watch.cancel()
        split = max(c.gen[0][0] for c in clocks)

        def ms(xs, turns, i=1):
            return round(max((x[i] for x in xs if (x[0] > split) == turns), default=0.0) * 1e3, 1)

        turn_lags = sorted(d for t, d in lags if t > split)
        return {"context_tokens": context, "episodes": EPISODES, "turns": TURNS,
                "delay_s": DELAY_S, "single_episode_wall_s": round(single, 3), "concurrent_wall_s": round(wall, 3),
                "slowdown": round(wall / single, 2), "start_s": round(split - t0, 3),
                "start_lag_max_ms": ms(lags, False), "start_longest_step_ms": ms(steps, False),
                "start_longest_step_cpu_ms": ms(steps, False, 2), "turns_lag_max_ms": ms(lags, True),
                "turns_lag_p99_ms": round(turn_lags[int(len(turn_lags) * .99)] * 1e3, 1),
                "turns_longest_step_ms": ms(steps, True), "turns_longest_step_cpu_ms": ms(steps, True, 2),
                **{f"gc_gen{g}": {"collections": sum(x == g for x, _ in gcs),
                                  "longest_ms": round(max((d for x, d in gcs if x == g), default=0) * 1e3, 1)}
                   for g in range(3)}}


def _best_ms(fn, n: int = 3) -> float:
    times = []
    for _ in range(n):
        t = PERF()
        fn()
        times.append(PERF() - t)
    return round(min(times) * 1e3, 1)


async def main(out: str | None) -> None:
    bench, started, load = Bench(), PERF(), [round(x, 2) for x in os.getloadavg()]
    per_turn = await bench.per_turn()
    conc = [await bench.concurrency(c) for c in CONTEXTS[:2]]
    full_gc = {"tracked_objects": len(gc.get_objects()), "ms": _best_ms(gc.collect)}  # this process's whole heap
    gc.freeze()
    full_gc["after_gc_freeze_ms"] = _best_ms(gc.collect)
    gc.unfreeze()
    print(json.dumps({"concurrency": conc, "full_gc": full_gc}, indent=1), flush=True)
    result = {"machine": {"platform": platform.platform(), "machine": platform.machine(), "cpus": os.cpu_count(),
                          "python": sys.version.split()[0], "load_average_at_start": load,
                          "load_average_at_end": [round(x, 2) for x in os.getloadavg()]},
              "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "turns": TURNS, "repeats": REPEATS,
              "per_turn": per_turn, "concurrency": conc,
              "full_gc": full_gc, "bench_wall_s": round(PERF() - started, 1)}
    if out:
        with open(out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out")
    asyncio.run(main(parser.parse_args().out))
