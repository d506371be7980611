"""Airline desk state: customers, their payment methods, flights, reservations and refunds."""

from __future__ import annotations

from sqlmodel import Field

from mcpworld.world import Timestamp, world_base

Base = world_base()


class Customer(Base, table=True):
    id: str = Field(primary_key=True)
    name: str
    email: str = Field(unique=True)
    phone: str
    tier: str = "regular"  # regular | silver | gold
    travel_credit: float = 0.0


class PaymentMethod(Base, table=True):
    __tablename__ = "payment_method"
    id: str = Field(primary_key=True)
    customer_id: str = Field(foreign_key="customer.id")
    kind: str  # card | gift_card
    last4: str = ""
    balance: float = 0.0  # gift cards only


class Flight(Base, table=True):
    id: str = Field(primary_key=True)  # e.g. MW101-0603
    number: str
    origin: str
    destination: str
    departs_at: Timestamp
    arrives_at: Timestamp
    status: str = "scheduled"  # scheduled | delayed | cancelled | departed
    economy_seats: int
    business_seats: int
    economy_sold: int = 0
    business_sold: int = 0
    economy_price: float
    business_price: float


class Reservation(Base, table=True):
    id: str = Field(primary_key=True)
    customer_id: str = Field(foreign_key="customer.id")
    flight_id: str = Field(foreign_key="flight.id")
    cabin: str  # economy | business
    fare: str  # basic | standard
    passengers: int = Field(ge=1)
    bags: int = 0
    insurance: bool = False
    status: str = "booked"  # booked | cancelled
    booked_at: Timestamp
    amount_paid: float
    payment_id: str = Field(foreign_key="payment_method.id")


class Refund(Base, table=True):
    id: str = Field(primary_key=True)
    reservation_id: str = Field(foreign_key="reservation.id")
    payment_id: str = Field(foreign_key="payment_method.id")
    amount: float
    reason: str
    created_at: Timestamp


class Charge(Base, table=True):
    id: str = Field(primary_key=True)
    reservation_id: str = Field(foreign_key="reservation.id")
    payment_id: str = Field(foreign_key="payment_method.id")
    amount: float
    description: str
    created_at: Timestamp


class Compensation(Base, table=True):
    id: str = Field(primary_key=True)
    reservation_id: str = Field(foreign_key="reservation.id", unique=True)
    customer_id: str = Field(foreign_key="customer.id")
    amount: float
    created_at: Timestamp
