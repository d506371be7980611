"""Seed data: a small, hand-made airline with rules worth testing (full flights, old basic fares...)."""

from __future__ import annotations

from datetime import datetime, timedelta

from mcpworld.world import Session

from .models import Customer, Flight, PaymentMethod, Reservation

NOW = datetime(2026, 6, 1, 12, 0, 0)


def _flight(fid: str, origin: str, dest: str, depart: datetime, hours: float, eco: float, biz: float,
            eco_seats: int = 120, biz_seats: int = 12, eco_sold: int = 40, biz_sold: int = 4,
            status: str = "scheduled") -> Flight:
    return Flight(id=fid, number=fid.split("-")[0], origin=origin, destination=dest, departs_at=depart,
                  arrives_at=depart + timedelta(hours=hours), status=status, economy_seats=eco_seats,
                  business_seats=biz_seats, economy_sold=eco_sold, business_sold=biz_sold,
                  economy_price=eco, business_price=biz)


def seed(db: Session) -> None:
    db.add_all([
        Customer(id="C001", name="Ada Lovelace", email="ada@example.com", phone="+44 20 7946 0001", tier="gold"),
        Customer(id="C002", name="Grace Hopper", email="grace@example.com", phone="+1 212 555 0102", tier="silver",
                 travel_credit=50.0),
        Customer(id="C003", name="Alan Turing", email="alan@example.com", phone="+44 20 7946 0003"),
        Customer(id="C004", name="Katherine Johnson", email="kj@example.com", phone="+1 757 555 0104"),
        Customer(id="C005", name="Edsger Dijkstra", email="edsger@example.com", phone="+31 20 555 0105",
                 tier="silver"),
    ])
    db.add_all([
        PaymentMethod(id="PM-ADA-CARD", customer_id="C001", kind="card", last4="4242"),
        PaymentMethod(id="PM-ADA-GIFT", customer_id="C001", kind="gift_card", balance=150.0),
        PaymentMethod(id="PM-GRACE-CARD", customer_id="C002", kind="card", last4="1881"),
        PaymentMethod(id="PM-ALAN-CARD", customer_id="C003", kind="card", last4="1936"),
        PaymentMethod(id="PM-KJ-CARD", customer_id="C004", kind="card", last4="1962"),
        PaymentMethod(id="PM-KJ-GIFT", customer_id="C004", kind="gift_card", balance=40.0),
        PaymentMethod(id="PM-ED-CARD", customer_id="C005", kind="card", last4="1959"),
    ])
    d = NOW.replace(hour=0)
    db.add_all([
        _flight("MW101-0603", "LHR", "JFK", d + timedelta(days=2, hours=9), 8, 420.0, 1900.0),
        _flight("MW103-0603", "LHR", "JFK", d + timedelta(days=2, hours=18), 8, 380.0, 1750.0),
        _flight("MW105-0604", "LHR", "JFK", d + timedelta(days=3, hours=9), 8, 410.0, 1850.0,
                eco_sold=120, biz_sold=12),
        _flight("MW102-0605", "JFK", "LHR", d + timedelta(days=4, hours=20), 7, 450.0, 2000.0),
        _flight("MW201-0602", "AMS", "LHR", d + timedelta(days=1, hours=7), 1.2, 120.0, 390.0),
        _flight("MW203-0602", "AMS", "LHR", d + timedelta(days=1, hours=16), 1.2, 95.0, 350.0, biz_sold=12),
        _flight("MW301-0601", "JFK", "SFO", d + timedelta(hours=8), 6, 300.0, 1200.0, status="departed"),
        _flight("MW305-0602", "JFK", "SFO", d + timedelta(days=1, hours=10), 6, 320.0, 1250.0, status="cancelled"),
        _flight("MW307-0602", "JFK", "SFO", d + timedelta(days=1, hours=15), 6, 340.0, 1300.0, status="delayed"),
        _flight("MW401-0606", "LHR", "CDG", d + timedelta(days=5, hours=11), 1.3, 110.0, 420.0),
    ])
    db.add_all([
        # booked an hour ago, basic fare: cancellable only within 24h
        Reservation(id="ZFA04Y", customer_id="C003", flight_id="MW101-0603", cabin="economy", fare="basic",
                    passengers=1, booked_at=NOW - timedelta(hours=1), amount_paid=420.0, payment_id="PM-ALAN-CARD"),
        # basic fare booked three days ago, no insurance: not refundable
        Reservation(id="QX7P2K", customer_id="C004", flight_id="MW102-0605", cabin="economy", fare="basic",
                    passengers=2, booked_at=NOW - timedelta(days=3), amount_paid=900.0, payment_id="PM-KJ-CARD"),
        # basic fare booked long ago but insured: refundable
        Reservation(id="INS9RT", customer_id="C005", flight_id="MW401-0606", cabin="economy", fare="basic",
                    passengers=1, insurance=True, booked_at=NOW - timedelta(days=20), amount_paid=110.0,
                    payment_id="PM-ED-CARD"),
        # standard fare, changeable
        Reservation(id="STD5LM", customer_id="C001", flight_id="MW101-0603", cabin="economy", fare="standard",
                    passengers=1, bags=1, booked_at=NOW - timedelta(days=10), amount_paid=420.0,
                    payment_id="PM-ADA-CARD"),
        # already departed
        Reservation(id="DEP3AA", customer_id="C002", flight_id="MW301-0601", cabin="business", fare="standard",
                    passengers=1, booked_at=NOW - timedelta(days=30), amount_paid=1200.0,
                    payment_id="PM-GRACE-CARD"),
        # on a cancelled flight
        Reservation(id="CXL8BB", customer_id="C002", flight_id="MW305-0602", cabin="economy", fare="standard",
                    passengers=1, booked_at=NOW - timedelta(days=12), amount_paid=320.0,
                    payment_id="PM-GRACE-CARD"),
        # on a delayed flight
        Reservation(id="DLY2CC", customer_id="C005", flight_id="MW307-0602", cabin="economy", fare="standard",
                    passengers=1, booked_at=NOW - timedelta(days=5), amount_paid=340.0, payment_id="PM-ED-CARD"),
        Reservation(id="GIFT6D", customer_id="C001", flight_id="MW201-0602", cabin="economy", fare="standard",
                    passengers=1, booked_at=NOW - timedelta(days=2), amount_paid=120.0, payment_id="PM-ADA-GIFT"),
    ])
