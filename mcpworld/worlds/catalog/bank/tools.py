"""Retail bank tools. Business rules live here, each with its own message."""

from __future__ import annotations

import re
import zlib
from datetime import date, datetime, timedelta
from typing import Literal

from sqlmodel import func, select

from mcpworld.world import Session, ToolError, fetch, new_id, not_found, now, tool

from .models import Account, Card, Customer, Dispute, Payee, Transaction, Transfer

DisputeReason = Literal["unauthorized", "not_received", "duplicate", "wrong_amount"]
ReplaceReason = Literal["lost", "stolen", "damaged"]

SAVINGS_WITHDRAWALS_PER_MONTH = 6
DISPUTE_WINDOW = timedelta(days=60)
PROVISIONAL_CREDIT_MAX = 1000.0  # disputes up to this amount are credited back while they are reviewed
DAMAGED_CARD_FEE = 10.0
CARD_VALIDITY_YEARS = 4


def _get(db: Session, model: type, key: str, kind: str):
    """Ids are matched regardless of case and surrounding spaces."""
    return fetch(db, model, key.strip().upper(), kind)


def _money(amount: float) -> float:
    if amount <= 0:
        raise ToolError("amount must be greater than zero")
    if round(amount, 2) != amount:
        raise ToolError(f"amount {amount} has more than two decimal places")
    return round(amount, 2)


def _available(account: Account) -> float:
    return round(account.balance + (account.overdraft_limit if account.kind == "checking" else 0.0), 2)


def _month_start(db: Session) -> datetime:
    return now(db).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _day_start(db: Session) -> datetime:
    return now(db).replace(hour=0, minute=0, second=0, microsecond=0)


def _savings_withdrawals(db: Session, account: Account) -> int:
    """Money taken out of a savings account this calendar month (each debit counts once)."""
    return len(db.exec(select(Transaction).where(Transaction.account_id == account.id, Transaction.amount < 0,
                                                 Transaction.posted_at >= _month_start(db))).all())


def _paid_to_payees_today(db: Session, customer_id: str) -> float:
    total = db.exec(select(func.coalesce(func.sum(Transfer.amount), 0.0)).where(
        Transfer.customer_id == customer_id, Transfer.payee_id.is_not(None),  # type: ignore[union-attr]
        Transfer.created_at >= _day_start(db))).one()
    return round(float(total), 2)


def _usable(account: Account) -> None:
    if account.status == "frozen":
        raise ToolError(f"account {account.id} is frozen: no money can move in or out of it")
    if account.status == "closed":
        raise ToolError(f"account {account.id} is closed")


def _debit(db: Session, account: Account, amount: float) -> None:
    """Take `amount` out of `account`, enforcing status, funds, overdraft and the savings withdrawal limit."""
    _usable(account)
    if amount > _available(account):
        room = f" (balance {account.balance:.2f} plus {account.overdraft_limit:.2f} overdraft)" \
            if account.kind == "checking" and account.overdraft_limit else ""
        raise ToolError(f"insufficient funds in {account.id}: {_available(account):.2f} available{room}, "
                        f"{amount:.2f} needed")
    if account.kind == "savings" and _savings_withdrawals(db, account) >= SAVINGS_WITHDRAWALS_PER_MONTH:
        raise ToolError(f"savings account {account.id} already had {SAVINGS_WITHDRAWALS_PER_MONTH} withdrawals this "
                        "month, the monthly limit; it resets on the 1st of next month")
    account.balance = round(account.balance - amount, 2)


def _post(db: Session, account: Account, amount: float, kind: str, description: str,
          **links: str | None) -> Transaction:
    txn = Transaction(id=new_id(db, "TX"), account_id=account.id, posted_at=now(db), amount=round(amount, 2),
                      kind=kind, description=description, **links)
    db.add(txn)
    return txn


def _account_view(db: Session, account: Account) -> dict:
    view = {**account.model_dump(), "available": _available(account)}
    if account.kind == "savings":
        used = _savings_withdrawals(db, account)
        view["withdrawals_this_month"] = used
        view["withdrawals_left_this_month"] = max(0, SAVINGS_WITHDRAWALS_PER_MONTH - used)
    return view


def _card_owner(db: Session, card: Card) -> Account:
    return _get(db, Account, card.account_id, "account")


@tool
def find_customer(db: Session, email: str) -> Customer:
    """Look up a customer by e-mail address."""
    found = db.exec(select(Customer).where(Customer.email == email.strip().lower())).first()
    if found is None:
        raise not_found("customer with email", email)
    return found


@tool
def get_customer(db: Session, customer_id: str) -> dict:
    """Get a customer's profile, their daily limit for payments to payees, how much of it was used today
    and how much is left."""
    customer = _get(db, Customer, customer_id, "customer")
    used = _paid_to_payees_today(db, customer.id)
    return {**customer.model_dump(), "paid_to_payees_today": used,
            "daily_limit_left": round(max(0.0, customer.daily_transfer_limit - used), 2)}


@tool
def list_accounts(db: Session, customer_id: str) -> list[dict]:
    """List a customer's accounts with balance, available funds (balance plus any overdraft), status, and
    for savings the withdrawals used and left this month."""
    customer = _get(db, Customer, customer_id, "customer")
    accounts = db.exec(select(Account).where(Account.customer_id == customer.id).order_by(Account.id))
    return [_account_view(db, a) for a in accounts]


@tool
def get_account(db: Session, account_id: str) -> dict:
    """Get one account: balance, overdraft limit, available funds, status (active, frozen, closed), and for
    savings the withdrawals used and left this month (6 allowed per calendar month)."""
    return _account_view(db, _get(db, Account, account_id, "account"))


@tool
def list_transactions(db: Session, account_id: str, start: date | None = None, end: date | None = None,
                      search: str = "", limit: int = 50) -> list[Transaction]:
    """List an account's transactions, newest first: posted date, signed amount (negative = money out),
    kind, description and card. Filter by date range (inclusive) and by words in the description."""
    account = _get(db, Account, account_id, "account")
    stmt = select(Transaction).where(Transaction.account_id == account.id)
    if start is not None:
        stmt = stmt.where(Transaction.posted_at >= datetime.combine(start, datetime.min.time()))
    if end is not None:
        stmt = stmt.where(Transaction.posted_at < datetime.combine(end + timedelta(days=1), datetime.min.time()))
    rows = db.exec(stmt.order_by(Transaction.posted_at.desc())).all()
    words = search.lower().split()
    return [t for t in rows if all(w in t.description.lower() for w in words)][:max(1, limit)]


@tool(writes=True, destructive=False)
def transfer_between_accounts(db: Session, from_account_id: str, to_account_id: str, amount: float,
                              memo: str = "") -> dict:
    """Move money between two accounts of the same customer (no daily limit applies).

    Refused when either account is frozen or closed, when the source lacks funds (checking may use its
    overdraft; savings may not go below zero), or when a savings source already had 6 withdrawals this
    calendar month.
    """
    amount = _money(amount)
    source = _get(db, Account, from_account_id, "account")
    target = _get(db, Account, to_account_id, "account")
    if source.id == target.id:
        raise ToolError("the two accounts must differ")
    if source.customer_id != target.customer_id:
        raise ToolError(f"accounts {source.id} and {target.id} belong to different customers; "
                        "pay other people through a payee")
    _usable(target)
    _debit(db, source, amount)
    target.balance = round(target.balance + amount, 2)
    transfer = Transfer(id=new_id(db, "TR"), customer_id=source.customer_id, from_account_id=source.id,
                        to_account_id=target.id, amount=amount, memo=memo, created_at=now(db))
    db.add(transfer)
    _post(db, source, -amount, "transfer", f"Transfer to {target.id}", transfer_id=transfer.id)
    _post(db, target, amount, "transfer", f"Transfer from {source.id}", transfer_id=transfer.id)
    return {"transfer": transfer.model_dump(), "from": _account_view(db, source), "to": _account_view(db, target)}


@tool
def list_payees(db: Session, customer_id: str) -> list[Payee]:
    """List the payees (people and companies at other banks) a customer can pay."""
    customer = _get(db, Customer, customer_id, "customer")
    return list(db.exec(select(Payee).where(Payee.customer_id == customer.id).order_by(Payee.id)))


@tool(writes=True, destructive=False)
def add_payee(db: Session, customer_id: str, payee_name: str, bank_name: str, account_number: str) -> Payee:
    """Save a new payee for a customer. The account number must be 8 to 12 digits; the same account
    number cannot be saved twice for one customer."""
    customer = _get(db, Customer, customer_id, "customer")
    name, bank_name, number = payee_name.strip(), bank_name.strip(), re.sub(r"[\s-]", "", account_number)
    if not name or not bank_name:
        raise ToolError("a payee needs a name and a bank name")
    if not re.fullmatch(r"\d{8,12}", number):
        raise ToolError(f"account number {account_number!r} must be 8 to 12 digits")
    taken = db.exec(select(Payee).where(Payee.customer_id == customer.id, Payee.account_number == number)).first()
    if taken is not None:
        raise ToolError(f"account number {number} is already saved as payee {taken.id} ({taken.name})")
    # numbered in sequence rather than drawn from the episode's generator, so a reference solution can
    # pay the new payee by id whatever the episode seed
    count = db.exec(select(func.count()).select_from(Payee)).one()
    payee = Payee(id=f"PY-{4001 + count}", customer_id=customer.id, name=name, bank_name=bank_name,
                  account_number=number, added_at=now(db))
    db.add(payee)
    db.flush()
    return payee


@tool(writes=True, destructive=False)
def pay_payee(db: Session, from_account_id: str, payee_id: str, amount: float, memo: str = "") -> dict:
    """Send money from an account to one of the account owner's payees.

    Refused when the account is frozen or closed, lacks funds (checking may use its overdraft), is a savings
    account that already had 6 withdrawals this month, or when the payment would take the customer's
    payments to payees today over their daily transfer limit.
    """
    amount = _money(amount)
    account = _get(db, Account, from_account_id, "account")
    payee = _get(db, Payee, payee_id, "payee")
    if payee.customer_id != account.customer_id:
        raise ToolError(f"payee {payee.id} is not a payee of the owner of account {account.id}")
    customer = _get(db, Customer, account.customer_id, "customer")
    _usable(account)
    used = _paid_to_payees_today(db, customer.id)
    if used + amount > customer.daily_transfer_limit:
        raise ToolError(f"daily transfer limit: {customer.name} may send {customer.daily_transfer_limit:.2f} a day "
                        f"to payees, {used:.2f} was already sent today, so at most "
                        f"{max(0.0, customer.daily_transfer_limit - used):.2f} more")
    _debit(db, account, amount)
    transfer = Transfer(id=new_id(db, "TR"), customer_id=customer.id, from_account_id=account.id,
                        payee_id=payee.id, amount=amount, memo=memo, created_at=now(db))
    db.add(transfer)
    _post(db, account, -amount, "payment", f"Payment to {payee.name}", transfer_id=transfer.id)
    return {"transfer": transfer.model_dump(), "account": _account_view(db, account)}


@tool
def list_cards(db: Session, customer_id: str) -> list[dict]:
    """List a customer's debit cards: last four digits, account, status (active, locked, cancelled), expiry
    and, for replaced cards, the card that replaced them."""
    customer = _get(db, Customer, customer_id, "customer")
    cards = db.exec(select(Card).join(Account, Card.account_id == Account.id)
                    .where(Account.customer_id == customer.id).order_by(Card.id))
    return [c.model_dump() for c in cards]


@tool(writes=True, destructive=False, idempotent=True)
def lock_card(db: Session, card_id: str) -> Card:
    """Temporarily lock a card so it cannot be used (it can be unlocked later). Refused for cancelled cards
    and cards already locked."""
    card = _get(db, Card, card_id, "card")
    if card.status == "cancelled":
        raise ToolError(f"card {card.id} (ending {card.last4}) is cancelled and cannot be locked")
    if card.status == "locked":
        raise ToolError(f"card {card.id} (ending {card.last4}) is already locked")
    card.status = "locked"
    return card


@tool(writes=True, destructive=False, idempotent=True)
def unlock_card(db: Session, card_id: str) -> Card:
    """Unlock a locked card. Refused for cancelled cards (they are replaced, never unlocked), cards that
    are not locked, and cards on a frozen or closed account."""
    card = _get(db, Card, card_id, "card")
    if card.status == "cancelled":
        extra = f"; it was replaced by {card.replaced_by}" if card.replaced_by else "; order a replacement instead"
        raise ToolError(f"card {card.id} (ending {card.last4}) is cancelled and cannot be unlocked{extra}")
    if card.status != "locked":
        raise ToolError(f"card {card.id} (ending {card.last4}) is not locked")
    _usable(_card_owner(db, card))
    card.status = "active"
    return card


@tool(writes=True)
def replace_card(db: Session, card_id: str, reason: ReplaceReason) -> dict:
    """Cancel a card for good and issue a new one on the same account, valid four years.

    Lost or stolen cards are replaced free; a damaged card costs a 10.00 fee taken from the account.
    Refused for a card that is already cancelled, or on a frozen or closed account.
    """
    card = _get(db, Card, card_id, "card")
    if card.status == "cancelled":
        raise ToolError(f"card {card.id} (ending {card.last4}) is already cancelled"
                        + (f" and was replaced by {card.replaced_by}" if card.replaced_by else ""))
    account = _card_owner(db, card)
    _usable(account)
    fee = DAMAGED_CARD_FEE if reason == "damaged" else 0.0
    if fee:
        _debit(db, account, fee)
        _post(db, account, -fee, "fee", f"Replacement fee for damaged card ending {card.last4}")
    count = db.exec(select(func.count()).select_from(Card)).one()
    issued = now(db)
    last4 = f"{zlib.crc32(new_id(db).encode()) % 10000:04d}"
    fresh = Card(id=f"CRD-{3001 + count}", account_id=account.id, last4=last4, issued_at=issued,
                 expires_at=issued.replace(year=issued.year + CARD_VALIDITY_YEARS))
    db.add(fresh)
    card.status = "cancelled"
    card.replaced_by = fresh.id
    return {"cancelled": card.model_dump(), "new_card": fresh.model_dump(), "fee": fee}


@tool(writes=True, destructive=False)
def file_dispute(db: Session, transaction_id: str, reason: DisputeReason) -> dict:
    """Dispute a card purchase. Disputes of up to 1000.00 are credited back to the account at once
    (provisional credit) while the bank reviews them; larger ones are credited only if the review succeeds.

    Refused for anything but card purchases, for charges posted more than 60 days ago, for a charge that is
    already disputed, on a frozen or closed account, and for 'unauthorized' charges while the card that
    made them is still active (lock or replace the card first).
    """
    txn = _get(db, Transaction, transaction_id, "transaction")
    if txn.kind != "card" or txn.amount >= 0:
        raise ToolError(f"transaction {txn.id} is a {txn.kind} entry, not a card purchase: only card purchases "
                        "can be disputed")
    if now(db) - txn.posted_at > DISPUTE_WINDOW:
        raise ToolError(f"transaction {txn.id} was posted on {txn.posted_at:%Y-%m-%d}, more than 60 days ago: "
                        f"the dispute window closed on {txn.posted_at + DISPUTE_WINDOW:%Y-%m-%d}")
    already = db.exec(select(Dispute).where(Dispute.transaction_id == txn.id)).first()
    if already is not None:
        raise ToolError(f"transaction {txn.id} is already disputed ({already.id}, {already.status})")
    account = _get(db, Account, txn.account_id, "account")
    _usable(account)
    if reason == "unauthorized" and txn.card_id:
        card = _get(db, Card, txn.card_id, "card")
        if card.status == "active":
            raise ToolError(f"card {card.id} (ending {card.last4}) is still active: lock or replace it before "
                            "disputing an unauthorized charge")
    amount = round(-txn.amount, 2)
    credit = amount if amount <= PROVISIONAL_CREDIT_MAX else 0.0
    dispute = Dispute(id=new_id(db, "DP"), transaction_id=txn.id, customer_id=account.customer_id,
                      account_id=account.id, amount=amount, reason=reason, provisional_credit=credit,
                      created_at=now(db))
    db.add(dispute)
    if credit:
        account.balance = round(account.balance + credit, 2)
        _post(db, account, credit, "dispute_credit", f"Provisional credit, dispute {dispute.id}")
    return {"dispute": dispute.model_dump(), "account": _account_view(db, account)}


@tool
def list_disputes(db: Session, customer_id: str) -> list[dict]:
    """List a customer's disputes with the disputed charge, amount, reason, status and provisional credit."""
    customer = _get(db, Customer, customer_id, "customer")
    disputes = db.exec(select(Dispute).where(Dispute.customer_id == customer.id).order_by(Dispute.created_at))
    return [{**d.model_dump(), "description": db.get(Transaction, d.transaction_id).description} for d in disputes]


TOOLS = [find_customer, get_customer, list_accounts, get_account, list_transactions, transfer_between_accounts,
         list_payees, add_payee, pay_payee, list_cards, lock_card, unlock_card, replace_card, file_dispute,
         list_disputes]
