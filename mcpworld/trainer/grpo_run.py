"""Wire a GRPO run together: load the model, reach the world over MCP, pick the tasks, train."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client

from mcpworld.agent.formats import TextFormat
from mcpworld.core.paths import registry_token
from mcpworld.core.protocol import EpisodeControl
from mcpworld.registry.connect import connect
from mcpworld.trainer.grpo import GRPOConfig, GRPOTrainer


@asynccontextmanager
async def open_world(world: Path | None, server: str | None) -> AsyncIterator[tuple[Client, str]]:
    """An MCP client: to a world package served in this process, or to a registered server."""
    if world is not None:
        from mcpworld.worlds.host import load_runtime
        from mcpworld.worlds.server import WorldServer

        hosted = WorldServer(load_runtime(str(world)))
        async with Client(hosted.server) as client:
            yield client, hosted.runtime.world.name
    else:
        async with connect(server) as client:  # type: ignore[arg-type]
            yield client, server  # type: ignore[misc]


def load_model(model_path: str | None, gguf: Path | None, tiny: bool, corpus: list[str], actions: list[str],
               seed: int) -> tuple[Any, Any]:
    if tiny:
        from mcpworld.trainer.tiny import tiny_model, tiny_tokenizer

        tokenizer = tiny_tokenizer(corpus, actions)
        return tiny_model(len(tokenizer), seed=seed), tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if gguf is not None:
        try:
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        except ImportError as exc:  # gguf / accelerate missing
            raise ValueError(f"loading {gguf.name} needs the GGUF extras: pip install 'mcpworld[gguf]' ({exc})"
                             ) from None
        return unpacked(model, gguf), AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    return AutoModelForCausalLM.from_pretrained(model_path), AutoTokenizer.from_pretrained(model_path)


def unpacked(model: Any, source: Path) -> Any:
    """A GGUF model as a plain full-precision one: trainable, and saved by `save_pretrained` as a Hugging Face
    checkpoint (transformers refuses to save a model still marked GGUF-quantized, and training would lose the
    weights at the first checkpoint). transformers unpacks GGUF weights to floats unless a GGUF kernel keeps
    them in blocks; those cannot be trained."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is None:
        return model
    if getattr(quantizer, "packed_modules", None):
        raise ValueError(f"{source.name} loaded with its weights kept in GGUF blocks (a GGUF kernel is installed), "
                         "which cannot be trained: uninstall the `kernels` package, or convert the file to a Hugging "
                         "Face checkpoint and pass --model DIR")
    quantizer.remove_quantization_config(model)
    return model


async def run_grpo(config: GRPOConfig, *, world: Path | None, server: str | None, task_ids: Sequence[str] = (),
                   model_path: str | None = None, gguf: Path | None = None, tiny: bool = False,
                   on_step: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    # A real model loads before any connection is open: a bad file is said plainly, with nothing to unwind.
    loaded = None if tiny else load_model(model_path, gguf, False, [], [], config.seed)
    async with open_world(world, server) as (client, name):
        ctl = EpisodeControl(client)
        every = (await ctl.tasks()).tasks
        missing = set(task_ids) - {t.id for t in every}
        if missing:
            raise ValueError(f"unknown task(s): {', '.join(sorted(missing))}")
        tasks = [t for t in every if t.id in task_ids] if task_ids else every
        fmt = TextFormat()
        # A tiny tokenizer learns the world's task words, and each reference call of any task becomes a single
        # action token (so the right call competes with the wrong ones from the first step).
        corpus = [t.instruction for t in every]
        # The vocabulary is the trainer's own (privileged) setup: the policy itself only ever sees instructions.
        revealed = (await ctl.tasks(token=registry_token(None)[0])).tasks
        actions = sorted({fmt.assistant_message([c], None)["content"] for t in revealed for c in t.solution})
        lm, tokenizer = loaded or load_model(model_path, gguf, tiny, corpus, actions, config.seed)
        return await GRPOTrainer(lm, tokenizer, ctl, name, tasks, config).train(on_step)
