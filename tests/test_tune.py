"""``tune``: NCCL's tuner configuration from a simulation. The file read back as the plugin reads
it has rows exactly at the sizes where the fastest simulated kernel beats NCCL's pick, over
ranges that cover the sweep without overlap, the same bytes on a rerun; bad input is one line,
exit 2, nothing written; a file the plugin would misread is refused by the parser."""

import itertools

import pytest
import yaml

from simulator.cli import main
from simulator.errors import InputError
from simulator.model.collective import Collective
from simulator.model.nccl import NcclAlgorithm, Protocol
from simulator.output.tuner_conf import (
    MAX_LINE_CHARS,
    SizeChoice,
    TunerRow,
    parse_tuner_conf,
    size_ranges,
    tuner_rows,
)
from simulator.tune import tune
from simulator.version import __version__

ONE_H100 = {"name": "tune-h100", "topology": {"preset": "dgx_h100"},
            "sizes": ["1KiB", "4KiB", "256KiB", "4MiB", "64MiB"], "verify": False}
"""One DGX H100 at five sizes: NCCL picks ring/LL to 256 KiB and NVLS above; the simulated
double binary tree (NCCL's Tree) beats the pick at 1 and 4 KiB (LL) and 4 MiB (LL128)."""


def write(tmp_path, scenario, name="s.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(scenario))
    return path


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """The one-H100 scenario tuned through the command line: the scenario's path, the file's, its
    text and what was printed."""
    import contextlib
    import io

    directory = tmp_path_factory.mktemp("tune")
    path = write(directory, ONE_H100)
    output = directory / "nccl_tuner.conf"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["tune", str(path), "--output", str(output), "--quiet"]) == 0
    return path, output, output.read_text(), printed.getvalue()


def test_the_rows_are_the_sizes_where_the_fastest_kernel_beats_nccls_pick(tuned):
    _, _, text, _ = tuned
    rows = parse_tuner_conf(text, "nccl_tuner.conf")
    # by hand: 1 and 4 KiB merge into one row, up to the geometric midpoint of 4 KiB and
    # 256 KiB (32 KiB); 4 MiB from just above √(256 KiB × 4 MiB) = 1 MiB to √(4 MiB × 64 MiB)
    assert [row.line() for row in rows] == ["allreduce,1024,32768,tree,ll,-1,1,8,1,-1",
                                            "allreduce,1048577,16777216,tree,ll128,-1,1,8,1,-1"]
    assert rows[0] == TunerRow(Collective.ALLREDUCE, 1024, 32768, NcclAlgorithm.TREE,
                               Protocol.LL, -1, 1, 8, 1, -1)


def test_the_ranges_cover_the_sweep_without_overlap_exactly_at_the_differing_sizes(tuned):
    _, _, text, _ = tuned
    rows = parse_tuner_conf(text, "nccl_tuner.conf")
    sizes = [1024, 4096, 262144, 4194304, 67108864]
    spans = size_ranges(sizes)
    # the sizes' ranges tile the sweep: each holds its size, each starts where the last ended
    assert spans[0][0] == sizes[0] and spans[-1][1] == sizes[-1]
    assert all(low <= size <= high for size, (low, high) in zip(sizes, spans, strict=True))
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(spans))
    # the rows do not overlap, and hold the sizes whose comment line names a faster kernel
    ordered = sorted((row.min_bytes, row.max_bytes) for row in rows)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ordered))
    table = {int(line.split()[1]): line for line in text.splitlines()
             if line.startswith("#") and len(line.split()) > 2 and line.split()[1].isdigit()}
    assert sorted(table) == sizes
    differing = [size for size in sizes if "(the pick)" not in table[size]]
    assert differing == [1024, 4096, 4194304]
    # ... each over exactly the ranges of its sizes, and naming the kernel their lines name
    covered = [[i for i, size in enumerate(sizes) if row.min_bytes <= size <= row.max_bytes]
               for row in rows]
    assert covered == [[0, 1], [3]]
    for row, held in zip(rows, covered, strict=True):
        assert (row.min_bytes, row.max_bytes) == (spans[held[0]][0], spans[held[-1]][1])
        for i in held:
            assert f"{row.algorithm.name.lower()}/{row.protocol.value.lower()} " \
                   "(double_binary_tree)" in table[sizes[i]]


def test_the_header_says_where_the_file_came_from_and_a_rerun_is_the_same_bytes(tuned, tmp_path):
    path, output, text, printed = tuned
    comments = " ".join(line[1:].strip() for line in text.splitlines()
                        if line.startswith("#"))  # the header's paragraphs, unwrapped
    assert f"Written by allreduce-sim {__version__}: python -m simulator tune {path} " in comments
    assert ("Simulated: scenario tune-h100, topology dgx_h100 (8 ranks on 1 node as NCCL counts "
            "them), allreduce of float32 sum, execution: nccl, NCCL 2.30's tuner; sizes 1024 to "
            "67108864 bytes (5).") in comments
    assert "Load it with NCCL_TUNER_PLUGIN=libnccl-tuner-example.so NCCL_TUNER_CONFIG_FILE=" \
           "<this file>." in comments
    assert max(len(line) for line in text.splitlines()) <= MAX_LINE_CHARS
    assert printed == text + f"# tuner configuration: {output} (2 rows)\n"
    again = tmp_path / "again.conf"
    assert main(["tune", str(path), "--output", str(again), "--quiet"]) == 0
    assert again.read_bytes() == text.encode()


def test_two_hosts_write_their_node_and_rank_counts(tmp_path):
    scenario = {**ONE_H100, "topology": {"preset": "dgx_h100", "nodes": 2},
                "sizes": ["1KiB", "1MiB", "64MiB"]}
    tuning = tune(scenario)
    assert (tuning.nodes, tuning.ranks) == (2, 16)
    assert [c.pick for c in tuning.chosen] == [
        (NcclAlgorithm.TREE, Protocol.LL), (NcclAlgorithm.TREE, Protocol.LL128),
        (NcclAlgorithm.NVLS_TREE, Protocol.SIMPLE)]
    assert [row.line() for row in tuning.rows] == ["allreduce,8388609,67108864,tree,simple,-1,2,"
                                                   "16,1,-1"]
    assert list(tuning.candidates) == ["ring", "nvls_tree", "double_binary_tree"]
    # every candidate at every size with each protocol NCCL runs it with: 3 + 1 + 3 a size
    assert len(tuning.results) == 3 * 7


def at(size, fastest, pick=(NcclAlgorithm.RING, Protocol.LL)):
    return SizeChoice(size, pick, 2.0, "x", fastest, 2.0 if fastest == pick else 1.0)


TREE = (NcclAlgorithm.TREE, Protocol.LL)
RING = (NcclAlgorithm.RING, Protocol.LL)


@pytest.mark.parametrize("chosen, lines", [
    ([at(4096, TREE)], ["allreduce,4096,4096,tree,ll,-1,1,8,1,-1"]),
    ([at(4096, TREE), at(4097, RING), at(4098, TREE)],  # neighbours one byte apart
     ["allreduce,4096,4096,tree,ll,-1,1,8,1,-1", "allreduce,4098,4098,tree,ll,-1,1,8,1,-1"]),
    ([at(1000, RING), at(3000, TREE), at(5000, TREE)],  # √(1000·3000) = 1732.05
     ["allreduce,1733,5000,tree,ll,-1,1,8,1,-1"]),
    ([at(1000, RING), at(3000, RING)], []),
    # two sizes with other picks but the same fastest kernel make one row
    ([at(1024, TREE), at(2048, TREE, pick=(NcclAlgorithm.NVLS, Protocol.SIMPLE))],
     ["allreduce,1024,2048,tree,ll,-1,1,8,1,-1"]),
])
def test_rows_by_hand(chosen, lines):
    assert [row.line() for row in tuner_rows(chosen, Collective.ALLREDUCE, 1, 8)] == lines


@pytest.mark.parametrize("scenario, message", [
    ({"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s", "latency": "1us"},
      "sizes": [1024]},
     "execution: expected execution: nccl: a tuner file chooses among NCCL's kernels and "
     "protocols, which only the nccl model times"),
    ({**ONE_H100, "collective": "broadcast"},
     "collective: expected allreduce, reduce_scatter, allgather: NCCL's model picks for no "
     "other, got broadcast"),
    ({**ONE_H100, "algorithms": ["direct", "ring"]},
     "algorithms: NCCL picks NVLS/Simple at 4194304 bytes, and the list leaves out its kernel: "
     "tune compares every size's fastest kernel with NCCL's pick, so it must run (use "
     "algorithms: auto, and protocol: auto)"),
    ({**ONE_H100, "protocol": "LL"},
     "protocol: NCCL picks NVLS/Simple at 4194304 bytes, and protocol LL leaves it out: "
     "tune compares every size's fastest kernel with NCCL's pick, so it must run (use "
     "algorithms: auto, and protocol: auto)"),
    ({**ONE_H100, "protocol": "Simple"},
     "protocol: NCCL picks Ring/LL at 1024 bytes, and protocol Simple leaves it out: tune "
     "compares every size's fastest kernel with NCCL's pick, so it must run (use algorithms: "
     "auto, and protocol: auto)"),
    ({**ONE_H100, "faults": [{"kind": "straggler", "rank": 1, "delay": "5us"}]},
     "faults: expected none: a tuner file holds for the healthy machine NCCL's tuner sees"),
    ({**ONE_H100, "nccl": {"symmetric": True}},
     "nccl.symmetric: expected false: on registered buffers NCCL runs its symmetric kernels "
     "ahead of any tuner plugin (src/scheduler/symmetric_sched.cc), which a tuner file cannot "
     "choose"),
])
def test_what_cannot_be_tuned_is_one_line_exit_2_nothing_written(tmp_path, capsys, scenario,
                                                                 message):
    path = write(tmp_path, scenario)
    output = tmp_path / "out" / "nccl_tuner.conf"
    assert main(["tune", str(path), "--output", str(output), "--quiet"]) == 2
    assert capsys.readouterr().err == f"{path}: {message}\n"
    assert not output.exists()


def test_an_output_that_is_the_scenario_or_a_directory_is_refused(tmp_path, capsys):
    path = write(tmp_path, ONE_H100)
    assert main(["tune", str(path), "--output", str(path)]) == 2
    assert capsys.readouterr().err == (f"command line: --output: {path} is an input of this run "
                                       f"({path}); choose another path\n")
    assert main(["tune", str(path), "--output", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"command line: --output: expected a file to write, but "
                                       f"{tmp_path} is a directory\n")
    assert path.read_text() == yaml.safe_dump(ONE_H100)


def test_a_failed_verification_writes_nothing(tmp_path, capsys, monkeypatch):
    import simulator.tune as tuning

    real = tuning.run_plan

    def wrong(*args, **kwargs):
        from dataclasses import replace

        return replace(real(*args, **kwargs), verified=False, max_abs_error=1.0)

    monkeypatch.setattr(tuning, "run_plan", wrong)
    path = write(tmp_path, {**ONE_H100, "sizes": ["1KiB"]})
    output = tmp_path / "nccl_tuner.conf"
    assert main(["tune", str(path), "--output", str(output), "--quiet"]) == 1
    assert capsys.readouterr().err == (f"{path}: verification failed for 7 run(s), first ring at "
                                       f"1024 bytes (max abs error 1)\n{path}: nothing written\n")
    assert not output.exists()


@pytest.mark.parametrize("line, message", [
    ("allreduce,0,65536,tree,simple,2,1,-1,-1", None),  # 9 fields: regBuff matches any
    ("allreduce,0,65536,tree,simple,2,1,-1", None),  # 8 fields: numPipeOps too
    ("allreduce,0,65536,tree,simple,2,1", "expected 8 to 10 comma-separated fields "
     "(collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,"
     "regBuff), got 7"),
    ("all_reduce,0,65536,tree,simple,2,1,-1", "expected one of the plugin's collectives "
     "(broadcast, reduce, allgather, reducescatter, allreduce), got 'all_reduce'"),
    ("allreduce,0,65536,Tree,simple,2,1,-1", "expected one of the plugin's algorithms (tree, "
     "ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat), got 'Tree'"),
    ("allreduce,0,65536,tree,LL,2,1,-1", "expected one of the plugin's protocols (ll, ll128, "
     "simple), got 'LL'"),
    ("allreduce,0,64KiB,tree,ll,2,1,-1", "expected a whole number in max_bytes, got '64KiB'"),
    ("allreduce,-1,65536,tree,ll,2,1,-1", "expected min_bytes of 0 or more, got -1"),
    ("allreduce,0,65536,tree,ll,-2,1,-1", "expected channels of -1 or more, got -2"),
    ("allreduce,65536,0,tree,ll,2,1,-1", "expected min_bytes at most max_bytes, got 65536 > 0"),
    ("# " + "x" * 300, "expected at most 254 characters (the plugin reads 255 bytes a line), "
     "got 302"),
])
def test_the_parser_reads_as_the_plugin_does_and_refuses_what_it_would_misread(line, message):
    text = "# a comment\n\n" + line + "\n"
    if message is None:
        [row] = parse_tuner_conf(text, "t.conf")
        assert (row.min_bytes, row.max_bytes, row.algorithm, row.channels, row.reg_buff) == (
            0, 65536, NcclAlgorithm.TREE, 2, -1)
        return
    with pytest.raises(InputError) as error:
        parse_tuner_conf(text, "t.conf")
    assert [str(p) for p in error.value.problems] == [f"t.conf: line 3: {message}"]
