"""The telecom domain's record shapes, as τ²-bench validates and prints them (our own restatement).

Both sides of telecom's dual control are pydantic models in τ²: the agent's database (plans, customers, lines,
bills, devices) and the user's phone and surroundings. Their class names, field order, types and defaults show
through in what the tools print (a line's dump, an enum's `repr` inside a VPN status text) and in validation
errors (`1 validation error for APNSettings`), so they are restated here with τ²'s names. Every model forbids
extra fields, as τ²'s `BaseModelNoExtra` does. Calls work on these models (`telecom.py` loads them per call and
writes back what changed); assignments are not validated, as in τ².
"""

from __future__ import annotations

import datetime
import json
import warnings
from enum import Enum
from typing import Any, Dict, List, Optional, TypeVar  # noqa: UP035 (pydantic's errors name annotations as written)

from pydantic import BaseModel, ConfigDict, Field, ValidationError

M = TypeVar("M", bound=BaseModel)


class NoExtra(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- the agent's database --------------------------------------------------------------------------------


class Address(NoExtra):
    street: str
    city: str
    state: str
    zip_code: str


class Plan(NoExtra):
    plan_id: str
    name: str
    data_limit_gb: float
    price_per_month: float
    data_refueling_price_per_gb: float


class DeviceType(str, Enum):
    PHONE = "phone"
    ROUTER = "router"
    TABLET = "tablet"
    WATCH = "watch"
    OTHER = "other"


class Device(NoExtra):
    device_id: str
    device_type: DeviceType
    model: str
    imei: Optional[str] = None  # noqa: UP045
    is_esim_capable: bool
    activated: bool = False
    activation_date: Optional[datetime.datetime] = None  # noqa: UP045
    last_esim_transfer_date: Optional[datetime.datetime] = None  # noqa: UP045


class LineStatus(str, Enum):
    ACTIVE = "Active"
    SUSPENDED = "Suspended"
    PENDING_ACTIVATION = "Pending Activation"
    CLOSED = "Closed"


class Line(NoExtra):
    line_id: str
    phone_number: str
    status: LineStatus = LineStatus.PENDING_ACTIVATION
    plan_id: str
    device_id: Optional[str] = None  # noqa: UP045
    data_used_gb: float = 0.0
    data_refueling_gb: float = 0.0
    roaming_enabled: bool = False
    contract_end_date: Optional[datetime.date] = None  # noqa: UP045
    last_plan_change_date: Optional[datetime.date] = None  # noqa: UP045
    last_sim_replacement_date: Optional[datetime.date] = None  # noqa: UP045
    suspension_start_date: Optional[datetime.date] = None  # noqa: UP045


class LineItem(NoExtra):
    description: str
    amount: float
    date: datetime.date
    item_type: str


class BillStatus(str, Enum):
    DRAFT = "Draft"
    ISSUED = "Issued"
    AWAITING_PAYMENT = "Awaiting Payment"
    PAID = "Paid"
    OVERDUE = "Overdue"
    DISPUTED = "Disputed"


class Bill(NoExtra):
    bill_id: str
    customer_id: str
    period_start: datetime.date
    period_end: datetime.date
    issue_date: datetime.date
    total_due: float
    due_date: datetime.date
    line_items: List[LineItem] = Field(default_factory=list)  # noqa: UP006
    status: BillStatus = BillStatus.DRAFT


class AccountStatus(str, Enum):
    ACTIVE = "Active"
    SUSPENDED = "Suspended"
    PENDING_VERIFICATION = "Pending Verification"
    CLOSED = "Closed"


class PaymentMethodType(str, Enum):
    CREDIT_CARD = "Credit Card"
    DEBIT_CARD = "Debit Card"
    PAYPAL = "PayPal"


class PaymentMethod(NoExtra):
    method_type: PaymentMethodType
    account_number_last_4: str
    expiration_date: str


class Customer(NoExtra):
    customer_id: str
    full_name: str
    date_of_birth: str
    email: str
    phone_number: str
    address: Address
    account_status: AccountStatus = AccountStatus.PENDING_VERIFICATION
    payment_methods: List[PaymentMethod] = Field(default_factory=list)  # noqa: UP006
    line_ids: List[str] = Field(default_factory=list)  # noqa: UP006
    bill_ids: List[str] = Field(default_factory=list)  # noqa: UP006
    created_at: datetime.datetime = datetime.date(2025, 1, 1)  # type: ignore[assignment]  # τ²'s default, a date
    last_extension_date: Optional[datetime.date] = None  # noqa: UP045
    goodwill_credit_used_this_year: float = 0.0


class TelecomDB(NoExtra):
    plans: List[Plan] = Field(default_factory=list)  # noqa: UP006
    customers: List[Customer] = Field(default_factory=list)  # noqa: UP006
    lines: List[Line] = Field(default_factory=list)  # noqa: UP006
    bills: List[Bill] = Field(default_factory=list)  # noqa: UP006
    devices: List[Device] = Field(default_factory=list)  # noqa: UP006


# -- the user's phone and surroundings ---------------------------------------------------------------------


class SimStatus(str, Enum):
    ACTIVE = "active"
    MISSING = "missing"
    LOCKED_PIN = "locked_pin"
    LOCKED_PUK = "locked_puk"


class NetworkTechnology(str, Enum):
    NONE = "none"
    TWO_G = "2G"
    THREE_G = "3G"
    FOUR_G = "4G"
    FIVE_G = "5G"


class NetworkModePreference(str, Enum):
    FOUR_G_5G_PREFERRED = "4g_5g_preferred"
    FOUR_G_ONLY = "4g_only"
    THREE_G_ONLY = "3g_only"
    TWO_G_ONLY = "2g_only"


class SignalStrength(str, Enum):
    NONE = "none"
    POOR = "poor"
    FAIR = "fair"
    GOOD = "good"
    EXCELLENT = "excellent"


class PerformanceLevel(str, Enum):
    UNKNOWN = "unknown"
    POOR = "poor"
    FAIR = "fair"
    GOOD = "good"
    EXCELLENT = "excellent"


class NetworkStatus(str, Enum):
    CONNECTED = "connected"
    SEARCHING = "searching"
    NO_SERVICE = "no_service"
    EMERGENCY_ONLY = "emergency_only"


class APNNames(str, Enum):
    INTERNET = "internet"
    BROKEN = "broken"


class APNSettings(NoExtra):
    apn_name: APNNames = APNNames.INTERNET
    reset_at_reboot: bool = False
    mms_apn: Optional[str] = "mms"  # noqa: UP045
    mmsc_url: Optional[str] = "http://mms.carrier.com/mms/wapenc"  # noqa: UP045
    mms_proxy: Optional[str] = None  # noqa: UP045
    mms_port: Optional[int] = None  # noqa: UP045


class VpnDetails(NoExtra):
    server_address: Optional[str] = None  # noqa: UP045
    protocol: Optional[str] = None  # noqa: UP045
    server_performance: PerformanceLevel = Field(default=PerformanceLevel.UNKNOWN, validate_default=True)


class AppPermissions(NoExtra):
    sms: bool = False
    storage: bool = False
    phone: bool = False
    network: bool = False


class AppStatus(NoExtra):
    app_name: str
    permissions: AppPermissions = Field(default_factory=AppPermissions)


def _default_apps() -> dict[str, AppStatus]:
    return {"messaging": AppStatus(app_name="messaging", permissions=AppPermissions(sms=True, storage=True,
                                                                                     phone=True)),
            "browser": AppStatus(app_name="browser", permissions=AppPermissions(network=True, storage=True))}


class MockPhoneAttributes(NoExtra):
    sim_card_status: SimStatus = Field(default=SimStatus.ACTIVE, validate_default=True)
    sim_card_missing: bool = False
    airplane_mode: bool = False
    network_signal_strength: SignalStrength = Field(default=SignalStrength.GOOD, validate_default=True)
    network_technology_connected: NetworkTechnology = Field(default=NetworkTechnology.FIVE_G, validate_default=True)
    network_connection_status: NetworkStatus = Field(default=NetworkStatus.CONNECTED, validate_default=True)
    battery_level: int = 80
    data_enabled: bool = True
    roaming_enabled: bool = False
    network_mode_preference: NetworkModePreference = Field(default=NetworkModePreference.FOUR_G_5G_PREFERRED,
                                                           validate_default=True)
    active_apn_settings: APNSettings = Field(default_factory=APNSettings)
    wifi_enabled: bool = False
    wifi_connected: bool = False
    wifi_ssid: Optional[str] = None  # noqa: UP045
    wifi_signal_strength: SignalStrength = Field(default=SignalStrength.NONE, validate_default=True)
    wifi_calling_enabled: bool = False
    wifi_calling_mms_over_wifi: bool = False
    data_saver_mode: bool = False
    vpn_enabled_setting: bool = False
    vpn_connected: bool = False
    vpn_details: Optional[VpnDetails] = None  # noqa: UP045
    app_statuses: Dict[str, AppStatus] = Field(default_factory=_default_apps)  # noqa: UP006


class PaymentRequest(NoExtra):
    bill_id: str
    amount_due: float
    paid: bool = False


def _default_signal() -> dict[NetworkTechnology, SignalStrength]:
    return {NetworkTechnology.TWO_G: SignalStrength.POOR, NetworkTechnology.THREE_G: SignalStrength.FAIR,
            NetworkTechnology.FOUR_G: SignalStrength.GOOD, NetworkTechnology.FIVE_G: SignalStrength.EXCELLENT}


class UserSurroundings(NoExtra):
    name: Optional[str] = None  # noqa: UP045
    phone_number: Optional[str] = None  # noqa: UP045
    is_abroad: bool = False
    roaming_allowed: bool = False
    signal_strength: dict[NetworkTechnology, SignalStrength] = Field(default_factory=_default_signal)
    mobile_data_usage_exceeded: bool = False
    line_active: bool = True
    payment_request: Optional[PaymentRequest] = None  # noqa: UP045


class TelecomUserDB(NoExtra):
    device: MockPhoneAttributes = Field(default_factory=MockPhoneAttributes)
    surroundings: UserSurroundings = Field(default_factory=UserSurroundings)


def stored(model: BaseModel) -> str:
    """A model as stored: pydantic's compact JSON (its serializer is the fast path: a call loads and stores every
    record). What the agent reads is printed from the model again, τ²'s way (`docs.render`), so the stored form
    never shows. A raw value a call assigned (τ² does not validate assignments) is stored as it is."""
    return model.model_dump_json(warnings=False)


def plain(model: BaseModel) -> Any:
    """A model as τ² dumps it: dates and times as `str` prints them (its `json.dumps(default=str)`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return json.loads(json.dumps(model.model_dump(), default=str))


def load(model: type[M], text: str) -> M:
    """A stored record as its model (pydantic's JSON parser: the fast path), or `lenient` when a call stored a raw
    value in it."""
    try:
        return model.model_validate_json(text)
    except ValidationError:
        return lenient(model, json.loads(text))


def lenient(model: type[M], data: dict[str, Any]) -> M:
    """A stored record as its model again. A field holding a raw value a call assigned (a mode `5`) would fail
    validation: it is set back raw, as τ²'s model held it."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raw = {e["loc"][0] for e in exc.errors() if e["loc"] and e["loc"][0] in data}
        if not raw:
            raise
        made = model.model_validate({k: v for k, v in data.items() if k not in raw})
        for key in raw:
            setattr(made, key, data[key])
        return made
