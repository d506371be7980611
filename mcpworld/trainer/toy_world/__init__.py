"""Buttons: the smallest world a policy can learn, for the CPU training recipe and the trainer's tests.

Three buttons; each task asks for one colour. A tiny model from scratch learns it in a few GRPO steps.
"""

from typing import Literal

from sqlmodel import Field

from mcpworld.world import Session, Task, World, call, new_id, tool, world_base

Base = world_base()
Color = Literal["red", "green", "blue"]


class Press(Base, table=True):
    id: str = Field(primary_key=True)
    color: str


class Button(Base, table=True):
    color: str = Field(primary_key=True)


def seed(db: Session) -> None:
    db.add_all([Button(color=c) for c in ("red", "green", "blue")])


@tool(writes=True, destructive=False)
def press(db: Session, color: Color) -> Press:
    """Press the button of that colour."""
    row = Press(id=new_id(db, "P"), color=color)
    db.add(row)
    return row


def _task(color: str) -> Task:
    return Task(id=f"press-{color}", instruction=f"press {color}", solution=[call("press", color=color)],
                verify=lambda o: [o.diff.inserted("press", color=color), o.diff.inserted("press", 1)])


world = World(name="buttons", title="Buttons", description="Three buttons: press the one asked for.",
              scenario="Press the button the user names.", base=Base, seed=seed, tools=[press],
              tasks=[_task(c) for c in ("red", "green", "blue")], tags=["toy", "training"])
