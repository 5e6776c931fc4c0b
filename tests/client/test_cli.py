"""`python -m bounty_client`: what it prints, where it takes the deployment from, its errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bounty_client import metadata_hash, metadata_to_data_uri
from bounty_client.cli import main
from contracts.devchain import free_port
from tests.client.conftest import CHAIN_ID, CONTRACT, USDC

DEPLOYMENT_ENV = {
    "BOUNTY_CHAIN_ID": str(CHAIN_ID),
    "BOUNTY_CONTRACT_ADDRESS": CONTRACT.lower(),
    "BOUNTY_USDC_ADDRESS": USDC.lower(),
}
METADATA = {"title": "Translate the docs", "languages": ["fr", "日本語"]}
NOT_INLINE = "not an inline data:application/json URI holding valid JSON (at most 65536 bytes, nested at most 64 deep)"


@pytest.fixture
def deployment_env(monkeypatch):
    monkeypatch.delenv("BOUNTY_SERVICE_URL", raising=False)
    for name, value in DEPLOYMENT_ENV.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def metadata_file(tmp_path: Path) -> Path:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(METADATA, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_it_prints_a_create_bounty_transaction_from_a_metadata_file(capsys, builder, deployment_env, metadata_file):
    status, out, _ = run(
        capsys,
        "tx", "create-bounty", "--metadata-file", str(metadata_file), "--reward", "100000000", "--duration", "86400",
    )
    assert status == 0
    assert json.loads(out) == builder.create_bounty(
        metadata_uri=metadata_to_data_uri(METADATA),
        metadata_hash=metadata_hash(METADATA),
        reward_amount=100_000_000,
        duration=86_400,
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["approve-usdc", "--amount", "102500000"], lambda b: b.approve_usdc(102_500_000)),
        (["submit", "--bounty-id", "1", "--metadata-uri", "ipfs://x", "--metadata-hash", "0x" + "ab" * 32],
         lambda b: b.submit(bounty_id=1, metadata_uri="ipfs://x", metadata_hash="0x" + "ab" * 32)),
        (["dispute", "--submission-id", "2", "--metadata-uri", 'data:application/json,{"why":"copied"}'],
         lambda b: b.dispute(submission_id=2, metadata_uri='data:application/json,{"why":"copied"}',
                             metadata_hash=metadata_hash({"why": "copied"}))),
        (["resolve-dispute", "--dispute-id", "3", "--upheld"], lambda b: b.resolve_dispute(3, True)),
        (["resolve-dispute", "--dispute-id", "3", "--rejected"], lambda b: b.resolve_dispute(3, False)),
        (["finalize", "--bounty-id", "4"], lambda b: b.finalize(4)),
        (["advance-review-cursor", "--bounty-id", "4"], lambda b: b.advance_review_cursor(4)),
        (["refund-expired", "--bounty-id", "5"], lambda b: b.refund_expired(5)),
        (["refund-submission-bond", "--submission-id", "6"], lambda b: b.refund_submission_bond(6)),
        (["cancel-resolved-dispute", "--dispute-id", "7"], lambda b: b.cancel_resolved_dispute(7)),
        (["withdraw"], lambda b: b.withdraw()),
        (["withdraw-to", "--recipient", USDC.lower()], lambda b: b.withdraw_to(USDC)),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else "",
)
def test_it_prints_every_transaction(capsys, builder, deployment_env, argv, expected):
    status, out, _ = run(capsys, "tx", *argv)
    assert status == 0
    assert json.loads(out) == expected(builder)


def test_it_reads_the_deployment_from_the_service(capsys, no_deployment_env, read_service):
    status, out, _ = run(capsys, "tx", "withdraw", "--service-url", read_service.url)
    assert status == 0
    assert json.loads(out)["to"] == CONTRACT
    assert read_service.paths() == ["/health"]


def test_flags_override_the_environment(capsys, deployment_env):
    status, out, _ = run(capsys, "tx", "finalize", "--bounty-id", "1", "--chain-id", "1")
    assert status == 0
    assert json.loads(out)["chainId"] == 1


@pytest.fixture
def no_deployment_env(monkeypatch):
    for name in (*DEPLOYMENT_ENV, "BOUNTY_SERVICE_URL"):
        monkeypatch.delenv(name, raising=False)


def error_line(message: str) -> str:
    """What the command prints on stderr for an error: one line."""
    return f"python -m bounty_client: error: {message}\n"


def test_a_missing_deployment_says_how_to_name_the_read_service_instead(capsys, no_deployment_env):
    status, out, err = run(capsys, "tx", "withdraw")
    assert (status, out) == (2, "")
    assert err == error_line(
        "missing environment variables: BOUNTY_CONTRACT_ADDRESS, BOUNTY_USDC_ADDRESS. Name the read service, "
        "whose /health gives the deployment: --service-url URL or BOUNTY_SERVICE_URL=URL (the dev server's is "
        "http://127.0.0.1:8000); or set the variables, or give --contract-address and --usdc-address"
    )


def test_a_half_given_deployment_names_only_the_missing_flag(capsys, no_deployment_env):
    status, _, err = run(capsys, "tx", "withdraw", "--contract-address", CONTRACT)
    assert status == 2
    assert err.startswith("python -m bounty_client: error: missing environment variables: BOUNTY_USDC_ADDRESS. ")
    assert err.endswith("or give --usdc-address\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tx", "finalize", "--bounty-id", "-1"], "--bounty-id: number must be a safe uint"),
        (["tx", "submit", "--bounty-id", "1.5", "--metadata-uri", "ipfs://x", "--metadata-hash", "0x" + "00" * 32],
         "--bounty-id: number must be a safe uint"),
        (["tx", "approve-usdc", "--amount", str(2**256)], "--amount: uint256 value out of range"),
        (["tx", "create-bounty", "--metadata-uri", "ipfs://x", "--metadata-hash", "0x12", "--reward", "1",
          "--duration", "1"], "--metadata-hash: bytes32 value must be 32 bytes"),
        (["tx", "create-bounty", "--metadata-uri", "ipfs://x", "--reward", "1", "--duration", "1"],
         "--metadata-hash is required with a --metadata-uri that is not an inline data URI"),
        (["tx", "create-bounty", "--metadata-uri", "ipfs://x", "--metadata-hash", "0x" + "00" * 32, "--reward", "1",
          "--duration", str(2**64)], "--duration: uint64 value out of range"),
        (["tx", "create-bounty", "--metadata-uri", "ipfs://x", "--metadata-hash", "0x" + "00" * 32, "--reward", "x",
          "--duration", "1"], "--reward: number must be a safe uint"),
        (["tx", "dispute", "--submission-id", "abc", "--metadata-uri", "ipfs://x", "--metadata-hash", "0x" + "00" * 32],
         "--submission-id: number must be a safe uint"),
        (["tx", "resolve-dispute", "--dispute-id", "-3", "--upheld"], "--dispute-id: number must be a safe uint"),
        (["tx", "withdraw-to", "--recipient", "0x1234"], "--recipient: invalid address"),
        (["tx", "withdraw", "--chain-id", "one"], "--chain-id: number must be a safe uint"),
        (["tx", "withdraw", "--contract-address", "0x12"], "--contract-address: invalid address"),
        (["tx", "withdraw", "--usdc-address", "usdc"], "--usdc-address: invalid address"),
        (["tx", "withdraw", "--timeout", "0"], "--timeout: must be a number of seconds above 0"),
        (["quote", "--reward", "1.5"], "--reward: number must be a safe uint"),
        (["quote", "--reward", "1", "--post-fee-bps", "10001"], "--post-fee-bps: post_fee_bps must be at most 10000"),
        (["quote", "--reward", "1", "--submission-bond-bps", "-1"],
         "--submission-bond-bps: number must be a safe uint"),
        (["parse-uri", "ipfs://x"], NOT_INLINE),
        (["parse-uri", "data:application/json," + "[" * 50_000], NOT_INLINE),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_flag(capsys, deployment_env, argv, message):
    status, out, err = run(capsys, *argv)
    assert (status, out) == (2, "")
    assert err == error_line(message)


def test_an_unreachable_service_exits_1_naming_the_flag_and_the_url(capsys, no_deployment_env):
    url = f"http://127.0.0.1:{free_port()}"
    status, out, err = run(capsys, "tx", "withdraw", "--service-url", url)
    assert (status, out) == (1, "")
    assert err.startswith(f"python -m bounty_client: error: --service-url: cannot reach {url}/health: ")
    assert err.count("\n") == 1


def test_an_unreachable_service_from_the_environment_names_the_variable(capsys, monkeypatch, no_deployment_env):
    url = f"http://127.0.0.1:{free_port()}/"
    monkeypatch.setenv("BOUNTY_SERVICE_URL", url)
    status, _, err = run(capsys, "tx", "withdraw")
    assert status == 1
    assert err.startswith(f"python -m bounty_client: error: BOUNTY_SERVICE_URL: cannot reach {url}health: ")


def test_a_slow_service_exits_1_naming_the_url_and_the_timeout(capsys, no_deployment_env, read_service):
    read_service.delay = 1.0
    status, _, err = run(capsys, "tx", "withdraw", "--service-url", read_service.url, "--timeout", "0.2")
    assert status == 1
    assert err == error_line(f"--service-url: {read_service.url}/health did not answer within 0.2 s")


def test_a_failed_health_request_exits_1_with_the_status_and_the_services_detail(capsys, monkeypatch, read_service):
    read_service.responses["/health"] = (503, {"status": "error", "detail": "database unreachable"})
    monkeypatch.setenv("BOUNTY_SERVICE_URL", read_service.url)
    status, _, err = run(capsys, "tx", "withdraw")
    assert status == 1
    assert err == error_line(
        f"BOUNTY_SERVICE_URL: {read_service.url}/health: request failed: 503 (database unreachable)"
    )


def test_a_service_that_is_not_the_read_service_exits_1(capsys, no_deployment_env, read_service):
    read_service.responses["/health"] = (200, b"<html>hello</html>")
    status, _, err = run(capsys, "tx", "withdraw", "--service-url", read_service.url)
    assert status == 1
    assert err == error_line(
        f"--service-url: {read_service.url}/health: GET /health: the body is not JSON "
        "(is this the bounty read service?)"
    )


def test_a_service_url_without_a_scheme_is_refused(capsys, no_deployment_env, read_service):
    status, _, err = run(capsys, "tx", "withdraw", "--service-url", "127.0.0.1:8000")
    assert status == 2
    assert err == error_line("--service-url: '127.0.0.1:8000' is not an http:// or https:// URL (e.g. http://127.0.0.1:8000)")
    assert read_service.requests == []


def test_it_prints_a_quote(capsys):
    status, out, _ = run(capsys, "quote", "--reward", "100000000")
    assert status == 0
    assert json.loads(out) == {
        "reward_amount": "100000000", "fee_amount": "2500000", "bond_amount": "10000000", "total_amount": "102500000",
    }
    _, out, _ = run(capsys, "quote", "--reward", "100000000", "--post-fee-bps", "100", "--submission-bond-bps", "0")
    assert json.loads(out)["total_amount"] == "101000000"


def test_it_prints_data_uris_hashes_and_canonical_json(capsys, metadata_file):
    assert run(capsys, "data-uri", str(metadata_file))[1] == metadata_to_data_uri(METADATA) + "\n"
    assert run(capsys, "hash", str(metadata_file))[1] == metadata_hash(METADATA) + "\n"
    assert run(capsys, "canonical-json", str(metadata_file))[1] == metadata_to_data_uri(METADATA)[22:] + "\n"
    assert run(capsys, "parse-uri", metadata_to_data_uri(METADATA))[1] == metadata_to_data_uri(METADATA)[22:] + "\n"


def test_an_invalid_metadata_file_is_reported(capsys, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{'single': 'quotes'}", encoding="utf-8")
    status, _, err = run(capsys, "hash", str(path))
    assert status == 2
    assert "is not valid JSON" in err


def test_it_runs_as_a_module():
    env = {**os.environ, **DEPLOYMENT_ENV}
    env.pop("BOUNTY_SERVICE_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "bounty_client", "tx", "withdraw"],
        capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parents[2], check=True, timeout=60,
    )
    assert json.loads(result.stdout) == {"chainId": CHAIN_ID, "to": CONTRACT, "data": "0x3ccfd60b", "value": "0x0"}
    usage = subprocess.run(
        [sys.executable, "-m", "bounty_client", "--help"], capture_output=True, text=True, check=True, timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert "tx" in usage.stdout


@pytest.mark.parametrize(
    ("argv", "status", "start"),
    [
        ([], 2, "python -m bounty_client: error: missing environment variables: "),
        (["--service-url", "http://127.0.0.1:{port}"], 1,
         "python -m bounty_client: error: --service-url: cannot reach http://127.0.0.1:{port}/health: "),
    ],
    ids=["no-deployment", "unreachable"],
)
def test_errors_of_the_module_are_one_line_without_a_traceback(argv, status, start):
    port = free_port()
    env = {name: value for name, value in os.environ.items() if name not in (*DEPLOYMENT_ENV, "BOUNTY_SERVICE_URL")}
    result = subprocess.run(
        [sys.executable, "-m", "bounty_client", "tx", "approve-usdc", "--amount", "1",
         *(arg.format(port=port) for arg in argv)],
        capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parents[2], timeout=60,
    )
    assert (result.returncode, result.stdout) == (status, "")
    assert result.stderr.startswith(start.format(port=port))
    assert result.stderr.count("\n") == 1
