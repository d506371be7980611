"""The retail domain's record shapes, as τ²-bench validates and prints them (our own restatement; see
`airline_models.py` for why the class names and field order are τ²'s)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class Variant(BaseModel):
    item_id: str
    options: dict[str, str]
    available: bool
    price: float


class Product(BaseModel):
    name: str
    product_id: str
    variants: dict[str, Variant]


class UserName(BaseModel):
    first_name: str
    last_name: str


class UserAddress(BaseModel):
    address1: str
    address2: str
    city: str
    country: str
    state: str
    zip: str


class PaymentMethodBase(BaseModel):
    source: str
    id: str


class CreditCard(PaymentMethodBase):
    source: Literal["credit_card"]
    brand: str
    last_four: str


class Paypal(PaymentMethodBase):
    source: Literal["paypal"]


class GiftCard(PaymentMethodBase):
    source: Literal["gift_card"]
    balance: float
    id: str


class User(BaseModel):
    user_id: str
    name: UserName
    address: UserAddress
    email: str
    payment_methods: dict[str, CreditCard | GiftCard | Paypal]
    orders: list[str]


class OrderFullfilment(BaseModel):
    tracking_id: list[str]
    item_ids: list[str]


class OrderItem(BaseModel):
    name: str
    product_id: str
    item_id: str
    price: float
    options: dict[str, str]


class OrderPayment(BaseModel):
    transaction_type: Literal["payment", "refund"]
    amount: float
    payment_method_id: str


class Order(BaseModel):
    order_id: str
    user_id: str
    address: UserAddress
    items: list[OrderItem]
    status: Literal["processed", "pending", "pending (item modified)", "delivered", "cancelled",
                    "exchange requested", "return requested"]
    fulfillments: list[OrderFullfilment]
    payment_history: list[OrderPayment]
    cancel_reason: Literal["no longer needed", "ordered by mistake"] | None = None
    exchange_items: list[str] | None = None
    exchange_new_items: list[str] | None = None
    exchange_payment_method_id: str | None = None
    exchange_price_difference: float | None = None
    return_items: list[str] | None = None
    return_payment_method_id: str | None = None


class RetailDB(BaseModel):
    model_config = ConfigDict(extra="forbid")
    products: dict[str, Product]
    users: dict[str, User]
    orders: dict[str, Order]
