# verl-swe on verl's published GPU image (verl 0.9.x: torch 2.11 + CUDA 13, vLLM 0.24, flash-attn), keeping
# its stack: the plugin and the sandbox tools are added, and the build is refused, naming the versions, if the
# base's stack is not one verl-swe supports (verl_swe/trainer/gpu_stack.py).
#   docker build -f docker/gpu.Dockerfile --build-arg BASE=<verl's image for its vLLM 0.24 stack> -t verl-swe:gpu .
# Run it with the host's docker socket mounted (the sandboxes are the host engine's containers) and the GPUs:
#   docker run --gpus all -v /var/run/docker.sock:/var/run/docker.sock -v $SWE_RUN_ROOT:$SWE_RUN_ROOT verl-swe:gpu ...
ARG BASE=verlai/verl:vllm024.latest
FROM ${BASE}
# PIP_FLAGS: extra pip options (the CPU test builds against a stand-in base with --no-deps, offline).
ARG PIP_FLAGS=""
# The local sandbox backend (bubblewrap) and what environment builds run (git, patch); docker is the host's.
RUN missing=""; for t in bwrap:bubblewrap git:git patch:patch nsenter:util-linux; do \
      command -v "${t%%:*}" >/dev/null || missing="$missing ${t#*:}"; done; \
    if [ -n "$missing" ]; then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y \
      --no-install-recommends $missing && rm -rf /var/lib/apt/lists/*; fi
COPY pyproject.toml README.md /opt/verl-swe/
COPY verl_swe /opt/verl-swe/verl_swe
COPY envs /opt/verl-swe/envs
COPY recipes /opt/verl-swe/recipes
# Refuse a base whose stack is not supported (no driver at build time: the stack only), then install the plugin
# with the base's torch, vLLM, transformers, verl and flash-attn pinned as constraints: pip keeps them.
RUN cd /opt/verl-swe && python -m verl_swe.trainer.gpu_stack --no-driver \
    && python -m verl_swe.trainer.gpu_stack --constraints > /tmp/keep.txt \
    && python -m pip install --no-cache-dir $PIP_FLAGS -c /tmp/keep.txt -e /opt/verl-swe \
    && rm /tmp/keep.txt
WORKDIR /opt/verl-swe
