"""The reference is the oracle for the whole database: any difference from its final state fails the task."""

from __future__ import annotations

from sqlmodel import Field

from mcpworld.core.models import Check
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.verify import normalize_verdict
from mcpworld.worlds.world import Session, Task, World, call, fetch, new_id, tool, world_base

Base = world_base()


class Account(Base, table=True):
    id: str = Field(primary_key=True)
    owner: str
    email: str
    balance: float


class Note(Base, table=True):
    id: str = Field(primary_key=True)
    account_id: str = Field(foreign_key="account.id")
    kind: str
    text: str


def seed(db: Session) -> None:
    db.add_all([Account(id="A1", owner="Ada", email="ada@x.org", balance=100.0),
                Account(id="A2", owner="Alan", email="alan@x.org", balance=50.0),
                Account(id="A3", owner="Grace", email="grace@x.org", balance=10.0)])


@tool(writes=True)
def set_email(db: Session, account_id: str, email: str) -> Account:
    """Change an account's e-mail."""
    account = fetch(db, Account, account_id)
    account.email = email
    return account


@tool(writes=True)
def add_note(db: Session, account_id: str, kind: str, text: str) -> Note:
    """Attach a note to an account."""
    fetch(db, Account, account_id)
    note = Note(id=new_id(db, "N"), account_id=account_id, kind=kind, text=text)
    db.add(note)
    return note


@tool(writes=True)
def draw_prize(db: Session) -> Note:
    """Give a prize note to a random account (the episode's generator picks it)."""
    winner = db.info["rng"].choice(["A1", "A2", "A3"])
    note = Note(id=new_id(db, "N"), account_id=winner, kind="prize", text="winner")
    db.add(note)
    return note


@tool
def get_account(db: Session, account_id: str) -> Account:
    """Read an account."""
    return fetch(db, Account, account_id)


TASKS = [
    Task(id="email", instruction="Ada (A1) wants her e-mail to be ada@new.org.",
         solution=[call("get_account", account_id="A1"), call("set_email", account_id="A1", email="ada@new.org")]),
    Task(id="two-notes", instruction="Add a 'call' note and a 'mail' note to A2, saying what was done.",
         solution=[call("add_note", account_id="A2", kind="call", text="called"),
                   call("add_note", account_id="A2", kind="mail", text="mailed")],
         verify=lambda o: Check(name="notes say what was done", passed=all(
             len(r["text"]) >= 5 for r in o.diff.tables["note"].inserted))),
    Task(id="draw", instruction="Run the prize draw.", solution=[call("draw_prize")]),
    Task(id="either", instruction="Flag A1 or A2 with a 'vip' note.",
         solution=[call("add_note", account_id="A1", kind="vip", text="vip client")],
         alternatives=[[call("add_note", account_id="A2", kind="vip", text="vip client")]]),
]

RT = WorldRuntime(World(name="accounts", title="Accounts", description="Accounts.", scenario="Help.", base=Base,
                        seed=seed, tools=[set_email, add_note, draw_prize, get_account], tasks=TASKS,
                        free_fields={"note": ("text",)}))


def play(task_id: str, *calls: tuple[str, dict], seed: int = 0) -> tuple[bool, list[Check]]:
    episode = RT.fork(task_id, seed=seed)
    for name, args in calls:
        assert RT.call(episode, name, args).error is None
    verdict = RT.verify(episode, None)
    episode.close()
    return verdict.passed, verdict.checks


def reference(task_id: str) -> list[tuple[str, dict]]:
    return [(s.name, s.arguments) for s in RT.tasks[task_id].solution]


def test_reference_passes_and_any_difference_fails() -> None:
    assert play("email", *reference("email"))[0]
    assert not play("email")[0]
    # a collateral write on an unrelated row, after the right one
    passed, checks = play("email", *reference("email"), ("set_email", {"account_id": "A3", "email": "x@y.z"}))
    assert not passed and "account[A3] was changed" in checks[0].detail
    # a wrong value for the argument the user gave
    passed, checks = play("email", ("set_email", {"account_id": "A1", "email": "ada@new.com"}))
    assert not passed and "email='ada@new.com' (reference 'ada@new.org')" in checks[0].detail


def test_generated_ids_and_order_do_not_matter_but_rows_do() -> None:
    swapped = list(reversed(reference("two-notes")))
    assert play("two-notes", *swapped, seed=7)[0], "creation order and the seed's ids must not matter"
    passed, checks = play("two-notes", *reference("two-notes")[:1])
    assert not passed and "missing new row" in checks[0].detail
    passed, _ = play("two-notes", *reference("two-notes"), ("add_note", {"account_id": "A2", "kind": "call",
                                                                         "text": "again"}))
    assert not passed, "an extra row is a collateral write"


def test_free_fields_are_left_to_the_task_checks() -> None:
    worded = [("add_note", {"account_id": "A2", "kind": "call", "text": "phoned the client"}),
              ("add_note", {"account_id": "A2", "kind": "mail", "text": "sent the letter"})]
    assert play("two-notes", *worded)[0]
    terse = [("add_note", {"account_id": "A2", "kind": "call", "text": "x"}),
             ("add_note", {"account_id": "A2", "kind": "mail", "text": "y"})]
    passed, checks = play("two-notes", *terse)
    assert not passed and [c.name for c in checks if not c.passed] == ["notes say what was done"]
    wrong_kind = [("add_note", {"account_id": "A2", "kind": "visit", "text": "visited them"}), worded[1]]
    assert not play("two-notes", *wrong_kind)[0], "only the declared free field may differ"


def test_alternatives_are_equally_correct() -> None:
    assert play("either", *reference("either"))[0]
    assert play("either", ("add_note", {"account_id": "A2", "kind": "vip", "text": "vip client"}))[0]
    assert not play("either", ("add_note", {"account_id": "A3", "kind": "vip", "text": "vip client"}))[0]
    assert not play("either", ("add_note", {"account_id": "A1", "kind": "vip", "text": "vip"}),
                    ("add_note", {"account_id": "A2", "kind": "vip", "text": "vip"}))[0]


def test_nested_check_lists_fail_when_any_check_fails() -> None:
    failing, passing = Check(name="a", passed=False), Check(name="b", passed=True)
    verdict = normalize_verdict([[failing], passing])
    assert not verdict.passed and verdict.score == 0.5
    assert normalize_verdict([[passing, True], [passing]]).passed
    assert not normalize_verdict([]).passed


def test_a_seed_dependent_reference_is_played_per_seed() -> None:
    """When a tool draws from the episode's generator, the reference of the agent's own seed is the oracle."""
    winners = set()
    for seed in range(6):
        assert play("draw", ("draw_prize", {}), seed=seed)[0], f"seed {seed}"
        episode = RT.fork("draw", seed=seed)
        RT.call(episode, "draw_prize", {})
        winners |= {r["account_id"] for r in RT.diff(episode).tables["note"].inserted}
        episode.close()
    assert len(winners) > 1, "the draw must depend on the seed for this test to mean anything"
    assert play("email", *reference("email"))[0]
    assert ("email", None) in RT.judge._references and ("draw", None) not in RT.judge._references
