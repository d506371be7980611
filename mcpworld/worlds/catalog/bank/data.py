"""Seed data: a small, hand-made bank with rules worth testing (a frozen account, spent limits, old charges...)."""

from __future__ import annotations

from datetime import datetime

from mcpworld.world import Session

from .models import Account, Card, Customer, Dispute, Payee, Transaction, Transfer

NOW = datetime(2026, 5, 20, 14, 0, 0)


def _d(month: int, day: int, hour: int = 12, minute: int = 0, year: int = 2026) -> datetime:
    return datetime(year, month, day, hour, minute)


def seed(db: Session) -> None:
    db.add_all([
        Customer(id="CU100", name="Priya Shah", email="priya@example.com", phone="+1 646 555 0110"),
        Customer(id="CU101", name="Marcus Lee", email="marcus@example.com", phone="+1 503 555 0121"),
        Customer(id="CU102", name="Elena Petrova", email="elena@example.com", phone="+1 415 555 0132",
                 daily_transfer_limit=5000.0),
        Customer(id="CU103", name="Samuel Okoye", email="samuel@example.com", phone="+1 713 555 0143"),
        Customer(id="CU104", name="Nora Lindqvist", email="nora@example.com", phone="+1 612 555 0154",
                 daily_transfer_limit=1000.0),
    ])
    db.add_all([
        Account(id="CHK-2001", customer_id="CU100", kind="checking", nickname="Everyday", balance=3200.0,
                overdraft_limit=500.0, opened_at=_d(3, 4, year=2019)),
        Account(id="SAV-2002", customer_id="CU100", kind="savings", nickname="Rainy day", balance=15000.0,
                opened_at=_d(3, 4, year=2019)),
        Account(id="CHK-2003", customer_id="CU101", kind="checking", nickname="Main", balance=420.75,
                opened_at=_d(8, 19, year=2022)),
        Account(id="SAV-2004", customer_id="CU101", kind="savings", nickname="Car fund", balance=2500.0,
                opened_at=_d(8, 19, year=2022)),
        Account(id="CHK-2005", customer_id="CU102", kind="checking", nickname="Household", balance=8750.40,
                overdraft_limit=1000.0, opened_at=_d(1, 10, year=2015)),
        Account(id="SAV-2006", customer_id="CU102", kind="savings", nickname="Long term", balance=40210.0,
                opened_at=_d(1, 10, year=2015)),
        # frozen by the bank (legal hold): no money moves in or out
        Account(id="CHK-2007", customer_id="CU103", kind="checking", nickname="Personal", balance=1890.0,
                status="frozen", opened_at=_d(6, 1, year=2021)),
        Account(id="SAV-2008", customer_id="CU103", kind="savings", nickname="Savings", balance=5300.0,
                opened_at=_d(6, 1, year=2021)),
        Account(id="CHK-2009", customer_id="CU104", kind="checking", nickname="Daily", balance=610.0,
                overdraft_limit=200.0, opened_at=_d(2, 14, year=2024)),
        Account(id="SAV-2010", customer_id="CU104", kind="savings", nickname="Travel", balance=1200.0,
                opened_at=_d(2, 14, year=2024)),
    ])
    db.add_all([
        Card(id="CRD-3001", account_id="CHK-2001", last4="4417", issued_at=_d(9, 1, year=2024),
             expires_at=_d(9, 30, year=2028)),
        Card(id="CRD-3002", account_id="CHK-2003", last4="9021", issued_at=_d(8, 25, year=2022),
             expires_at=_d(8, 31, year=2026)),
        Card(id="CRD-3003", account_id="CHK-2005", last4="3388", status="locked", issued_at=_d(1, 20, year=2025),
             expires_at=_d(1, 31, year=2029)),
        Card(id="CRD-3004", account_id="CHK-2007", last4="5150", issued_at=_d(6, 10, year=2021),
             expires_at=_d(6, 30, year=2026)),
        Card(id="CRD-3005", account_id="CHK-2009", last4="7702", issued_at=_d(3, 20), expires_at=_d(3, 31, year=2030)),
        Card(id="CRD-3006", account_id="CHK-2009", last4="1164", status="cancelled", issued_at=_d(2, 20, year=2024),
             expires_at=_d(2, 28, year=2028), replaced_by="CRD-3005"),
    ])
    db.add_all([
        Payee(id="PY-4001", customer_id="CU100", name="Jordan Shah", bank_name="Chase", account_number="000123456789",
              added_at=_d(11, 2, year=2023)),
        Payee(id="PY-4002", customer_id="CU100", name="City Power & Light", bank_name="Wells Fargo",
              account_number="44001234", added_at=_d(3, 10, year=2019)),
        Payee(id="PY-4003", customer_id="CU102", name="Harbor View Apartments", bank_name="Bank of America",
              account_number="99887766", added_at=_d(1, 15, year=2025)),
        Payee(id="PY-4004", customer_id="CU103", name="Ikechukwu Okoye", bank_name="Citibank",
              account_number="31415926", added_at=_d(7, 7, year=2021)),
        Payee(id="PY-4005", customer_id="CU104", name="Maple Property Mgmt", bank_name="US Bank",
              account_number="55501234", added_at=_d(2, 20, year=2024)),
    ])
    transfers = [
        Transfer(id="TR6001", customer_id="CU100", from_account_id="CHK-2001", payee_id="PY-4002", amount=132.45,
                 memo="Electricity April", created_at=_d(5, 3, 10)),
        # Elena already paid 4000 of her 5000 daily limit this morning
        Transfer(id="TR6020", customer_id="CU102", from_account_id="CHK-2005", payee_id="PY-4003", amount=4000.0,
                 memo="Rent June", created_at=_d(5, 20, 9, 15)),
        Transfer(id="TR6009", customer_id="CU101", from_account_id="SAV-2004", to_account_id="CHK-2003",
                 amount=200.0, memo="", created_at=_d(4, 25, 18)),
    ]
    txns = [
        Transaction(id="TX7001", account_id="CHK-2001", posted_at=_d(5, 18, 9, 12), amount=-6.50, kind="card",
                    description="Blue Bottle Coffee", card_id="CRD-3001"),
        Transaction(id="TX7002", account_id="CHK-2001", posted_at=_d(5, 15, 16, 40), amount=-249.99, kind="card",
                    description="Amazon Marketplace", card_id="CRD-3001"),
        Transaction(id="TX7003", account_id="CHK-2001", posted_at=_d(5, 1, 6), amount=4200.0, kind="deposit",
                    description="Payroll - ACME Corp"),
        Transaction(id="TX7004", account_id="CHK-2001", posted_at=_d(3, 2, 11, 5), amount=-612.40, kind="card",
                    description="SkyHigh Airlines", card_id="CRD-3001"),
        Transaction(id="TX7005", account_id="CHK-2001", posted_at=_d(5, 10, 8, 0), amount=-15.99, kind="card",
                    description="Streamly Subscription", card_id="CRD-3001"),
        Transaction(id="TX7006", account_id="CHK-2001", posted_at=_d(5, 10, 8, 1), amount=-15.99, kind="card",
                    description="Streamly Subscription", card_id="CRD-3001"),
        Transaction(id="TX7007", account_id="CHK-2001", posted_at=_d(4, 10, 8, 0), amount=-15.99, kind="card",
                    description="Streamly Subscription", card_id="CRD-3001"),
        Transaction(id="TX7008", account_id="CHK-2001", posted_at=_d(5, 3, 10), amount=-132.45, kind="payment",
                    description="Payment to City Power & Light", transfer_id="TR6001"),
        Transaction(id="TX7010", account_id="SAV-2002", posted_at=_d(4, 30, 23), amount=18.75, kind="interest",
                    description="Interest April"),
        Transaction(id="TX7020", account_id="CHK-2003", posted_at=_d(5, 19, 19, 30), amount=-82.31, kind="card",
                    description="Metro Grocery", card_id="CRD-3002"),
        Transaction(id="TX7021", account_id="CHK-2003", posted_at=_d(5, 5, 6), amount=1800.0, kind="deposit",
                    description="Payroll - Riverside Diner"),
        Transaction(id="TX7022", account_id="CHK-2003", posted_at=_d(4, 28, 7, 45), amount=-45.0, kind="card",
                    description="QuickFuel", card_id="CRD-3002"),
        Transaction(id="TX7029", account_id="SAV-2004", posted_at=_d(4, 25, 18), amount=-200.0, kind="transfer",
                    description="Transfer to CHK-2003", transfer_id="TR6009"),
        Transaction(id="TX7040", account_id="CHK-2005", posted_at=_d(5, 12, 13, 20), amount=-1499.0, kind="card",
                    description="Luxe Electronics", card_id="CRD-3003"),
        Transaction(id="TX7041", account_id="CHK-2005", posted_at=_d(5, 20, 9, 15), amount=-4000.0, kind="payment",
                    description="Payment to Harbor View Apartments", transfer_id="TR6020"),
        Transaction(id="TX7042", account_id="CHK-2005", posted_at=_d(5, 1, 6), amount=9500.0, kind="deposit",
                    description="Payroll - Northwind Labs"),
        Transaction(id="TX7050", account_id="CHK-2007", posted_at=_d(5, 1, 6), amount=2100.0, kind="deposit",
                    description="Payroll - Gulf Logistics"),
        Transaction(id="TX7051", account_id="CHK-2007", posted_at=_d(5, 9, 15), amount=-210.0, kind="card",
                    description="Hardware Hub", card_id="CRD-3004"),
        Transaction(id="TX7060", account_id="CHK-2009", posted_at=_d(5, 16, 10, 30), amount=-23.80, kind="card",
                    description="Corner Pharmacy", card_id="CRD-3005"),
        Transaction(id="TX7061", account_id="CHK-2009", posted_at=_d(5, 18, 2, 14), amount=-89.99, kind="card",
                    description="Online Games Ltd", card_id="CRD-3005"),
        Transaction(id="TX7062", account_id="CHK-2009", posted_at=_d(3, 15, 17), amount=-18.0, kind="card",
                    description="Bookshop on Main", card_id="CRD-3006"),
    ]
    # Marcus already made six savings withdrawals this month: the monthly limit is reached
    for n, day in enumerate((2, 5, 8, 11, 14, 17)):
        tr = f"TR601{n}"
        transfers.append(Transfer(id=tr, customer_id="CU101", from_account_id="SAV-2004", to_account_id="CHK-2003",
                                  amount=100.0, memo="", created_at=_d(5, day, 18)))
        txns.append(Transaction(id=f"TX703{n}", account_id="SAV-2004", posted_at=_d(5, day, 18), amount=-100.0,
                                kind="transfer", description="Transfer to CHK-2003", transfer_id=tr))
        txns.append(Transaction(id=f"TX708{n}", account_id="CHK-2003", posted_at=_d(5, day, 18), amount=100.0,
                                kind="transfer", description="Transfer from SAV-2004", transfer_id=tr))
    db.add_all(transfers)
    db.add_all(txns)
    db.add(Transaction(id="TX7023", account_id="CHK-2003", posted_at=_d(5, 2, 11), amount=45.0,
                       kind="dispute_credit", description="Provisional credit, dispute DP5001"))
    db.add(Dispute(id="DP5001", transaction_id="TX7022", customer_id="CU101", account_id="CHK-2003", amount=45.0,
                   reason="wrong_amount", provisional_credit=45.0, created_at=_d(5, 2, 11)))
