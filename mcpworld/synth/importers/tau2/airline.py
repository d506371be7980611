"""The airline domain's 14 tools, behaving as τ²-bench's do (our own implementation of their observable behaviour).

What must match τ² byte for byte, and why the code below has the shape it has:

- the class is named `AirlineTools` and each method has τ²'s parameters in τ²'s order, so a call with missing or
  unexpected arguments fails with the same Python `TypeError` text;
- records are plain dicts (τ²'s model dumps, `docs.py`), mutated in place; where τ² builds a model (and so
  validates) we build the mirror model of the same name (`airline_models.py`), so validation errors read the same;
- arguments are used raw where τ² uses them raw (a string `nonfree_baggages` multiplies as a string; a `cabin`
  τ² never validates is stored as sent) and validated where τ² validated them;
- τ²'s quirks are kept: cancelling never releases seats; reservation ids are HATHAT, HATHAU, HATHAV; certificates
  certificate_3221322..4; a one-stop search's next day is `2024-05-{day + 1}`; partial writes before an error stay.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

from mcpworld.synth.importers.tau2.airline_models import (
    AirportCode,
    Certificate,
    DirectFlight,
    FlightInfo,
    Passenger,
    Payment,
    Reservation,
    ReservationFlight,
)
from mcpworld.synth.importers.tau2.docs import Docs, Record, record

NOW = "2024-05-15T15:00:00"  # τ²'s airline clock
RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
CERTIFICATE_NUMBERS = (3221322, 3221323, 3221324)
AIRPORTS = (("SFO", "San Francisco"), ("JFK", "New York"), ("LAX", "Los Angeles"), ("ORD", "Chicago"),
            ("DFW", "Dallas"), ("DEN", "Denver"), ("SEA", "Seattle"), ("ATL", "Atlanta"), ("MIA", "Miami"),
            ("BOS", "Boston"), ("PHX", "Phoenix"), ("IAH", "Houston"), ("LAS", "Las Vegas"), ("MCO", "Orlando"),
            ("EWR", "Newark"), ("CLT", "Charlotte"), ("MSP", "Minneapolis"), ("DTW", "Detroit"),
            ("PHL", "Philadelphia"), ("LGA", "LaGuardia"))
TABLES = ("flights", "users", "reservations")

# τ²'s kind of each tool: only WRITE tools are replayed by its evaluator
KINDS = {
    "book_reservation": "write", "calculate": "generic", "cancel_reservation": "write",
    "get_reservation_details": "read", "get_user_details": "read", "list_all_airports": "read",
    "search_direct_flight": "read", "search_onestop_flight": "read", "send_certificate": "write",
    "transfer_to_human_agents": "generic", "update_reservation_baggages": "write",
    "update_reservation_flights": "write", "update_reservation_passengers": "write", "get_flight_status": "read",
}


class AirlineTools:
    """One call's view of an airline episode (τ²'s class name: it shows in argument errors)."""

    def __init__(self, docs: Docs):
        self.docs = docs

    # -- lookups -------------------------------------------------------------------------------------------

    def _user(self, user_id: Any) -> dict[str, Any]:
        user = self.docs.get("users", user_id)
        if user is None:
            raise ValueError(f"User {user_id} not found")
        return user

    def _reservation(self, reservation_id: Any) -> dict[str, Any]:
        reservation = self.docs.get("reservations", reservation_id)
        if reservation is None:
            raise ValueError(f"Reservation {reservation_id} not found")
        return reservation

    def _flight(self, flight_number: Any) -> dict[str, Any]:
        flight = self.docs.get("flights", flight_number)
        if flight is None:
            raise ValueError(f"Flight {flight_number} not found")
        return flight

    def _flight_day(self, flight_number: Any, date: Any) -> dict[str, Any]:
        flight = self._flight(flight_number)
        if date not in flight["dates"]:
            raise ValueError(f"Flight {flight_number} not found on date {date}")
        return flight["dates"][date]

    def _direct(self, date: Any, origin: Any = None, destination: Any = None,
                leave_after: Any = None) -> list[dict[str, Any]]:
        found = []
        for flight in self.docs.values("flights"):
            if ((origin is None or flight["origin"] == origin)
                    and (destination is None or flight["destination"] == destination)
                    and date in flight["dates"] and flight["dates"][date]["status"] == "available"
                    and (leave_after is None or flight["scheduled_departure_time_est"] >= leave_after)):
                day = flight["dates"][date]
                found.append(DirectFlight(
                    flight_number=flight["flight_number"], origin=flight["origin"],
                    destination=flight["destination"], status="available",
                    scheduled_departure_time_est=flight["scheduled_departure_time_est"],
                    scheduled_arrival_time_est=flight["scheduled_arrival_time_est"],
                    available_seats=day["available_seats"], prices=day["prices"]).model_dump())
        return found

    def _charge(self, user: dict[str, Any], payment_id: Any, total_price: Any) -> dict[str, Any] | None:
        """Pay a change with a stored method: never a certificate; a gift card must cover it."""
        if payment_id not in user["payment_methods"]:
            raise ValueError("Payment method not found")
        method = user["payment_methods"][payment_id]
        if method["source"] == "certificate":
            raise ValueError("Certificate cannot be used to update reservation")
        if method["source"] == "gift_card" and method["amount"] < total_price:
            raise ValueError("Gift card balance is not enough")
        if method["source"] == "gift_card":
            method["amount"] -= total_price
        return Payment(payment_id=payment_id, amount=total_price).model_dump() if total_price != 0 else None

    # -- tools ---------------------------------------------------------------------------------------------

    def book_reservation(self, user_id, origin, destination, flight_type, cabin, flights, passengers,  # noqa: ANN001
                         payment_methods, total_baggages, nonfree_baggages, insurance) -> Any:
        if all(isinstance(f, dict) for f in flights):
            flights = [FlightInfo(**f) for f in flights]
        if all(isinstance(p, dict) for p in passengers):
            passengers = [Passenger(**p) for p in passengers]
        if all(isinstance(p, dict) for p in payment_methods):
            payment_methods = [Payment(**p) for p in payment_methods]
        user = self._user(user_id)
        reservation_id = next((r for r in RESERVATION_IDS if not self.docs.has("reservations", r)), None)
        if reservation_id is None:
            raise ValueError("Too many reservations")
        reservation = Reservation(
            reservation_id=reservation_id, user_id=user_id, origin=origin, destination=destination,
            flight_type=flight_type, cabin=cabin, flights=[], passengers=deepcopy(passengers),
            payment_history=deepcopy(payment_methods), created_at=NOW, total_baggages=total_baggages,
            nonfree_baggages=nonfree_baggages, insurance=insurance).model_dump()
        total_price = 0
        days = []
        for info in flights:
            number = info.flight_number
            flight = self._flight(number)
            day = self._flight_day(number, info.date)
            if day["status"] != "available":
                raise ValueError(f"Flight {number} not available on date {info.date}")
            if day["available_seats"][cabin] < len(passengers):
                raise ValueError(f"Not enough seats on flight {number}")
            price = day["prices"][cabin]
            reservation["flights"].append(ReservationFlight(
                origin=flight["origin"], destination=flight["destination"], flight_number=number, date=info.date,
                price=price).model_dump())
            days.append(day)
            total_price += price * len(passengers)
        if insurance == "yes":
            total_price += 30 * len(passengers)
        total_price += 50 * nonfree_baggages
        for method in payment_methods:
            payment_id, amount = method.payment_id, method.amount
            if payment_id not in user["payment_methods"]:
                raise ValueError(f"Payment method {payment_id} not found")
            stored = user["payment_methods"][payment_id]
            if stored["source"] in {"gift_card", "certificate"} and stored["amount"] < amount:
                raise ValueError(f"Not enough balance in payment method {payment_id}")
        total_payment = sum(method.amount for method in payment_methods)
        if total_payment != total_price:
            raise ValueError(f"Payment amount does not add up, total price is {total_price}, but paid {total_payment}")
        for method in payment_methods:  # the checks passed: take the money (a certificate is used up)
            stored = user["payment_methods"][method.payment_id]
            if stored["source"] == "gift_card":
                stored["amount"] -= method.amount
            elif stored["source"] == "certificate":
                user["payment_methods"].pop(method.payment_id)
        for day in days:
            day["available_seats"][cabin] -= len(passengers)
        self.docs.put("reservations", reservation_id, reservation)
        self._user(user_id)["reservations"].append(reservation_id)
        return Record(reservation)

    def calculate(self, expression) -> Any:  # noqa: ANN001
        if not all(char in "0123456789+-*/(). " for char in expression):
            raise ValueError("Invalid characters in expression")
        return str(round(float(eval(expression, {"__builtins__": None}, {})), 2))  # noqa: S307 (digits and operators only)

    def cancel_reservation(self, reservation_id) -> Any:  # noqa: ANN001
        reservation = self._reservation(reservation_id)
        refunds = [Payment(payment_id=p["payment_id"], amount=-p["amount"]).model_dump()
                   for p in reservation["payment_history"]]
        reservation["payment_history"].extend(refunds)
        reservation["status"] = "cancelled"  # seats are not released (as in τ²)
        return Record(reservation)

    def get_reservation_details(self, reservation_id) -> Any:  # noqa: ANN001
        return Record(self._reservation(reservation_id))

    def get_user_details(self, user_id) -> Any:  # noqa: ANN001
        return Record(self._user(user_id))

    def list_all_airports(self) -> Any:
        return [record(AirportCode(iata=iata, city=city)) for iata, city in AIRPORTS]

    def search_direct_flight(self, origin, destination, date) -> Any:  # noqa: ANN001
        return [Record(f) for f in self._direct(date=date, origin=origin, destination=destination)]

    def search_onestop_flight(self, origin, destination, date) -> Any:  # noqa: ANN001
        pairs = []
        for first in self._direct(date=date, origin=origin, destination=None):
            first["date"] = date
            next_date = f"2024-05-{int(date[-2:]) + 1}" if "+1" in first["scheduled_arrival_time_est"] else date
            for second in self._direct(date=next_date, origin=first["destination"], destination=destination,
                                       leave_after=first["scheduled_arrival_time_est"]):
                second["date"] = next_date
                pairs.append([Record(first), Record(second)])
        return pairs

    def send_certificate(self, user_id, amount) -> Any:  # noqa: ANN001
        user = self._user(user_id)
        for payment_id in [f"certificate_{n}" for n in CERTIFICATE_NUMBERS]:
            if payment_id not in user["payment_methods"]:
                user["payment_methods"][payment_id] = Certificate(
                    id=payment_id, amount=amount, source="certificate").model_dump()
                return f"Certificate {payment_id} added to user {user_id} with amount {amount}."
        raise ValueError("Too many certificates")

    def transfer_to_human_agents(self, summary) -> Any:  # noqa: ANN001
        return "Transfer successful"

    def update_reservation_baggages(self, reservation_id, total_baggages, nonfree_baggages,  # noqa: ANN001
                                    payment_id) -> Any:
        reservation = self._reservation(reservation_id)
        user = self._user(reservation["user_id"])
        total_price = 50 * max(0, nonfree_baggages - reservation["nonfree_baggages"])
        payment = self._charge(user, payment_id, total_price)
        if payment is not None:
            reservation["payment_history"].append(payment)
        reservation["total_baggages"] = total_baggages
        reservation["nonfree_baggages"] = nonfree_baggages
        return Record(reservation)

    def update_reservation_flights(self, reservation_id, cabin, flights, payment_id) -> Any:  # noqa: ANN001
        if all(isinstance(f, dict) for f in flights):
            flights = [FlightInfo(**f) for f in flights]
        reservation = self._reservation(reservation_id)
        user = self._user(reservation["user_id"])
        total_price = 0
        kept_or_new = []
        for info in flights:
            same = next((f for f in reservation["flights"] if f["flight_number"] == info.flight_number
                         and f["date"] == info.date and cabin == reservation["cabin"]), None)
            if same:
                total_price += same["price"] * len(reservation["passengers"])
                kept_or_new.append(same)
                continue
            flight = self._flight(info.flight_number)
            day = self._flight_day(info.flight_number, info.date)
            if day["status"] != "available":
                raise ValueError(f"Flight {info.flight_number} not available on date {info.date}")
            if day["available_seats"][cabin] < len(reservation["passengers"]):
                raise ValueError(f"Not enough seats on flight {info.flight_number}")
            new = ReservationFlight(flight_number=info.flight_number, date=info.date, price=day["prices"][cabin],
                                    origin=flight["origin"], destination=flight["destination"]).model_dump()
            total_price += new["price"] * len(reservation["passengers"])
            kept_or_new.append(new)
        total_price -= sum(f["price"] for f in reservation["flights"]) * len(reservation["passengers"])
        payment = self._charge(user, payment_id, total_price)
        if payment is not None:
            reservation["payment_history"].append(payment)
        reservation["flights"] = kept_or_new
        reservation["cabin"] = cabin  # as sent: τ² does not validate it here
        return Record(reservation)

    def update_reservation_passengers(self, reservation_id, passengers) -> Any:  # noqa: ANN001
        validated = all(isinstance(p, dict) for p in passengers)
        if validated:
            passengers = [Passenger(**p) for p in passengers]
        reservation = self._reservation(reservation_id)
        if len(passengers) != len(reservation["passengers"]):
            raise ValueError("Number of passengers does not match")
        # stored as τ² stores it: the passengers' dumps, or whatever was sent when it was not all objects
        reservation["passengers"] = [p.model_dump() for p in passengers] if validated else deepcopy(passengers)
        return Record(reservation)

    def get_flight_status(self, flight_number, date) -> Any:  # noqa: ANN001
        return self._flight_day(flight_number, date)["status"]
