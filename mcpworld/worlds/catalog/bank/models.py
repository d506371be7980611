"""Retail bank state: customers, checking and savings accounts, cards, transactions, payees, transfers, disputes."""

from __future__ import annotations

from sqlmodel import Field

from mcpworld.world import Timestamp, world_base

Base = world_base()


class Customer(Base, table=True):
    id: str = Field(primary_key=True)
    name: str
    email: str = Field(unique=True)
    phone: str
    daily_transfer_limit: float = 2500.0  # payments to payees per calendar day


class Account(Base, table=True):
    id: str = Field(primary_key=True)  # CHK-.... or SAV-....
    customer_id: str = Field(foreign_key="customer.id")
    kind: str  # checking | savings
    nickname: str = ""
    balance: float = 0.0
    overdraft_limit: float = 0.0  # checking only: how far below zero the balance may go
    status: str = "active"  # active | frozen | closed
    opened_at: Timestamp


class Card(Base, table=True):
    id: str = Field(primary_key=True)
    account_id: str = Field(foreign_key="account.id")
    last4: str
    status: str = "active"  # active | locked | cancelled
    issued_at: Timestamp
    expires_at: Timestamp
    replaced_by: str | None = None


class Transaction(Base, table=True):
    __tablename__ = "transactions"
    id: str = Field(primary_key=True)
    account_id: str = Field(foreign_key="account.id")
    posted_at: Timestamp
    amount: float  # signed: negative takes money out of the account
    kind: str  # card | deposit | transfer | payment | fee | interest | dispute_credit
    description: str
    card_id: str | None = Field(default=None, foreign_key="card.id")
    transfer_id: str | None = Field(default=None, foreign_key="transfer.id")


class Payee(Base, table=True):
    id: str = Field(primary_key=True)
    customer_id: str = Field(foreign_key="customer.id")
    name: str
    bank_name: str
    account_number: str
    added_at: Timestamp


class Transfer(Base, table=True):
    id: str = Field(primary_key=True)
    customer_id: str = Field(foreign_key="customer.id")
    from_account_id: str = Field(foreign_key="account.id")
    to_account_id: str | None = Field(default=None, foreign_key="account.id")  # internal transfers
    payee_id: str | None = Field(default=None, foreign_key="payee.id")  # payments to payees
    amount: float
    memo: str = ""
    created_at: Timestamp


class Dispute(Base, table=True):
    id: str = Field(primary_key=True)
    transaction_id: str = Field(foreign_key="transactions.id", unique=True)
    customer_id: str = Field(foreign_key="customer.id")
    account_id: str = Field(foreign_key="account.id")
    amount: float
    reason: str  # unauthorized | not_received | duplicate | wrong_amount
    status: str = "open"  # open | resolved | rejected
    provisional_credit: float = 0.0
    created_at: Timestamp
