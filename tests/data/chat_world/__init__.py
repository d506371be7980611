"""A small world with conversational tasks, for tests/worlds/test_users.py: one scripted user, one played by a
model (a replay server in the tests)."""

from sqlmodel import Field, select

from mcpworld.world import Number, Session, Task, User, World, call, fetch, tool, world_base

Base = world_base()


class Account(Base, table=True):
    id: str = Field(primary_key=True)
    owner: str
    email: str = Field(unique=True)
    balance: float


def seed(db: Session) -> None:
    db.add_all([Account(id="A1001", owner="Ada Byron", email="ada@example.com", balance=100.0),
                Account(id="A1002", owner="Alan Kay", email="alan@example.com", balance=50.0)])


@tool
def find_account(db: Session, email: str) -> Account:
    """The account with this e-mail address."""
    account = db.exec(select(Account).where(Account.email == email)).first()
    if account is None:
        raise LookupError(f"no account with e-mail {email}")
    return account


@tool(writes=True)
def set_email(db: Session, account_id: str, email: str) -> Account:
    """Change an account's e-mail address."""
    account = fetch(db, Account, account_id)
    account.email = email
    return account


world = World(
    name="chat",
    title="Chat desk",
    description="A tiny account desk whose customers talk to the agent.",
    scenario="You help customers with their accounts. Ask them for what you need.",
    base=Base,
    seed=seed,
    tools=[find_account, set_email],
    names=["account.owner"],
    amounts=["account.balance"],
    vary=True,
    tasks=[
        Task(id="balance-chat", kind="answer",
             instruction="A customer asks for their balance (ada@example.com).",
             user=User(turns=("Hi, I'd like to know my balance.", "Sure, it's ada@example.com.", "Thanks, bye!")),
             solution=[call("find_account", email="ada@example.com")],
             expect=[Number(value=100.0, scales=True)]),
        Task(id="email-chat",
             instruction="Ada Byron (ada@example.com) wants her e-mail changed to ada@byron.org.",
             user=User(instructions="You are Ada Byron, ada@example.com. You want your e-mail address changed to "
                                    "ada@byron.org. Give the new address only when asked.",
                       persona="Polite and brief."),
             solution=[call("find_account", email="ada@example.com"),
                       call("set_email", account_id="A1001", email="ada@byron.org")]),
    ],
)
