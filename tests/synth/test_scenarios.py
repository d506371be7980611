"""Scenario expansion with a model (recorded completions served over real HTTP): seeds grow into distinct
scenarios, near-duplicates and unsuitable ones are dropped and counted, a second run resumes, and the result
feeds `synth world`, which builds several scenarios in parallel and reports tries per stage."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from mcpworld.core.llm_replay import ReplayLLM, serve
from mcpworld.core.testing import free_port
from mcpworld.synth.cli import synth_group
from mcpworld.synth.synthesis.pipeline import read_scenarios
from mcpworld.synth.synthesis.scenarios import Deduper, Scenario

LIBRARY = Path(__file__).parents[1] / "data" / "synth" / "library_world.json"


def reply(items: list[tuple[str, str]]) -> dict:
    return {"content": json.dumps([{"name": n, "description": d} for n, d in items])}


SCRIPTS = {
    "Rate how well": [{"content": json.dumps([
        {"name": n, "score": s} for n, s in (("PawDesk", 9), ("Kennel Keeper", 9), ("Pet Insurance Claims", 8),
                                             ("ShelfLend", 9), ("VetStock", 8), ("TuneCast", 2))])}],
    # round 2 of the veterinary seed lists round 1's scenarios as taken, so it matches this key first
    "- Kennel Keeper\n": [reply([("Kennel Keeper", "Boarding bookings for dogs."),
                               ("VetStock", "Clinic staff track drug and supply inventory, reorder stock and log "
                                            "usage per visit.")])],
    "Seed domain: veterinary care": [reply([
        ("PawDesk", "Pet owners book, move and cancel vet appointments; staff manage the day's schedule."),
        ("Kennel Keeper", "Owners reserve boarding stays for their pets; staff assign runs and record check-ins."),
        ("PawDesk Pro", "Pet owners book, move and cancel vet appointments; staff manage the day schedule."),
        ("Pet Insurance Claims", "Owners file claims for treatments and insurers approve, reject or pay them.")])],
    "Seed domain: libraries": [{"content": "Sure! Here are some great library ideas for you."},
                               reply([("ShelfLend", "Members borrow, renew and return books; librarians manage "
                                                    "holds and fines.")])],
    "Seed domain: music streaming": [reply([("TuneCast", "Live radio streams with AI-generated commentary.")])],
}


def test_near_duplicates_are_found_without_embeddings() -> None:
    dedupe = Deduper(0.5)
    dedupe.add(Scenario("PawDesk", "Pet owners book, move and cancel vet appointments.", "vet"))
    assert dedupe.duplicate_of(Scenario("Paw-Desk", "Something else entirely.", "vet")) == ("duplicate name", "PawDesk")
    assert dedupe.duplicate_of(Scenario("PawDesk Pro", "Pet owners book, move and cancel vet appointments!",
                                        "vet")) == ("near-duplicate", "PawDesk")
    assert dedupe.duplicate_of(Scenario("VetStock", "Clinic staff track drug inventory and reorder stock.",
                                        "vet")) is None


def test_seeds_grow_into_distinct_scenarios_and_a_second_run_resumes(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# domains\nveterinary care\nlibraries\n" + json.dumps({"domain": "music streaming"}) + "\n")
    out = tmp_path / "scenarios.jsonl"
    llm = ReplayLLM(SCRIPTS)
    with serve(llm, free_port()) as base:
        args = ["scenarios", "--seeds", str(seeds), "-n", "5", "-o", str(out), "--model", "m", "--base-url", base,
                "--per-request", "4", "--json"]
        first = CliRunner().invoke(synth_group, args)
        assert first.exit_code == 0, first.output
        summary = json.loads(first.output[first.output.index("{"):])
        kept = [json.loads(line) for line in out.read_text().splitlines()]
        assert [k["name"] for k in kept] == ["PawDesk", "Kennel Keeper", "Pet Insurance Claims", "ShelfLend",
                                             "VetStock"]
        assert kept[0]["seed"] == "veterinary care" and kept[0]["suitability"] == 9
        assert summary["dropped"] == {"near-duplicate": 1, "low suitability": 1, "duplicate name": 1}
        assert summary["examples"]["near-duplicate"] == ["PawDesk Pro"]
        # four expansion requests, one of which had to be asked again (the libraries reply that was not JSON)
        assert summary["stages"]["expand"] == {"requests": 5, "retries": 1, "failures": 0, "tries_per_success": 1.25}
        sent = len(llm.requests)
        more = CliRunner().invoke(synth_group, [*args[:4], "6", *args[5:], "--max-rounds", "2"])
    assert more.exit_code == 1 and "seeds ran out of rounds" in more.output
    resumed = json.loads(more.output[more.output.index("{"):more.output.rindex("}") + 1])
    assert resumed["resumed_from"] == 5 and resumed["kept"] == 5
    # only the seeds with rounds left were asked again; nothing kept twice
    assert len(out.read_text().splitlines()) == 5 and 0 < len(llm.requests) - sent <= 4
    # the output is what `synth world --scenarios` reads
    assert read_scenarios(out)[0] == ("PawDesk: Pet owners book, move and cancel vet appointments; staff manage "
                                      "the day's schedule.", "PawDesk")


def test_bad_seeds_file_is_refused(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# nothing here\n")
    result = CliRunner().invoke(synth_group, ["scenarios", "--seeds", str(seeds), "--model", "m", "--base-url",
                                              "http://127.0.0.1:9/v1"])
    assert result.exit_code != 0 and "no seed domains" in result.output


def test_synth_world_builds_scenarios_in_parallel_with_a_summary(tmp_path: Path, isolated_home: Path) -> None:
    data = json.loads(LIBRARY.read_text())
    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(json.dumps({"scenario": data["scenario"], "name": n}) + "\n"
                             for n in ("library-one", "library-two")))
    with serve(ReplayLLM(data["scripts"]), free_port()) as base:
        result = CliRunner().invoke(synth_group, ["world", "--scenarios", str(batch), "--parallel", "2", "--model",
                                                  "replay", "--base-url", base, "--max-retries", "1",
                                                  "--registry", "http://127.0.0.1:9"])
    assert result.exit_code == 0, result.output
    assert (isolated_home / "worlds" / "library-one").is_dir() and (isolated_home / "worlds" / "library-two").is_dir()
    assert "2 synthesized, 0 already installed, 0 failed of 2; tries per stage:" in " ".join(result.output.split())
