"""Airline desk tools. Business rules live here, each with its own message."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Literal

from sqlmodel import select

from mcpworld.world import Session, ToolError, fetch, new_id, not_found, now, tool

from .models import (
    Charge,
    Compensation,
    Customer,
    Flight,
    PaymentMethod,
    Refund,
    Reservation,
)

Cabin = Literal["economy", "business"]
Fare = Literal["basic", "standard"]
CancelReason = Literal["change_of_plan", "flight_cancelled", "medical", "other"]

FREE_BAGS = {"regular": 1, "silver": 2, "gold": 3}
BAG_FEE = 35.0
MAX_BAGS_PER_PASSENGER = 5
CANCEL_WINDOW = timedelta(hours=24)



def _price(flight: Flight, cabin: str) -> float:
    return flight.economy_price if cabin == "economy" else flight.business_price


def _seats_left(flight: Flight, cabin: str) -> int:
    if cabin == "economy":
        return flight.economy_seats - flight.economy_sold
    return flight.business_seats - flight.business_sold


def _take_seats(flight: Flight, cabin: str, count: int) -> None:
    if flight.status in ("departed", "cancelled"):
        raise ToolError(f"flight {flight.id} is {flight.status} and cannot be booked")
    if _seats_left(flight, cabin) < count:
        raise ToolError(f"flight {flight.id} has only {_seats_left(flight, cabin)} {cabin} seat(s) left")
    if cabin == "economy":
        flight.economy_sold += count
    else:
        flight.business_sold += count


def _release_seats(flight: Flight, cabin: str, count: int) -> None:
    if cabin == "economy":
        flight.economy_sold -= count
    else:
        flight.business_sold -= count


def _pay(db: Session, customer_id: str, payment_id: str, amount: float) -> PaymentMethod:
    method = fetch(db, PaymentMethod, payment_id, "payment method")
    if method.customer_id != customer_id:
        raise ToolError(f"payment method {payment_id} does not belong to customer {customer_id}")
    if method.kind == "gift_card":
        if method.balance < amount:
            raise ToolError(f"gift card {payment_id} has {method.balance:.2f} left; {amount:.2f} is needed")
        method.balance -= amount
    return method


def _refund(db: Session, reservation: Reservation, amount: float, reason: str) -> Refund:
    method = fetch(db, PaymentMethod, reservation.payment_id, "payment method")
    if method.kind == "gift_card":
        method.balance += amount
    refund = Refund(id=new_id(db, "RF"), reservation_id=reservation.id, payment_id=method.id,
                    amount=round(amount, 2), reason=reason, created_at=now(db))
    db.add(refund)
    return refund


def _active(db: Session, reservation_id: str) -> tuple[Reservation, Flight]:
    reservation = fetch(db, Reservation, reservation_id, "reservation")
    if reservation.status == "cancelled":
        raise ToolError(f"reservation {reservation_id} is already cancelled")
    flight = fetch(db, Flight, reservation.flight_id, "flight")
    if flight.status == "departed":
        raise ToolError(f"flight {flight.id} of reservation {reservation_id} has already departed")
    return reservation, flight


@tool
def find_customer(db: Session, email: str) -> Customer:
    """Look up a customer profile by e-mail address."""
    found = db.exec(select(Customer).where(Customer.email == email.strip().lower())).first()
    if found is None:
        raise not_found("customer with email", email)
    return found


@tool
def get_customer(db: Session, customer_id: str) -> Customer:
    """Get a customer's profile: name, contact details, loyalty tier and travel credit."""
    return fetch(db, Customer, customer_id, "customer")


@tool
def list_payment_methods(db: Session, customer_id: str) -> list[PaymentMethod]:
    """List the customer's saved payment methods (cards, and gift cards with their balance)."""
    fetch(db, Customer, customer_id, "customer")
    return list(db.exec(select(PaymentMethod).where(PaymentMethod.customer_id == customer_id)))


@tool
def search_flights(db: Session, origin: str, destination: str, day: date) -> list[dict]:
    """Find flights between two airports (IATA codes) on a day, with seats left and prices per cabin."""
    start = day.isoformat()
    end = (day + timedelta(days=1)).isoformat()
    flights = db.exec(select(Flight).where(
        Flight.origin == origin.upper(), Flight.destination == destination.upper(),
        Flight.departs_at >= start, Flight.departs_at < end,
    ).order_by(Flight.departs_at))
    return [{**f.model_dump(), "economy_left": _seats_left(f, "economy"),
             "business_left": _seats_left(f, "business")} for f in flights]


@tool
def get_flight(db: Session, flight_id: str) -> dict:
    """Get one flight's schedule, status, prices and seats left per cabin."""
    f = fetch(db, Flight, flight_id, "flight")
    return {**f.model_dump(), "economy_left": _seats_left(f, "economy"), "business_left": _seats_left(f, "business")}


@tool
def get_reservation(db: Session, reservation_id: str) -> Reservation:
    """Get a reservation: flight, cabin, fare, passengers, bags, insurance, status and amount paid."""
    return fetch(db, Reservation, reservation_id, "reservation")


@tool
def list_reservations(db: Session, customer_id: str) -> list[Reservation]:
    """List every reservation of a customer, newest booking first."""
    fetch(db, Customer, customer_id, "customer")
    return list(db.exec(select(Reservation).where(Reservation.customer_id == customer_id)
                        .order_by(Reservation.booked_at.desc())))


@tool(writes=True, destructive=False)
def book_flight(db: Session, customer_id: str, flight_id: str, cabin: Cabin, fare: Fare, passengers: int,
                payment_id: str, insurance: bool = False) -> Reservation:
    """Book seats on a flight and charge the payment method.

    Standard fares cost 15% more than basic fares. Insurance costs 30 per passenger. Gift cards must cover
    the whole amount. Refused when the cabin has too few seats or the flight is cancelled or departed.
    """
    if not 1 <= passengers <= 9:
        raise ToolError("passengers must be between 1 and 9")
    fetch(db, Customer, customer_id, "customer")
    flight = fetch(db, Flight, flight_id, "flight")
    _take_seats(flight, cabin, passengers)
    amount = _price(flight, cabin) * passengers * (1.15 if fare == "standard" else 1.0)
    amount = round(amount + (30.0 * passengers if insurance else 0.0), 2)
    _pay(db, customer_id, payment_id, amount)
    reservation = Reservation(id=new_id(db), customer_id=customer_id, flight_id=flight_id, cabin=cabin, fare=fare,
                              passengers=passengers, insurance=insurance, booked_at=now(db), amount_paid=amount,
                              payment_id=payment_id)
    db.add(reservation)
    db.flush()
    return reservation


@tool(writes=True)
def cancel_reservation(db: Session, reservation_id: str, reason: CancelReason) -> dict:
    """Cancel a reservation and refund it to the payment method it was paid with.

    Refused when the flight has departed, or when a basic fare is cancelled more than 24 hours after
    booking without travel insurance (unless the airline cancelled the flight).
    """
    reservation, flight = _active(db, reservation_id)
    late = now(db) - reservation.booked_at > CANCEL_WINDOW
    if reservation.fare == "basic" and late and not reservation.insurance and flight.status != "cancelled":
        raise ToolError(
            f"reservation {reservation_id} is a basic fare booked more than 24 hours ago without insurance: "
            "it cannot be cancelled for a refund"
        )
    reservation.status = "cancelled"
    _release_seats(flight, reservation.cabin, reservation.passengers)
    refund = _refund(db, reservation, reservation.amount_paid, reason)
    return {"reservation": reservation.model_dump(), "refund": refund.model_dump()}


@tool(writes=True)
def change_flight(db: Session, reservation_id: str, new_flight_id: str) -> dict:
    """Move a reservation to another flight on the same route, same cabin.

    Basic fares cannot be changed. A more expensive flight charges the difference to the original payment
    method; a cheaper one refunds it.
    """
    reservation, old = _active(db, reservation_id)
    if reservation.fare == "basic":
        raise ToolError(f"reservation {reservation_id} is a basic fare: basic fares cannot be changed")
    new = fetch(db, Flight, new_flight_id, "flight")
    if (new.origin, new.destination) != (old.origin, old.destination):
        raise ToolError(f"flight {new_flight_id} flies {new.origin}-{new.destination}, "
                        f"not {old.origin}-{old.destination}")
    if new.id == old.id:
        raise ToolError(f"reservation {reservation_id} is already on flight {new_flight_id}")
    _take_seats(new, reservation.cabin, reservation.passengers)
    _release_seats(old, reservation.cabin, reservation.passengers)
    difference = round((_price(new, reservation.cabin) - _price(old, reservation.cabin))
                       * reservation.passengers * 1.15, 2)
    result: dict = {"difference": difference}
    if difference > 0:
        _pay(db, reservation.customer_id, reservation.payment_id, difference)
        charge = Charge(id=new_id(db, "CH"), reservation_id=reservation.id, payment_id=reservation.payment_id,
                        amount=difference, description=f"change to {new.id}", created_at=now(db))
        db.add(charge)
        result["charge"] = charge.model_dump()
    elif difference < 0:
        result["refund"] = _refund(db, reservation, -difference, f"change to {new.id}").model_dump()
    reservation.flight_id = new.id
    reservation.amount_paid = round(reservation.amount_paid + difference, 2)
    result["reservation"] = reservation.model_dump()
    return result


@tool(writes=True, destructive=False)
def add_bags(db: Session, reservation_id: str, bags: int) -> dict:
    """Add checked bags to a reservation.

    Each passenger gets free bags by loyalty tier (regular 1, silver 2, gold 3); each bag beyond that costs
    35, charged to the reservation's payment method. At most 5 bags per passenger.
    """
    if bags < 1:
        raise ToolError("bags must be at least 1")
    reservation, _ = _active(db, reservation_id)
    customer = fetch(db, Customer, reservation.customer_id, "customer")
    total = reservation.bags + bags
    if total > MAX_BAGS_PER_PASSENGER * reservation.passengers:
        raise ToolError(f"at most {MAX_BAGS_PER_PASSENGER} bags per passenger "
                        f"({MAX_BAGS_PER_PASSENGER * reservation.passengers} for this reservation)")
    free = FREE_BAGS[customer.tier] * reservation.passengers
    paid = max(0, total - free) - max(0, reservation.bags - free)
    fee = round(paid * BAG_FEE, 2)
    reservation.bags = total
    result: dict = {"bags": total, "fee": fee}
    if fee:
        _pay(db, reservation.customer_id, reservation.payment_id, fee)
        charge = Charge(id=new_id(db, "CH"), reservation_id=reservation.id, payment_id=reservation.payment_id,
                        amount=fee, description=f"{paid} extra bag(s)", created_at=now(db))
        db.add(charge)
    return result


@tool(writes=True)
def upgrade_cabin(db: Session, reservation_id: str) -> dict:
    """Upgrade an economy reservation to business, charging the fare difference to its payment method."""
    reservation, flight = _active(db, reservation_id)
    if reservation.cabin == "business":
        raise ToolError(f"reservation {reservation_id} is already in business")
    _take_seats(flight, "business", reservation.passengers)
    _release_seats(flight, "economy", reservation.passengers)
    difference = round((flight.business_price - flight.economy_price) * reservation.passengers, 2)
    _pay(db, reservation.customer_id, reservation.payment_id, difference)
    db.add(Charge(id=new_id(db, "CH"), reservation_id=reservation.id, payment_id=reservation.payment_id,
                  amount=difference, description="upgrade to business", created_at=now(db)))
    reservation.cabin = "business"
    reservation.amount_paid = round(reservation.amount_paid + difference, 2)
    return {"reservation": reservation.model_dump(), "charged": difference}


@tool(writes=True, destructive=False, idempotent=True)
def update_contact(db: Session, customer_id: str, email: str | None = None, phone: str | None = None) -> Customer:
    """Change a customer's e-mail address and/or phone number."""
    customer = fetch(db, Customer, customer_id, "customer")
    if email is None and phone is None:
        raise ToolError("give a new email or phone")
    if email is not None:
        email = email.strip().lower()
        if "@" not in email or "." not in email.split("@")[-1]:
            raise ToolError(f"{email!r} is not a valid e-mail address")
        taken = db.exec(select(Customer).where(Customer.email == email, Customer.id != customer_id)).first()
        if taken is not None:
            raise ToolError(f"e-mail {email} is already used by another customer")
        customer.email = email
    if phone is not None:
        customer.phone = phone.strip()
    return customer


@tool(writes=True, destructive=False)
def issue_travel_credit(db: Session, customer_id: str, reservation_id: str, amount: float) -> Customer:
    """Compensate a customer with travel credit for a delayed or cancelled flight.

    Only for the customer's own reservation on a flight the airline delayed or cancelled; at most 100 per
    passenger for a delay and 200 per passenger for a cancellation; once per reservation.
    """
    customer = fetch(db, Customer, customer_id, "customer")
    reservation = fetch(db, Reservation, reservation_id, "reservation")
    if reservation.customer_id != customer_id:
        raise ToolError(f"reservation {reservation_id} does not belong to customer {customer_id}")
    flight = fetch(db, Flight, reservation.flight_id, "flight")
    caps = {"delayed": 100.0, "cancelled": 200.0}
    if flight.status not in caps:
        raise ToolError(f"flight {flight.id} is {flight.status}: compensation is only for delays and cancellations")
    cap = caps[flight.status] * reservation.passengers
    if not 0 < amount <= cap:
        raise ToolError(f"amount must be between 0 and {cap:.2f} for a {flight.status} flight")
    already = db.exec(select(Compensation).where(Compensation.reservation_id == reservation_id)).first()
    if already is not None:
        raise ToolError(f"reservation {reservation_id} was already compensated")
    db.add(Compensation(id=new_id(db, "CP"), reservation_id=reservation_id, customer_id=customer_id,
                        amount=amount, created_at=now(db)))
    customer.travel_credit = round(customer.travel_credit + amount, 2)
    return customer


TOOLS = [find_customer, get_customer, list_payment_methods, search_flights, get_flight, get_reservation,
         list_reservations, book_flight, cancel_reservation, change_flight, add_bags, upgrade_cabin,
         update_contact, issue_travel_credit]
