"""The paper's RL algorithm as small pure functions (P1 Sec. 3, DAPO): advantages, loss, group
filtering, overlong handling, sampling checks, log-prob mismatch. `verl_registry` plugs them into verl."""
