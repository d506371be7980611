"""The airline domain's record shapes, as τ²-bench validates and prints them (our own restatement).

τ²'s state is pydantic models; what its tools print and what its evaluator hashes is their `model_dump()`. These
models carry τ²'s class names and field order, because both show through: the names in pydantic's validation
errors (`1 validation error for Payment ...`), the order in every printed record. They are used at import time to
normalise `db.json` into the documents τ² would print, and at call time wherever τ² builds a model (and so
validates): `FlightInfo`, `Passenger`, `Payment`, `Certificate`, `Reservation`, `ReservationFlight`,
`DirectFlight`, `AirportCode`. Everything else a tool does works on the stored documents as plain dicts.
"""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict

Cabin = Literal["business", "economy", "basic_economy"]


class AirportCode(BaseModel):
    iata: str
    city: str


class Name(BaseModel):
    first_name: str
    last_name: str


class Address(BaseModel):
    address1: str
    address2: Optional[str] = None  # noqa: UP045 (pydantic's error texts name the annotation as written)
    city: str
    country: str
    state: str
    zip: str


class Payment(BaseModel):
    payment_id: str
    amount: int


class PaymentMethodBase(BaseModel):
    source: str
    id: str


class CreditCard(PaymentMethodBase):
    source: Literal["credit_card"]
    brand: str
    last_four: str


class GiftCard(PaymentMethodBase):
    source: Literal["gift_card"]
    amount: float
    id: str


class Certificate(PaymentMethodBase):
    source: Literal["certificate"]
    amount: float


class Passenger(BaseModel):
    first_name: str
    last_name: str
    dob: str


class FlightDateStatusAvailable(BaseModel):
    status: Literal["available"]
    available_seats: dict[Cabin, int]
    prices: dict[Cabin, int]


class FlightDataStatusOnTime(BaseModel):
    status: Literal["on time"]
    estimated_departure_time_est: str
    estimated_arrival_time_est: str


class FlightDataStatusFlying(BaseModel):
    status: Literal["flying"]
    actual_departure_time_est: str
    estimated_arrival_time_est: str


class FlightDateStatusLanded(BaseModel):
    status: Literal["landed"]
    actual_departure_time_est: str
    actual_arrival_time_est: str


class FlightDateStatusCancelled(BaseModel):
    status: Literal["cancelled"]


class FlightDateStatusDelayed(BaseModel):
    status: Literal["delayed"]
    estimated_departure_time_est: str
    estimated_arrival_time_est: str


FlightDateStatus = Union[FlightDateStatusAvailable, FlightDateStatusLanded, FlightDateStatusCancelled,  # noqa: UP007
                         FlightDateStatusDelayed, FlightDataStatusFlying, FlightDataStatusOnTime]


class FlightBase(BaseModel):
    flight_number: str
    origin: str
    destination: str


class Flight(FlightBase):
    scheduled_departure_time_est: str
    scheduled_arrival_time_est: str
    dates: dict[str, FlightDateStatus]


class DirectFlight(FlightBase):
    status: Literal["available"]
    scheduled_departure_time_est: str
    scheduled_arrival_time_est: str
    date: Optional[str] = None  # noqa: UP045
    available_seats: dict[Cabin, int]
    prices: dict[Cabin, int]


class ReservationFlight(FlightBase):
    date: str
    price: int


class FlightInfo(BaseModel):
    flight_number: str
    date: str


class User(BaseModel):
    user_id: str
    name: Name
    address: Address
    email: str
    dob: str
    payment_methods: dict[str, Union[CreditCard, GiftCard, Certificate]]  # noqa: UP007
    saved_passengers: list[Passenger]
    membership: Literal["gold", "silver", "regular"]
    reservations: list[str]


class Reservation(BaseModel):
    reservation_id: str
    user_id: str
    origin: str
    destination: str
    flight_type: Literal["round_trip", "one_way"]
    cabin: Cabin
    flights: list[ReservationFlight]
    passengers: list[Passenger]
    payment_history: list[Payment]
    created_at: str
    total_baggages: int
    nonfree_baggages: int
    insurance: Literal["yes", "no"]
    status: Optional[Literal["cancelled"]] = None  # noqa: UP045


class FlightDB(BaseModel):
    model_config = ConfigDict(extra="forbid")
    flights: dict[str, Flight]
    users: dict[str, User]
    reservations: dict[str, Reservation]
