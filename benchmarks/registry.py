"""Registry benchmark: list and search over 10,000 records through the REST API of a real server process."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime

import httpx
from sqlmodel import Session

from benchmarks.common import Row, p50, timed
from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http
from mcpworld.registry.records import local_record
from mcpworld.registry.store import RegistryStore, ServerRow


def fill(url: str, n: int) -> None:
    store = RegistryStore(url)
    now = datetime(2026, 1, 1)
    with Session(store.engine) as db:
        for i in range(n):
            doc = local_record(f"io.bench/server-{i:05d}", f"Benchmark server {i} for topic {i % 97}",
                               "world" if i % 2 else "external", url=f"http://127.0.0.1:9/{i}/mcp",
                               facts={"tags": [f"topic{i % 97}"]})
            db.add(ServerRow(name=doc["name"], version="1.0.0", doc=json.dumps(doc),
                             search_text=(doc["name"] + " " + doc["description"]).lower(), kind="world",
                             published_at=now, updated_at=now))
        db.commit()


def bench_registry(quick: bool, tmpdir: str) -> list[Row]:
    url = f"sqlite:///{tmpdir}/bench-registry.db"
    fill(url, 10_000)
    port = free_port()
    proc = subprocess.Popen(mcpworld_cmd("registry", "serve", "--port", str(port), "--db", url, "--token", "t"),
                            env={**os.environ, "MCPWORLD_HOME": tmpdir}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/healthz", proc)
        n = 50 if quick else 300
        with httpx.Client(base_url=base) as http:
            baseline = p50(timed(lambda: http.get("/healthz"), n)) * 1000
            first = p50(timed(lambda: http.get("/v0/servers", params={"limit": 30}), n)) * 1000
            cursor = http.get("/v0/servers", params={"limit": 30}).json()["metadata"]["nextCursor"]
            paged = p50(timed(lambda: http.get("/v0/servers", params={"limit": 30, "cursor": cursor}), n)) * 1000
            search = p50(timed(lambda: http.get("/v0/servers", params={"search": "topic 42", "limit": 30}), n)) * 1000
            assert http.get("/v0/servers", params={"search": "topic 42"}).json()["metadata"]["count"] > 0
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return [
        Row("registry list p50 (10k records)", first, "ms", "GET /healthz p50", baseline, "<= 20 ms", first <= 20),
        Row("registry next page p50 (10k)", paged, "ms", "GET /healthz p50", baseline, "<= 20 ms", paged <= 20),
        Row("registry search p50 (10k)", search, "ms", "GET /healthz p50", baseline, "<= 20 ms", search <= 20),
    ]
