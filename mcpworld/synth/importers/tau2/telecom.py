"""The telecom domain, behaving as τ²-bench's does (our own implementation of its observable behaviour).

Telecom is τ²'s dual-control domain: the agent has 13 tools on the carrier's records, the user has 30 on their own
phone, and after every successful call τ² *syncs* the two sides (`sync`): the phone learns whether its line is
active, may roam and is over its data limit; a bill the user paid is marked paid; a bill awaiting payment becomes a
payment request on the phone. Tasks start by running setup functions on either side (a SIM locked, a bill made
overdue), and are judged by assertion functions on the end state (`assertion`).

State is τ²'s two databases as records (`telecom_models.py`): the agent's lists (`plans`, `customers`, `lines`,
`bills`, `devices`, one row per element, keyed by position) and the user's `phone` table (`device`,
`surroundings`, and `quirks`, which τ² keeps in its process rather than its database). A call loads them as
models, runs τ²'s logic on them (assignments unvalidated, partial writes kept on error), and writes back every
record whose dump changed.

What matches τ² byte for byte: result texts and error texts (class names `TelecomTools` and `TelecomUserTools`,
τ²'s parameter names and order), record dumps, the reward. Kept quirks: a VPN broken by a task's setup makes every
later VPN connection slow (τ² mutates its class-wide default); a refuel's new bill is `B` + 8 hex digits, derived
here from the state where τ² draws a random UUID, so that the same calls give the same state.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

from pydantic import BaseModel

from mcpworld.synth.importers.tau2.docs import dumps, render
from mcpworld.synth.importers.tau2.telecom_models import (
    APNNames,
    APNSettings,
    Bill,
    BillStatus,
    Customer,
    Device,
    Line,
    LineItem,
    LineStatus,
    MockPhoneAttributes,
    NetworkModePreference,
    NetworkStatus,
    NetworkTechnology,
    PaymentRequest,
    PerformanceLevel,
    Plan,
    SignalStrength,
    SimStatus,
    TelecomDB,
    TelecomUserDB,
    UserSurroundings,
    VpnDetails,
    load,
    plain,
    stored,
)
from mcpworld.worlds.world import KeptError

NOW = "2025-02-25T12:08:00"  # τ²'s telecom clock
TODAY = date(2025, 2, 25)
TABLES = ("plans", "customers", "lines", "bills", "devices")
MODELS = {"plans": Plan, "customers": Customer, "lines": Line, "bills": Bill, "devices": Device}
PHONE = "phone"  # the user's side: rows `device`, `surroundings`, `quirks`
KINDS = {
    "get_customer_by_phone": "read", "get_customer_by_id": "read", "get_customer_by_name": "read",
    "get_details_by_id": "read", "suspend_line": "write", "resume_line": "write", "get_bills_for_customer": "read",
    "send_payment_request": "write", "get_data_usage": "read", "enable_roaming": "write", "disable_roaming": "write",
    "transfer_to_human_agents": "generic", "refuel_data": "write",
}
USER_KINDS = {
    "check_status_bar": "read", "check_network_status": "read", "check_network_mode_preference": "read",
    "set_network_mode_preference": "write", "run_speed_test": "read", "toggle_airplane_mode": "write",
    "check_sim_status": "read", "reseat_sim_card": "write", "toggle_data": "write", "toggle_roaming": "write",
    "check_data_restriction_status": "read", "toggle_data_saver_mode": "write", "check_apn_settings": "read",
    "set_apn_settings": "write", "reset_apn_settings": "write", "check_wifi_status": "read", "toggle_wifi": "write",
    "check_wifi_calling_status": "read", "toggle_wifi_calling": "write", "check_vpn_status": "read",
    "connect_vpn": "write", "disconnect_vpn": "write", "check_installed_apps": "read", "check_app_status": "read",
    "check_app_permissions": "read", "grant_app_permission": "write", "can_send_mms": "read",
    "reboot_device": "write", "check_payment_request": "read", "make_payment": "write",
}


# -- state ---------------------------------------------------------------------------------------------------


class State:
    """Both databases of one episode as models, loaded from its tables, written back by `flush`."""

    def __init__(self, conn: Any):
        self.conn = conn
        self._texts: dict[tuple[str, str], str] = {}
        tree: dict[str, list[Any]] = {}
        for table in TABLES:
            rows = conn.exec_driver_sql(f'SELECT key, data FROM "{table}" ORDER BY pos').fetchall()
            tree[table] = []
            for key, data in rows:
                self._texts[(table, key)] = data
                tree[table].append(load(MODELS[table], data))
        self.db = TelecomDB.model_construct(**tree)
        phone = {k: d for k, d in conn.exec_driver_sql(f'SELECT key, data FROM "{PHONE}"').fetchall()}
        for key, data in phone.items():
            self._texts[(PHONE, key)] = data
        self.user = TelecomUserDB.model_construct(device=load(MockPhoneAttributes, phone["device"]),
                                                  surroundings=load(UserSurroundings, phone["surroundings"]))
        self.quirks: dict[str, Any] = json.loads(phone.get("quirks") or "{}")

    def records(self) -> dict[tuple[str, str], str]:
        out = {(table, str(i)): stored(m) for table in TABLES for i, m in enumerate(getattr(self.db, table))}
        out[(PHONE, "device")] = stored(self.user.device)
        out[(PHONE, "surroundings")] = stored(self.user.surroundings)
        out[(PHONE, "quirks")] = dumps(self.quirks)
        return out

    def flush(self) -> None:
        """Write every record whose dump changed; new list elements go last (τ² never deletes one)."""
        for (table, key), text in self.records().items():
            old = self._texts.get((table, key))
            if old is None:
                self.conn.exec_driver_sql(f'INSERT INTO "{table}" (key, pos, data) VALUES (?, ?, ?)',
                                          (key, int(key), text))  # only list elements are new
            elif old != text:
                self.conn.exec_driver_sql(f'UPDATE "{table}" SET data = ? WHERE key = ?', (text, key))
            self._texts[(table, key)] = text

    def new_bill_id(self, customer_id: Any) -> str:
        """τ²'s `B` + 8 hex digits (τ²: from a random UUID), here from the customer and the number of bills: the
        same calls make the same id on every seed, so a reference's new bill is the agent's."""
        return "B" + hashlib.sha256(f"{customer_id}:{len(self.db.bills)}".encode()).hexdigest()[:8]

    @property
    def vpn_default(self) -> VpnDetails:
        return VpnDetails(server_address="192.168.1.1", protocol="OpenVPN",
                          server_performance=self.quirks.get("vpn_performance", PerformanceLevel.EXCELLENT.value))


def initial_tables(db_text: dict[str, Any], user_text: dict[str, Any]) -> dict[str, list[list[Any]]]:
    """τ²'s two database files (parsed) as the package's tables: `[[key, record], ...]` in τ²'s order."""
    db = TelecomDB.model_validate(db_text)
    user = TelecomUserDB.model_validate(user_text)
    tables: dict[str, list[list[Any]]] = {t: [[str(i), json.loads(stored(m))] for i, m in enumerate(getattr(db, t))]
                                          for t in TABLES}
    tables[PHONE] = [["device", json.loads(stored(user.device))],
                     ["surroundings", json.loads(stored(user.surroundings))], ["quirks", {}]]
    return tables


def dump_tree(conn: Any) -> dict[str, Any]:
    """Both databases as τ² dumps them (what its `get_db_hash` and `get_user_db_hash` hash)."""
    state = State(raw(conn))
    agent = {t: [plain(m) for m in getattr(state.db, t)] for t in TABLES}
    return {"agent": agent, "user": {"device": plain(state.user.device),
                                     "surroundings": plain(state.user.surroundings)}}


# -- the agent's tools ---------------------------------------------------------------------------------------


class TelecomTools:
    """The agent's side (τ²'s class name: it shows in argument errors)."""

    def __init__(self, state: State):
        self.state, self.db = state, state.db

    def get_customer_by_phone(self, phone_number):  # noqa: ANN001, ANN201 (τ²'s signature, raw arguments)
        for customer in self.db.customers:
            if customer.phone_number == phone_number:
                return customer
            for line_id in customer.line_ids:
                line = self._get_line_by_id(line_id)
                if line and line.phone_number == phone_number:
                    return customer
        raise ValueError(f"Customer with phone number {phone_number} not found")

    def get_customer_by_id(self, customer_id):  # noqa: ANN001, ANN201
        for customer in self.db.customers:
            if customer.customer_id == customer_id:
                return customer
        raise ValueError(f"Customer with ID {customer_id} not found")

    def get_customer_by_name(self, full_name, dob):  # noqa: ANN001, ANN201
        return [c for c in self.db.customers if c.full_name.lower() == full_name.lower() and c.date_of_birth == dob]

    def _get_line_by_phone(self, phone_number: Any) -> Line:
        for line in self.db.lines:
            if line.phone_number == phone_number:
                return line
        raise ValueError(f"Line with phone number {phone_number} not found")

    def _find(self, items: list[Any], field: str, value: Any, what: str) -> Any:
        for item in items:
            if getattr(item, field) == value:
                return item
        raise ValueError(f"{what} with ID {value} not found")

    def _get_line_by_id(self, line_id: Any) -> Line:
        return self._find(self.db.lines, "line_id", line_id, "Line")

    def _get_plan_by_id(self, plan_id: Any) -> Plan:
        return self._find(self.db.plans, "plan_id", plan_id, "Plan")

    def _get_device_by_id(self, device_id: Any) -> Device:
        return self._find(self.db.devices, "device_id", device_id, "Device")

    def _get_bill_by_id(self, bill_id: Any) -> Bill:
        return self._find(self.db.bills, "bill_id", bill_id, "Bill")

    def _get_target_line(self, customer_id: Any, line_id: Any) -> Line:
        customer = self.get_customer_by_id(customer_id)
        if line_id not in customer.line_ids:
            raise ValueError(f"Line {line_id} not found for customer {customer_id}")
        return self._get_line_by_id(line_id)

    def get_details_by_id(self, id):  # noqa: ANN001, ANN201, A002
        for prefix, lookup in (("L", self._get_line_by_id), ("D", self._get_device_by_id),
                               ("B", self._get_bill_by_id), ("C", self.get_customer_by_id),
                               ("P", self._get_plan_by_id)):
            if id.startswith(prefix):
                return lookup(id)
        raise ValueError(f"Unknown ID format or type: {id}")

    def suspend_line(self, customer_id, line_id, reason):  # noqa: ANN001, ANN201, ARG002
        line = self._get_target_line(customer_id, line_id)
        if line.status != LineStatus.ACTIVE:
            raise ValueError("Line must be active to suspend")
        line.status = LineStatus.SUSPENDED
        line.suspension_start_date = TODAY
        return {"message": "Line suspended successfully. $5/month holding fee will apply.", "line": line}

    def resume_line(self, customer_id, line_id):  # noqa: ANN001, ANN201
        line = self._get_target_line(customer_id, line_id)
        if line.status not in (LineStatus.SUSPENDED, LineStatus.PENDING_ACTIVATION):
            raise ValueError("Line must be suspended to resume")
        line.status = LineStatus.ACTIVE
        line.suspension_start_date = None
        return {"message": "Line resumed successfully", "line": line}

    def get_bills_for_customer(self, customer_id, limit=12):  # noqa: ANN001, ANN201
        customer = self.get_customer_by_id(customer_id)
        bills = [self._get_bill_by_id(bill_id) for bill_id in customer.bill_ids]
        return sorted(bills, key=lambda bill: bill.issue_date, reverse=True)[:limit]

    def send_payment_request(self, customer_id, bill_id):  # noqa: ANN001, ANN201
        customer = self.get_customer_by_id(customer_id)
        if self._get_bills_awaiting_payment(customer):
            raise ValueError("A bill is already awaiting payment for this customer")
        if bill_id not in customer.bill_ids:
            raise ValueError(f"Bill {bill_id} not found for customer {customer_id}")
        bill = self._get_bill_by_id(bill_id)
        bill.status = BillStatus.AWAITING_PAYMENT
        return f"Payment request sent to the customer for bill {bill.bill_id}"

    def _get_bills_awaiting_payment(self, customer: Customer) -> list[Bill]:
        bills = [self._get_bill_by_id(bill_id) for bill_id in customer.bill_ids]
        return [b for b in bills if b and b.status == BillStatus.AWAITING_PAYMENT]

    def _set_bill_to_paid(self, bill_id: Any) -> None:
        self._get_bill_by_id(bill_id).status = BillStatus.PAID

    def _apply_one_time_charge(self, customer_id: Any, amount: Any, description: str) -> None:
        customer = self.get_customer_by_id(customer_id)
        draft = None
        for bill_id in customer.bill_ids:
            bill = self._get_bill_by_id(bill_id)
            if bill and bill.status == BillStatus.DRAFT:
                draft = bill
                break
        if not draft:
            start = (TODAY.replace(day=1) + timedelta(days=32)).replace(day=1)
            following = start.replace(month=start.month + 1 if start.month < 12 else 1,
                                      year=start.year if start.month < 12 else start.year + 1)
            new_id = self.state.new_bill_id(customer_id)
            draft = Bill(bill_id=new_id, customer_id=customer_id, period_start=start,
                         period_end=following - timedelta(days=1), issue_date=start, total_due=0,
                         due_date=start + timedelta(days=14), status=BillStatus.DRAFT)
            self.db.bills.append(draft)
            customer.bill_ids.append(new_id)
        draft.line_items.append(LineItem(description=description, amount=amount, date=TODAY,
                                         item_type="Credit" if amount < 0 else "Charge"))
        draft.total_due += amount

    def get_data_usage(self, customer_id, line_id):  # noqa: ANN001, ANN201
        line = self._get_target_line(customer_id, line_id)
        plan = self._get_plan_by_id(line.plan_id)
        cycle_end = date(TODAY.year, TODAY.month + 1 if TODAY.month < 12 else 1, 1) - timedelta(days=1)
        return {"line_id": line_id, "data_used_gb": line.data_used_gb, "data_limit_gb": plan.data_limit_gb,
                "data_refueling_gb": line.data_refueling_gb, "cycle_end_date": cycle_end}

    def set_data_usage(self, customer_id: Any, line_id: Any, data_used_gb: Any) -> str:
        self._get_target_line(customer_id, line_id).data_used_gb = data_used_gb
        return f"Data usage set to {data_used_gb} GB for line {line_id}"

    def enable_roaming(self, customer_id, line_id):  # noqa: ANN001, ANN201
        line = self._get_target_line(customer_id, line_id)
        if line.roaming_enabled:
            return "Roaming was already enabled"
        line.roaming_enabled = True
        return "Roaming enabled successfully"

    def disable_roaming(self, customer_id, line_id):  # noqa: ANN001, ANN201
        line = self._get_target_line(customer_id, line_id)
        if not line.roaming_enabled:
            return "Roaming was already disabled"
        line.roaming_enabled = False
        return "Roaming disabled successfully"

    def transfer_to_human_agents(self, summary):  # noqa: ANN001, ANN201, ARG002
        return "Transfer successful"

    def refuel_data(self, customer_id, line_id, gb_amount):  # noqa: ANN001, ANN201
        line = self._get_target_line(customer_id, line_id)
        if gb_amount <= 0:
            raise ValueError("Refuel amount must be positive")
        plan = self._get_plan_by_id(line.plan_id)
        if not plan:
            raise ValueError("Plan not found for this line")
        charge = gb_amount * plan.data_refueling_price_per_gb
        line.data_refueling_gb += gb_amount
        self._apply_one_time_charge(customer_id, charge,
                                    f"Data refueling: {gb_amount} GB at ${plan.data_refueling_price_per_gb}/GB")
        return {"message": f"Successfully added {gb_amount} GB of data for line {line_id} for ${charge:.2f}",
                "new_data_refueling_gb": line.data_refueling_gb, "charge": charge}

    # -- setup and assertions (τ²'s task functions, never tools) --

    def suspend_line_for_overdue_bill(self, customer_id: Any, line_id: Any, new_bill_id: Any,
                                      contract_ended: Any) -> str:
        line = self._get_line_by_id(line_id)
        if line.status != LineStatus.ACTIVE:
            raise ValueError("Line must be active to suspend for unpaid bill")
        amount = self._get_plan_by_id(line.plan_id).price_per_month
        if amount <= 0:
            raise ValueError("Amount must be positive for overdue bill")
        customer = self.get_customer_by_id(customer_id)
        if [b for b in customer.bill_ids if self._get_bill_by_id(b).status == BillStatus.OVERDUE]:
            raise ValueError("Customer already has an overdue bill")
        last_day = TODAY.replace(day=1) - timedelta(days=1)
        first_day = last_day.replace(day=1)
        bill = Bill(bill_id=new_bill_id, customer_id=customer_id, period_start=first_day, period_end=last_day,
                    issue_date=first_day, total_due=0, due_date=first_day + timedelta(days=14),
                    status=BillStatus.OVERDUE)
        bill.line_items.append(LineItem(description=f"Charge for line {line.line_id}", amount=amount, date=TODAY,
                                        item_type="Charge" if amount > 0 else "Credit"))
        bill.total_due += amount
        self.db.bills.append(bill)
        customer.bill_ids.append(new_bill_id)
        line.status = LineStatus.SUSPENDED
        line.suspension_start_date = TODAY
        if contract_ended:
            line.contract_end_date = last_day
        return f"Line {line_id} suspended for unpaid bill {new_bill_id}. Contract ended: {contract_ended}"

    def assert_data_refueling_amount(self, customer_id: Any, line_id: Any, expected_amount: Any) -> bool:
        return abs(self._get_target_line(customer_id, line_id).data_refueling_gb - expected_amount) < 1e-6

    def assert_line_status(self, customer_id: Any, line_id: Any, expected_status: Any) -> bool:
        return self._get_target_line(customer_id, line_id).status == expected_status

    def assert_overdue_bill_exists(self, customer_id: Any, overdue_bill_id: Any) -> bool:
        customer = self.get_customer_by_id(customer_id)
        if overdue_bill_id not in customer.bill_ids:
            raise ValueError(f"Overdue bill {overdue_bill_id} not found")
        if self._get_bill_by_id(overdue_bill_id).status != BillStatus.OVERDUE:
            raise ValueError(f"Overdue bill {overdue_bill_id} is not overdue")
        return True

    def assert_no_overdue_bill(self, overdue_bill_id: Any) -> bool:
        try:
            return self._get_bill_by_id(overdue_bill_id).status == BillStatus.PAID
        except ValueError:
            return True


# -- the user's tools ----------------------------------------------------------------------------------------

SIGNAL_BARS = {SignalStrength.NONE: "📵 No Signal", SignalStrength.POOR: "📶¹ Poor", SignalStrength.FAIR: "📶² Fair",
               SignalStrength.GOOD: "📶³ Good", SignalStrength.EXCELLENT: "📶⁴ Excellent"}
SPEEDS = {NetworkTechnology.TWO_G: (0.1, 0.4), NetworkTechnology.THREE_G: (1.0, 5.0),
          NetworkTechnology.FOUR_G: (10.0, 100.0), NetworkTechnology.FIVE_G: (50.0, 500.0),
          NetworkTechnology.NONE: (0.0, 0.0)}
SIGNAL_FACTORS = {SignalStrength.POOR: 0.2, SignalStrength.FAIR: 0.5, SignalStrength.GOOD: 0.8,
                  SignalStrength.EXCELLENT: 1.0, SignalStrength.NONE: 0.0}
SPEED_ADVICE = {"Very Poor": "Connection is very slow. Basic web browsing might be difficult.",
                "Poor": "Connection is slow. Web browsing may be sluggish, streaming difficult.",
                "Fair": "Connection is okay for web browsing and some standard definition streaming.",
                "Good": "Connection is good for most activities, including HD streaming.",
                "Excellent": "Connection is very fast."}
PREFERRED_TECH = {NetworkModePreference.FOUR_G_ONLY: NetworkTechnology.FOUR_G,
                  NetworkModePreference.THREE_G_ONLY: NetworkTechnology.THREE_G,
                  NetworkModePreference.TWO_G_ONLY: NetworkTechnology.TWO_G}
SIM_TEXTS = {SimStatus.ACTIVE: "Your SIM card is active and working.",
             SimStatus.MISSING: "No SIM card detected in the phone.",
             SimStatus.LOCKED_PIN: "The SIM card is locked with a PIN code.",
             SimStatus.LOCKED_PUK: "The SIM card is locked with a PUK code."}


def _on_off(flag: Any) -> str:
    return "ON" if flag else "OFF"


class TelecomUserTools:
    """The user's side: their phone and surroundings (τ²'s class name: it shows in argument errors)."""

    def __init__(self, state: State):
        self.state = state

    @property
    def device(self) -> MockPhoneAttributes:
        return self.state.user.device

    @property
    def surroundings(self) -> UserSurroundings:
        return self.state.user.surroundings

    def _bar(self) -> str:
        return f"Status Bar: {self._check_status_bar()}"

    def _with_bar(self, text: str) -> str:
        return f"{text}\n{self._bar()}"

    # -- setup functions (τ²'s task initialisation, never tools) --

    def set_user_info(self, name: Any, phone_number: Any) -> None:
        self.surroundings.name = name
        self.surroundings.phone_number = phone_number

    def set_user_location(self, abroad: Any) -> None:
        self.surroundings.is_abroad = abroad

    def turn_airplane_mode_on(self) -> str:
        if not self._toggle_airplane_mode():
            self._toggle_airplane_mode()
        return "Airplane Mode is now ON."

    def turn_airplane_mode_off(self) -> str:
        if self._toggle_airplane_mode():
            self._toggle_airplane_mode()
        return "Airplane Mode is now OFF."

    def unseat_sim_card(self) -> str:
        self.device.sim_card_missing = True
        self.simulate_network_search()
        return "SIM card un-seated successfully."

    def lock_sim_card(self, mode: Any) -> str:
        if mode == "pin":
            self.device.sim_card_status = SimStatus.LOCKED_PIN
        elif mode == "puk":
            self.device.sim_card_status = SimStatus.LOCKED_PUK
        self.simulate_network_search()
        return f"SIM card locked successfully in {mode} mode."

    def turn_data_on(self) -> str:
        self.device.data_enabled = True
        return "Data connection restored."

    def turn_data_off(self) -> str:
        if self._toggle_data():
            self._toggle_data()
        return "Data connection broken."

    def turn_roaming_on(self) -> str:
        if not self._toggle_roaming():
            self._toggle_roaming()
        return "Data Roaming is now ON."

    def turn_roaming_off(self) -> str:
        if self._toggle_roaming():
            self._toggle_roaming()
        return "Data Roaming is now OFF."

    def turn_data_saver_mode_on(self) -> str:
        if not self._toggle_data_saver_mode():
            self._toggle_data_saver_mode()
        return "Data Saver Mode is now ON."

    def turn_data_saver_mode_off(self) -> str:
        if self._toggle_data_saver_mode():
            self._toggle_data_saver_mode()
        return "Data Saver Mode is now OFF."

    def break_apn_settings(self) -> str:
        self.device.active_apn_settings.apn_name = APNNames.BROKEN
        self.simulate_network_search()
        return "APN settings broken. Please call reset_apn_settings() to fix."

    def break_apn_mms_setting(self) -> str:
        self.device.active_apn_settings.mmsc_url = None
        return "APN MMS setting broken. Please call reset_apn_settings() to fix."

    def set_wifi_calling(self, enabled: Any, mms_over_wifi: Any = None) -> str:
        if self.device.wifi_calling_enabled != enabled:
            self._toggle_wifi_calling()
        msg = f"Wi-Fi Calling is now {_on_off(enabled)}."
        if mms_over_wifi is not None:
            self.device.wifi_calling_mms_over_wifi = mms_over_wifi
            msg += f"\nMMS over Wi-Fi is now {_on_off(mms_over_wifi)}."
        return msg

    def break_vpn(self) -> str:
        """τ² connects with its class-wide default details and degrades that object: every later connection in
        the process is slow too. Here the episode remembers it (`quirks`)."""
        self.connect_vpn()
        self.state.quirks["vpn_performance"] = PerformanceLevel.POOR.value
        if self.device.vpn_details is not None:
            self.device.vpn_details.server_performance = PerformanceLevel.POOR
        return "VPN connection broken."

    def remove_app_permission(self, app_name: Any, permission: Any) -> tuple[bool, str]:
        app = self.device.app_statuses.get(app_name)
        permission = permission.lower()
        if not app:
            return False, f"App '{app_name}' not found. Cannot remove permission."
        if not hasattr(app.permissions, permission):
            return False, f"Permission '{permission}' not tracked for app '{app_name}'."
        setattr(app.permissions, permission, False)
        return True, f"Permission '{permission}' removed from app '{app_name}'."

    # -- status and network --

    def check_status_bar(self):  # noqa: ANN201 (τ²'s signature)
        return self._bar()

    def _check_status_bar(self) -> str:
        d = self.device
        shown = []
        if d.airplane_mode:
            shown.append("✈️ Airplane Mode")
        else:
            shown.append(SIGNAL_BARS.get(d.network_signal_strength, "📵 No Signal"))
            if d.network_technology_connected != NetworkTechnology.NONE:
                shown.append(d.network_technology_connected.value)
            if d.data_enabled and d.network_technology_connected != NetworkTechnology.NONE:
                shown.append("📱 Data Enabled")
                if d.data_saver_mode:
                    shown.append("🔽 Data Saver")
            else:
                shown.append("📵 Data Disabled")
        if d.wifi_enabled and d.wifi_connected:
            shown.append(f"📡 Connected to {d.wifi_ssid}" if d.wifi_ssid else "📡 Enabled")
        if d.vpn_connected:
            shown.append("🔒 VPN Connected")
        shown.append(f"🔋 {d.battery_level}%")
        return " | ".join(shown)

    def check_network_status(self):  # noqa: ANN201
        d = self.device
        lines = [f"Airplane Mode: {_on_off(d.airplane_mode)}",
                 f"SIM Card Status: {self._check_sim_status().value}",
                 f"Cellular Connection: {d.network_connection_status.value}",
                 f"Cellular Signal: {d.network_signal_strength.value}",
                 f"Cellular Network Type: {d.network_technology_connected.value}",
                 f"Mobile Data Enabled: {'Yes' if d.data_enabled else 'No'}",
                 f"Data Roaming Enabled: {'Yes' if d.roaming_enabled else 'No'}",
                 f"Wi-Fi Radio: {_on_off(d.wifi_enabled)}",
                 f"Wi-Fi Connected: {'Yes' if d.wifi_connected else 'No'}"]
        if d.wifi_connected:
            lines.append(f"Connected Wi-Fi Network: {d.wifi_ssid}")
        return "\n".join(lines)

    def check_network_mode_preference(self):  # noqa: ANN201
        return f"Network Mode Preference: {self.device.network_mode_preference.value}"

    def set_network_mode_preference(self, mode):  # noqa: ANN001, ANN201
        try:
            valid = NetworkModePreference(mode) if isinstance(mode, str) else mode
            self.device.network_mode_preference = valid
            self.simulate_network_search()
        except ValueError:
            valid = None
        if valid is None:
            options = ", ".join(m.value for m in NetworkModePreference)
            return f"Failed to set network mode: '{mode}' is not a valid option. Please use one of: {options}\n" \
                   f"{self._bar()}"
        return self._with_bar(f"Preferred Network Mode set to: {valid.value}")

    def _get_mobile_data_working(self) -> bool:
        d, s = self.device, self.surroundings
        if d.airplane_mode or d.network_signal_strength == SignalStrength.NONE:
            return False
        if d.network_connection_status == NetworkStatus.NO_SERVICE:
            return False
        if s.is_abroad and (not d.roaming_enabled or not s.roaming_allowed):
            return False
        return bool(d.data_enabled) and not s.mobile_data_usage_exceeded

    def run_speed_test(self):  # noqa: ANN201
        speed, description = self._run_speed_test()
        if speed is None:
            return f"Speed test failed: {description or 'Could not determine speed'}."
        return f"Speed Test Result: {speed:.2f} Mbps ({description}). {SPEED_ADVICE.get(description or '', '')}"

    def _run_speed_test(self) -> tuple[float | None, str | None]:
        d = self.device
        if not self._get_mobile_data_working():
            return None, "No Connection"
        slow_vpn = d.vpn_connected and d.vpn_details and d.vpn_details.server_performance == PerformanceLevel.POOR
        factor = 0.1 if slow_vpn else 1.0
        if d.data_saver_mode:
            factor *= 0.2
        low, high = SPEEDS.get(d.network_technology_connected, (0.0, 0.0))
        speed = round((low + high) / 2.0 * SIGNAL_FACTORS.get(d.network_signal_strength, 0.0) * factor, 2)
        for limit, label in ((1, "Very Poor"), (5, "Poor"), (25, "Fair"), (100, "Good")):
            if speed < limit:
                return speed, label
        return speed, "Excellent"

    def toggle_airplane_mode(self):  # noqa: ANN201
        return self._with_bar(f"Airplane Mode is now {_on_off(self._toggle_airplane_mode())}.")

    def _drop_wifi(self) -> None:
        self.device.wifi_connected = False
        self.device.wifi_ssid = None
        self.device.wifi_signal_strength = SignalStrength.NONE

    def _toggle_airplane_mode(self) -> bool:
        d = self.device
        was_on = d.airplane_mode
        d.airplane_mode = not was_on
        if was_on:
            d.network_connection_status = NetworkStatus.SEARCHING
            if d.wifi_enabled:
                self._drop_wifi()
        else:
            self._drop_wifi()
            if d.vpn_connected:
                self._disconnect_vpn()
        self.simulate_network_search()
        return d.airplane_mode

    def check_sim_status(self):  # noqa: ANN201
        status = self._check_sim_status()
        return SIM_TEXTS.get(status, f"Unknown SIM status: {status.value}")

    def _check_sim_status(self) -> SimStatus:
        return SimStatus.MISSING if self.device.sim_card_missing else self.device.sim_card_status

    def reseat_sim_card(self):  # noqa: ANN201
        self.device.sim_card_missing = False
        self.simulate_network_search()
        return self._with_bar("SIM card re-seated successfully.")

    # -- data, roaming, saver --

    def toggle_data(self):  # noqa: ANN201
        return self._with_bar(f"Mobile Data is now {_on_off(self._toggle_data())}.")

    def _toggle_data(self) -> bool:
        self.device.data_enabled = not self.device.data_enabled
        self.simulate_network_search()
        return self.device.data_enabled

    def toggle_roaming(self):  # noqa: ANN201
        return self._with_bar(f"Data Roaming is now {_on_off(self._toggle_roaming())}.")

    def _toggle_roaming(self) -> bool:
        self.device.roaming_enabled = not self.device.roaming_enabled
        self.simulate_network_search()
        return self.device.roaming_enabled

    def check_data_restriction_status(self):  # noqa: ANN201
        return "Data Saver mode is ON (limits data usage)." if self.device.data_saver_mode else \
            "Data Saver mode is OFF."

    def toggle_data_saver_mode(self):  # noqa: ANN201
        return self._with_bar(f"Data Saver Mode is now {_on_off(self._toggle_data_saver_mode())}.")

    def _toggle_data_saver_mode(self) -> bool:
        self.device.data_saver_mode = not self.device.data_saver_mode
        return self.device.data_saver_mode

    # -- APN --

    def check_apn_settings(self):  # noqa: ANN201
        settings = self.device.active_apn_settings.model_copy(deep=True)
        return (f"Current APN Name: {settings.apn_name.value or 'Not Set'}\nMMSC URL (for picture messages): "
                f"{settings.mmsc_url or 'Not Set'}\n(These are technical settings, usually best left unchanged.)")

    def set_apn_settings(self, apn_settings):  # noqa: ANN001, ANN201
        if isinstance(apn_settings, dict):
            apn_settings = APNSettings(**apn_settings)
        self.device.active_apn_settings = apn_settings
        said = f"APN settings set to: {apn_settings.apn_name.value}"
        self.simulate_network_search()
        return self._with_bar(said)

    def reset_apn_settings(self):  # noqa: ANN201
        self.device.active_apn_settings.reset_at_reboot = True
        self.simulate_network_search()
        return self._with_bar("APN settings will reset at reboot.")

    # -- Wi-Fi, calling, VPN --

    def check_wifi_status(self):  # noqa: ANN201
        d = self.device
        if not d.wifi_enabled:
            return "Wi-Fi is turned OFF."
        if d.wifi_connected:
            return f"Wi-Fi is ON and connected to '{d.wifi_ssid}'. Signal strength: {d.wifi_signal_strength.value}."
        return "Wi-Fi is ON but not connected to any network."

    def toggle_wifi(self):  # noqa: ANN201
        if self.device.airplane_mode:
            return self._with_bar("Cannot change Wi-Fi settings while Airplane Mode is ON.")
        self.device.wifi_enabled = not self.device.wifi_enabled
        if not self.device.wifi_enabled:
            self._drop_wifi()
        return self._with_bar(f"Wi-Fi is now {_on_off(self.device.wifi_enabled)}.")

    def check_wifi_calling_status(self):  # noqa: ANN201
        return f"Wi-Fi Calling is currently turned {_on_off(self.device.wifi_calling_enabled)}."

    def toggle_wifi_calling(self):  # noqa: ANN201
        return self._with_bar(f"Wi-Fi Calling is now {_on_off(self._toggle_wifi_calling())}.")

    def _toggle_wifi_calling(self) -> bool:
        self.device.wifi_calling_enabled = not self.device.wifi_calling_enabled
        return self.device.wifi_calling_enabled

    def check_vpn_status(self):  # noqa: ANN201
        d = self.device
        if d.vpn_connected:
            details = d.vpn_details.model_dump() if d.vpn_details else None
            if details:
                return f"VPN is ON and connected. Details: {details}"
            return "VPN is ON and connected (no specific details available)."
        if d.vpn_enabled_setting:
            return "VPN is turned ON in settings, but currently not connected."
        return "VPN is turned OFF."

    def connect_vpn(self):  # noqa: ANN201
        if self.device.vpn_connected:
            return "VPN already connected."
        self.device.vpn_connected = True
        self.device.vpn_details = self.state.vpn_default
        return self._with_bar("VPN connected successfully.")

    def disconnect_vpn(self):  # noqa: ANN201
        done = self._disconnect_vpn()
        return self._with_bar("VPN disconnected successfully." if done else "No active VPN connection to disconnect.")

    def _disconnect_vpn(self) -> bool:
        if not self.device.vpn_connected:
            return False
        self.device.vpn_connected = False
        self.device.vpn_details = None
        return True

    # -- apps and MMS --

    def check_installed_apps(self):  # noqa: ANN201
        return f"The following apps are installed on the phone: {', '.join(self.device.app_statuses.keys())}"

    @staticmethod
    def _granted(permissions: BaseModel) -> list[str]:
        return [name.replace("_", " ").lower() for name, allowed in permissions.model_dump().items() if allowed]

    def check_app_status(self, app_name):  # noqa: ANN001, ANN201
        app = self.device.app_statuses.get(app_name)
        if app is None:
            return f"App '{app_name}' not found on this phone."
        granted = self._granted(app.permissions)
        lines = [f"Status for App: {app_name}"]
        if not granted:
            lines.append(" - Permissions: None granted.")
        else:
            lines.append(" - Permissions Granted:")
            lines.extend(f"   - {p}" for p in granted)
        return "\n".join(lines)

    def check_app_permissions(self, app_name):  # noqa: ANN001, ANN201
        app = self.device.app_statuses.get(app_name)
        if app is None:
            return f"App '{app_name}' not found on this phone."
        granted = self._granted(app.permissions)
        if not granted:
            return f"App '{app_name}' currently has no permissions granted."
        return f"App '{app_name}' has permission for: {', '.join(granted)}."

    def grant_app_permission(self, app_name, permission):  # noqa: ANN001, ANN201
        app = self.device.app_statuses.get(app_name)
        permission = permission.lower()
        if not app:
            ok, message = False, f"App '{app_name}' not found. Cannot grant permission."
        elif permission not in (tracked := list(app.permissions.model_dump().keys())):
            ok, message = False, f"Permission '{permission}' not tracked for app '{app_name}', available " \
                                 f"permissions: {tracked}"
        else:
            setattr(app.permissions, permission, True)
            ok, message = True, f"Permission '{permission}' granted to app '{app_name}'."
        return f"{'Success. ' if ok else 'Error. '}{message}\n{self._bar()}"

    def can_send_mms(self):  # noqa: ANN201
        return "Your messaging app can send MMS messages." if self._can_send_mms() else \
            "Your messaging app cannot send MMS messages."

    def _can_send_mms(self) -> bool:
        d = self.device
        if not self._get_mobile_data_working() or d.network_technology_connected == NetworkTechnology.TWO_G:
            return False
        if d.wifi_calling_enabled and d.wifi_calling_mms_over_wifi:
            return False
        if d.active_apn_settings.mmsc_url is None:
            return False
        app = d.app_statuses.get("messaging")
        return app is not None and bool(app.permissions.storage and app.permissions.sms)

    def reboot_device(self):  # noqa: ANN201
        lines = []
        if self.device.active_apn_settings.reset_at_reboot:
            lines.append("Resetting APN settings...")
            self.device.active_apn_settings = APNSettings()
        lines.append("Restarting network services...")
        self.device.network_connection_status = NetworkStatus.SEARCHING
        self.simulate_network_search()
        return self._with_bar("\n".join(lines))

    def simulate_network_search(self) -> None:
        """Where the phone connects, from its SIM, mode preference and surroundings (τ²'s search)."""
        d, signals = self.device, self.surroundings.signal_strength
        if self._check_sim_status() == SimStatus.ACTIVE:
            d.network_connection_status = NetworkStatus.CONNECTED
            pref = d.network_mode_preference
            if pref == NetworkModePreference.FOUR_G_5G_PREFERRED:
                five = signals.get(NetworkTechnology.FIVE_G, SignalStrength.NONE)
                tech = NetworkTechnology.FOUR_G if five == SignalStrength.NONE else NetworkTechnology.FIVE_G
            else:
                tech = PREFERRED_TECH.get(pref, NetworkTechnology.FOUR_G)
            d.network_technology_connected = tech
            d.network_signal_strength = signals.get(tech, SignalStrength.NONE)
        else:
            self._no_service()
        if d.airplane_mode:  # one at a time, as τ² checks them: a broken record fails after what came before
            self._no_service()
        if d.active_apn_settings.apn_name == APNNames.BROKEN:
            self._no_service()
        if not self.surroundings.line_active:
            self._no_service()

    def _no_service(self) -> None:
        self.device.network_connection_status = NetworkStatus.NO_SERVICE
        self.device.network_technology_connected = NetworkTechnology.NONE
        self.device.network_signal_strength = SignalStrength.NONE

    # -- payments --

    def check_payment_request(self):  # noqa: ANN201
        request = self.surroundings.payment_request
        if request is None:
            return "No payment request has been made."
        return f"You have a payment request for bill {request.bill_id} of {request.amount_due} USD."

    def make_payment(self):  # noqa: ANN201
        request = self.surroundings.payment_request
        if request is None:
            return "You do not have a payment request."
        request.paid = True
        return f"Payment of {request.amount_due} USD has been made for bill {request.bill_id}."

    # -- assertions (τ²'s task functions) --

    def assert_airplane_mode_status(self, expected_status: Any) -> bool:
        return self.device.airplane_mode == expected_status

    def assert_service_status(self, expected_status: Any) -> bool:
        return self.device.network_connection_status == NetworkStatus(expected_status)

    def assert_mobile_data_status(self, expected_status: Any) -> bool:
        return self._get_mobile_data_working() == expected_status

    def assert_mobile_roaming_status(self, expected_status: Any) -> bool:
        return self.device.roaming_enabled == expected_status

    def assert_mobile_data_saver_mode_status(self, expected_status: Any) -> bool:
        return self.device.data_saver_mode == expected_status

    def assert_internet_speed(self, expected_speed: Any, expected_desc: Any = None) -> bool:
        speed, desc = self._run_speed_test()
        speed = speed or 0.0
        if expected_desc is None:
            return speed >= expected_speed
        return speed >= expected_speed and (desc or "").lower() == expected_desc.lower()

    def assert_internet_not_excellent(self) -> bool:
        return (self._run_speed_test()[1] or "").lower() != "excellent"

    def assert_can_send_mms(self, expected_status: Any) -> bool:
        return self._can_send_mms() == expected_status

    def assert_mobile_data_usage_exceeded(self, expected_status: Any) -> bool:
        return self.surroundings.mobile_data_usage_exceeded == expected_status


# -- the two sides together ----------------------------------------------------------------------------------


def sync(state: State) -> None:
    """τ²'s `sync_tools`, after every successful call: the phone learns its line's state; a paid request marks its
    bill paid; a bill awaiting payment becomes the phone's payment request."""
    surroundings = state.user.surroundings
    if surroundings.phone_number is None:
        return
    agent = TelecomTools(state)
    phone_number = surroundings.phone_number
    line = agent._get_line_by_phone(phone_number)
    if line is None:
        raise ValueError(f"Wrong scenario, line not found for phone number: {phone_number}")
    surroundings.line_active = line.status == LineStatus.ACTIVE
    surroundings.roaming_allowed = bool(line.roaming_enabled)
    plan = agent._get_plan_by_id(line.plan_id)
    surroundings.mobile_data_usage_exceeded = line.data_used_gb >= plan.data_limit_gb + line.data_refueling_gb
    request = surroundings.payment_request
    if request is not None and request.paid:
        agent._set_bill_to_paid(request.bill_id)
        surroundings.payment_request = None
    if surroundings.payment_request is None:
        bills = agent._get_bills_awaiting_payment(agent.get_customer_by_phone(phone_number))
        if bills:
            surroundings.payment_request = PaymentRequest(bill_id=bills[0].bill_id, amount_due=bills[0].total_due)


def toolkit(state: State, side: str) -> Any:
    return TelecomUserTools(state) if side == "user" else TelecomTools(state)


def run_tool(side: str, name: str, db: Any, arguments: dict[str, Any]) -> str:
    """One τ² call by `side` ("assistant" or "user"): its result text, synced; or `KeptError("Error: ...")`
    after its writes (τ² neither syncs nor rolls back a call that raised)."""
    state = State(db.connection())
    try:
        value = getattr(toolkit(state, side), name)(**arguments)
        sync(state)
    except Exception as exc:
        state.flush()
        raise KeptError(f"Error: {exc}") from None
    state.flush()
    return render(value)


def run_function(state: State, env_type: str, func_name: str, arguments: dict[str, Any]) -> Any:
    """A task's setup or assertion function on one side, then τ²'s sync (`run_env_function_call`)."""
    result = getattr(toolkit(state, env_type), func_name)(**arguments)
    sync(state)
    return result


def setup(actions: list[dict[str, Any]]) -> Callable[[Any], None]:
    """A task's `initialization_actions` as its setup: run in order on the task's starting state."""
    def run(db: Any) -> None:
        state = State(db.connection())
        for action in actions:
            run_function(state, action["env_type"], action["func_name"], action.get("arguments") or {})
        state.flush()
    return run


def assertions_met(conn: Any, assertions: list[dict[str, Any]]) -> bool:
    """τ²'s ENV_ASSERTION on an episode's end state (`conn`: SQLAlchemy's, or `raw(sqlite3 connection)`): each
    assertion (then a sync) in order, on models read from it: the episode is never changed. τ² requires each to
    return a bool."""
    state = State(conn)
    met = True
    for a in assertions:
        result = run_function(state, a["env_type"], a["func_name"], a.get("arguments") or {})
        if not isinstance(result, bool):
            raise ValueError(f"Function {a['func_name']} returned {type(result)} instead of bool")
        met = met and result == a.get("assert_value", True)
    return met


class raw:  # noqa: N801 (reads as a function: `State(raw(conn))`)
    """A sqlite3 connection in the shape `State` reads (SQLAlchemy's `exec_driver_sql`)."""

    def __init__(self, conn: Any):
        self.conn = conn

    def exec_driver_sql(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        return self.conn.execute(sql, params)


def schemas() -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The agent's and the user's argument schemas (our own, from τ²'s signatures; τ² does not validate them)."""
    def obj(**props: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": props, "required": list(props)}

    text, number = {"type": "string"}, {"type": "number"}
    line = {"customer_id": text, "line_id": text}
    agent = {
        "get_customer_by_phone": obj(phone_number=text), "get_customer_by_id": obj(customer_id=text),
        "get_customer_by_name": obj(full_name=text, dob=text), "get_details_by_id": obj(id=text),
        "suspend_line": obj(**line, reason=text), "resume_line": obj(**line),
        "get_bills_for_customer": {"type": "object", "properties": {"customer_id": text, "limit": {
            "type": "integer", "default": 12}}, "required": ["customer_id"]},
        "send_payment_request": obj(customer_id=text, bill_id=text), "get_data_usage": obj(**line),
        "enable_roaming": obj(**line), "disable_roaming": obj(**line), "transfer_to_human_agents": obj(summary=text),
        "refuel_data": obj(**line, gb_amount=number),
    }
    modes = {"type": "string", "enum": [m.value for m in NetworkModePreference]}
    apn = {"type": "object", "properties": {"apn_name": {"type": "string", "enum": [n.value for n in APNNames]},
                                            "mms_apn": text, "mmsc_url": text, "mms_proxy": text,
                                            "mms_port": {"type": "integer"}}}
    special = {"set_network_mode_preference": obj(mode=modes), "set_apn_settings": obj(apn_settings=apn),
               "check_app_status": obj(app_name=text), "check_app_permissions": obj(app_name=text),
               "grant_app_permission": obj(app_name=text, permission=text)}
    user = {name: special.get(name, obj()) for name in USER_KINDS}
    return agent, user
