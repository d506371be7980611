"""Fixtures shared by the AWM tests (test_awm*.py) and the worker's (test_worker.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcpworld.synth.cli import synth_group
from mcpworld.synth.sandbox.worker import Interpreter

AWM_DATA = Path(__file__).parents[1] / "data" / "awm"

EXTRA_ENDPOINTS = '''
class PetCreate(BaseModel):
    owner_id: int
    name: str
    species: str


class Reminder(BaseModel):
    note: Optional[str] = None
    urgent: bool = False


@app.post("/pets", response_model=PetOut, summary="Register a pet", operation_id="add_pet")
def add_pet(body: PetCreate, db: Session = Depends(get_db)):
    pet = Pet(owner_id=body.owner_id, name=body.name, species=body.species)
    db.add(pet)
    db.commit()
    db.refresh(pet)
    return pet


@app.post("/reminders", summary="Send a reminder to the clinic's owners", operation_id="send_reminder")
def send_reminder(body: Reminder, db: Session = Depends(get_db)):
    db.add(Owner(name="Reminder sent", email=body.note))
    db.commit()
    return {"sent": True, "urgent": body.urgent}


if __name__ == "__main__":'''


@pytest.fixture(scope="session")
def awm_runtime() -> Interpreter:
    """AWM's runtime (its lock's libraries, in their own virtualenv: `awm_runtime`), built here on first need from
    pip's index or $MCPWORLD_AWM_WHEELHOUSE and cached outside the test run; the tests that import AWM scenarios skip,
    saying why, where it cannot be built."""
    from mcpworld.synth.importers.awm_runtime import AwmRuntimeUnavailable, interpreter

    try:
        return interpreter()
    except AwmRuntimeUnavailable as exc:
        pytest.skip(f"AWM's runtime cannot be built here: {exc}")


@pytest.fixture(scope="session")
def awm_faithful(awm_runtime: Interpreter, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/data/awm's Pet Clinic 1 with two more endpoints (one whose body has only optional fields, one that
    breaks a CHECK), imported once (served as AWM's server); the package's path."""
    root = tmp_path_factory.mktemp("awm-faithful")
    data = root / "data"
    shutil.copytree(AWM_DATA, data)
    lines = []
    for line in (data / "gen_envs.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["scenario"] == "Pet Clinic 1":
            record["full_code"] = record["full_code"].replace('\n\nif __name__ == "__main__":', EXTRA_ENDPOINTS)
        lines.append(json.dumps(record))
    (data / "gen_envs.jsonl").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(synth_group, ["import-awm", str(data), "--only", "Pet Clinic 1", "--references",
                                              str(AWM_DATA / "references.jsonl"), "--no-audit", "-o",
                                              str(root / "out")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return root / "out" / "awm-pet-clinic-1"
