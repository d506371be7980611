"""How an episode ended, and what it scores: the one reward table (docs/training.md, "Rewards").

Below every layer that ends or judges an episode: the agent's loop and trajectories, every trainer bridge, and
the NeMo Gym server (which rewards rollouts it never plays) all read it from here.
"""

from __future__ import annotations

from enum import StrEnum

FORMAT_PENALTY = -1.0  # AWM's format reward: what a penalised termination scores, whatever the scorer says


class Termination(StrEnum):
    """How an episode ended, and what it scores: the one reward table (docs/training.md, "Rewards").

    A StrEnum, so trajectories keep the plain strings on disk and `t.termination == "max_turns"` still reads.
    The bridge, the embedded trainer and rollouts all score through `reward`; `tests/trainer/test_rewards.py`
    checks the docs' table against `REWARD_RULES` and every trainer against `reward`.
    """

    FINAL_ANSWER = "final_answer"
    MAX_TURNS = "max_turns"
    TIMEOUT = "timeout"
    TRUNCATED = "truncated"
    FORMAT_ERROR = "format_error"
    UNKNOWN_TOOL = "unknown_tool"
    INFRA_ERROR = "infra_error"
    SERVER_ERROR = "server_error"
    MODEL_ERROR = "model_error"
    SETUP_ERROR = "setup_error"
    EPISODE_TIMEOUT = "episode_timeout"

    @property
    def penalized(self) -> bool:
        """The agent broke the protocol (malformed reply, unknown tool): `FORMAT_PENALTY`, not a verifier score."""
        return self in (Termination.FORMAT_ERROR, Termination.UNKNOWN_TOOL)

    @property
    def infra(self) -> bool:
        """Our side lost the episode (server died, connection broke, request timed out, worker crashed).

        Not the agent's doing, so it carries no reward, every consumer leaves it out, and `--resume` plays it
        again. `server_error` is how runners before infra_error recorded the same thing (with a wrong -1).
        """
        return self in (Termination.INFRA_ERROR, Termination.SERVER_ERROR)

    @property
    def scored(self) -> bool:
        """Whether the episode is a sample of the policy at all. Infra errors are not, and neither is a model
        error (the model's endpoint failed to answer: nothing the policy chose), nor a setup error (the run was
        set up wrong: a scripted policy without its references or recordings): all are left out of training."""
        return not self.infra and self not in (Termination.MODEL_ERROR, Termination.SETUP_ERROR)

    @property
    def verified(self) -> bool:
        """The verifier decides the reward (the agent answered, or its turns ran out and the state is judged)."""
        return self in (Termination.FINAL_ANSWER, Termination.MAX_TURNS)

    def reward(self, passed: bool = False, *, penalize: bool = True) -> float:
        """The episode's reward: 1 passed / 0 failed when verified, `FORMAT_PENALTY` when penalised, else 0
        (unscored endings return 0 too, but are never trained on: see `scored`)."""
        if not self.scored:
            return 0.0
        if self.penalized:
            return FORMAT_PENALTY if penalize else 0.0
        return 1.0 if passed and self.verified else 0.0


REWARD_RULES: dict[Termination, str] = {
    Termination.FINAL_ANSWER: "1 if the verifier passes, else 0",
    Termination.MAX_TURNS: "1 if the verifier passes, else 0",
    Termination.TIMEOUT: "0",
    Termination.TRUNCATED: "0",
    Termination.FORMAT_ERROR: "-1",
    Termination.UNKNOWN_TOOL: "-1",
    Termination.EPISODE_TIMEOUT: "0",
    Termination.INFRA_ERROR: "not scored",
    Termination.SERVER_ERROR: "not scored",
    Termination.MODEL_ERROR: "not scored",
    Termination.SETUP_ERROR: "not scored",
}
"""What each ending scores, in words: the docs' reward table is checked against this and `Termination.reward`."""

INFRA_TERMINATIONS = frozenset(t for t in Termination if t.infra)
PENALIZED_TERMINATIONS = frozenset(t for t in Termination if t.penalized)
