"""A secure vertical Gram's rows stream to the party processes (issue 34: memory per party flat in N).

A data party's process receives its rows only after the charge, ``share_rows`` rows at a time, as its cross-products
loop reads them (``party.FrameReader``); its launcher writes them frame by frame (``launch.stream_rows``) from arrays
or from ``Chunks`` read again chunk by chunk (``crossproducts.ColumnStream``). Checked here: the frames give exactly
the whole input's statistics and rows, a stream's memory (launcher and reader together) does not grow with N, a
second pass that gives other rows stops the run, and real party processes report about the same peak memory at two
sizes eight times apart (the whole int64 block and its buffer took 16 bytes per entry before)."""
from __future__ import annotations

import math
import os
import threading
import tracemalloc
import warnings

import attrs
import numpy as np
import pytest
from conftest import gone

from privsdr import Budget, Chunks, ValidationError
from privsdr.secure.aggregate import SecureAggregationError
from privsdr.secure.crossproducts import Block, ColumnStream, CrossProducts, Group, row_frames
from privsdr.secure.job import AggregationJob, NodeJob
from privsdr.secure.launch import run_parties, stream_rows
from privsdr.secure.party import FrameReader, ShareRefused, gram_input
from privsdr.vertical import Party
from privsdr.vertical.secure_moments import SecureVerticalMeanCovariance

pytest.importorskip("mpyc")

WIDTHS = {"alice": 8, "bob": 2}
SHARE_ROWS = 512


def layout(N: int) -> AggregationJob:
    groups = [Group("alice", WIDTHS["alice"], "alice"), Group("bob", WIDTHS["bob"], "bob"), Group("1", 1, value=1)]
    products = CrossProducts(N, groups, [Block("xtx", ("alice", "bob", "1"))], -8, share_rows=SHARE_ROWS)
    W = sum(WIDTHS.values()) + 1
    node = NodeJob("xtx", W * (W + 1) // 2, 4.0**-8, (0, 1), float(N) * 64.0, W)
    return AggregationJob(["helper", "alice", "bob"], ["helper", "alice", "bob"], 1, (node,), 60.0, products)


def chunked_rows(N: int, width: int, seed: int, chunk: int = 700) -> ColumnStream:
    """Integer rows on the grid, generated chunk by chunk (never whole), the same on every pass."""
    def read():
        for start in range(0, N, chunk):
            yield np.random.default_rng([seed, start]).integers(-200, 200, (min(chunk, N - start), width))
    return ColumnStream(read, N, width)


def streamed(job: AggregationJob, name: str, rows: dict, keep: bool = True) -> tuple[FrameReader, list[np.ndarray]]:
    """Write party ``name``'s rows into a pipe as its launcher does and read them as its process does (``keep``: the
    frames read, else none)."""
    r, w = os.pipe()
    reader, frames, errors = FrameReader(r, job, name), [], []

    def write():
        with os.fdopen(w, "wb") as out:
            try:
                stream_rows(out.write, job.products, name, rows)
            except Exception as exc:  # noqa: BLE001 - the test reads it
                errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for start in range(0, job.products.rows, SHARE_ROWS):
            frame = reader.read(min(SHARE_ROWS, job.products.rows - start))[name]
            if keep:
                frames.append(frame)
    finally:
        writer.join()
        os.close(r)
    assert not errors, errors
    return reader, frames


def test_the_frames_give_the_whole_inputs_rows_and_statistics():
    N = 3 * SHARE_ROWS + 77
    job = layout(N)
    stream = chunked_rows(N, WIDTHS["alice"], 1)
    reader, frames = streamed(job, "alice", {"block": stream})
    local, held = gram_input(job, "alice", {"block": np.asarray(stream)})
    assert np.array_equal(np.concatenate(frames), held["alice"])
    assert reader.rows == N and np.array_equal(reader.local, local)  # the first party's constant term N c^2 too


def test_a_streams_memory_does_not_grow_with_N():
    """Launcher and reader together hold a frame and a chunk, whatever N: the traced peak at 8x the rows stays within
    a tenth of the larger N's whole int64 block (the whole block alone would be 8 N width bytes). tracemalloc traces
    every thread of the process, and another thread's allocations (a test process's own) can only add to a peak: each
    N's peak is the least of three runs."""
    peaks = {}
    for N in (4 * SHARE_ROWS, 32 * SHARE_ROWS):
        job = layout(N)
        runs = []
        for _ in range(3):
            tracemalloc.start()
            try:
                streamed(job, "alice", {"block": chunked_rows(N, WIDTHS["alice"], 2)}, keep=False)
                runs.append(tracemalloc.get_traced_memory()[1])
            finally:
                tracemalloc.stop()
        peaks[N] = min(runs)
    small, large = peaks.values()
    block = 32 * SHARE_ROWS * WIDTHS["alice"] * 8
    assert large - small < block / 10, (peaks, block)


def test_a_second_pass_with_other_rows_stops_the_stream():
    N = 2 * SHARE_ROWS
    job = layout(N)
    short = ColumnStream(lambda: iter([np.zeros((N - 5, WIDTHS["bob"]), dtype=np.int64)]), N, WIDTHS["bob"])
    with pytest.raises(ValidationError, match="fewer than"):
        stream_rows(lambda b: None, job.products, "bob", {"block": short})
    long = ColumnStream(lambda: iter([np.zeros((N + 1, WIDTHS["bob"]), dtype=np.int64)]), N, WIDTHS["bob"])
    with pytest.raises(ValidationError, match="more than"):
        stream_rows(lambda b: None, job.products, "bob", {"block": long})
    with pytest.raises(ValidationError, match="integers"):
        list(row_frames(np.zeros((3, 2)), 2, 2))


def test_a_frame_beyond_the_public_bounds_is_refused_by_the_reader():
    N = SHARE_ROWS
    job = layout(N)
    rows = np.zeros((N, WIDTHS["bob"]), dtype=np.int64)
    rows[-1, 0] = 10**9  # beyond sqrt of the node's bound in grid units
    with pytest.raises(ShareRefused, match="public bounds"):
        streamed(job, "bob", {"block": rows})


def test_a_party_processs_peak_memory_does_not_grow_with_N():
    """Two real runs of the party processes (``share_rows`` = 2048), N and 16 N rows streamed from chunks: each process
    reports its peak resident memory (VmHWM). Before the rows were streamed a party held its whole int64 block and the
    npz buffer it was read from, 16 bytes per entry; here no process grows by a third of that for the added rows."""
    peaks, share_rows = {}, 2048
    for N in (2 * share_rows, 16 * share_rows):
        job = layout(N)
        job = attrs.evolve(job, products=attrs.evolve(job.products, share_rows=share_rows))
        opened = run_parties(job, {"alice": {"block": chunked_rows(N, WIDTHS["alice"], 3)},
                                   "bob": {"block": chunked_rows(N, WIDTHS["bob"], 4)}})
        assert gone(opened.pids)
        peaks[N] = dict(opened.peak_rss_kib)
        assert set(peaks[N]) == {"helper", "alice", "bob"} and min(peaks[N].values()) > 0
    (small, before), (large, after) = peaks.items()
    whole = 16 * WIDTHS["alice"] * (large - small)  # what alice's process took more before, in bytes
    for name in before:
        assert (after[name] - before[name]) * 1024 < whole / 3, (name, peaks, whole)


def test_a_chunks_party_whose_second_pass_differs_stops_the_run_after_the_charge():
    """The first pass counts N rows; a second pass that ends early stops the party, every process ends, and the
    failure says why (the nodes were charged: nothing was released)."""
    N, calls = 600, []

    def read():
        calls.append(1)
        yield np.zeros((N if len(calls) == 1 else N - 100, 2))

    with warnings.catch_warnings(), pytest.raises(SecureAggregationError, match="fewer than the 600 rows") as info:
        warnings.simplefilter("ignore")
        SecureVerticalMeanCovariance(row_bound=math.sqrt(2), budget=Budget(1.0, 1e-6), timeout=60.0).fit(
            [Party("alice", Chunks(read, n_rows=N, n_features=2)), Party("bob", np.zeros((N, 2)))])
    assert info.value.charged and gone(info.value.pids)
