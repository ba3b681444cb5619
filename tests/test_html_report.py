"""``--format html`` (issue 41): one self-contained page per run, opened in a real browser.

Debian's Chromium, headless, driven by selenium through the system's chromedriver (never one
downloaded): the page loads from ``file://`` with no console error, every figure is an image
that decoded (a natural width) and takes space on the page, the results table holds the CSV's
rows and exact values, and a screenshot is taken. ``make test`` installs Chromium where it is
missing; without it these tests fail saying so, never skip.
"""

import csv
import os
import re
from html import escape
from pathlib import Path

import pytest

from simulator.cli import main

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1280,900")
SCENARIO = """\
name: small
topology: {preset: dgx_h100, nodes: 1}
algorithms: [ring, nvls]
sizes: [64KiB, 1MiB, 16MiB]
execution: nccl
faults:
  - {kind: straggler, rank: 1, delay: 5us}
"""
SCREENSHOT = "HTML_REPORT_SCREENSHOT"
"""Where the browser test saves its screenshot besides its own temporary directory (``make
gallery`` sets it to docs/gallery/report.png)."""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The report of a 1-node run of 2 algorithms × 3 sizes with a fault and ``--links``: every
    section there. The output directory."""
    base = tmp_path_factory.mktemp("html")
    (base / "small.yaml").write_text(SCENARIO)
    out = base / "out"
    assert main(["run", str(base / "small.yaml"), "--output", str(out), "--format", "csv,html",
                 "--links", str(out / "links.csv"), "--quiet"]) == 0
    return out


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Headless Chromium under selenium, its console log kept; the test fails in one line
    where Chromium is missing."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.is_file()]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not found: `make test` installs Chromium "
                    "(apt-get install chromium chromium-driver)", pytrace=False)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


def test_the_report_renders_its_figures_with_no_console_error(browser, run, tmp_path):
    browser.get((run / "small.html").as_uri())
    figures = browser.execute_script(
        "return [...document.querySelectorAll('img, svg')].map(e => {"
        "  const box = e.getBoundingClientRect();"
        "  return [e.closest('figure').id, e.tagName, e.naturalWidth ?? null, box.width,"
        "          box.height]; })")
    assert [figure[:2] for figure in figures] == [
        ["results-figure", "IMG"], ["crossover-figure", "IMG"], ["links-figure", "IMG"]]
    for ident, _, natural, width, height in figures:
        assert natural > 0 and width > 0 and height > 0, ident
    assert [entry for entry in browser.get_log("browser")
            if entry["level"] in ("SEVERE", "WARNING")] == []
    height = browser.execute_script(  # the whole page in the viewport, below the window's frame
        "return document.documentElement.scrollHeight + window.outerHeight - window.innerHeight")
    browser.set_window_size(1280, height)
    shots = [tmp_path / "report.png", *([Path(os.environ[SCREENSHOT])]
                                        if os.environ.get(SCREENSHOT) else [])]
    for shot in shots:
        assert browser.save_screenshot(str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_its_results_table_holds_the_csv_rows_and_the_printed_table(browser, run):
    browser.get((run / "small.html").as_uri())
    cells = browser.execute_script(
        "return [...document.querySelectorAll('#results tbody tr')].map(row =>"
        "  [...row.cells].map(cell => [cell.textContent, cell.title]))")
    with (run / "small.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert len(cells) == len(rows) == 6
    printed = browser.execute_script("return document.querySelector('details pre').textContent")
    lines = [line.split() for line in printed.splitlines()[3:9]]  # the table, as run printed it
    for row, shown, line in zip(rows, cells, lines, strict=True):
        assert [text for text, _ in shown] == line
        assert shown[0][0] == row["size_bytes"] and shown[4][0] == row["algorithm"]
        assert [title for _, title in shown[5:9]] == [
            f"sim_time_s = {row['sim_time_s']}", f"algbw_GBps = {row['algbw_GBps']}",
            f"busbw_GBps = {row['busbw_GBps']}", f"model_time_s = {row['model_time_s']}"]
        assert shown[10][1] == (f"verified = {row['verified']}, max_abs_error = "
                                f"{row['max_abs_error']}")
    choice = browser.execute_script(
        "return [...document.querySelectorAll('#choice tbody tr')].map(row =>"
        "  [...row.cells].map(cell => cell.textContent))")
    assert [(row[0], row[1], row[4], row[6]) for row in choice] == [
        ("65536", "ring/LL", "(the pick)", "yes"), ("1048576", "ring/LL", "(the pick)", "yes"),
        ("16777216", "nvls/Simple", "(the pick)", "yes")]
    faults = browser.execute_script(
        "return [...document.querySelectorAll('#faults tbody tr')].map(row =>"
        "  [row.className, row.cells[1].textContent, row.cells[4].textContent])")
    # a straggler adds its 5 us to every point; ties go to the algorithm listed first
    assert faults == [["mark", "ring", "+5.00"]] * 3 + [["", "nvls", "+5.00"]] * 3


def test_the_report_loads_nothing_from_anywhere(run):
    page = (run / "small.html").read_text(encoding="utf-8")
    assert "http://" not in page and "https://" not in page
    assert re.findall(r"<(script|link|iframe|object)\b", page) == []
    assert re.findall(r'src="([^"]{0,22})', page) == ["data:image/png;base64,"] * 3


def test_every_string_in_the_report_is_escaped(run):
    import pandas as pd

    from simulator.output.report import report
    from simulator.scenario import load_scenario

    results = pd.read_csv(run / "small.csv")
    results["algorithm"] = "<img src=x onerror=alert(1)>"
    page = report(results, load_scenario(run.parent / "small.yaml"))
    assert "<img src=x" not in page
    assert "<td>&lt;img src=x onerror=alert(1)&gt;</td>" in page


def test_without_links_the_report_says_how_to_add_the_heatmap(tmp_path, capsys):
    (tmp_path / "small.yaml").write_text(SCENARIO.replace("[ring, nvls]", "[ring]")
                                         .replace("64KiB, 1MiB, ", ""))
    assert main(["run", str(tmp_path / "small.yaml"), "--output", str(tmp_path / "out"),
                 "--format", "html", "--quiet"]) == 0
    page = (tmp_path / "out" / "small.html").read_text(encoding="utf-8")
    assert ('<p class="note">run with --links FILE.csv to add the heatmap of every link&#x27;s '
            "utilisation at every point here</p>") in page
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"# results: {tmp_path / 'out' / 'small.csv'}, {tmp_path / 'out' / 'small.html'}")


def test_a_fault_nccl_would_abort_on_is_said_at_the_top(tmp_path, capsys):
    (tmp_path / "nic.yaml").write_text("topology: {preset: dgx_h100, nodes: 2}\n"
                                       "algorithms: [ring]\nsizes: [1MiB]\nfaults:\n"
                                       "  - {kind: nic_down, nic: n0.nic1, at: 2us}\n")
    assert main(["run", str(tmp_path / "nic.yaml"), "--output", str(tmp_path / "out"),
                 "--format", "html", "--quiet"]) == 0
    caveat = capsys.readouterr().err.removeprefix(f"{tmp_path / 'nic.yaml'}: ").rstrip("\n")
    assert caveat.startswith("nic_down n0.nic1 at 2us: NCCL does not re-route")
    page = (tmp_path / "out" / "nic.html").read_text(encoding="utf-8")
    assert f'<p class="caveat">{escape(caveat)}</p>' in page
    assert page.index('class="caveat"') < page.index("<h2>")  # above the answer


def test_a_training_scenario_refuses_the_report_before_it_runs(tmp_path, capsys):
    scenario = Path(__file__).parent.parent / "scenarios" / "train_resnet50.yaml"
    assert main(["run", str(scenario), "--output", str(tmp_path / "out"),
                 "--format", "csv,html"]) == 2
    assert capsys.readouterr().err == (
        "command line: --format: expected csv, json, png, parquet with a training scenario, "
        "got 'csv,html' (html: a report of a run of sizes; a training step's tables and figures "
        "are its csv and png files)\n")
    assert not (tmp_path / "out").exists()


def test_a_resumed_run_reports_every_point_kept_and_new(tmp_path, capsys):
    (tmp_path / "small.yaml").write_text(SCENARIO.replace("[ring, nvls]", "[ring]")
                                         .replace(", 16MiB", ""))
    out, args = tmp_path / "out", ["--format", "csv,json,html"]
    assert main(["run", str(tmp_path / "small.yaml"), "--output", str(out), *args,
                 "--quiet"]) == 0
    lines = (out / "small.csv").read_text().splitlines(keepends=True)
    (out / "small.csv").write_text("".join(lines[:2]))  # a run stopped after its first point
    (out / "small.html").unlink()
    capsys.readouterr()
    assert main(["run", str(tmp_path / "small.yaml"), "--output", str(out), "--resume",
                 *args]) == 0
    assert "(1 kept from the stopped run)" in capsys.readouterr().err
    page = (out / "small.html").read_text(encoding="utf-8")
    start = page.index('<table id="results">')
    results = page[start:page.index("</table>", start)]
    assert re.findall(r'<tr><td class="num">(\d+)</td>', results) == ["65536", "1048576"]


def test_a_point_left_out_is_said_in_the_report_with_why(tmp_path):
    from simulator import simulate
    from simulator.output.observed import Observed
    from simulator.output.report import report
    from simulator.plan import LeftOut
    from simulator.scenario.parse import scenario_from_dict

    described = {"name": "two", "topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s",
                                             "latency": "1us"},
                 "algorithms": ["ring", "direct"], "sizes": ["1KiB"], "verify": False}
    left = LeftOut(1 << 30, "execution: <too> big", "ring at 1GiB", "ring")
    page = report(simulate(described), scenario_from_dict(described), Observed(left_out=(left,)))
    assert '<p class="note left-out">ring at 1GiB left out: execution: &lt;too&gt; big</p>' in page
    assert ("  1073741824   268435456  float32   sum               ring  left out: execution: "
            "&lt;too&gt; big") in page  # the whole text table's line, escaped
