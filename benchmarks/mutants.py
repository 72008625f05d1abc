"""Mutation check of the privacy tests: break the privacy on purpose, one edit at a time, and see a test go red.

Each mutant is an exact text replacement in one source file (it must match exactly once). The script
copies ``privsdr/`` and ``tests/`` to a temporary directory, applies one mutant, and runs pytest on the
mutant's test selection with that copy first on ``sys.path`` (the installed package is not touched).
A mutant is *caught* when pytest fails. The table at the end is the mutation score of the suite's
privacy tests. This is a measurement, not a test: it takes minutes.

    python benchmarks/mutants.py                 # every mutant
    python benchmarks/mutants.py --only sparse   # mutants whose name contains "sparse"
    python benchmarks/mutants.py --list
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
    more: tuple[tuple[str, str, str], ...] = ()  #: further (path, old, new) edits applied together with the first

    @property
    def edits(self) -> tuple[tuple[str, str, str], ...]:
        return ((self.path, self.old, self.new), *self.more)


_NET, _NET_TESTS = "privsdr/parties/transport.py", "tests/test_mailbox_network.py"

MUTANTS = (
    Mutant("gaussian_sigma_halved", "Gaussian mechanism draws half its calibrated noise",
           "privsdr/mechanisms/gaussian.py", "        return arr + spec.scale * rng.standard_normal(arr.shape)",
           "        return arr + 0.5 * spec.scale * rng.standard_normal(arr.shape)", ("tests/test_audit.py",)),
    Mutant("laplace_scale_halved", "Laplace mechanism draws half its calibrated noise",
           "privsdr/mechanisms/laplace.py", "        return arr + rng.laplace(0.0, spec.scale, size=arr.shape)",
           "        return arr + rng.laplace(0.0, 0.5 * spec.scale, size=arr.shape)", ("tests/test_audit.py",)),
    Mutant("symmetric_noise_halved", "symmetric-matrix Gaussian draws half its noise",
           "privsdr/mechanisms/symmetric.py", "        upper = np.triu(spec.scale * rng.standard_normal((p, p)))",
           "        upper = np.triu(0.5 * spec.scale * rng.standard_normal((p, p)))", ("tests/test_audit.py", "tests/test_privacy_mutants.py")),
    Mutant("noisy_max_noise_off", "report-noisy-max without noise",
           "privsdr/mechanisms/selection.py", "        if not spec.noise_off:\n            scores = scores + rng.laplace(0.0, spec.scale, size=scores.shape)",
           "        if False:\n            scores = scores + rng.laplace(0.0, spec.scale, size=scores.shape)", ("tests/test_audit.py",)),
    Mutant("analytic_sigma_halved", "analytic Gaussian calibration returns half the multiplier",
           "privsdr/mechanisms/calibration.py", "        return analytic_noise_multiplier(epsilon, delta)",
           "        return 0.5 * analytic_noise_multiplier(epsilon, delta)", ("tests/test_mechanisms.py", "tests/test_audit.py")),
    Mutant("laplace_undercharged", "a Laplace release is charged half its epsilon",
           "privsdr/accounting/events.py", "        return Cost(div_up(1.0, z), 0.0)", "        return Cost(div_up(0.5, z), 0.0)",
           ("tests/test_accountants.py", "tests/test_accounting_edges.py", "tests/test_ledger.py")),
    Mutant("gaussian_undercharged", "a Gaussian release is charged as if its noise were doubled",
           "privsdr/accounting/events.py", "        return Cost(gaussian_epsilon(self.noise_multiplier, self.delta), self.delta)",
           "        return Cost(gaussian_epsilon(2 * self.noise_multiplier, self.delta), self.delta)",
           ("tests/test_accountants.py", "tests/test_accounting_edges.py")),
    Mutant("gaussians_merged_by_max", "RDP/PLD merge Gaussians by their largest mu instead of adding mu^2",
           "privsdr/accounting/accountants.py", "    mu2 = math.fsum(1.0 / (g.noise_multiplier * g.noise_multiplier) for g in gaussians)",
           "    mu2 = max(1.0 / (g.noise_multiplier * g.noise_multiplier) for g in gaussians)", ("tests/test_accountants.py",)),
    Mutant("gaussian_epsilon_not_stepped_up", "the fast Gaussian solve returns Brent's root without checking the bound at it",
           "privsdr/accounting/gaussian.py", "    eps = _brent()(excess, lo, hi)\n", "    eps = _brent()(excess, lo, hi)\n    return eps\n",
           ("tests/test_accounting_edges.py::test_the_fast_gaussian_solves_give_the_reference_answers_bit_for_bit",)),
    Mutant("pld_memo_ignores_count", "PLD's memo keeps one release's distribution for a repeated event",
           "privsdr/accounting/accountants.py", "    return dist.self_compose(count) if count > 1 else dist", "    return dist",
           ("tests/test_accountants.py::test_memoised_privacy_loss_distributions_give_the_answer_built_from_scratch",)),
    Mutant("pld_gaussian_noise_halved", "the PLD accountant builds a Gaussian release's distribution at half its noise",
           "privsdr/accounting/pld_build.py", "    z, s = float(standard_deviation), 1.0", "    z, s = float(standard_deviation) / 2, 1.0",
           ("tests/test_pld_build.py", "tests/test_accountants.py")),
    Mutant("pld_epsilon_read_at_twice_delta", "the PLD accountant's epsilon is read at twice the target delta",
           "privsdr/accounting/pld_build.py", "    return math.log((mass_upper - delta) / mass_lower)",
           "    return math.log((mass_upper - 2 * delta) / mass_lower)", ("tests/test_pld_build.py", "tests/test_accountants.py")),
    Mutant("memo_keys_a_subclass_by_repr", "a user's accountant class is memoised on repr(to_dict()), which leaves out "
           "what it depends on beyond its parent's parameters (a best subclass's members' reading deltas)",
           "privsdr/accounting/accountants.py",
           "        return None if any(parameters is None for _, _, parameters in members) else (accountant.delta_cap, members)\n    return None\n",
           "        return None if any(parameters is None for _, _, parameters in members) else (accountant.delta_cap, members)\n    return (repr(accountant.to_dict()),)\n",
           ("tests/test_accountants.py",)),
    Mutant("best_remembers_its_choice_as_each_members", "best keeps its chosen cost in the memo as every member's answer",
           "privsdr/accounting/accountants.py", "                _COST_CACHE.put(key, costs[m.name])",
           "                _COST_CACHE.put(key, self.choose(costs)[1])", ("tests/test_fixed_costs.py", "tests/test_ledger.py")),
    Mutant("best_leaves_out_basic_unchecked", "best leaves basic and advanced out on its guessed lower bounds without "
           "checking them against the Gaussian profile (where basic is the smallest, best answers another member's epsilon)",
           "privsdr/accounting/accountants.py",
           "        if not all(gaussian_delta_lower(e.noise_multiplier, x) > e.delta for e, x in low.items()):",
           "        if False:", ("tests/test_accountants.py",)),
    Mutant("best_leaves_out_advanced_unchecked", "best leaves advanced out when basic's lower bounds clear the other "
           "members, without checking DRV/KOV at them (where advanced beats the others, best answers a larger epsilon)",
           "privsdr/accounting/accountants.py",
           "            if isinstance(m, AdvancedAccountant) and sums is not None and not m._bound(sums) >= target:",
           "            if False:",
           ("tests/test_accountants.py",)),
    Mutant("ledger_never_refuses", "the ledger skips its budget check",
           "privsdr/accounting/ledger.py", "        basic_delta = BasicAccountant()\n        if not self.budget.unlimited and not after.fits_within(self.budget):",
           "        basic_delta = BasicAccountant()\n        if False:",
           ("tests/test_ledger.py",)),
    Mutant("charge_after_noise", "a node is charged after its noise is drawn (not write-ahead)",
           "privsdr/plan/execute.py",
           "        reservation.charge(name)  # write-ahead: charged before the noise exists\n        out = mech.sample(prepared, spec, self._rngs[name], **options)",
           "        out = mech.sample(prepared, spec, self._rngs[name], **options)\n        reservation.charge(name)",
           ("tests/test_ledger.py", "tests/test_journal.py", "tests/test_mean_covariance.py")),
    Mutant("rows_outside_the_cell_accepted", "a release charged to one cell of a row partition may read rows of another",
           "privsdr/plan/execute.py", "        if allowed is not None and not np.all(np.isin(read, allowed, assume_unique=True)):",
           "        if False:", ("tests/test_run_rows.py",)),
    Mutant("mean_cov_mean_sensitivity_halved", "DPMeanCovariance declares C/n for the mean (true: 2C/n)",
           "privsdr/algorithms/mean_covariance.py", 'gram.column_sum(C, "replace_one", n)', 'gram.column_sum(C / 2, "replace_one", n)',
           ("tests/test_mean_covariance.py", "tests/test_audit.py", "tests/test_privacy_mutants.py")),
    Mutant("mean_cov_second_moment_halved", "DPMeanCovariance declares half the second moment's sensitivity",
           "privsdr/algorithms/mean_covariance.py", 'gram.xtx(C, "replace_one", n)', 'gram.xtx(C, "replace_one", 2 * n)',
           ("tests/test_mean_covariance.py", "tests/test_privacy_mutants.py")),
    Mutant("dp_scaler_mean_sensitivity_halved", "DPStandardScaler declares sqrt(p)/n for the mean (true: 2 sqrt(p)/n)",
           "privsdr/preprocessing/standard.py", 'return gram.box_sum(-ones, ones, "replace_one", n), ',
           'return gram.box_sum(-ones, ones, "replace_one", 2 * n), ', ("tests/test_preprocessing.py",)),
    Mutant("dp_scaler_no_clipping", "DPStandardScaler releases the moments of unclipped rows",
           "privsdr/preprocessing/standard.py", "    parts = RowParts(shift=center, scale=bounds, box=1.0)",
           "    parts = RowParts(shift=center, scale=bounds, box=None)", ("tests/test_preprocessing.py",)),
    Mutant("no_clipping", "rows are not clipped before the DP-SIR releases",
           "privsdr/algorithms/_base.py", "        np.clip(rows, -self.bound, self.bound, out=rows)", "        pass",
           ("tests/test_dpsir.py",)),
    Mutant("dpsir_init_drops_p", "DP-SIR B.1 sensitivities without the factor p",
           "privsdr/algorithms/dpsir.py", '        d, c2 = square_mass(bounds, self._init_dims(len(bounds)))  # d c2',
           '        d, c2 = 1.0, square_mass(bounds, self._init_dims(len(bounds)))[1]  # d c2', ("tests/test_dpsir.py",)),
    Mutant("dpsir_step_drops_sqrt_pk", "Algorithm 2 step: entry-wise sensitivity used as the Frobenius one",
           "privsdr/algorithms/_sir_common.py", '    return entry * math.sqrt(width * K) if norm == "l2" else entry', "    return entry",
           ("tests/test_dpsir.py",)),
    Mutant("sparse_step_uses_n", "SparseDPSIR step sensitivity with 1/n instead of 1/m_t",
           "privsdr/algorithms/dpsir.py", '            m = n if self.mode == "paper" else len(idx)', "            m = n",
           ("tests/test_privacy_mutants.py", "tests/test_dpsir.py")),
    Mutant("fsir_mean_sensitivity_halved", "FSIR client declares ||x||/n for the slice means (true: 2||x||/n)",
           "privsdr/federated/client.py", '    mean_sens = gram.slice_sums(c, RELATION, n)', '    mean_sens = gram.slice_sums(c / 2, RELATION, n)',
           ("tests/test_fsir_client_probe.py", "tests/test_federated.py", "tests/test_privacy_mutants.py")),
    Mutant("fsir_no_truncation", "FSIR client does not truncate the rows",
           "privsdr/federated/protocol.py",
           '            return clip_rows_l2(X, float(self.bound))  # type: ignore[arg-type]\n        R = self.column_bounds(X.shape[1], active)\n        return np.clip(X, -R, R)',
           "            return X\n        return X", ("tests/test_federated.py",)),
    Mutant("two_stage_shape_from_private_means", "two-stage VGM shapes stage 2 from the private slice means",
           "privsdr/federated/client.py", "boost=_vgm_boost(centred_slice_means(stage1, run_w), floor**2, config.n_directions))",
           "boost=_vgm_boost(centred_slice_means(M, run_w), floor**2, config.n_directions))",
           ("tests/test_privacy_mutants.py", "tests/test_fsir_centring.py", "tests/test_federated.py")),
    Mutant("parallel_composition_drops_shared_releases", "parallel composition forgets the releases every record sees",
           "privsdr/accounting/composition.py", "    base = tuple(groups.pop(frozenset(), ()))", "    base = ()\n    groups.pop(frozenset(), None)",
           ("tests/test_accountants.py", "tests/test_ledger.py")),
    Mutant("moments_sums_sensitivity_halved", "DPSIR (moments) declares ||c||/n for the slice sums (true: 2||c||/n)",
           "privsdr/released/moments.py", "gram.slice_sums(c, RELATION, per, c2),", "gram.slice_sums(c, RELATION, 2 * per, c2),",
           ("tests/test_dpsir_moments.py", "tests/test_secure_vertical_moments.py")),
    Mutant("moments_second_moment_halved", "DPSIR (moments) declares half the second moment's sensitivity",
           "privsdr/released/moments.py", "gram.xtx(c, RELATION, per, c2),", "gram.xtx(c, RELATION, 2 * per, c2),",
           ("tests/test_dpsir_moments.py", "tests/test_secure_vertical_moments.py")),
    Mutant("moments_counts_sensitivity_halved", "DPSIR (moments) declares 1/n for the slice counts (true: sqrt(2)/n)",
           "privsdr/released/moments.py", "gram.slice_counts(RELATION, per),", "gram.slice_counts(RELATION, math.sqrt(2.0) * per),",
           ("tests/test_dpsir_moments.py", "tests/test_secure_vertical_moments.py")),
    Mutant("moments_no_clipping", "DPSIR (moments) does not clip the rows",
           "privsdr/core/sufficient.py",
           "        np.clip(out, -bound, bound, out=out)\n    else:\n        np.clip(X, -bound, bound, out=out)\n",
           "    else:\n        np.copyto(out, X)\n",
           ("tests/test_dpsir_moments.py",)),
    Mutant("onepass_mean_sensitivity_halved", "DPSIR (onepass) centres with a DP mean declared at c sqrt(p)/n (true: 2 c sqrt(p)/n)",
           "privsdr/algorithms/dpsir.py", "gram.column_sum(bound_l2(bounds), RELATION, n)", "gram.column_sum(bound_l2(bounds), RELATION, 2 * n)",
           ("tests/test_dpsir_moments.py", "tests/test_dpsir.py")),
    Mutant("secure_noise_halved", "the secure sampler draws half its grid noise",
           "privsdr/mechanisms/secure.py", "        sigma2 = scale * scale\n", "        sigma2 = scale * scale / 4\n",
           ("tests/test_secure_sampler.py",)),
    Mutant("secure_rounding_ignored", "the secure grid noise forgets the rounding shift (sensitivity Delta/gamma only)",
           "privsdr/mechanisms/secure.py", "(Fraction(sensitivity) / Fraction(gamma) + _spread(dimension, norm))",
           "(Fraction(sensitivity) / Fraction(gamma))", ("tests/test_secure_sampler.py",)),
    Mutant("secure_bernoulli_exp_skips_a_coin", "Bernoulli(exp(-gamma)) takes its first coin as heads without a draw whenever gamma >= 1/2",
           "privsdr/mechanisms/secure.py", "    k = 2 if num == den else 1\n", "    k = 2 if 2 * num >= den else 1\n",
           ("tests/test_secure_sampler.py",)),
    Mutant("secure_priced_as_continuous", "a secure Gaussian node is priced by the continuous Gaussian's profile",
           "privsdr/mechanisms/gaussian.py", "            return (DiscreteGaussianEvent(spec.noise_multiplier, spec.delta),)",
           "            return (GaussianEvent(spec.noise_multiplier, spec.delta),)", ("tests/test_secure_sampler.py",)),
    Mutant("secure_float_noise", "the secure path adds numpy floating-point noise",
           "privsdr/mechanisms/gaussian.py", '            return secure.release(arr, spec.noise_multiplier, spec.sensitivity.value, "gaussian")',
           "            return arr + spec.scale * rng.standard_normal(arr.shape)", ("tests/test_secure_sampler.py",)),
    Mutant("secure_rho_halved", "a discrete Gaussian event is charged half its zCDP rho",
           "privsdr/accounting/events.py", "return math.inf if z == 0 else 0.5 / (z * z) * (1.0 + 1e-15)",
           "return math.inf if z == 0 else 0.25 / (z * z) * (1.0 + 1e-15)", ("tests/test_secure_sampler.py",)),
    Mutant("pride_entry_sensitivity_halved", "PRIDE declares theta_k / 2 for the sketch under the entry relation",
           "privsdr/vertical/pride_steps.py", "    return float(np.max(np.asarray(hi) - np.asarray(lo))) * w2",
           "    return float(np.max(np.asarray(hi) - np.asarray(lo))) * w2 / 2", ("tests/test_pride.py",)),
    Mutant("pride_no_clipping", "PRIDE certified mode does not clip the columns to their public ranges",
           "privsdr/vertical/pride_steps.py", "        D = clip_columns(D, lo, hi)", "        pass", ("tests/test_pride.py",)),
    Mutant("pride_certified_standardises", "PRIDE certified mode standardises with the data's own sd",
           "privsdr/vertical/pride.py", 'return bool(self.standardize) if self.standardize is not None else self.mode != "certified"',
           "return bool(self.standardize) if self.standardize is not None else True", ("tests/test_pride.py",)),
    Mutant("pride_row_uses_entry_sensitivity", "PRIDE row relation declares the one-entry sensitivity",
           "privsdr/vertical/pride.py", "Sensitivity(steps.row_sensitivity(lo, hi, (info.n_columns, dims[name])), ",
           "Sensitivity(steps.entry_sensitivity(lo, hi), ", ("tests/test_pride.py",)),
    Mutant("pride_row_spectral_norm_unpadded", "PRIDE row sensitivity with sqrt(tau/tau_subs) instead of sqrt(tau'/tau_subs)",
           "privsdr/vertical/pride_steps.py", "spectral, w2 = math.sqrt((1 << (int(tau) - 1).bit_length()) / tau_subs), 1.0",
           "spectral, w2 = math.sqrt(tau / tau_subs), 1.0", ("tests/test_pride.py",)),
    Mutant("pride_row_in_parallel", "PRIDE row relation composes the parties in parallel",
           "privsdr/vertical/pride.py", 'scopes = plan.partition("party", layout.names, stable=True) if c.relation == "entry" else [None] * len(layout.names)',
           'scopes = plan.partition("party", layout.names, stable=True)', ("tests/test_pride.py",)),
    Mutant("pride_srht_scaled_up", "SRHT rows of norm 2 while w2 = 1 is declared",
           "privsdr/core/sketch.py", "        return out.T / math.sqrt(self.sketch_dim)",
           "        return 2.0 * out.T / math.sqrt(self.sketch_dim)", ("tests/test_pride.py", "tests/test_pride_core.py")),
    Mutant("pride_kenthapadi_drops_factor_2", "Kenthapadi multiplier sqrt(ln(1/(2 delta)) + eps) / eps (a factor sqrt 2 too small)",
           "privsdr/mechanisms/calibration.py", "        return math.sqrt(2.0 * (math.log(1.0 / (2.0 * delta)) + epsilon)) / epsilon",
           "        return math.sqrt(math.log(1.0 / (2.0 * delta)) + epsilon) / epsilon", ("tests/test_pride_core.py", "tests/test_pride.py")),
    # issue 12: DPPLS certified S2 and S1 (each declared sensitivity, the clipping that makes it true)
    Mutant("pls_xtx_sensitivity_halved", "DPPLS S2 declares C_x^2 / 2 for X^T X",
           "privsdr/algorithms/_pls_modes.py", 'plan.add("xtx", "symmetric_gaussian", gram.xtx(Cx, RELATION),',
           'plan.add("xtx", "symmetric_gaussian", gram.xtx(Cx, RELATION, 2.0),', ('tests/test_pls_privacy.py', 'tests/test_pls.py')),
    Mutant("pls_xty_sensitivity_halved", "DPPLS S2 declares C_x C_y / 2 for X^T y",
           "privsdr/algorithms/_pls_modes.py", 'plan.add("xty", "gaussian", gram.xty(Cx, Cy, RELATION),', 'plan.add("xty", "gaussian", gram.xty(Cx, Cy / 2, RELATION),', ('tests/test_pls_privacy.py', 'tests/test_pls.py')),
    Mutant("pls_count_sensitivity_halved", "DPPLS DP centring declares 1/2 for the row count",
           "privsdr/algorithms/_pls_modes.py", 'plan.add("count", "gaussian", gram.count(RELATION),', 'plan.add("count", "gaussian", _sens(0.5, "halved"),', ('tests/test_pls_privacy.py', 'tests/test_pls.py')),
    Mutant("pls_s1_u_sensitivity_halved", "DPPLS S1 declares C_x C_y / 2 for E^T f",
           "privsdr/algorithms/_pls_modes.py", 'plan.add(f"u_{a}", "gaussian", gram.xty(Cx, Cy, RELATION),',
           'plan.add(f"u_{a}", "gaussian", gram.xty(Cx, Cy / 2, RELATION),', ('tests/test_pls_privacy.py', 'tests/test_pls.py')),
    Mutant("pls_rows_not_clipped", "DPPLS does not clip the rows to ||x - center|| <= C_x",
           "privsdr/algorithms/_pls_queries.py", "    return core.clip_rows_l2(np.asarray(X, dtype=float) - center, bound)",
           "    return np.asarray(X, dtype=float) - center", ('tests/test_pls_privacy.py', 'tests/test_pls.py')),
    Mutant("pls_y_not_clipped", "DPPLS does not clip the responses to |y - center| <= C_y",
           "privsdr/algorithms/_pls_queries.py", "    return np.clip(np.asarray(y, dtype=float) - center, -bound, bound)",
           "    return np.asarray(y, dtype=float) - center", ('tests/test_pls_privacy.py', 'tests/test_pls.py')),
    # issue 13: DP-BCD certified mode
    Mutant("dpbcd_gram_sensitivity_halved", "DP-BCD declares sqrt(2) C^2 / 2 for a party's Gram matrix",
           "privsdr/vertical/dpbcd_steps.py", '    return gram.xtx(row_bound, "replace_one").value', '    return gram.xtx(row_bound, "replace_one").value / 2',
           ('tests/test_dpbcd_certified.py', 'tests/test_dpbcd.py')),
    Mutant("dpbcd_label_sensitivity_halved", "DP-BCD declares C_i C_y for X_i^T y (true: 2 C_i C_y)",
           "privsdr/vertical/dpbcd_steps.py", '    return gram.xty(row_bound, label_bound, "replace_one").value', '    return gram.xty(row_bound, label_bound, "replace_one").value / 2', ('tests/test_dpbcd_certified.py', 'tests/test_dpbcd.py')),
    Mutant("dpbcd_rows_not_clipped", "DP-BCD does not clip a party's rows to ||x|| <= C_i",
           "privsdr/vertical/dpbcd_steps.py", "    return clip_rows_l2(X, bound)", "    return X", ('tests/test_dpbcd_certified.py', 'tests/test_dpbcd.py')),
    Mutant("dpbcd_label_not_clipped", "DP-BCD does not clip the labels to |y| <= C_y",
           "privsdr/vertical/dpbcd_steps.py", "    return np.clip(y, -bound, bound)", "    return y", ('tests/test_dpbcd_certified.py', 'tests/test_dpbcd.py')),
    Mutant("dpbcd_label_sum_sensitivity_halved", "DP-BCD declares C_y for the DP intercept's label sum (true: 2 C_y)",
           "privsdr/vertical/dpbcd_steps.py", '    return gram.label_sum(label_bound, "replace_one").value', '    return gram.label_sum(label_bound, "replace_one").value / 2', ('tests/test_dpbcd_certified.py',)),
    Mutant("dpbcd_label_sum_not_clipped", "the DP intercept's label sum reads the labels unclipped",
           "privsdr/vertical/dpbcd.py", "np.sum(steps.clip_label(party.y, self.config.certified_label_bound))", "np.sum(party.y)",
           ('tests/test_dpbcd_certified.py',)),
    Mutant("dpbcd_shrinkage_reads_private_gram", "DP-BCD's shrinkage measures a step in the party's noise-free Gram",
           "privsdr/vertical/dpbcd.py", 'd, kept = shrinkage.certified_increment(state["gram"], s,',
           'd, kept = shrinkage.certified_increment(steps.gram_query(Xc) + 1e-9 * state["gram"], s,', ('tests/test_replay.py',)),
    Mutant("dppls_pretest_off", "certified DPPLS fits components to an X^T y that cannot be told from noise",
           "privsdr/released/ssp.py", '    if c.get("shrinkage") == "snr" and not signal_in_xty(u, np.broadcast_to(var_u, u.shape)):',
           "    if False:", ('tests/test_pls_shrinkage.py',)),
    Mutant("dppls_pretest_ignores_centring_noise", "DPPLS's pre-test leaves out the noise the DP centring adds to X^T y",
           "privsdr/released/ssp.py",
           '        var_u = var_u + regression.centring_variance(scales.get("x_sum", 0.0), scales.get("y_sum", 0.0), x_shift, y_shift, n_t)',
           "        var_u = var_u + 0.0 * x_shift", ('tests/test_pls_shrinkage.py',)),
    Mutant("dppls_no_james_stein", "certified DPPLS keeps its slopes whole however much of them the noise explains",
           "privsdr/algorithms/pls.py", "factor = attributes[\"shrinkage_factor_\"] = regression.fallback_factor(ratio)",
           "factor = attributes[\"shrinkage_factor_\"] = 1.0", ('tests/test_pls_shrinkage.py',)),
    Mutant("dpbcd_fallback_reads_exact_mean", "DP-BCD's fallback (the DP mean, issue 33) is the labels' noise-free mean",
           "privsdr/vertical/dpbcd.py", "shrinkage.dp_label_mean(float(total[0]), party.X.shape[0]",
           "shrinkage.dp_label_mean(float(np.sum(steps.clip_label(party.y, self.config.certified_label_bound))), party.X.shape[0]",
           ('tests/test_replay.py',)),
    Mutant("dppls_s1_pretest_off", "certified DPPLS S1 keeps a component whose released E^T f is noise",
           "privsdr/algorithms/_pls_modes.py", '        if keep == A and c.get("shrinkage") == "snr" and not component_signal(u, u_sd, A):',
           "        if False:", ('tests/test_pls_shrinkage.py',)),
    Mutant("dppls_s1_offset_noise_ignored", "S1's pre-test leaves out what the DP means' noise puts into E^T f",
           "privsdr/algorithms/_pls_modes.py", '        offset_sd = run.plan.specs["x_sum"].scale * run.plan.specs["y_sum"].scale / n_t',
           "        offset_sd = 0.0 * n_t", ('tests/test_pls_shrinkage.py',)),
    Mutant("sparse_selection_sensitivity_halved", "sparse SIR's selection declares half the change a record makes to the scores",
           "privsdr/algorithms/sparse_sir.py", 'Sensitivity(2.0 / n, "linf"', 'Sensitivity(1.0 / n, "linf"',
           ('tests/test_sparse_moments.py',)),
    Mutant("sparse_selection_uses_the_noise_free_scores", "sparse SIR selects on the exact scores and releases nothing",
           "privsdr/algorithms/dpsir.py", 'selected = np.sort(np.asarray(run.release("support", scores), dtype=int))',
           'selected = np.sort(np.argsort(-scores)[: int(run.plan.specs["support"].params["s"])]); run.release("support", scores)',
           ('tests/test_sparse_moments.py', 'tests/test_replay.py')),
    Mutant("sparse_margin_reads_the_private_scores", "sparse SIR's selection-margin warning reads the noise-free scores of the rows",
           "privsdr/algorithms/dpsir.py",
           '        selected = np.sort(np.asarray(run.release("support", scores), dtype=int))\n',
           '        selected = np.sort(np.asarray(run.release("support", scores), dtype=int))\n        self._private_scores = scores\n',
           ('tests/test_replay.py',),
           more=(("privsdr/algorithms/dpsir.py", "        released = from_run(run, list(run.outputs), n=n, source=source)\n        fitted = sparse_sir_from_released(",
                  "        released = from_run(run, list(run.outputs), n=n, source=source)\n"
                  "        released = Released({**released.arrays, \"private_scores\": self._private_scores}, released.scales, released.n, "
                  "released.relation, released.source, released.nodes)\n        fitted = sparse_sir_from_released("),
                 ("privsdr/algorithms/dpsir.py", 'weakest, miss = sparse_sir.selection_margin(release, bounds[selected], float(released.scales["support"]), p, n)',
                  'weakest = float(np.min(released["private_scores"][selected])); miss = sparse_sir.miss_probability(weakest, '
                  'float(released.scales["support"]), p - len(selected), 0.0)'))),
    Mutant("sparse_pca_margin_reads_the_private_covariances", "sparse PCA's lonely-coordinate warning reads the noise-free covariances",
           "privsdr/algorithms/sparse_pca.py", "    ratios = co_variation(sigma, scale)\n",
           "    ratios = co_variation(sigma, scale)\n    ratios = co_variation(np.asarray(released.arrays[\"noise_free_sigma\"]), scale)\n",
           ('tests/test_replay.py',),
           more=(("privsdr/algorithms/sparse_pca.py", '        released = from_run(run, ("support", "sigma"), n=n, source="in memory")\n',
                  '        released = from_run(run, ("support", "sigma"), n=n, source="in memory")\n'
                  '        released = Released({**released.arrays, "noise_free_sigma": core.covariance_uncentred(Xc[:, selected])}, released.scales, '
                  'released.n, released.relation, released.source)\n'),)),
    Mutant("noisy_top_noise_halved", "the top-s selection (noisy_top's and peeling's) draws half its Laplace noise",
           "privsdr/mechanisms/selection.py", "        noisy = scores + (rng.laplace(0.0, b, size=scores.shape) if b > 0 else 0.0)",
           "        noisy = scores + (rng.laplace(0.0, b / 2, size=scores.shape) if b > 0 else 0.0)", ('tests/test_audit.py',)),
    Mutant("sparse_moments_bound_of_one_column", "the moments on the selected columns declare the largest column's bound only",
           "privsdr/algorithms/dpsir.py", "k, c2 = square_mass(bounds, screen)  # k c2", "k, c2 = square_mass(bounds, 1)  # k c2",
           ('tests/test_sparse_moments.py', 'tests/test_sparse_moments_probe.py')),
    Mutant("sparse_pca_selection_sensitivity_halved", "sparse PCA's selection declares half the change a record makes",
           "privsdr/algorithms/sparse_pca.py", 'Sensitivity(1.0 / n, "linf", RELATION, "d_j', 'Sensitivity(0.5 / n, "linf", RELATION, "d_j',
           ('tests/test_sparse_moments.py',)),
    Mutant("sparse_pca_sigma_bound_of_one_column", "sparse PCA's Sigma on the selected columns declares one column's bound",
           "privsdr/algorithms/sparse_pca.py", "    k_s, c2_s = square_mass(bounds, s)\n    delta = max(",
           "    k_s, c2_s = square_mass(bounds, 1)\n    delta = max(", ('tests/test_sparse_moments.py', 'tests/test_sparse_moments_probe.py')),
    Mutant("fsir_screen_sensitivity_halved", "FSIR's private screen declares half the change a record makes to the spreads",
           "privsdr/federated/client.py", 'Sensitivity(2.0 / n, "linf", RELATION, "||C s_j||', 'Sensitivity(1.0 / n, "linf", RELATION, "||C s_j||',
           ('tests/test_column_bounds.py',)),
    Mutant("pride_no_bias_correction", "certified PRIDE leaves the noisy sketches' attenuation in (issue 23's fit)",
           "privsdr/vertical/pride.py", 'return self.mode == "certified" and self.cv_mode != "none"', "return False",
           ('tests/test_pride_shrinkage.py',)),
    Mutant("pride_no_held_out_fallback", "certified PRIDE keeps a block its held-out errors cannot tell from the mean",
           "privsdr/vertical/pride.py", "        if trivial:\n            fitted = {", "        if False:\n            fitted = {",
           ('tests/test_pride_shrinkage.py',)),
    Mutant("pride_held_out_no_bonferroni", "PRIDE's held-out test ignores that lambda was chosen on the same errors",
           "privsdr/vertical/pride.py", "* len(grid))", "* 1)", ('tests/test_pride_shrinkage.py',)),
    Mutant("dpbcd_no_shrinkage", "certified DP-BCD keeps every step however noisy (issue 23's fit)",
           "privsdr/vertical/dpbcd.py", 'shrink=c.shrinkage == "james_stein"', "shrink=False", ('tests/test_dpbcd_shrinkage.py',)),
    # issue 15: the privacy filters across runs (each rule against its paper's formula, and adaptively chosen runs)
    Mutant("filter_advanced_drops_half_sum_sq", "advanced filter without the sum eps_r^2 / 2 term",
           "privsdr/accounting/filters.py", "    return outward(math.sqrt(2.0 * math.log(1.0 / delta_f) * sq) + 0.5 * sq)",
           "    return outward(math.sqrt(2.0 * math.log(1.0 / delta_f) * sq))", ("tests/test_filters.py",)),
    Mutant("filter_advanced_full_delta", "advanced filter lets sum delta_r take all of delta (delta_f not set aside)",
           "privsdr/accounting/filters.py", "sum_up([r.delta for r in runs]) > delta - delta_f:", "sum_up([r.delta for r in runs]) > delta:",
           ("tests/test_filters.py",)),
    Mutant("filter_basic_ignores_delta", "basic filter admits whatever sum delta_r is",
           "privsdr/accounting/filters.py", "    if sum_up([r.delta for r in runs]) > delta:\n        return math.inf\n", "",
           ("tests/test_filters.py",)),
    Mutant("filter_rdp_drops_union_bound", "Renyi filter converts at ln(1/delta), as if the order were fixed in advance",
           "privsdr/accounting/filters.py", "    eps = rho + math.log(len(FILTER_ORDERS) / delta) / (alphas - 1.0)",
           "    eps = rho + math.log(1.0 / delta) / (alphas - 1.0)", ("tests/test_filters.py",)),
    Mutant("filter_gdp_max_mu", "GDP filter takes the largest run's mu instead of sqrt(sum mu_r^2)",
           "privsdr/accounting/filters.py", "    mu = math.sqrt(math.fsum(r.mu**2 for r in runs))",
           "    mu = max(r.mu for r in runs)", ("tests/test_filters.py",)),
    Mutant("filter_run_mu_max", "a run's mu from its largest Gaussian release only",
           "privsdr/accounting/filters.py",
           "    return math.fsum(math.inf if e.noise_multiplier == 0 else 1.0 / e.noise_multiplier**2 for e in gaussians)",
           "    return max(math.inf if e.noise_multiplier == 0 else 1.0 / e.noise_multiplier**2 for e in gaussians)",
           ("tests/test_filters.py",)),
    Mutant("filter_run_delta_dropped", "a run enters the filters with delta_r = 0",
           "privsdr/accounting/filters.py", "    return RunProfile(float(cost.epsilon), float(delta), exp, mu_of(exp))",
           "    return RunProfile(float(cost.epsilon), 0.0, exp, mu_of(exp))", ("tests/test_filters.py",)),
    Mutant("filter_lazy_rdp_curve_is_zero", "a run's RDP curve, computed on first read, is read as zero (the rdp and best filters under-charge)",
           "privsdr/accounting/filters.py", '            object.__setattr__(self, "_rdp", rdp_of(self._rdp))',
           '            object.__setattr__(self, "_rdp", tuple(0.0 for _ in FILTER_ORDERS))', ("tests/test_filters.py",)),
    Mutant("filter_best_full_delta", "best holds every rule to delta instead of delta / 4",
           "privsdr/accounting/filters.py", "        share = delta / len(RULES)", "        share = delta", ("tests/test_filters.py",)),
    Mutant("ledger_runs_non_adaptive", "the ledger composes all runs as if fixed in advance (PLD across runs)",
           "privsdr/accounting/ledger.py", "        if len(groups) <= 1:", "        if True:", ("tests/test_filters.py",)),
    Mutant("commit_plan_runs_twice", "a committed plan joins its batch on every run, not once",
           "privsdr/accounting/ledger.py", "            if batch.plans.count(h) > sum(1 for r in used if r.plan_hash == h):",
           "            if h in batch.plans:", ("tests/test_filters.py",)),
    # issue 16: chunked / Dask fits and ledgers under scikit-learn's clone
    Mutant("chunked_sir_clip_doubled", "the chunked DPSIR clips each chunk at twice the public bound",
           "privsdr/algorithms/sir_moments.py", "    bounds = column_bounds(bound, p)\n    shift = public_center(center, p)\n    labels",
           "    bounds = 2 * column_bounds(bound, p)\n    shift = public_center(center, p)\n    labels", ("tests/test_scale.py",)),
    Mutant("chunked_sir_plan_for_2n", "the chunked DPSIR calibrates for 2n rows (sensitivities from the wrong n: half the noise)",
           "privsdr/algorithms/dpsir.py", "calibrated = self._allocate(self.build_plan(n, p, budget), budget, ledger)\n        return n, p, bounds",
           "calibrated = self._allocate(self.build_plan(2 * n, p, budget), budget, ledger)\n        return n, p, bounds",
           ("tests/test_scale.py",)),
    Mutant("chunked_mean_cov_unclipped", "the chunked DPMeanCovariance does not clip its chunks",
           "privsdr/algorithms/mean_covariance.py", "RowParts(shift=center, box=bounds, l2=clip), (\"x_sum\", \"xtx\"))",
           "RowParts(shift=center, box=None, l2=None), (\"x_sum\", \"xtx\"))", ("tests/test_scale.py",)),
    Mutant("chunked_pls_clip_doubled", "the chunked DPPLS clips x at twice bound_x",
           "privsdr/algorithms/_pls_queries.py", "np.broadcast_to(center, (m,)), y_center, bound_x, bound_y))",
           "np.broadcast_to(center, (m,)), y_center, 2 * bound_x, bound_y))", ("tests/test_scale.py",)),
    Mutant("dask_last_chunk_twice", "the Dask reduction adds the last chunk twice",
           "privsdr/rows.py", "    for part in results:  # in chunk order", "    for part in results + results[-1:]:  # in chunk order",
           ("tests/test_scale.py",)),
    Mutant("clone_copies_the_ledger", "Ledger.__deepcopy__ removed: clone gives every GridSearchCV fit a fresh account",
           "privsdr/accounting/ledger.py", "    def __deepcopy__(self, memo: dict[int, Any]) -> Ledger:\n        return self\n", "",
           ("tests/test_sklearn.py",)),
    Mutant("detached_ledger_spends", "an unpickled in-memory ledger (a joblib worker's copy) may spend",
           "privsdr/accounting/ledger.py", "                              f\"process {self.pid} that made it)\")\n        if self._detached is not None:",
           "                              f\"process {self.pid} that made it)\")\n        if False:",
           ("tests/test_sklearn.py", "tests/test_default_ledger.py")),
    # issue 21: a release noised and charged correctly while its noise-free twin is used or sent; a node charged to
    # part of the records it reads; refusals one record can flip; runs that stop early; committed batches
    Mutant("moments_noise_free_proportions", "the DPSIR moments kernel uses the noise-free slice proportions",
           "privsdr/algorithms/sir_moments.py", "    return MomentRelease.from_released(from_run(run, MOMENT_NODES, n=n, source=source))",
           "    return __import__(\"attrs\").evolve(MomentRelease.from_released(from_run(run, MOMENT_NODES, n=n, source=source)), "
           "proportions=counts / n)",
           ("tests/test_replay.py",)),
    Mutant("dpbcd_sends_noise_free_gram", "a DP-BCD party sends its noise-free Gram while the noisy one is charged",
           "privsdr/vertical/dpbcd.py", '{**state, "gram": gram, "gram_raw": out, "gram_scale": spec.scale}',
           '{**state, "gram": gram, "gram_raw": steps.gram_query(steps.clip_block(party.X, C)), "gram_scale": spec.scale}',
           ("tests/test_replay.py",)),
    Mutant("s1_deflates_with_noise_free_loadings", "DPPLS S1 deflates with the noise-free loadings p, c",
           "privsdr/algorithms/_pls_modes.py", "        p, ca = g / h, r / h\n        E, f = iterative_deflate(E, f, w, p, ca, Cx, Cy)",
           "        p, ca = g / h, r / h\n        E, f = iterative_deflate(E, f, w, stats_a[\"g\"] / float(stats_a[\"h\"][0]), "
           "float(stats_a[\"r\"][0]) / float(stats_a[\"h\"][0]), Cx, Cy)", ("tests/test_replay.py",)),
    Mutant("mean_over_all_rows_charged_to_half", "the onepass DP mean reads every row but is charged to the init half",
           "privsdr/algorithms/dpsir.py", "                     weight=0.2, calibration=\"analytic\", parents=tuple(plan.nodes),",
           "                     weight=0.2, calibration=\"analytic\", parents=tuple(plan.nodes), scope=init_scope,",
           ("tests/test_replay.py",)),
    Mutant("mean_over_all_rows_says_half", "the onepass DP mean is charged to the init half and says it reads those rows only",
           "privsdr/algorithms/dpsir.py", "                     weight=0.2, calibration=\"analytic\", parents=tuple(plan.nodes),",
           "                     weight=0.2, calibration=\"analytic\", parents=tuple(plan.nodes), scope=init_scope,",
           ("tests/test_replay.py",),
           more=(("privsdr/algorithms/dpsir.py", "        dp_mean = np.asarray(run.release(\"mean\", mean / X.shape[0]))",
                  "        dp_mean = np.asarray(run.release(\"mean\", mean / X.shape[0], rows=run.rows_of(\"mean\")))"),)),
    Mutant("chunked_pls_refuses_constant_y", "the chunked DPPLS refuses a constant y (a refusal one record can flip)",
           "privsdr/algorithms/pls.py", "        # no \"y is constant\" refusal: a chunked fit is certified",
           "        if np.allclose(total[\"xty\"], total[\"y_sum\"] / total[\"count\"] * total[\"x_sum\"]):\n"
           "            raise ValidationError(\"y is constant\")\n        # no \"y is constant\" refusal: a chunked fit is certified",
           ("tests/test_bad_inputs.py", "tests/test_replay.py")),
    Mutant("dpbcd_certified_rank_refusal", "certified DP-BCD refuses a rank-deficient block (a refusal one record can flip)",
           "privsdr/vertical/dpbcd.py", "            if self.config.mode != \"certified\" and full_rank(party.X) < m:",
           "            if full_rank(party.X) < m:", ("tests/test_bad_inputs.py", "tests/test_replay.py")),
    Mutant("early_stop_priced_on_releases", "a run that stops early is charged only the nodes it released",
           "privsdr/accounting/ledger.py", "        if not self.charged or self.closed:\n            return []",
           "        if True:\n            return []", ("tests/test_ledger.py", "tests/test_journal.py")),
    Mutant("dead_run_priced_on_releases", "a run whose process died after a charge is priced on its charges only",
           "privsdr/accounting/ledger.py", "        return charged + self.uncharged if ended and charged else charged",
           "        return charged", ("tests/test_journal.py", "tests/test_ledger.py")),
    Mutant("skipped_committed_plan_is_free", "a committed plan that is never run frees its budget",
           "privsdr/accounting/ledger.py", "        if self.slots is None:\n            return []",
           "        if True:\n            return []", ("tests/test_filters.py",)),
    # issue 22: secure aggregation (distributed discrete Gaussian shares, MPyC parties)
    Mutant("secure_share_variance_halved", "each party's noise share has half the variance the calibration needs",
           "privsdr/mechanisms/distributed.py", "                      sigma * sigma / honest, parties, honest, d)",
           "                      sigma * sigma / honest / 2, parties, honest, d)", ("tests/test_secure.py", "tests/test_secure_sites.py")),
    Mutant("secure_shares_ignore_colluders", "the calibration counts the colluders' shares as if they were secret",
           "privsdr/mechanisms/distributed.py", "    return parties, colluders, parties - colluders",
           "    return parties, colluders, parties", ("tests/test_secure.py", "tests/test_fsir_secure.py")),
    Mutant("secure_party_sends_noise_free", "a party sends its rounded statistic without its noise share",
           "privsdr/secure/party.py", "            part = part + e.astype(np.int64)", "            part = part + 0 * e.astype(np.int64)",
           ("tests/test_secure.py", "tests/test_secure_vertical.py", "tests/test_secure_sites.py")),
    Mutant("secure_release_opens_noise_free_sum", "the release is the noise-free sum of the contributions",
           "privsdr/secure/aggregate.py", "        values[node.name] = value\n",
           "        values[node.name] = value = np.asarray(plain[node.name], dtype=float).reshape(np.shape(value))\n",
           ("tests/test_secure.py",)),
    Mutant("secure_charged_after_the_parties", "nodes charged only when the parties succeed (a dropout is free)",
           "privsdr/secure/aggregate.py", "    run.issue(*names)  # write-ahead", "    pass  # write-ahead",
           ("tests/test_secure.py",)),
    # issue 33: the parties agree on one public job before anyone is charged
    Mutant("secure_charged_before_the_agreement", "nodes charged before the parties have compared their public jobs",
           "privsdr/secure/aggregate.py", "    try:\n        opened = parties(job, charge)",
           "    charge()\n    try:\n        opened = parties(job, lambda: None)", ("tests/test_secure.py",)),
    Mutant("secure_digest_omits_the_plan_record", "the job digest leaves out the calibrated plan (budget, accountant, events)",
           "privsdr/secure/job.py", '{**canonical(self), "bits": self.bits}', '{**canonical(self), "bits": self.bits, "public": ""}',
           ("tests/test_secure.py",)),
    Mutant("secure_digest_of_the_layout_only", "the job digest covers parties and t only (no budget, no noise shares)",
           "privsdr/secure/job.py", '{**canonical(self), "bits": self.bits}', '{"parties": list(self.parties), "threshold": self.threshold}',
           ("tests/test_secure.py", "tests/test_vertical_secure_cli.py")),
    Mutant("secure_party_takes_its_whole_journal", "a secure CLI party spends what its journal holds, not the configured budget",
           "privsdr/cli/vertical_secure.py", "budget=budget, ledger=ledger, accountant=accountant)",
           "budget=None if ledger is not None else budget, ledger=ledger, accountant=accountant)",
           ("tests/test_vertical_secure_cli.py",)),
    Mutant("secure_fsir_sums_over_own_rows", "each client divides its sums by its own n_k (sensitivity 1/N no longer holds)",
           "privsdr/federated/secure_fit.py", 'return {"slice_sums": sums / N, "slice_counts": counts / N, "second_moment": (Xt.T @ Xt) / N}',
           'return {"slice_sums": sums / len(Xt), "slice_counts": counts / len(Xt), "second_moment": (Xt.T @ Xt) / len(Xt)}',
           ("tests/test_fsir_secure.py",)),
    Mutant("secure_field_too_small", "the secure integers are sized 20 bits short of the sums they must hold (the opening wraps)",
           "privsdr/secure/job.py", "    bits = int(worst).bit_length() + 1  # exact", "    bits = int(worst).bit_length() - 19  # exact",
           ("tests/test_secure_views.py",)),
    # issue 34 item 4: secure horizontal fits (SecureSites: the secure sum of the sites' declared blocks)
    Mutant("secure_sites_unclipped_site_sums", "each site sums its rows unclipped (AdaSSP over sites: the Gram's sensitivity no longer holds)",
           "privsdr/algorithms/adassp.py",
           'partial(ssp_statistics, x_center=c["x_center"], y_center=c["y_center"], bound_x=c["bound_x"], bound_y=c["bound_y"]),\n                          lambda released, report, plan, ledger: self._finish_released(released, report, plan, ledger, c, None, m)',
           'partial(ssp_statistics, x_center=c["x_center"], y_center=c["y_center"], bound_x=1e3, bound_y=1e3),\n                          lambda released, report, plan, ledger: self._finish_released(released, report, plan, ledger, c, None, m)',
           ("tests/test_secure_sites.py",)),
    Mutant("secure_sites_mean_covariance_over_own_rows", "each site divides its sums by its own n_k, not the public N (replace-one 2C/N no longer holds)",
           "privsdr/algorithms/mean_covariance.py", 'return {"mean": local["x_sum"] / N, "second_moment": local["xtx"] / N}',
           'return {"mean": local["x_sum"] / len(X), "second_moment": local["xtx"] / len(X)}', ("tests/test_secure_sites.py",)),
    Mutant("secure_sites_field_from_site_rows", "the secure sums' field is sized from the sites' row counts (N leaks into the job and report)",
           "privsdr/federated/secure_sites.py", "site_bounds(blocks, int(self.max_rows))", "site_bounds(blocks, max(X.shape[0] for X, _ in checked))",
           ("tests/test_secure_sites.py",)),
    Mutant("adassp_lambda_min_half_sensitivity", "lambda_min declared at C^2 / 2 (half its Weyl bound): half its noise",
           "privsdr/algorithms/adassp.py", 'gram.gram_eigenvalue(row_bound, RELATION)', 'gram.gram_eigenvalue(row_bound / math.sqrt(2.0), RELATION)',
           ("tests/test_adassp.py",)),
    Mutant("adassp_ridge_from_noise_free_lambda_min", "the ridge rule reads the noise-free lambda_min (its released twin unused)",
           "privsdr/algorithms/adassp.py", "        return self._finish_released(from_run(run, names, n=public_n, source=source), run.report, calibrated, ledger, c, X_raw, shape[1])",
           "        released = from_run(run, names, n=public_n, source=source)\n"
           "        released = Released({**released.arrays, \"lambda_min\": [np.linalg.eigvalsh(statistics[\"xtx\"])[0]]}, released.scales, released.n, released.relation, released.source) if not c[\"shrink\"] else released\n"
           "        return self._finish_released(released, run.report, calibrated, ledger, c, X_raw, shape[1])",
           ("tests/test_adassp.py", "tests/test_replay.py")),
    Mutant("adassp_xty_sensitivity_without_row_bound", "X^T y declared at C_y instead of C C_y",
           "privsdr/algorithms/adassp.py", 'gram.xty(row_bound, label_bound, RELATION)', 'gram.xty(1.0, label_bound, RELATION)',
           ("tests/test_adassp.py",)),
    Mutant("relation_conversion_keeps_sensitivity", "add/remove plans join a replace-one ledger without doubling their sensitivities",
           "privsdr/plan/graph.py", "doubled = Sensitivity(2.0 * s.value, s.norm, target,", "doubled = Sensitivity(1.0 * s.value, s.norm, target,",
           ("tests/test_one_journal.py",)),
    Mutant("adassp_solves_with_the_noise_free_gram", "the published variant's coefficients come from the noise-free Gram (the release is charged, unused)",
           "privsdr/algorithms/adassp.py", "        return self._finish_released(from_run(run, names, n=public_n, source=source), run.report, calibrated, ledger, c, X_raw, shape[1])",
           "        released = from_run(run, names, n=public_n, source=source)\n"
           "        released = Released({**released.arrays, \"xtx\": statistics[\"xtx\"]}, released.scales, released.n, released.relation, released.source) if not c[\"shrink\"] else released\n"
           "        return self._finish_released(released, run.report, calibrated, ledger, c, X_raw, shape[1])",
           ("tests/test_adassp.py", "tests/test_replay.py")),
    # issue 33 item 3: the certified AdaSSP releases DPPLS S2's statistics (the same nodes, ``_pls_modes``)
    Mutant("adassp_centred_x_sum_half_sensitivity", "the certified AdaSSP's x_sum (S2's node) declared at C_x / 2",
           "privsdr/algorithms/_pls_modes.py", 'gram.column_sum(Cx, RELATION)',
           'gram.column_sum(Cx / 2, RELATION)', ("tests/test_never_worse.py",)),
    Mutant("adassp_centred_y_sum_half_sensitivity", "the certified AdaSSP's y_sum (S2's node) declared at C_y / 2",
           "privsdr/algorithms/_pls_modes.py", 'gram.label_sum(Cy, RELATION)',
           'gram.label_sum(Cy / 2, RELATION)', ("tests/test_never_worse.py",)),
    Mutant("adassp_centred_xtx_half_sensitivity", "the certified AdaSSP's X^T X (S2's node) declared at C_x^2 / 2",
           "privsdr/algorithms/_pls_modes.py", 'plan.add("xtx", "symmetric_gaussian", gram.xtx(Cx, RELATION),',
           'plan.add("xtx", "symmetric_gaussian", gram.xtx(Cx / 2 ** 0.5, RELATION),', ("tests/test_never_worse.py",)),
    Mutant("adassp_y_sum_noise_halved", "the label sum gets half its noise (twice the sum released, the output halved)",
           "privsdr/algorithms/adassp.py", 'else statistics[name])', 'else 2.0 * statistics[name] if name == "y_sum" else statistics[name])',
           ("tests/test_never_worse.py",),
           more=(("privsdr/algorithms/adassp.py", "        return self._finish_released(from_run(run, names, n=public_n, source=source), run.report, calibrated, ledger, c, X_raw, shape[1])",
                  "        released = from_run(run, names, n=public_n, source=source)\n"
                  "        if c[\"shrink\"]:\n            released = Released({**released.arrays, \"y_sum\": released[\"y_sum\"] / 2}, released.scales, released.n, released.relation, released.source)\n"
                  "        return self._finish_released(released, run.report, calibrated, ledger, c, X_raw, shape[1])"),)),
    Mutant("adassp_stacked_bootstrap_without_noise", "the certified fit's stacked bootstrap sees no change of its slopes (ratio 0: "
           "never warns, never falls back towards the DP mean)",
           "privsdr/released/regression.py", "            deltas = stacked_slopes(stacked) - b\n",
           "            deltas = 0.0 * stacked_slopes(stacked)\n", ("tests/test_adassp.py",)),
    Mutant("adassp_fallback_reads_noise_free_sum", "the certified fit's DP mean reads the noise-free label sum (its release charged, unused)",
           "privsdr/algorithms/adassp.py", "        return self._finish_released(from_run(run, names, n=public_n, source=source), run.report, calibrated, ledger, c, X_raw, shape[1])",
           "        released = from_run(run, names, n=public_n, source=source)\n"
           "        released = Released({**released.arrays, \"y_sum\": statistics[\"y_sum\"]}, released.scales, released.n, released.relation, released.source) if c[\"shrink\"] else released\n"
           "        return self._finish_released(released, run.report, calibrated, ledger, c, X_raw, shape[1])",
           ("tests/test_never_worse.py", "tests/test_replay.py")),
    Mutant("adassp_centred_solves_with_the_noise_free_gram", "the certified fit's slopes come from the noise-free X^T X (the release is charged, unused)",
           "privsdr/algorithms/adassp.py", "        return self._finish_released(from_run(run, names, n=public_n, source=source), run.report, calibrated, ledger, c, X_raw, shape[1])",
           "        released = from_run(run, names, n=public_n, source=source)\n"
           "        released = Released({**released.arrays, \"xtx\": statistics[\"xtx\"]}, released.scales, released.n, released.relation, released.source) if c[\"shrink\"] else released\n"
           "        return self._finish_released(released, run.report, calibrated, ledger, c, X_raw, shape[1])",
           ("tests/test_adassp.py", "tests/test_replay.py")),
    # issue 34: vertical-secure SIR and mean/covariance (declared blocks of the secure Gram)
    Mutant("secure_vertical_sir_half_sensitivity", "the secure SIR moments declare half their sensitivities (per = 2): half their noise",
           "privsdr/vertical/secure_moments.py", 'row_bound=c["C"] * c["scale"], per=1.0,', 'row_bound=c["C"] * c["scale"], per=2.0,',
           ("tests/test_secure_vertical_moments.py",)),
    Mutant("secure_vertical_column_sums_half_sensitivity", "the secure column sums declare C instead of 2C (replace-one)",
           "privsdr/vertical/secure_moments.py", "gram.column_sum(C, RELATION)", "gram.column_sum(C, RELATION, 2.0)",
           ("tests/test_secure_vertical_moments.py",)),
    Mutant("secure_vertical_slice_indicators_doubled", "the label holder's slice indicators are 2 instead of 1 (the counts' sensitivity doubles)",
           "privsdr/vertical/secure_moments.py", 'indicators[np.arange(labels.size), labels] = one',
           'indicators[np.arange(labels.size), labels] = 2 * one', ("tests/test_secure_vertical_moments.py",)),
    Mutant("secure_gram_only_the_last_row_chunk", "the cross-products keep only the last row chunk's products",
           "privsdr/secure/party.py", "sums[(g, h)] = product if (g, h) not in sums else sums[(g, h)] + product", "sums[(g, h)] = product",
           ("tests/test_secure_vertical_moments.py",)),
    Mutant("secure_sum_drops_the_other_contributors", "the opened sum holds the first contributor's vector only (its noise share alone)",
           "privsdr/secure/party.py", "    for share in shares[1:]:\n        total = total + share", "    for share in shares[1:]:\n        total = total + 0 * share",
           ("tests/test_secure_vertical_moments.py",)),
    # issue 23: the secure vertical Gram (cross-products of secret-shared columns)
    Mutant("secure_vertical_gram_half_sensitivity", "the secure Gram declares ||z||^2 / 2 (half its sensitivity): half its noise",
           "privsdr/vertical/secure_run.py", '                 gram.xtx(C, RELATION),', '                 gram.xtx(C, RELATION, 2.0),',
           ("tests/test_secure_vertical.py",)),
    Mutant("secure_vertical_xty_sensitivity_without_row_bound", "the secure X^T y declares C_y instead of C C_y",
           "privsdr/vertical/secure_run.py", 'gram.xty(C, Cy, RELATION)', 'gram.xty(1.0, Cy, RELATION)',
           ("tests/test_secure_vertical.py",)),
    Mutant("secure_vertical_clip_without_rounding_room", "a party clips its rows to its bound and then rounds (rows can exceed it)",
           "privsdr/secure/crossproducts.py", "    room = bound - math.sqrt(X.shape[1]) * gamma / 2.0\n", "    room = bound\n",
           ("tests/test_secure_vertical.py",)),
    Mutant("secure_vertical_helper_adds_no_share", "the helper takes part without a noise share (the calibration counts it)",
           "privsdr/secure/party.py", "        if name in job.inputs:  # a helper adds a noise share",
           "        if name in job.products.parties:  # a helper adds a noise share",
           ("tests/test_secure_vertical.py", "tests/test_secure_contributors.py")),
    Mutant("secure_vertical_solves_with_the_noise_free_gram", "the coefficients come from the noise-free Gram (the release is charged, unused)",
           "privsdr/vertical/secure_run.py", "        released = from_run(run, NODES, n=0, source=\"secure vertical Gram\")\n",
           "        released = from_run(run, NODES, n=0, source=\"secure vertical Gram\")\n"
           "        Zp = np.column_stack([blocks[k] for k in names] + ([np.full(N, c[\"constant\"])] if c[\"intercept\"] else [])) * 2.0**e\n"
           "        released = Released({**released.arrays, \"xtx\": Zp.T @ Zp}, released.scales, 0, released.relation, released.source)\n",
           ("tests/test_secure_vertical.py", "tests/test_replay.py")),
    # -- issue 33 item 7: breaks the suite did not see (the secure paths' probes) -------------------------------------
    Mutant("secure_vertical_row_bound_from_one_party", "the secure Gram's row bound is the largest party's bound, not sqrt(sum C_i^2)",
           "privsdr/vertical/secure_run.py", "        C = math.sqrt(sum(b * b for b in bounds.values()))\n",
           "        C = max(bounds.values())\n", ("tests/test_secure_sensitivity_probe.py",)),
    Mutant("secure_vertical_constant_column_left_out", "the intercept's constant column is left out of the augmented row's norm",
           "privsdr/vertical/secure_run.py", "        row_bound = math.hypot(C, constant * 2.0**exponent) if self.fit_intercept else C\n",
           "        row_bound = C\n", ("tests/test_secure_sensitivity_probe.py",)),
    Mutant("secure_fsir_row_bound_from_column_bound", "the secure FSIR moments take the per-column bound R as the row bound (not R sqrt(p))",
           "privsdr/federated/protocol.py", "            return float(self.bound) * math.sqrt(p)  # type: ignore[arg-type]",
           "            return float(self.bound)  # type: ignore[arg-type]", ("tests/test_secure_sensitivity_probe.py",)),
    Mutant("secure_vertical_label_not_clipped", "the label holder rounds its labels to the grid without clipping them",
           "privsdr/secure/crossproducts.py", "np.rint(np.clip(np.asarray(y, dtype=float), -room, room) / gamma)",
           "np.rint(np.asarray(y, dtype=float) / gamma)", ("tests/test_secure_sensitivity_probe.py",)),
    Mutant("secure_vertical_rows_not_clipped", "a party rounds its rows to the grid without clipping them",
           "privsdr/secure/crossproducts.py", "    return np.rint(clip_rows_l2(X, room) / gamma).astype(np.int64)",
           "    return np.rint(X / gamma).astype(np.int64)", ("tests/test_secure_sensitivity_probe.py",)),
    Mutant("secure_opening_accepts_one_share_fewer", "a secure release runs with one contributor fewer than its calibration counted",
           "privsdr/secure/aggregate.py", 'if int(spec.params["parties"]) != len(contributors) or',
           'if int(spec.params["parties"]) > len(contributors) + 1 or', ("tests/test_secure_contributors.py",)),
    Mutant("secure_opening_ignores_calibrated_colluders", "a secure release runs with more colluders than its calibration counted",
           "privsdr/secure/aggregate.py", ' or int(spec.params["colluders"]) != threshold:', ":",
           ("tests/test_secure_contributors.py",)),
    Mutant("secure_opening_drops_a_contributor", "the party program opens the sum without the first contributor's vector",
           "privsdr/secure/party.py", "    senders = [job.index(name) for name in job.inputs]",
           "    senders = [job.index(name) for name in job.inputs[1:]]", ("tests/test_secure_contributors.py",)),
    Mutant("sparse_selection_reads_unclipped_rows", "the sparse designs' slice-spread scores read the rows before clipping them",
           "privsdr/core/sufficient.py", "    Xc = np.clip(np.asarray(X, dtype=float) - center, -bounds, bounds)\n    n = Xc.shape[0]",
           "    Xc = np.asarray(X, dtype=float) - center\n    n = Xc.shape[0]", ("tests/test_sparse_moments_probe.py",)),
    Mutant("sparse_pca_selection_before_clipping", "sparse PCA selects on the mean squares of the unclipped rows (clips after the selection)",
           "privsdr/algorithms/sparse_pca.py", 'run.release("support", np.mean(Xc * Xc, axis=0) / bounds**2)',
           'run.release("support", np.mean(X * X, axis=0) / bounds**2)', ("tests/test_sparse_moments_probe.py",)),
    Mutant("noisy_top_charges_a_round_fewer", "noisy_top charges s - 1 selection events for its s rounds",
           "privsdr/mechanisms/selection.py", '        return (PureEvent(div_up(2.0, z)),) * int(spec.params["s"])',
           '        return (PureEvent(div_up(2.0, z)),) * max(1, int(spec.params["s"]) - 1)', ("tests/test_mechanism_draws.py",)),
    Mutant("noisy_max_rounds_draw_twice", "each noisy-max round takes the larger of two noisy looks (one event charged)",
           "privsdr/mechanisms/selection.py", "        noisy = scores + (rng.laplace(0.0, b, size=scores.shape) if b > 0 else 0.0)",
           "        noisy = scores + (np.maximum(rng.laplace(0.0, b, size=scores.shape), rng.laplace(0.0, b, size=scores.shape)) "
           "if b > 0 else 0.0)", ("tests/test_mechanism_draws.py",)),
    Mutant("peeling_charges_one_selection", "peeling charges one selection event for its s rounds",
           "privsdr/mechanisms/selection.py", "        return (select,) * s + (LaplaceEvent(z),) * (d * s)",
           "        return (select,) + (LaplaceEvent(z),) * (d * s)", ("tests/test_mechanism_draws.py",)),
    Mutant("report_noisy_max_draws_twice", "report-noisy-max adds two Laplace vectors and charges one selection",
           "privsdr/mechanisms/selection.py", "            scores = scores + rng.laplace(0.0, spec.scale, size=scores.shape)\n        return int(np.argmax(scores))",
           "            scores = scores + rng.laplace(0.0, spec.scale, size=scores.shape)\n"
           "            scores = scores + rng.laplace(0.0, spec.scale, size=scores.shape)\n        return int(np.argmax(scores))",
           ("tests/test_mechanism_draws.py",)),
    Mutant("chunked_pls_labels_not_clipped", "a DPPLS row chunk sums its labels before clipping them",
           "privsdr/algorithms/_pls_queries.py", "np.broadcast_to(center, (m,)), y_center, bound_x, bound_y))",
           "np.broadcast_to(center, (m,)), y_center, bound_x, np.inf))", ("tests/test_chunked_release_probe.py",)),
    Mutant("chunked_pls_rows_not_clipped", "a DPPLS row chunk sums its rows before clipping them",
           "privsdr/algorithms/_pls_queries.py", "np.broadcast_to(center, (m,)), y_center, bound_x, bound_y))",
           "np.broadcast_to(center, (m,)), y_center, np.inf, bound_y))", ("tests/test_chunked_release_probe.py",)),
    Mutant("gram_pass_block_unclipped", "the one blocked pass sums every block after the first without clipping it",
           "privsdr/core/gram_pass.py", "        rule.clip_into(Ub, X[start:stop], name)\n",
           "        rule.clip_into(Ub, X[start:stop], name) if start == 0 else np.copyto(Ub, X[start:stop])\n",
           ("tests/test_gram_pass.py",)),
    Mutant("gram_pass_finiteness_unchecked", "the one blocked pass no longer refuses NaN or inf (the clip hides inf)",
           "privsdr/core/gram_pass.py", "        if not finite:\n", "        if False:\n", ("tests/test_gram_pass.py",)),
    Mutant("gram_pass_clipped_rows_uncorrected", "the uncopied L2 pass sums X_b^T X_b without removing the clipped rows' excess",
           "privsdr/core/gram_pass.py", "                G -= Xc.T @ (Xc * (1.0 - s * s)[:, None])\n", "                pass\n",
           ("tests/test_gram_pass.py",)),
    Mutant("gram_pass_norms_finiteness_unchecked", "the uncopied L2 pass no longer sends a block with NaN or inf to the checking rule",
           "privsdr/core/gram_pass.py", "    if not np.isfinite(q.sum()):\n        return None\n", "    if False:\n        return None\n",
           ("tests/test_gram_pass.py",)),
    Mutant("chunked_sir_rows_not_clipped", "a DPSIR row chunk sums its rows before clipping them",
           "privsdr/algorithms/sir_moments.py", "core.clipped_sufficient_sums(X, labels, len(cuts) + 1, shift, bounds)",
           "core.clipped_sufficient_sums(X, labels, len(cuts) + 1, shift, 1e6 * bounds)", ("tests/test_chunked_release_probe.py",)),
    # -- the default ledger and party processes (issue 25) ---------------------------------------------------
    Mutant("tracker_drops_group_privacy", "an add/remove fit is entered in the tracking ledger at its own epsilon (no group privacy)",
           "privsdr/accounting/tracking.py", "            if self.source == Relation.ADD_REMOVE:", "            if False:",
           ("tests/test_default_ledger.py",)),
    Mutant("implicit_fit_not_tracked", "a fit without ledger= is not entered in the tracking ledger",
           "privsdr/accounting/default.py", "        ledger.report_to, ledger.report_as = _tracker(), who\n", "        pass\n",
           ("tests/test_default_ledger.py",)),
    Mutant("configured_default_ledger_ignored", "a fit without ledger= ignores the configured default ledger",
           "privsdr/plan/fit_budget.py", "        ledger = ledger_for(self)\n", "        ledger = ledger\n", ("tests/test_default_ledger.py",)),
    Mutant("forked_in_memory_ledger_spends", "a forked child spends its copy of an in-memory ledger (a second account)",
           "privsdr/accounting/ledger.py", "self._detached is None and self.pid != os.getpid():",
           "self._detached is None and False:", ("tests/test_default_ledger.py",)),
    Mutant("worker_gets_a_fresh_budget", "an estimator pickled to a worker leaves the configured default ledger behind",
           "privsdr/_sklearn.py", "                state = {**state, CARRIED: configured}\n", "                pass\n",
           ("tests/test_default_ledger.py",)),
    Mutant("party_charges_before_every_party_is_ready", "a party charges its first stage without waiting for the others' ready",
           "privsdr/parties/party_process.py",
           "        for other in others:\n            _checked(box.fetch(message_id(0, other, \"ready\")",
           "        for other in ():\n            _checked(box.fetch(message_id(0, other, \"ready\")", ("tests/test_vertical_cli.py",)),
    Mutant("failed_party_posts_no_abort", "a party that fails leaves the others waiting (no abort message)",
           "privsdr/parties/party_process.py", "\"abort\", 0, {}, {\"why\": why}", "\"quiet\", 0, {}, {\"why\": why}",
           ("tests/test_vertical_cli.py",)),
    # -- labels that follow the warnings (issue 33 item 1) ---------------------------------------------------
    Mutant("pipeline_label_left_certified", "a fit behind a row-reading Pipeline step keeps its CERTIFIED report (warning only)",
           "privsdr/_pipeline.py", "        obj.__dict__[self.name] = relabelled_behind_reading_steps(obj, value)\n",
           "        obj.__dict__[self.name] = value\n", ("tests/test_labels.py",)),
    Mutant("pipeline_label_skips_party_reports", "the per-party reports of a vertical fit behind a row-reading step stay CERTIFIED",
           "privsdr/_pipeline.py", "        out = {key: _relabelled(item, reason) for key, item in value.items()}",
           "        out = dict(value)", ("tests/test_labels.py",)),
    Mutant("not_private_keeps_the_status", "a relabelled report changes its status line but keeps status certified",
           "privsdr/report/report.py", "        return attrs.evolve(self, status=\"none\", status_line=",
           "        return attrs.evolve(self, status=self.status, status_line=", ("tests/test_labels.py",)),
    # issue 33: the secure paths' trust-model sentences, the field of an add/remove fit, the label's public rescale
    Mutant("secure_server_said_to_see_sums_only", "the trust model drops the shares a non-contributor (the FSIR server) receives",
           "privsdr/secure/trust.py", '        objects = ["vector"] if peer in job.inputs else []',
           '        objects = ["vector"] if peer in job.inputs and party in job.inputs else []', ("tests/test_secure_views.py",)),
    Mutant("secure_gram_claims_deviation_is_harmless", "the secure Gram's report says a deviating party cannot hurt privacy",
           "privsdr/secure/trust.py", '        deviation = ("semi-honest parties: every party runs the protocol as written, and the other',
           '        deviation = deviation or ("semi-honest parties: every party runs the protocol as written, and the other',
           ("tests/test_secure_views.py",)),
    Mutant("secure_vertical_field_from_N", "the secure vertical field is sized from the data's N (field_bits tells N)",
           "privsdr/vertical/secure_run.py", '    return products, c["max_rows"] * max(c["row_bound"], c["label_bound"]) ** 2',
           '    return products, layout.n_rows * max(c["row_bound"], c["label_bound"]) ** 2', ("tests/test_secure_views.py",)),
    Mutant("secure_label_scale_read_off_y", "the label's rescale is read off the data's largest |y| instead of its public bound",
           "privsdr/vertical/secure_run.py",
           '        c = self._checked(names, widths)\n        if own is not None and own not in c["parties"]:',
           '        c = self._checked(names, widths)\n        for p in data.values():\n            if p.holds_label:\n'
           '                c["label_scale"] = label_scale(math.sqrt(sum(b * b for b in c["bounds"].values())), '
           'float(np.abs(np.asarray(p.y) - c["y_center"]).max()))\n'
           '                c["label_bound"] = c["declared_label_bound"] * c["label_scale"]\n'
           '        if own is not None and own not in c["parties"]:', ("tests/test_secure_views.py",)),
    # issue 36: the channels between the parties (addresses, mutual TLS)
    Mutant("secure_listener_skips_name_check", "a listening party accepts any CA-signed certificate for the id a client claims",
           "privsdr/secure/party.py", "        if claimed >= self.own or (self.tls and not names_party(cert, claimed)):",
           "        if claimed >= self.own:", ("tests/test_secure_tls.py",)),
    Mutant("secure_ssl_dropped", "MPyC runs without --ssl although the job says TLS",
           "privsdr/secure/party.py", '    return argv + (["--ssl"] if job.tls else []) + ["--no-log"]', '    return argv + ["--no-log"]',
           ("tests/test_secure_tls.py", "tests/test_secure_views.py")),
    Mutant("secure_listens_everywhere", "a party listens on every interface instead of its configured address",
           "privsdr/secure/party.py", "NamedPeer(protocol_factory(), own, tls, refused), own_host, port",
           'NamedPeer(protocol_factory(), own, tls, refused), "0.0.0.0", port', ("tests/test_secure_tls.py",)),
    Mutant("secure_run_ca_for_network", "a CA made for the run is used for network addresses too",
           "privsdr/secure/launch.py", "        if not job.loopback:\n            raise PrivsdrError(\"TLS to network addresses",
           "        if False:\n            raise PrivsdrError(\"TLS to network addresses", ("tests/test_secure_tls.py",)),
    Mutant("secure_dialer_trusts_system_cas", "a dialing party trusts the operating system's CA store besides the job's CA",
           "privsdr/secure/party.py", '    os.environ["SSL_CERT_FILE"], os.environ["SSL_CERT_DIR"] = str(creds.ca), str(config)\n',
           "", ("tests/test_secure_tls.py", "tests/test_secure_views.py")),
    Mutant("secure_key_mode_unchecked", "a key file others may read is used",
           "privsdr/network/certificates.py", "    if st.st_mode & 0o077:", "    if False:", ("tests/test_secure_tls.py",)),
    Mutant("secure_plaintext_said_tls", "the trust model says mutual TLS for a plaintext run",
           "privsdr/secure/trust.py", "    if job.tls:\n        return (f\"channels: {TLS_CHANNELS}",
           "    if True:\n        return (f\"channels: {TLS_CHANNELS}", ("tests/test_secure_views.py",)),
    Mutant("secure_charge_before_ready", "a secure party opens its run and charges before every party is ready (issue 36)",
           "privsdr/secure/aggregate.py", "    try:\n        party.agree()\n    except BaseException as exc:",
           "    try:\n        pass\n    except BaseException as exc:",
           ("tests/test_secure_fail_clean.py",)),
    Mutant("secure_statistics_on_disk", "a launcher writes a party's statistics into a temporary folder it never removes",
           "privsdr/secure/launch.py", "            payload = buffer.getvalue()\n",
           "            payload = buffer.getvalue()\n            import pathlib, tempfile\n"
           "            (pathlib.Path(tempfile.mkdtemp(prefix='privsdr-secure-')) / 'in.npz').write_bytes(payload)\n",
           ("tests/test_secure_fail_clean.py",)),
    Mutant("secure_no_parent_death_signal", "a party process does not ask to die with its launcher",
           "privsdr/secure/party.py", "            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG", "            pass",
           ("tests/test_secure_fail_clean.py",)),
    # issue 36: one party per host, agreement before any run is opened, charge failures and linkage refusals told
    Mutant("secure_launcher_opens_run_before_agreement", "a one-machine launcher opens its run (journal reserve) before the parties agree",
           "privsdr/secure/aggregate.py", "    return _agreed(start_parties(job, inputs, certificates=certificates, record_view=record_view))",
           "    return start_parties(job, inputs, certificates=certificates, record_view=record_view).__enter__()",
           ("tests/test_fsir_hosts.py",),
           (("privsdr/secure/aggregate.py", "        return _run(run, job, lambda j, charge: session.finish(charge), plain, server)",
             "        return _run(run, job, lambda j, charge: (session.agree(), session.finish(charge))[1], plain, server)"),)),
    Mutant("secure_no_charged_round", "after the ready point a party whose charge failed is not heard: the others draw and open",
           "privsdr/secure/party.py", "    missing = uncharged(job, await mpc.transfer(charged_message(charged)))",
           "    missing: list[str] = []", ("tests/test_fsir_hosts.py",)),
    Mutant("fsir_party_does_not_decline", "an FSIR site whose CSV is refused does not tell the others (they wait for their timeout)",
           "privsdr/cli/fsir.py", "preflight(outputs, args.report, open_journal, load, decline)",
           "preflight(outputs, args.report, open_journal, load, None)", ("tests/test_fsir_hosts.py",)),
    Mutant("linkage_refusal_not_told", "a linkage party refused for its identifiers never tells its peers",
           "privsdr/linkage/refusal.py", "    if name not in config.names:\n        return", "    if True:\n        return",
           ("tests/test_linkage.py",)),
    Mutant("secure_peer_unpickles_classes", "a party unpickles whatever its peers send (MPyC's own pickle.loads)",
           "privsdr/secure/party.py", "        if (module, name) in self.ALLOWED:", "        if True:",
           ("tests/test_secure_fail_clean.py",)),
    Mutant("linkage_sends_hashes", "linkage sends H(id) of its identifiers instead of blinding them",
           "privsdr/linkage/psi.py",
           "    current = blind(hash_all([normalised[j] for j in permutation], workers), mask, workers=workers)",
           "    current = hash_all([normalised[j] for j in permutation], workers)", ("tests/test_linkage.py",)),
    Mutant("linkage_exponent_one", "linkage's secret scalar is 1 (elements go out unblinded)",
           "privsdr/linkage/psi.py", "    return bytes(rbcl.crypto_core_ristretto255_scalar_random())", "    return bytes([1] + [0] * 31)",
           ("tests/test_linkage.py",)),
    Mutant("linkage_unshuffled", "a party sends its blinded identifiers in its row order",
           "privsdr/linkage/psi.py", "    secrets.SystemRandom().shuffle(order)\n", "", ("tests/test_linkage.py",)),
    Mutant("linkage_no_mask", "with three parties the last hop of a list computes its owner's fully blinded values",
           "privsdr/linkage/psi.py", "    mask = scalar if k == 2 else new_scalar()", "    mask = scalar; new_scalar()", ("tests/test_linkage.py",),
           more=(("privsdr/linkage/psi.py", "final = incoming if k == 2 else", "final = incoming if True else"),)),
    Mutant("linkage_peer_name_unchecked", "a TLS peer's certificate is not checked for the expected party name",
           "privsdr/linkage/channel.py", "        if expected not in names:", "        if False:", ("tests/test_linkage.py",)),
    Mutant("linkage_plaintext_anywhere", "plaintext linkage to a non-loopback address without the explicit flag",
           "privsdr/linkage/channel.py", "    if remote and not tls and not allow_plaintext:", "    if False:", ("tests/test_linkage.py",)),
    Mutant("linkage_ids_checked_late", "identifiers are checked only after the party has connected",
           "privsdr/linkage/psi.py", "    normalised = normalise_ids(ids, casefold=config.casefold, pattern=config.pattern)\n",
           "    normalised = [str(i).strip() for i in ids]\n", ("tests/test_linkage.py",),
           more=(("privsdr/linkage/psi.py", "    try:\n        sizes = {name: len(normalised)}",
                  "    try:\n        normalise_ids(ids, casefold=config.casefold, pattern=config.pattern)\n"
                  "        sizes = {name: len(normalised)}"),)),
    Mutant("linkage_tls_ignored", "linkage connections stay plaintext although TLS contexts were given",
           "privsdr/linkage/channel.py",
           "sock = context.wrap_socket(raw, server_hostname=peer.name if context.check_hostname else None) if context else raw",
           "sock = raw", ("tests/test_linkage.py",),
           more=(("privsdr/linkage/channel.py", "sock = context.wrap_socket(raw, server_side=True) if context else raw", "sock = raw"),)),
    # -- issue 34 item 3: the consumers read a Released and nothing else ------------------------------------------------
    Mutant("msc_record_carries_the_noise_free_count", "MSC's record carries the noise-free row count (its release charged, unused)",
           "privsdr/algorithms/spectral.py",
           '        released = from_run(run, ("count", "sum"), n=0, source="in memory" if summed is None else "chunks")\n',
           '        released = from_run(run, ("count", "sum"), n=0, source="in memory" if summed is None else "chunks")\n'
           '        released = Released({**released.arrays, "count": [float(shape[0])]}, released.scales, released.n, released.relation, '
           'released.source, released.nodes)\n', ("tests/test_replay.py",)),
    Mutant("mean_covariance_diagnostic_reads_one_scale", "DPMeanCovariance's diagnostic reads the mean's noise sd for the covariance's",
           "privsdr/algorithms/mean_covariance.py",
           'ratios = noise_ratios(released.scales["mean"], released.scales["second_moment"], clip, bounds)',
           'ratios = noise_ratios(released.scales["mean"], released.scales["mean"], clip, bounds)', ("tests/test_consumers.py",)),
    Mutant("dppls_pretest_reads_the_gram_scale", "DPPLS S2's pre-test takes X^T X's noise sd for X^T y's",
           "privsdr/released/ssp.py", '    var_u: float | np.ndarray = scales.get("xty", 0.0) ** 2',
           '    var_u: float | np.ndarray = scales.get("xtx", 0.0) ** 2', ("tests/test_consumers.py",)),
    Mutant("fsir_pooled_noise_sd_unweighted", "the FSIR server's pooled record gives every client's noise the same weight",
           "privsdr/federated/server.py",
           "scales = {k: math.sqrt(sum((n * r.scales[k]) ** 2 for n, r in zip(sizes, records, strict=True))) / N for k in arrays}",
           "scales = {k: math.sqrt(sum(r.scales[k] ** 2 for r in records)) / len(records) for k in arrays}", ("tests/test_consumers.py",)),
    Mutant("sparse_sir_margin_at_the_sums_scale", "SparseDPSIR's selection margin reads the slice sums' noise sd, not the selection's",
           "privsdr/algorithms/dpsir.py", 'float(released.scales["support"])', 'float(released.scales["slice_sums"])',
           ("tests/test_consumers.py",)),
    # issue 36 item 1: the mailbox protocols over the network (privsdr/parties/transport.py)
    Mutant("mailbox_peer_name_unchecked", "a mailbox peer's certificate is not checked for the party it claims to be",
           _NET, "        if not self.tls:\n            return\n        names", "        if True:\n            return\n        names",
           (_NET_TESTS + "::test_an_impostor_is_refused_before_anything_is_charged",)),
    Mutant("mailbox_listens_everywhere", "a mailbox party listens on every interface, not on its configured host",
           _NET, "listener = socket.create_server((host, port))", 'listener = socket.create_server(("0.0.0.0", port))',
           (_NET_TESTS + "::test_each_party_listens_on_its_own_address_only_and_the_last_nowhere",)),
    Mutant("mailbox_party_sigterm_unhandled", "SIGTERM kills a mailbox party without telling the others or closing its run",
           "privsdr/cli/_parties.py", "    with interrupts():\n        return _play_party(", "    if True:\n        return _play_party(",
           (_NET_TESTS + "::test_sigterm_stops_a_cli_party_which_tells_the_others_and_closes_its_journal_run",)),
    Mutant("mailbox_plaintext_anywhere", "a mailbox party talks plaintext to a network address",
           _NET, "        if not tls and remote:", "        if False:", (_NET_TESTS + "::test_plaintext_to_a_network_address_is_refused_without_the_flag",)),
    Mutant("mailbox_config_plaintext_anywhere", "a mailbox configuration with --plaintext and network addresses is written",
           "privsdr/cli/_parties.py", "    if args.plaintext and remote:", "    if False:",
           (_NET_TESTS + "::test_plaintext_to_a_network_address_is_refused_without_the_flag",)),
    Mutant("mailbox_tls_ignored", "mailbox connections stay plaintext although the configuration asks for TLS",
           _NET, "sock=sock, ssl=self._client_ctx,", "sock=sock, ssl=None,", (_NET_TESTS + "::test_a_relay_between_the_two_parties_sees_only_tls_records",),
           more=((_NET, "conn, ssl=self._server_ctx,", "conn, ssl=None,"),
                 (_NET, "        if not self.tls:\n            return\n        names", "        if True:\n            return\n        names"))),
    Mutant("mailbox_sender_unchecked", "a mailbox message signed with another party's name is accepted from the peer",
           _NET, "if message.sender != peer or self.name not in message.recipients:", "if False:",
           (_NET_TESTS + "::test_a_message_signed_with_another_senders_name_stops_the_run",)),
    Mutant("mailbox_vanished_peer_unnoticed", "a mailbox peer whose connection drops is not noticed",
           _NET, "                self._gone[peer] = why", "                pass",
           (_NET_TESTS + "::test_a_peer_that_vanishes_is_named_and_the_journal_closes_the_run_as_failed",)),
    Mutant("mailbox_connect_after_reserve", "a mailbox party connects only at its first message, after its run is reserved",
           "privsdr/parties/party_process.py", "        box.progress = progress or box.progress\n        box.open()\n",
           "        box.progress = progress or box.progress\n", (_NET_TESTS + "::test_an_impostor_is_refused_before_anything_is_charged",)),
    Mutant("mailbox_messages_on_disk", "the network mailbox also saves each message it sends to a file",
           _NET, "        frame = self.frames.pack(MESSAGE, message.to_bytes())\n",
           "        frame = self.frames.pack(MESSAGE, message.to_bytes())\n        message.save(f\"{message.id}.npz\")\n",
           (_NET_TESTS + "::test_the_network_run_gives_the_folder_runs_model_and_writes_nothing",)),
    Mutant("mailbox_trusts_public_cas", "a party's dialling TLS context trusts the system's public CAs beside the parties' CA",
           "privsdr/network/certificates.py", "        context = ssl.create_default_context(purpose, cafile=str(creds.ca))",
           "        context = ssl.create_default_context(purpose)\n        context.load_verify_locations(cafile=str(creds.ca))",
           (_NET_TESTS + "::test_each_partys_channels_trust_the_parties_ca_and_no_other",)),
    Mutant("linkage_control_chars_accepted", "the ASCII fast path of the identifier check lets control characters through",
           "privsdr/linkage/normalise.py", "        return not text.isprintable()", "        return False", ("tests/test_linkage.py",)),
    # issue 34: a secure Gram party's rows streamed after the charge; helpers that add only a noise share
    Mutant("secure_gram_frames_unchecked", "a party process inputs its streamed rows without checking them against the public bounds",
           "privsdr/secure/party.py",
           "            frame[group.name] = checked_rows(self.job, group, np.frombuffer(raw, dtype=\"<i8\").reshape(rows, group.width), rows)",
           "            frame[group.name] = np.frombuffer(raw, dtype=\"<i8\").reshape(rows, group.width)",
           ("tests/test_secure_vertical_streaming.py::test_a_frame_beyond_the_public_bounds_is_refused_by_the_reader",)),
    Mutant("secure_gram_helpers_uncounted", "the secure moments are calibrated for one share more than the parties draw",
           "privsdr/vertical/secure_moments.py", 'distributed=(len(c["parties"]), c["t"])', 'distributed=(len(c["parties"]) + 1, c["t"])',
           ("tests/test_secure_helpers.py",)),
    # the memos of a fit's fixed costs (tests/test_fixed_costs.py): what they save must never lower a price
    Mutant("ledger_memo_blind_to_dead_runs", "the ledger's memo of spent/remaining is not redone when a run's process dies",
           "privsdr/accounting/ledger.py", "        key = (self._generation, tuple(run.run_id for run in self._runs.values() if not run.closed and self._ended(run)))",
           "        key = (self._generation, ())", ("tests/test_fixed_costs.py",)),
    Mutant("interned_charges_by_label", "a plan's charge is replaced by an earlier plan's charge of the same label",
           "privsdr/plan/graph.py", "    return charge\n\n\nclass CalibratedPlan:",
           "    return _BY_LABEL.setdefault(charge.label, charge)\n\n\n_BY_LABEL: dict[str, Charge] = {}\n\n\nclass CalibratedPlan:",
           ("tests/test_fixed_costs.py", "tests/test_ledger.py")),
    Mutant("worst_path_max_not_sum", "the allocation takes the largest weight of whole-scope nodes for their sum",
           "privsdr/plan/graph.py", "        return sum_up([float(v) for v in values]) if values else 0.0",
           "        return max(values) if values else 0.0", ("tests/test_fixed_costs.py", "tests/test_ledger.py")),
    # the party fork server (privsdr/secure/forks.py) must be a fresh interpreter: a fork of the launcher would hand every
    # party the launcher's memory (every party's input, the launcher's secrets)
    Mutant("secure_fork_server_forked_from_launcher", "the party fork server is a fork of the launcher, not a fresh interpreter",
           "privsdr/secure/forks.py",
           "            self.proc = subprocess.Popen([*_SERVER_COMMAND, str(theirs.fileno())],\n"
           "                                         pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,\n"
           "                                         cwd=\"/\", env=env)\n",
           "            pid = os.fork()\n"
           "            if pid == 0:\n"
           "                self._sock.close()\n"
           "                from .fork_server import serve\n"
           "                os._exit(serve(theirs.fileno()))\n"
           "            self.proc = _Forked(pid)  # type: ignore[assignment]\n",
           ("tests/test_secure_forks.py::test_forked_parties_hold_nothing_private_of_the_launcher_or_of_each_other",),
           more=(("privsdr/secure/forks.py", "\n\nclass ForkedProcess:",
             "\n\nclass _Forked:\n"
             "    def __init__(self, pid: int) -> None:\n"
             "        self.pid, self.returncode = pid, None\n\n"
             "    def poll(self) -> int | None:\n"
             "        if self.returncode is None and os.waitpid(self.pid, os.WNOHANG)[0]:\n"
             "            self.returncode = 0\n"
             "        return self.returncode\n\n"
             "    def wait(self, timeout: float | None = None) -> int:\n"
             "        if self.returncode is None:\n"
             "            os.waitpid(self.pid, 0)\n"
             "            self.returncode = 0\n"
             "        return 0\n\n"
             "    def kill(self) -> None:\n"
             "        os.kill(self.pid, signal.SIGKILL)\n\n\n"
             "class ForkedProcess:"),)),
    # the launcher must learn a forked party's exit status whatever its fd numbers (select.select fails from 1024 on;
    # swallowed, wait() timed out after the parties were charged)
    Mutant("secure_fork_status_by_select", "the launcher waits for a forked party's exit status with select.select",
           "privsdr/secure/forks.py",
           "            poller = select.poll()\n"
           "            poller.register(status, select.POLLIN)\n"
           "            if poller.poll(left * 1000.0):\n",
           "            try:\n"
           "                readable = select.select([status], [], [], left)[0]\n"
           "            except (OSError, ValueError):  # as a closed fd: given up\n"
           "                break\n"
           "            if readable:\n",
           ("tests/test_secure_forks.py::test_a_launcher_holding_more_than_1024_files_gets_its_forked_partys_exit_status",)),
    # an answer of the fork server must be the answer to the request just sent: a stray one read as a fork's answer
    # gives the launcher another process's PID (which it may then signal by group)
    Mutant("secure_fork_answers_unnumbered", "the launcher takes any answer of the fork server for its request's",
           "privsdr/secure/forks.py", "            if answer.get(\"n\") != self._number:", "            if False:",
           ("tests/test_secure_forks.py::test_an_answer_to_another_request_breaks_the_server",)),
)

# issue 34: the Gram-block spec (privsdr/released/gram.py). Each rule of block_value halved once in the spec; one entry
# per estimator that releases a block through that rule, so that each estimator's own tests must catch it.
_GRAM = "privsdr/released/gram.py"
_GRAM_RULES = {
    "add_remove_square": ('value, rule = a.square, f"||', 'value, rule = a.square / 2, f"||'),
    "add_remove_product": ("value, rule = a.radius * other.radius, f", "value, rule = a.radius * other.radius / 2, f"),
    "replace_one_square": ("value, rule = math.sqrt(2.0) * a.square, f", "value, rule = math.sqrt(2.0) * a.square / 2, f"),
    "replace_one_constant": ("value, rule = fixed.radius * moving.diameter, f", "value, rule = fixed.radius * moving.diameter / 2, f"),
    "replace_one_product": ("value, rule = 2.0 * a.radius * other.radius, f", "value, rule = a.radius * other.radius, f"),
}
_GRAM_USERS = (  # (rule, estimator, what it releases through the rule, its tests)
    ("add_remove_square", "dppls", "DPPLS S2's X^T X and count", ("tests/test_pls_privacy.py",)),
    ("add_remove_square", "adassp", "AdaSSP's Z^T Z and lambda_min", ("tests/test_adassp.py",)),
    ("add_remove_square", "secure_vertical", "the secure vertical Gram Z^T Z", ("tests/test_secure_vertical.py",)),
    ("add_remove_product", "dppls", "DPPLS's X^T y and centring sums", ("tests/test_pls_privacy.py",)),
    ("add_remove_product", "adassp", "AdaSSP's Z^T y", ("tests/test_adassp.py",)),
    ("add_remove_product", "secure_vertical", "the secure vertical Z^T y", ("tests/test_secure_vertical.py",)),
    ("replace_one_square", "dpsir_moments", "DPSIR's second moment", ("tests/test_dpsir_moments.py",)),
    ("replace_one_square", "fsir", "an FSIR client's second moment", ("tests/test_fsir_client_probe.py", "tests/test_federated.py")),
    ("replace_one_square", "mean_cov", "DPMeanCovariance's second moment", ("tests/test_mean_covariance.py", "tests/test_privacy_mutants.py")),
    ("replace_one_square", "dpbcd", "a DP-BCD party's Gram", ("tests/test_dpbcd_certified.py",)),
    ("replace_one_square", "sparse_pca", "sparse PCA's Sigma and SparseDPSIR's moments", ("tests/test_sparse_moments.py",)),
    ("replace_one_square", "dpsir_init", "DPSIR's B.1 Sigma on the init part", ("tests/test_dpsir.py",)),
    ("replace_one_constant", "dpsir_moments", "DPSIR's slice counts", ("tests/test_dpsir_moments.py",)),
    ("replace_one_constant", "fsir", "an FSIR client's slice proportions", ("tests/test_fsir_client_probe.py",)),
    ("replace_one_constant", "dpsir_onepass", "DPSIR's DP mean (onepass centring)", ("tests/test_dpsir_moments.py",)),
    ("replace_one_constant", "mean_cov", "DPMeanCovariance's mean", ("tests/test_mean_covariance.py", "tests/test_privacy_mutants.py")),
    ("replace_one_constant", "dp_scaler", "DPStandardScaler's two column sums", ("tests/test_preprocessing.py",)),
    ("replace_one_constant", "dpbcd", "DP-BCD's label sum", ("tests/test_dpbcd_certified.py",)),
    ("replace_one_product", "dpsir_moments", "DPSIR's slice sums", ("tests/test_dpsir_moments.py",)),
    ("replace_one_product", "fsir", "an FSIR client's slice means", ("tests/test_fsir_client_probe.py", "tests/test_federated.py")),
    ("replace_one_product", "dpbcd", "DP-BCD's X_i^T y", ("tests/test_dpbcd_certified.py",)),
)
MUTANTS += tuple(
    Mutant(f"gram_{rule}_halved_{user}", f"the spec halves its {rule.replace('_', ' ')} rule: {what}", _GRAM, *_GRAM_RULES[rule], tests)
    for rule, user, what, tests in _GRAM_USERS
)


def run_mutant(mutant: Mutant, python: str, timeout: float) -> tuple[bool, float, str]:
    with tempfile.TemporaryDirectory(prefix="privsdr-mutant-") as tmp:
        work = Path(tmp)
        shutil.copytree(ROOT / "privsdr", work / "privsdr")
        shutil.copytree(ROOT / "tests", work / "tests")
        shutil.copy(ROOT / "pyproject.toml", work / "pyproject.toml")
        for path, old, new in mutant.edits:
            target = work / path
            text = target.read_text()
            if text.count(old) != 1:
                return False, 0.0, f"NOT APPLIED: the text to replace occurs {text.count(old)} times in {path}"
            target.write_text(text.replace(old, new))
        env = dict(os.environ, PYTHONPATH=str(work))
        start = time.perf_counter()
        # its own session: on a timeout the whole group (pytest and its xdist workers) is ended, and only it
        proc = subprocess.Popen([python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *mutant.tests], cwd=work, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return True, time.perf_counter() - start, "timed out (counted as caught)"
        seconds = time.perf_counter() - start
        failed = [line for line in stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
        last = (stdout.strip() or stderr.strip() or f"pytest exited with {proc.returncode} and printed nothing").splitlines()[-1]
        return proc.returncode != 0, seconds, (failed[0] if failed else last)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=None, help="run the mutants whose name contains this text")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if args.only is None or args.only in m.name]
    if args.list:
        for m in chosen:
            print(f"{m.name:<45} {m.what}")
        return 0
    rows = []
    for m in chosen:
        caught, seconds, detail = run_mutant(m, sys.executable, args.timeout)
        rows.append((m, caught, seconds, detail))
        print(f"{'caught' if caught else 'MISSED':<7} {m.name:<45} {seconds:6.1f} s  {detail}", flush=True)
    n_caught = sum(1 for _, c, _, _ in rows if c)
    print("\n| mutant | what it breaks | caught | by |\n|---|---|---|---|")
    for m, caught, _, detail in rows:
        print(f"| `{m.name}` | {m.what} | {'yes' if caught else '**no**'} | {detail.replace('|', '/')} |")
    print(f"\nmutation score: {n_caught} / {len(rows)} caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
