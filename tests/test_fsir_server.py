"""Issue 10 item 4 (the server checks what it can) and issue 9 item 4 (opt-in enforced on every
path; a non-private run never says "certified")."""
from __future__ import annotations

import json
import re

import attrs
import numpy as np
import pytest
from conftest import write_table

from privsdr import DPSIR, Budget, DPMeanCovariance, FederatedSIR, Ledger, UncertifiedPlanError, ValidationError
from privsdr.federated import ClientMessage, FSIRConfig, client_message, merge, screening_message
from privsdr.federated.checks import FALSE_REFUSAL

CUTS = (-1.0, 0.0, 1.0)
CONFIG = FSIRConfig(bound=2.0, cut_points=CUTS)


def data(n, seed, p=4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    return X, X[:, 0] + 0.5 * rng.standard_normal(n)


def upload(n=147, seed=0, config=CONFIG, client_id=None, **kw):
    return client_message(*data(n, seed), config, Budget(1.0, 1e-5), client_id=client_id or f"c{seed}", random_state=seed, **kw)


@pytest.fixture(scope="module")
def honest():
    return [upload(147, 0), upload(300, 1), upload(90, 2)]


def test_honest_uploads_merge(honest):
    result = merge(honest, CONFIG)
    assert result.n_total == 147 + 300 + 90 and np.allclose(np.linalg.norm(result.directions, axis=0), 1.0)


def _with_report(m, **changes):
    report = json.loads(m.report_json)
    for key, value in changes.items():
        report["public_parameters"][key] = value
    report["data_shape"] = [changes.get("n", m.n), m.p]
    return json.dumps(report)


@pytest.mark.parametrize("attack, message", [
    ("resent_under_new_id", "same upload"),
    ("n_inflated_in_message", "report says n"),
    ("n_inflated_everywhere", "noise scale"),
    ("n_fractional", "integer"),
    ("n_zero", "integer"),
    ("n_bool", "integer"),
    ("second_moment_times_1e6", "implausible"),
    ("slice_means_times_1e6", "implausible"),
    ("negative_variance", "implausible"),
    ("nan", "NaN"),
    ("status_claimed_certified", "status"),
    ("report_of_another_config", "report says config"),
    ("wrong_slices", "slices"),
])
def test_server_refuses(attack, message, honest):
    a = honest[0]
    if attack == "resent_under_new_id":
        bad = attrs.evolve(a, client_id="someone-else")
    elif attack == "n_inflated_in_message":
        bad = attrs.evolve(a, n=1_000_000)
    elif attack == "n_inflated_everywhere":
        bad = attrs.evolve(a, n=1_000_000, report_json=_with_report(a, n=1_000_000))
    elif attack == "n_fractional":
        bad = attrs.evolve(a, n=442.5)
    elif attack == "n_zero":
        bad = attrs.evolve(a, n=0)
    elif attack == "n_bool":
        bad = attrs.evolve(a, n=True)
    elif attack == "second_moment_times_1e6":
        bad = attrs.evolve(a, second_moment=a.second_moment * 1e6)
    elif attack == "slice_means_times_1e6":
        bad = attrs.evolve(a, slice_means=a.slice_means * 1e6)
    elif attack == "negative_variance":
        S = a.second_moment.copy()
        S[1, 1] = -50.0
        bad = attrs.evolve(a, second_moment=S)
    elif attack == "nan":
        bad = attrs.evolve(a, slice_means=np.full_like(a.slice_means, np.nan))
    elif attack == "status_claimed_certified":  # a published-VGM upload relabelled certified
        config = attrs.evolve(CONFIG, mechanism="vgm")
        vgm = upload(147, 5, config=config, allow_uncertified=True)
        report = json.loads(vgm.report_json)
        report["status"] = "certified"
        bad = attrs.evolve(vgm, report_json=json.dumps(report))
        with pytest.raises(ValidationError, match=message):
            merge([bad, upload(200, 6, config=config, allow_uncertified=True)], config, allow_uncertified=True)
        return
    elif attack == "report_of_another_config":
        bad = attrs.evolve(a, report_json=_with_report(a, config="0" * 16))
    else:
        bad = attrs.evolve(a, n_slices=3, slice_means=a.slice_means[:, :3], proportions=a.proportions[:3])
    messages = [a, bad] if attack == "resent_under_new_id" else [bad, honest[1]]
    with pytest.raises(ValidationError, match=message):
        merge(messages, CONFIG, allow_uncertified=True)


def test_plausibility_check_passes_honest_uploads_at_high_noise():
    """Small n and small epsilon (noise far larger than the data): 200 honest uploads, none refused
    (the check's false-refusal rate is below 1e-9 per upload by construction)."""
    assert FALSE_REFUSAL <= 1e-9
    config = FSIRConfig(bound=2.0, cut_points=CUTS, mechanism="vgm_two_stage")
    uploads = [client_message(*data(12, s), config, Budget(0.05, 1e-6), client_id=f"s{s}", random_state=s) for s in range(100)]
    uploads += [client_message(*data(12, s), CONFIG, Budget(0.05, 1e-6), client_id=f"t{s}", random_state=s) for s in range(100)]
    merge(uploads[:100], config, psd_floor=1e-6)
    merge(uploads[100:], CONFIG, psd_floor=1e-6)
    exact = [upload(60, s, config=attrs.evolve(CONFIG, mechanism="none", cov_mechanism="none"), allow_uncertified=True) for s in range(3)]
    merge(exact, attrs.evolve(CONFIG, mechanism="none", cov_mechanism="none"), allow_uncertified=True)


def test_malformed_files_get_one_clear_line(tmp_path, cli, honest):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(CONFIG.to_json())
    good = tmp_path / "good.fsir"
    honest[0].save(good)
    cases = {
        "page.fsir": b"<html><body>not an upload</body></html>",
        "empty.fsir": b"",
        "truncated.fsir": good.read_bytes()[:-60],
    }
    import io

    buffer = io.BytesIO()
    np.savez(buffer, meta=np.frombuffer(json.dumps({"protocol": "privsdr.fsir", "version": 1, "n": "x"}).encode(), dtype=np.uint8))
    cases["fields.fsir"] = buffer.getvalue()
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        r = cli("fsir", "server", good, path, "--config", cfg)
        assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and name in r.err, (name, r)
        with pytest.raises(ValidationError):
            ClientMessage.load(path)
    r = cli("fsir", "server", good, good, "--config", cfg)
    assert r.code == 2 and "same file" in r.err


# -- issue 9 item 4: opt-in on every path ----------------------------------------------------------
def test_every_python_entry_point_refuses_uncertified_uploads_unless_asked():
    X, y = data(200, 3)
    vgm = attrs.evolve(CONFIG, mechanism="vgm")
    none = attrs.evolve(CONFIG, mechanism="none", cov_mechanism="none")
    ccmd = attrs.evolve(CONFIG, screening="ccmd", ccmd_threshold=0.3)
    for config in (vgm, none):
        ledger = Ledger(Budget(1.0, 1e-5))
        with pytest.raises(UncertifiedPlanError):
            client_message(X, y, config, Budget(1.0, 1e-5), client_id="a", ledger=ledger)
        assert ledger.spent.epsilon == 0 and not ledger.runs
    with pytest.raises(UncertifiedPlanError):
        screening_message(X, y, ccmd, Budget(1.0, 1e-5), client_id="a")
    for kw in ({"mechanism": "vgm"}, {"mechanism": "none", "cov_mechanism": "none"}, {"screening": "ccmd", "ccmd_threshold": 0.3}):
        ledger = Ledger(Budget(5.0, 1e-4))
        with pytest.raises(UncertifiedPlanError):
            FederatedSIR(1, bound=2.0, cut_points=CUTS, ledger=ledger, budget=Budget(1.0, 1e-5), **kw).fit([data(200, 4), data(200, 5)])
        assert ledger.spent.epsilon == 0
    claimed = client_message(X, y, vgm, Budget(1.0, 1e-5), client_id="a", allow_uncertified=True)
    assert claimed.report.status == "claimed"
    with pytest.raises(UncertifiedPlanError):
        merge([claimed, client_message(*data(200, 6), vgm, Budget(1.0, 1e-5), client_id="b", allow_uncertified=True)], vgm)


def test_cli_client_and_server_need_allow_uncertified(tmp_path, journal, cli):
    X, y = data(300, 7)
    table = write_table(tmp_path / "site.csv", X, y)
    for mechanism in ("vgm", "none"):
        cfg = tmp_path / f"{mechanism}.json"
        r = cli("fsir", "config", cfg, "--bound", 2, "--cut-points", *CUTS, "--mechanism", mechanism,
                *(["--cov-mechanism", "none"] if mechanism == "none" else []))
        assert r.code == 0 and "--allow-uncertified" in r.out
        before = journal.read_bytes()
        out = tmp_path / f"{mechanism}.fsir"
        args = ("fsir", "client", "--config", cfg, "--data", table, "--target", "y", "--client-id", "s", "--journal", journal, "--out", out)
        r = cli(*args)
        assert r.code == 2 and "certified" in r.err and journal.read_bytes() == before and not out.exists()
        r = cli(*args, "--allow-uncertified")
        assert r.code == 0, r.err
        r = cli("fsir", "server", out, "--config", cfg)
        assert r.code == 2 and "allow-uncertified" in r.err
        assert cli("fsir", "server", out, "--config", cfg, "--allow-uncertified").code == 0


def test_a_non_private_run_never_says_certified(tmp_path):
    X, y = data(400, 8)
    journal = tmp_path / "inf.jsonl"
    ledger = Ledger(Budget.infinite(), journal=journal)
    est = DPSIR(1, bound=2.0, cut_points=CUTS, budget=Budget.infinite(), ledger=ledger, random_state=0).fit(X, y)
    reports = [est.privacy_report_, DPMeanCovariance(clip=3.0, budget=Budget.infinite()).fit(X).privacy_report_,
               client_message(X, y, CONFIG, Budget.infinite(), client_id="a").report,
               client_message(X, y, attrs.evolve(CONFIG, mechanism="none", cov_mechanism="none"), Budget(1.0, 1e-5),
                              client_id="a", allow_uncertified=True).report]
    fed = FederatedSIR(1, bound=2.0, cut_points=CUTS, mechanism="none", cov_mechanism="none", allow_uncertified=True).fit([(X, y), data(300, 9)])
    reports.append(fed.privacy_report_)
    for report in reports:
        assert report.status == "none" and report.status_line.startswith(("NON-PRIVATE", "NOT PRIVATE")), report.status_line
        assert all(node.status == "none" for node in report.nodes)
        assert not re.search(r'"status": *"certified"', report.to_json())
    assert fed.privacy_["status"] == "none" and all(m.report.status == "none" for m in fed.messages_)
    closes = [json.loads(line) for line in journal.read_text().splitlines() if '"close"' in line]
    assert closes and all(c["summary"]["status"] == "none" for c in closes)
    assert '"status":"certified"' not in journal.read_text()  # the reserve records' charges included
    with pytest.raises(UncertifiedPlanError):  # Budget.infinite() opts out of noise, not into uncertified nodes
        DPSIR(1, bound=2.0, mode="paper", budget=Budget.infinite(), random_state=0).fit(X, y)
