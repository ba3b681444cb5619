"""Figures: they render headless (Agg, matplotlib's object API), plot exactly the results file's
numbers (read back from the Figure objects by each line's gid), keep their size labels apart,
say so when a run had one rank, name the right winner per size, and set a measured sweep beside
the simulated one with the error computed as (simulated - measured) / measured."""

import csv
import io
import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from simulator import simulate
from simulator.cli import main
from simulator.output.crossover import crossover, crossover_figure
from simulator.output.figures import read_results
from simulator.output.plots import LinkRate, results_figure
from simulator.output.reference import Reference, errors, reference_figure
from simulator.output.writers import write_results
from simulator.scenario import scenario_from_dict
from simulator.settings import RunSettings
from tests.conftest import REPO

H200 = REPO / "docs" / "reference" / "nccl-tests-h200.csv"
SWITCH = {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s", "latency": "1us"}


def lines(figure):
    """Every data line of a figure by its gid."""
    return {line.get_gid(): line for axis in figure.axes for line in axis.get_lines()
            if line.get_gid()}


def rendered(figure):
    """Draw the figure on an Agg canvas (as savefig does) and return its renderer."""
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return canvas.get_renderer()


def overlapping(boxes):
    return [(a, b) for a, b in itertools.combinations(boxes, 2) if a.overlaps(b)]


def visible_ticks(axis, which):
    """The labels of the major ticks inside the axis's limits (those drawn)."""
    ax = axis.xaxis if which == "x" else axis.yaxis
    low, high = sorted(axis.get_xlim() if which == "x" else axis.get_ylim())
    return [(tick.label1.get_text(), tick.label1) for tick in ax.get_major_ticks()
            if low <= tick.get_loc() <= high and tick.label1.get_visible()
            and tick.label1.get_text()]


def hand_frame(times, *, ranks=4, protocols=None):
    """A results frame made by hand: {algorithm: {size: seconds}}."""
    rows = []
    for algorithm, by_size in times.items():
        for size, time_s in by_size.items():
            busbw = size / time_s / 1e9 * 2 * (ranks - 1) / ranks
            rows.append({"scenario": "hand", "topology": "switch", "ranks": ranks,
                         "collective": "allreduce", "algorithm": algorithm, "size_bytes": size,
                         "dtype": "float32", "op": "sum", "sim_time_s": time_s,
                         "model_time_s": time_s, "algbw_GBps": size / time_s / 1e9,
                         "busbw_GBps": busbw,
                         "protocol": (protocols or {}).get((algorithm, size), "")})
    return pd.DataFrame(rows)


def test_run_writes_every_figure_and_they_plot_the_csv_values(tmp_path):
    scenario = tmp_path / "decimal.yaml"
    scenario.write_text("name: decimal\ntopology: {kind: switch, ranks: 4, bandwidth: 25GB/s, "
                        "latency: 1us}\nalgorithms: [ring, direct]\n"
                        "sizes: [1MB, 10MB, 100MB]\n")
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--output", str(out)]) == 0
    for name in ("decimal.png", "decimal-crossover.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    frame = read_results(out / "decimal.csv")
    table = pd.read_csv(out / "decimal.csv")
    figure = results_figure(frame, LinkRate(25e9, "nvlink"))
    drawn = lines(figure)
    for algorithm, rows in table.groupby("algorithm"):
        rows = rows.sort_values("size_bytes")
        sizes = rows.size_bytes.to_numpy()
        for gid, expected in [
                (f"simulated busbw:{algorithm}", rows.busbw_GBps),
                (f"simulated time:{algorithm}", rows.sim_time_s * 1e6),
                (f"closed form time:{algorithm}", rows.model_time_s * 1e6),
                # busbw of the closed form: size / model time × 2(p-1)/p, p = 4
                (f"closed form busbw:{algorithm}", sizes / rows.model_time_s / 1e9 * 1.5)]:
            line = drawn[gid]
            assert list(line.get_xdata()) == list(sizes), gid
            np.testing.assert_allclose(line.get_ydata(), expected.to_numpy(), rtol=1e-12)
        # the closed form is drawn over the simulated line, dashed
        assert drawn[f"closed form busbw:{algorithm}"].get_zorder() > \
            drawn[f"simulated busbw:{algorithm}"].get_zorder()
        assert drawn[f"closed form busbw:{algorithm}"].get_linestyle() == "--"
    assert list(drawn["link rate"].get_ydata()) == [25.0, 25.0]
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert legend[:4] == ["ring", "direct", "simulated", "closed form"]
    assert legend[4].startswith("link rate 25GB/s (nvlink)")


def test_the_run_figure_gets_the_link_rate_from_the_scenario(tmp_path):
    scenario = scenario_from_dict({"name": "two", "topology": {"preset": "dgx_h100", "nodes": 2},
                                   "algorithms": ["ring"], "sizes": ["1MiB"], "verify": False})
    from simulator.output.figures import link_rate

    assert link_rate(scenario) == LinkRate(50e9, "net")  # the NIC: ranks on two hosts
    one_host = scenario_from_dict({"topology": {"preset": "dgx_h100"}, "sizes": ["1MiB"]})
    assert link_rate(one_host) == LinkRate(450e9, "nvlink")


def test_decimal_and_dense_sizes_get_distinct_labels_that_never_overlap():
    decimal = hand_frame({"ring": {10**k: 1e-6 * 10**k / 1e6 + 1e-5 for k in range(3, 10)}})
    figure = results_figure(decimal)
    renderer = rendered(figure)
    for axis in figure.axes:
        labels = visible_ticks(axis, "x")
        assert [text for text, _ in labels] == ["1KB", "10KB", "100KB", "1MB", "10MB", "100MB",
                                                "1GB"]
        assert overlapping([label.get_window_extent(renderer) for _, label in labels]) == []
    dense = hand_frame({"ring": {2**k: 1e-6 * 2**k / 1e6 + 1e-5 for k in range(10, 31)}})
    figure = results_figure(dense)
    renderer = rendered(figure)
    for axis in figure.axes:
        labels = visible_ticks(axis, "x")
        texts = [text for text, _ in labels]
        assert texts[0] == "1KiB" and texts[-1] == "1GiB" and len(set(texts)) == len(texts) > 5
        assert overlapping([label.get_window_extent(renderer) for _, label in labels]) == []


def test_one_size_gives_distinct_ticks_and_the_title_clear_of_the_axes():
    frame = hand_frame({"ring": {1 << 30: 5.1914e-3}, "direct": {1 << 30: 5.1506e-3}})
    figure = results_figure(frame, LinkRate(450e9, "nvlink"))
    renderer = rendered(figure)
    for axis in figure.axes:
        ticks = [text for text, _ in visible_ticks(axis, "y")]
        assert len(ticks) >= 2 and len(set(ticks)) == len(ticks), ticks
        assert [text for text, _ in visible_ticks(axis, "x")] == ["1GiB"]
        assert not figure._suptitle.get_window_extent(renderer).overlaps(
            axis.get_tightbbox(renderer))


def test_one_rank_says_so_without_a_warning(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        frame = simulate({"topology": {**SWITCH, "ranks": 1}, "algorithms": ["ring", "direct"],
                          "sizes": ["1KiB", "1MiB"]})
        for figure in (results_figure(frame), crossover_figure(frame)):
            texts = [text.get_text() for axis in figure.axes for text in axis.texts]
            assert any("One rank (p = 1)" in text for text in texts)
            assert lines(figure) == {}
            figure.savefig(io.BytesIO(), format="png")
            assert "1 rank," in figure._suptitle.get_text()


def test_the_crossover_chart_names_the_winner_and_its_margin():
    frame = hand_frame({"ring": {1024: 3e-6, 1 << 20: 40e-6, 1 << 30: 5.0e-3},
                        "direct": {1024: 2e-6, 1 << 20: 44e-6, 1 << 30: 6.0e-3},
                        "nvls": {1024: 9e-6, 1 << 20: 50e-6, 1 << 30: 4.0e-3}},
                       protocols={("ring", 1024): "LL", ("direct", 1024): "LL",
                                  ("nvls", 1024): "Simple", ("ring", 1 << 20): "LL128",
                                  ("direct", 1 << 20): "LL128", ("nvls", 1 << 20): "Simple",
                                  ("ring", 1 << 30): "Simple", ("direct", 1 << 30): "Simple",
                                  ("nvls", 1 << 30): "Simple"})
    table = crossover(frame)
    assert table.winner.tolist() == ["direct/LL", "ring/LL128", "nvls/Simple"]
    assert table.runner_up.tolist() == ["ring/LL", "direct/LL128", "ring/Simple"]
    assert table.margin.tolist() == pytest.approx([0.5, 0.1, 0.25])
    figure = crossover_figure(frame)
    bands = {patch.get_gid() for axis in figure.axes for patch in axis.patches}
    assert {"winner:direct/LL:1024-1024", "winner:ring/LL128:1048576-1048576",
            "winner:nvls/Simple:1073741824-1073741824"} <= bands
    margins = {text.get_gid(): text.get_text() for axis in figure.axes for text in axis.texts
               if text.get_gid()}
    assert margins == {"margin:1024": "+50%", "margin:1048576": "+10%",
                       "margin:1073741824": "+25%"}
    ratio = lines(figure)["ratio:direct"]
    np.testing.assert_allclose(ratio.get_ydata(), [1.0, 44 / 40, 6.0 / 4.0])
    figure.savefig(io.BytesIO(), format="png")


def test_a_run_of_sizes_with_one_winner_is_one_band():
    frame = hand_frame({"ring": {1024: 2e-6, 2048: 2e-6, 4096: 9e-6},
                        "direct": {1024: 3e-6, 2048: 2e-6, 4096: 3e-6}})
    table = crossover(frame)
    assert table.winner.tolist() == ["ring", "ring", "direct"]  # a tie goes to the first listed
    assert table.margin.tolist() == pytest.approx([0.5, 0.0, 2.0])
    bands = {patch.get_gid() for axis in crossover_figure(frame).axes for patch in axis.patches}
    assert {"winner:ring:1024-2048", "winner:direct:4096-4096"} <= bands


@pytest.fixture(scope="module")
def dgx_results(tmp_path_factory):
    """Results of scenarios/dgx.yaml's machine (one DGX H100, execution nccl) at the sizes the
    H200 data has and a few it has not, with NCCL's kernels, written as run writes them."""
    scenario = scenario_from_dict({
        "name": "dgx-h100", "topology": {"preset": "dgx_h100", "nodes": 1},
        "algorithms": ["ring", "double_binary_tree", "nvls"],
        "sizes": ["16KiB", "64KiB", "1MiB", "16MiB", "256MiB", "1GiB"],
        "gpu": {"reduce_bandwidth": "1.1TB/s"}, "verify": False})
    out = tmp_path_factory.mktemp("dgx")
    write_results(simulate(scenario), scenario, RunSettings(), out, ("csv", "json"))
    return out / "dgx-h100.csv"


def test_plot_against_the_h200_measurements(dgx_results, tmp_path, capsys):
    assert main(["plot", str(dgx_results), "--reference", str(H200), "--output",
                 str(tmp_path)]) == 0
    for name in ("dgx-h100.png", "dgx-h100-crossover.png", "dgx-h100-reference.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "no link-rate line" not in printed  # the JSON beside the CSV gave it
    # by hand: NCCL's pick per size from the CSV, the measured busbw from the H200 file
    simulated = {int(row["size_bytes"]): float(row["busbw_GBps"])
                 for row in csv.DictReader(dgx_results.read_text().splitlines())
                 if row["nccl_pick"] == "True"}
    measured = {int(row["size_bytes"]): float(row["busbw_GBps"]) for row in csv.DictReader(
        line for line in H200.read_text().splitlines() if not line.startswith("#"))}
    common = sorted(set(simulated) & set(measured))
    assert common == [65536, 1 << 20, 1 << 24, 1 << 28, 1 << 30]  # 16 KiB was not measured
    expected = [100 * (simulated[s] - measured[s]) / measured[s] for s in common]
    from simulator.measured.nccl_tests import load_measurements

    series = load_measurements(H200)
    reference = Reference(str(H200), tuple(m.size_bytes for m in series.rows),
                          tuple(m.busbw_GBps for m in series.rows))
    figure = reference_figure(read_results(dgx_results), reference)
    drawn = lines(figure)
    assert list(drawn["error"].get_xdata()) == common
    np.testing.assert_allclose(drawn["error"].get_ydata(), expected, rtol=1e-12)
    assert list(drawn["measured"].get_xdata()) == sorted(measured)
    np.testing.assert_allclose(drawn["measured"].get_ydata(),
                               [measured[s] for s in sorted(measured)])
    table = errors(read_results(dgx_results), reference)
    assert table.name.tolist() == ["ring/LL", "ring/LL", "nvls/Simple", "nvls/Simple",
                                   "nvls/Simple"]
    for size, error in zip(common, expected, strict=True):
        assert f"{size:>12}" in printed and f"{error:+.1f}" in printed
    assert all(abs(e) < 20 for e in expected)  # docs/fidelity.md: within a few percent


def test_plot_of_a_single_algorithm_compares_it_where_no_pick_is_marked(tmp_path):
    frame = hand_frame({"ring": {65536: 20e-6, 1 << 20: 30e-6}}, ranks=8)
    frame.to_csv(tmp_path / "ring.csv", index=False)
    reference = Reference("m.csv", (65536, 1 << 20, 1 << 21), (6.0, 70.0, 90.0))
    table = errors(read_results(tmp_path / "ring.csv"), reference)
    busbw = [65536 / 20e-6 / 1e9 * 1.75, (1 << 20) / 30e-6 / 1e9 * 1.75]
    np.testing.assert_allclose(table.error, [(busbw[0] - 6) / 6, (busbw[1] - 70) / 70])
    assert main(["plot", str(tmp_path / "ring.csv")]) == 0  # no JSON beside: no link rate
    assert (tmp_path / "ring-crossover.png").exists()


def test_a_reference_of_another_collective_is_refused(dgx_results, tmp_path, capsys):
    log = tmp_path / "ag.log"
    log.write_text("# Collective test starting: all_gather_perf\n"
                   "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  "
                   "busbw  #wrong\n"
                   "1048576  32768  float  none  -1  20.0  52.4  45.9  0  20.0  52.4  45.9  0\n")
    assert main(["plot", str(dgx_results), "--reference", str(log), "--output",
                 str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"{log}: measures allgather (all_gather_perf), but the "
                                       "results are of allreduce; expected a log of the same "
                                       "collective\n")
    assert not list(tmp_path.glob("*.png"))


@pytest.mark.parametrize("content, message", [
    (None, "{path}: no such file"),
    ("size_bytes,time_us,busbw_GBps\n1024,10.0,0.1\n",
     "{path}: expected a results file of `python -m simulator run` (docs/results.md); missing "
     "columns scenario, topology, ranks, collective, algorithm, dtype, op, sim_time_s, "
     "model_time_s"),
    ("", "{path}: expected a results file of `python -m simulator run` (docs/results.md), a CSV"),
])
def test_bad_input_to_plot_is_one_line_and_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / "r.csv"
    if content is not None:
        path.write_text(content)
    assert main(["plot", str(path)]) == 2
    assert capsys.readouterr().err == message.format(path=path) + "\n"
    assert not list(tmp_path.glob("*.png"))


def test_a_measurement_file_given_as_results_is_one_line_and_exit_2(capsys):
    assert main(["plot", str(H200)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{H200}: expected a results file of `python -m simulator run` "
                          "(docs/results.md), a CSV; ")
    assert err.count("\n") == 1


def test_a_missing_reference_is_one_line_and_exit_2(dgx_results, tmp_path, capsys):
    assert main(["plot", str(dgx_results), "--reference", str(tmp_path / "none.log")]) == 2
    assert capsys.readouterr().err == f"{tmp_path / 'none.log'}: no such file\n"


def test_a_non_numeric_column_names_the_line(tmp_path, capsys):
    frame = hand_frame({"ring": {1024: 1e-6, 2048: 2e-6}}).astype({"sim_time_s": object})
    frame.loc[1, "sim_time_s"] = "fast"
    frame.to_csv(tmp_path / "r.csv", index=False)
    assert main(["plot", str(tmp_path / "r.csv")]) == 2
    assert capsys.readouterr().err == (f"{tmp_path / 'r.csv'}: line 3: expected a number in "
                                       "column sim_time_s, got 'fast'\n")


def test_every_algorithm_has_its_own_colour_past_ten():
    from simulator.output.plots import TAB20, colours

    few = pd.DataFrame({"algorithm": ["ring", "nvls", "ring"]})
    assert colours(few) == {"ring": "C0", "nvls": "C1"}
    many = pd.DataFrame({"algorithm": [f"a{i}" for i in range(13)]})
    assigned = colours(many)
    assert len(set(assigned.values())) == 13 and assigned["a12"] == TAB20[12]


def test_a_long_name_in_a_narrow_band_breaks_at_its_protocol():
    # 11 sizes: a band of one size is ~1.05 inches wide, too narrow for 25 characters at 7 points
    # on one line (~1.5 inches) and for 18 (~1.1), so the name splits and turns upright; a band
    # of ten sizes holds its name on one line
    sizes = [1 << (10 + 2 * i) for i in range(11)]
    times = {"ring": {size: 2e-6 for size in sizes},
             "two_shot_multicast": {size: 1e-6 if size == 1 << 16 else 3e-6 for size in sizes}}
    protocols = {(name, size): "Simple" for name in times for size in sizes}
    figure = crossover_figure(hand_frame(times, protocols=protocols))
    winners = {text.get_text(): text.get_rotation() for text in figure.axes[1].texts
               if not text.get_gid()}
    assert winners["two_shot_multicast\nSimple"] == 90.0
    assert winners["ring/Simple"] == 0.0


def test_nccl_picks_are_ringed_where_the_csv_marks_them(dgx_results):
    frame = read_results(dgx_results)
    table = pd.read_csv(dgx_results)
    chosen = table[table.nccl_pick].sort_values("size_bytes")
    assert len(chosen) == 6  # one pick a size, scenarios/dgx.yaml's machine under NCCL
    drawn = lines(results_figure(frame))
    for gid, expected in (("nccl pick busbw", chosen.busbw_GBps),
                          ("nccl pick time", chosen.sim_time_s * 1e6)):
        assert list(drawn[gid].get_xdata()) == chosen.size_bytes.tolist()
        np.testing.assert_allclose(drawn[gid].get_ydata(), expected.to_numpy(), rtol=1e-12)
        assert (drawn[gid].get_marker(), drawn[gid].get_markeredgecolor()) == ("o", "k")
    fastest = table.groupby("size_bytes").sim_time_s.min()
    ratio = lines(crossover_figure(frame))["nccl pick ratio"]
    assert list(ratio.get_xdata()) == chosen.size_bytes.tolist()
    np.testing.assert_allclose(ratio.get_ydata(), chosen.sim_time_s.to_numpy()
                               / fastest.loc[chosen.size_bytes].to_numpy(), rtol=1e-12)
    legend = [text.get_text() for text in results_figure(frame).legends[0].get_texts()]
    assert "NCCL's pick" in legend


@pytest.mark.parametrize("column", [None, [False, False, None, None]])
def test_a_run_without_picks_has_no_pick_marker(column):
    frame = hand_frame({"ring": {1024: 3e-6, 2048: 4e-6}, "direct": {1024: 2e-6, 2048: 5e-6}})
    if column is not None:  # execution: ideal writes the column empty
        frame["nccl_pick"] = pd.array(column, dtype="boolean")
    for figure in (results_figure(frame), crossover_figure(frame)):
        assert not [gid for gid in lines(figure) if gid.startswith("nccl pick")]
        legends = [text.get_text() for legend in [*figure.legends,
                                                  *[axis.get_legend() for axis in figure.axes
                                                    if axis.get_legend()]]
                   for text in legend.get_texts()]
        assert "NCCL's pick" not in legends


def switch_ceiling(sizes):
    """The fabric's ceiling of an allreduce on 4 ranks of a 25 GB/s switch: each GPU moves
    2·3/4·S each way over its 25 GB/s, so the floor is 1.5·S / 25 GB/s and busbw at most
    25 GB/s."""
    from simulator.model.collective import Collective
    from simulator.model.machine import Machine
    from simulator.model.topology import switch
    from simulator.output.figures import fabric_ceiling

    return fabric_ceiling(Machine.of(switch(4, 25e9, 1e-6)), Collective.ALLREDUCE, sizes)


def test_the_fabric_ceiling_is_the_floor_of_the_machine():
    ceiling = switch_ceiling([10**8, 10**6, 10**7, 10**6])
    assert ceiling.cut == "GPU" and not ceiling.in_switch
    assert [size for size, _ in ceiling.floor_s] == [10**6, 10**7, 10**8]
    np.testing.assert_allclose([seconds for _, seconds in ceiling.floor_s],
                               [6e-5, 6e-4, 6e-3], rtol=1e-15)
    assert ceiling.label([25.0, 25.0]) == "fabric's ceiling 25GB/s\n(GPU cut)"
    assert switch_ceiling([]) is None


def test_a_closed_form_past_the_fabric_ceiling_is_drawn_capped_at_it():
    # floor 60 µs, 600 µs, 6 ms at 1, 10, 100 MB: ring's closed form is faster at 1 and 100 MB
    frame = hand_frame({"ring": {10**6: 80e-6, 10**7: 800e-6, 10**8: 8e-3},
                        "direct": {10**6: 90e-6, 10**7: 900e-6, 10**8: 9e-3}})
    frame.loc[frame.algorithm == "ring", "model_time_s"] = [50e-6, 700e-6, 5e-3]
    kept = frame.copy()
    figure = results_figure(frame, LinkRate(25e9), switch_ceiling(frame.size_bytes))
    drawn = lines(figure)
    np.testing.assert_allclose(drawn["fabric ceiling"].get_ydata(), [25.0] * 3, rtol=1e-12)
    np.testing.assert_allclose(drawn["fabric floor"].get_ydata(), [60.0, 600.0, 6000.0],
                               rtol=1e-12)
    ceiling = drawn["fabric ceiling"].get_ydata()
    busbw = drawn["closed form busbw:ring"].get_ydata()
    assert (busbw[0], busbw[2]) == (ceiling[0], ceiling[2])  # exactly the ceiling's values
    assert busbw[1] == pytest.approx(1e7 / 700e-6 / 1e9 * 1.5, rel=1e-12)  # 21.4 GB/s, its own
    np.testing.assert_allclose(drawn["closed form time:ring"].get_ydata(), [60.0, 700.0, 6000.0],
                               rtol=1e-12)
    assert list(drawn["capped busbw:ring"].get_xdata()) == [10**6, 10**8]
    assert list(drawn["capped time:ring"].get_xdata()) == [10**6, 10**8]
    assert not [gid for gid in drawn if gid.endswith(":direct") and gid.startswith("capped")]
    np.testing.assert_allclose(drawn["closed form time:direct"].get_ydata(), [90, 900, 9000],
                               rtol=1e-12)
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert legend[-2:] == ["fabric's ceiling 25GB/s\n(GPU cut);\non time: the fabric's floor",
                           "closed form, capped at the\nfabric's ceiling (2 points)"]
    pd.testing.assert_frame_equal(frame, kept)  # the results keep the closed form's own value


def test_nothing_capped_says_nothing_of_capping():
    frame = hand_frame({"ring": {10**6: 80e-6, 10**7: 800e-6}})
    figure = results_figure(frame, None, switch_ceiling(frame.size_bytes))
    assert not [gid for gid in lines(figure) if gid.startswith("capped")]
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert legend[-1] == "fabric's ceiling 25GB/s\n(GPU cut);\non time: the fabric's floor"


def test_plot_takes_the_ceiling_from_the_settings_beside_the_csv(dgx_results, tmp_path, capsys):
    from simulator.output.figures import limits_beside

    rate, ceiling, why = limits_beside(dgx_results, read_results(dgx_results).size_bytes)
    assert (rate, why) == (LinkRate(450e9, "nvlink"), "")
    # one DGX H100 with the NVSwitch reducing: each GPU sends S and receives S over its 450 GB/s
    # of NVLink and 63 GB/s of PCIe (tests/test_bounds.py), so busbw ≤ 2·7/8 · 513 GB/s
    assert (ceiling.cut, ceiling.in_switch) == ("GPU", True)
    assert dict(ceiling.floor_s)[1 << 30] == pytest.approx((1 << 30) / 513e9, rel=1e-12)
    assert ceiling.label([897.75]) == "fabric's ceiling 898GB/s\n(GPU cut, switch reducing)"
    alone = tmp_path / "alone.csv"
    alone.write_bytes(dgx_results.read_bytes())
    assert main(["plot", str(alone)]) == 0
    assert capsys.readouterr().out.startswith(
        f"# no link-rate line and no fabric's ceiling: {tmp_path / 'alone.json'} not found\n")


def test_a_closed_form_past_the_link_rate_is_named_with_why():
    # busbw = S / t · 1.5: ring 1e6 / 80 µs · 1.5 = 18.75 GB/s over a 10 GB/s link, under the
    # 25 GB/s ceiling; direct 1e6 / 200 µs · 1.5 = 7.5 GB/s, under the link
    frame = hand_frame({"ring": {10**6: 80e-6}, "direct": {10**6: 200e-6}})
    figure = results_figure(frame, LinkRate(10e9), switch_ceiling(frame.size_bytes))
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert ("closed form past the link rate:\nring\n(a switch reduces, or a rank drives\n"
            "several links; the fabric's\nceiling still bounds it)") in legend
    assert not any("past the link" in text for text in [
        text.get_text() for text in results_figure(frame, LinkRate(20e9)).legends[0].get_texts()])


def test_a_far_ceiling_stays_off_the_axis_and_says_so():
    # busbw 1e6 / 400 µs · 1.5 = 3.75 GB/s; the 25 GB/s ceiling lies far above it
    frame = hand_frame({"ring": {10**6: 400e-6, 10**7: 4e-3}})
    figure = results_figure(frame, None, switch_ceiling(frame.size_bytes))
    assert figure.axes[0].get_ylim()[1] == pytest.approx(3.75 * 1.12, rel=1e-12)
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert legend[-1] == ("fabric's ceiling 25GB/s\n(GPU cut) (above\nthe axis);\non time: the "
                          "fabric's floor")
