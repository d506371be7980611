"""The retail domain's 16 tools, behaving as τ²-bench's do (our own implementation; the rules of `airline.py`:
τ²'s class name `RetailTools` and parameter order, records as dicts mutated in place, mirror models where τ²
validates, raw arguments where τ² uses them raw).

Kept quirks: `modify_pending_order_items` gives every modified item the price and options of the *last* new
variant; it records `abs(diff)` unrounded while gift-card balances are rounded; exchanges round the difference,
returns and exchanges store `sorted(item_ids)`; a cancellation refunds gift cards rounded, and a refund that
fails half-way keeps the balances it already changed.
"""

from __future__ import annotations

import json
from typing import Any

from mcpworld.synth.importers.tau2.docs import Docs, Record
from mcpworld.synth.importers.tau2.retail_models import OrderPayment, UserAddress

TABLES = ("products", "users", "orders")
KINDS = {
    "calculate": "generic", "cancel_pending_order": "write", "exchange_delivered_order_items": "write",
    "find_user_id_by_name_zip": "read", "find_user_id_by_email": "read", "get_order_details": "read",
    "get_product_details": "read", "get_item_details": "read", "get_user_details": "read",
    "list_all_product_types": "read", "modify_pending_order_address": "write", "modify_pending_order_items": "write",
    "modify_pending_order_payment": "write", "modify_user_address": "write", "return_delivered_order_items": "write",
    "transfer_to_human_agents": "generic",
}


def _gift(method: dict[str, Any]) -> bool:
    return method.get("source") == "gift_card"


class RetailTools:
    """One call's view of a retail episode (τ²'s class name: it shows in argument errors)."""

    def __init__(self, docs: Docs):
        self.docs = docs

    def _order(self, order_id: Any) -> dict[str, Any]:
        order = self.docs.get("orders", order_id)
        if order is None:
            raise ValueError("Order not found")
        return order

    def _user(self, user_id: Any) -> dict[str, Any]:
        user = self.docs.get("users", user_id)
        if user is None:
            raise ValueError("User not found")
        return user

    def _product(self, product_id: Any) -> dict[str, Any]:
        product = self.docs.get("products", product_id)
        if product is None:
            raise ValueError("Product not found")
        return product

    def _item(self, item_id: Any) -> dict[str, Any]:
        for product in self.docs.values("products"):
            if item_id in product["variants"]:
                return product["variants"][item_id]
        raise ValueError("Item not found")

    def _variant(self, product_id: Any, variant_id: Any) -> dict[str, Any]:
        product = self._product(product_id)
        if variant_id not in product["variants"]:
            raise ValueError("Variant not found")
        return product["variants"][variant_id]

    def _method(self, user_id: Any, payment_method_id: Any) -> dict[str, Any]:
        user = self._user(user_id)
        if payment_method_id not in user["payment_methods"]:
            raise ValueError("Payment method not found")
        return user["payment_methods"][payment_method_id]

    def calculate(self, expression) -> Any:  # noqa: ANN001
        if not all(char in "0123456789+-*/(). " for char in expression):
            raise ValueError("Invalid characters in expression")
        return str(round(float(eval(expression, {"__builtins__": None}, {})), 2))  # noqa: S307 (digits and operators only)

    def cancel_pending_order(self, order_id, reason) -> Any:  # noqa: ANN001
        order = self._order(order_id)
        if order["status"] != "pending":
            raise ValueError("Non-pending order cannot be cancelled")
        if reason not in {"no longer needed", "ordered by mistake"}:
            raise ValueError("Invalid reason")
        refunds = []
        for payment in order["payment_history"]:
            method_id = payment["payment_method_id"]
            refunds.append(OrderPayment(transaction_type="refund", amount=payment["amount"],
                                        payment_method_id=method_id).model_dump())
            user = self._user(order["user_id"])
            method = self._method(user["user_id"], method_id)
            if _gift(method):
                method["balance"] += payment["amount"]
                method["balance"] = round(method["balance"], 2)
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        order["payment_history"].extend(refunds)
        return Record(order)

    def exchange_delivered_order_items(self, order_id, item_ids, new_item_ids, payment_method_id) -> Any:  # noqa: ANN001
        order = self._order(order_id)
        if order["status"] != "delivered":
            raise ValueError("Non-delivered order cannot be exchanged")
        all_ids = [item["item_id"] for item in order["items"]]
        for item_id in item_ids:
            if item_ids.count(item_id) > all_ids.count(item_id):
                raise ValueError(f"Number of {item_id} not found.")
        if len(item_ids) != len(new_item_ids):
            raise ValueError("The number of items to be exchanged should match.")
        diff = 0
        for item_id, new_item_id in zip(item_ids, new_item_ids):  # noqa: B905 (τ² zips without strict)
            item = next((i for i in order["items"] if i["item_id"] == item_id), None)
            if item is None:
                raise ValueError(f"Item {item_id} not found")
            variant = self._variant(item["product_id"], new_item_id)
            if not variant["available"]:
                raise ValueError(f"New item {new_item_id} not found or available")
            diff += variant["price"] - item["price"]
        diff = round(diff, 2)
        method = self._method(order["user_id"], payment_method_id)
        if _gift(method) and method["balance"] < diff:
            raise ValueError("Insufficient gift card balance to pay for the price difference")
        order["status"] = "exchange requested"
        order["exchange_items"] = sorted(item_ids)
        order["exchange_new_items"] = sorted(new_item_ids)
        order["exchange_payment_method_id"] = payment_method_id
        order["exchange_price_difference"] = diff
        return Record(order)

    def find_user_id_by_name_zip(self, first_name, last_name, zip) -> Any:  # noqa: ANN001, A002
        for user in self.docs.values("users"):
            if (user["name"]["first_name"].lower() == first_name.lower()
                    and user["name"]["last_name"].lower() == last_name.lower() and user["address"]["zip"] == zip):
                return user["user_id"]
        raise ValueError("User not found")

    def find_user_id_by_email(self, email) -> Any:  # noqa: ANN001
        for user in self.docs.values("users"):
            if user["email"].lower() == email.lower():
                return user["user_id"]
        raise ValueError("User not found")

    def get_order_details(self, order_id) -> Any:  # noqa: ANN001
        return Record(self._order(order_id))

    def get_product_details(self, product_id) -> Any:  # noqa: ANN001
        return Record(self._product(product_id))

    def get_item_details(self, item_id) -> Any:  # noqa: ANN001
        return Record(self._item(item_id))

    def get_user_details(self, user_id) -> Any:  # noqa: ANN001
        return Record(self._user(user_id))

    def list_all_product_types(self) -> Any:
        return json.dumps({p["name"]: p["product_id"] for p in self.docs.values("products")}, sort_keys=True)

    def modify_pending_order_address(self, order_id, address1, address2, city, state, country, zip) -> Any:  # noqa: ANN001, A002
        order = self._order(order_id)
        if "pending" not in order["status"]:
            raise ValueError("Non-pending order cannot be modified")
        order["address"] = UserAddress(address1=address1, address2=address2, city=city, state=state,
                                       country=country, zip=zip).model_dump()
        return Record(order)

    def modify_pending_order_items(self, order_id, item_ids, new_item_ids, payment_method_id) -> Any:  # noqa: ANN001
        order = self._order(order_id)
        if order["status"] != "pending":
            raise ValueError("Non-pending order cannot be modified")
        all_ids = [item["item_id"] for item in order["items"]]
        for item_id in item_ids:
            if item_ids.count(item_id) > all_ids.count(item_id):
                raise ValueError(f"{item_id} not found")
        if len(item_ids) != len(new_item_ids):
            raise ValueError("The number of items to be exchanged should match")
        diff = 0
        variant: Any = None
        for item_id, new_item_id in zip(item_ids, new_item_ids):  # noqa: B905
            if item_id == new_item_id:
                raise ValueError("The new item id should be different from the old item id")
            item = next((i for i in order["items"] if i["item_id"] == item_id), None)
            if item is None:
                raise ValueError(f"Item {item_id} not found")
            variant = self._variant(item["product_id"], new_item_id)
            if not variant["available"]:
                raise ValueError(f"New item {new_item_id} not found or available")
            diff += variant["price"] - item["price"]
        method = self._method(order["user_id"], payment_method_id)
        if _gift(method) and method["balance"] < diff:
            raise ValueError("Insufficient gift card balance to pay for the new item")
        order["payment_history"].append(OrderPayment(
            transaction_type="payment" if diff > 0 else "refund", amount=abs(diff),
            payment_method_id=payment_method_id).model_dump())
        if _gift(method):
            method["balance"] -= diff
            method["balance"] = round(method["balance"], 2)
        for item_id, new_item_id in zip(item_ids, new_item_ids):  # noqa: B905
            item = next((i for i in order["items"] if i["item_id"] == item_id), None)
            if item is None:
                raise ValueError(f"Item {item_id} not found")
            item["item_id"] = new_item_id
            item["price"] = variant["price"]  # the last variant's, for every item (as τ²)
            item["options"] = variant["options"]
        order["status"] = "pending (item modified)"
        return Record(order)

    def modify_pending_order_payment(self, order_id, payment_method_id) -> Any:  # noqa: ANN001
        order = self._order(order_id)
        if "pending" not in order["status"]:
            raise ValueError("Non-pending order cannot be modified")
        method = self._method(order["user_id"], payment_method_id)
        history = order["payment_history"]
        if len(history) != 1 or history[0]["transaction_type"] != "payment":
            raise ValueError("There should be exactly one payment for a pending order")
        if history[0]["payment_method_id"] == payment_method_id:
            raise ValueError("The new payment method should be different from the current one")
        amount = history[0]["amount"]
        if _gift(method) and method["balance"] < amount:
            raise ValueError("Insufficient gift card balance to pay for the order")
        history.extend([
            OrderPayment(transaction_type="payment", amount=amount, payment_method_id=payment_method_id).model_dump(),
            OrderPayment(transaction_type="refund", amount=amount,
                         payment_method_id=history[0]["payment_method_id"]).model_dump()])
        if _gift(method):
            method["balance"] -= amount
            method["balance"] = round(method["balance"], 2)
        old = self._method(order["user_id"], history[0]["payment_method_id"])
        if _gift(old):
            old["balance"] += amount
            old["balance"] = round(old["balance"], 2)
        return Record(order)

    def modify_user_address(self, user_id, address1, address2, city, state, country, zip) -> Any:  # noqa: ANN001, A002
        user = self._user(user_id)
        user["address"] = UserAddress(address1=address1, address2=address2, city=city, state=state, country=country,
                                      zip=zip).model_dump()
        return Record(user)

    def return_delivered_order_items(self, order_id, item_ids, payment_method_id) -> Any:  # noqa: ANN001
        order = self._order(order_id)
        if order["status"] != "delivered":
            raise ValueError("Non-delivered order cannot be returned")
        user = self._user(order["user_id"])
        method = self._method(user["user_id"], payment_method_id)
        if not _gift(method) and payment_method_id != order["payment_history"][0]["payment_method_id"]:
            raise ValueError("Payment method should be the original payment method")
        all_ids = [item["item_id"] for item in order["items"]]
        for item_id in item_ids:
            if item_ids.count(item_id) > all_ids.count(item_id):
                raise ValueError("Some item not found")
        order["status"] = "return requested"
        order["return_items"] = sorted(item_ids)
        order["return_payment_method_id"] = payment_method_id
        return Record(order)

    def transfer_to_human_agents(self, summary) -> Any:  # noqa: ANN001
        return "Transfer successful"
