"""NCCL's system topology file read: the XML that ``NCCL_TOPO_DUMP_FILE`` writes and
``NCCL_TOPO_FILE`` reads (NCCL src/graph/xml.cc writes it, topo.cc turns it into NCCL's graph).

Its shape::

    <system version="1">
      <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
        <pci busid="0000:15:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
          <pci busid="0000:18:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
            <gpu dev="0" sm="90" rank="0" gdr="1">
              <nvlink target="0000:05:00.0" count="5" tclass="0x068000"/>
            </gpu>
          </pci>
          <pci busid="0000:19:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16">
            <nic><net name="mlx5_0" dev="0" speed="400000" port="1" latency="0.000000"/></nic>
          </pci>
        </pci>
      </cpu>
    </system>

A ``<cpu>`` is a NUMA node; nested ``<pci>`` elements are the PCIe tree below it: PCIe
switches (class 0x0604xx), each GPU's function (0x03xxxx, holding its ``<gpu>``) and each NIC's
(0x02xxxx, holding ``<nic>``, whose ``<net>`` ports carry their speed in Mb/s). A ``<pci>``'s
``link_speed`` and ``link_width`` describe its link up to its parent. A GPU's ``<nvlink>``
names the target's bus id, how many links lead there and the target's class: 0x068000 an
NVSwitch, 0x03xxxx another GPU, 0x068001 the CPU. The file is read as NCCL reads it (the
attributes NCCL requires are required here), with two differences: what NCCL would silently
skip or guess is refused with a line saying so (an unknown class, a ``<net>`` without ``dev``
or ``speed``, a ``<gpu>`` without ``rank``, an element NCCL does not know), and attributes
the simulator does not use (``gdr``, ``guid`` on InfiniBand, ``maxconn``, ``coll``,
``affinity``, ...) are accepted and ignored, as are ``<c2c>`` and ``<pcilink>``.

Every problem is an :class:`~simulator.errors.InputError` line naming the file, the element
and its line (``topo.xml: <gpu> at line 12: expected a 'sm' attribute ...``).
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path

from simulator.errors import InputError, Problem, quoted
from simulator.inputs import note_read
from simulator.model.nccltopo import Cpu, Device, Gpu, NcclTopology, Net, NvLink
from simulator.units import INT_MAX, finite_in, whole_in
from simulator.xmlsafe import XmlElement, read_xml

SWITCH_CLASSES = ("0x0604", "0x080100")
"""PCI classes of a PCIe switch's port (a PCI-to-PCI bridge, 0x0604xx) and of the ConnectX-8
"data direct" function, which NCCL also takes for a switch (topo.cc ``kvDictPciClass``)."""
GPU_CLASS, NIC_CLASS, INFINIBAND_CLASS = "0x03", "0x02", "0x0207"
"""Display controllers (GPUs), network controllers (NICs), and among them InfiniBand ones
(0x0207xx; Ethernet is 0x0200xx): PCI-SIG class codes, matched by prefix as NCCL does."""
NVSWITCH_CLASS, CPU_CLASS = "0x068000", "0x068001"
"""An ``<nvlink>``'s target class for an NVSwitch (xml.h ``PCI_NVSWITCH_CLASS``) and for the
CPU (NVLink-C2C, topo.cc ``kvDictPciClass``)."""

CHILDREN = {"system": ("cpu",), "cpu": ("pci", "nic"), "pci": ("pci", "gpu", "nic", "pcilink"),
            "gpu": ("nvlink", "c2c"), "nic": ("net",), "net": (), "nvlink": (), "c2c": (),
            "pcilink": ()}
"""The elements NCCL's loader knows (xml.cc ``ncclTopoXmlLoad*`` handlers), by parent."""

MEANING = {"version": "1", "numaid": "the NUMA node", "arch": "x86_64 or arm64",
           "vendor": "GenuineIntel or AuthenticAMD", "familyid": "the CPU family",
           "modelid": "the CPU model", "busid": "the PCI bus id, e.g. 0000:1b:00.0",
           "class": "the PCI class, e.g. 0x030200", "link_speed": "e.g. 32.0 GT/s PCIe",
           "link_width": "the lanes, e.g. 16", "rank": "the GPU's NCCL rank",
           "dev": "the CUDA or network device number", "sm": "the compute capability, e.g. 90",
           "target": "the bus id the links lead to", "count": "how many links",
           "tclass": "the target's PCI class, e.g. 0x068000", "speed": "in Mb/s, e.g. 400000"}
"""What each required attribute holds, for the line that says it is missing."""



PCIE_X16_BPS = {"2.5": 4.0e9, "5": 8.0e9, "8": 15.75e9, "16": 31.5e9, "32": 63.0e9,
                "64": 121.0e9}
"""A PCIe x16 link's bandwidth per direction, by its transfer rate in GT/s (PCI-SIG: Gen1 and
2 with 8b/10b encoding; Gen3 to 5 with 128b/130b, 15.75, 31.5 and 63 GB/s, the figures the
presets quote: dgx1_v100.yaml [3], dgx_a100.yaml [2], dgx_h100.yaml [2]; Gen6 PAM4 with FLIT
encoding, 242 of every 256 bytes). A link of w lanes has w/16 of it. NCCL itself takes
lower, achievable figures (topo.cc ``kvDictPciGen``: Gen4 x16 24 GB/s); the presets and this
reader take the wire's."""


def read_topology(file: str) -> NcclTopology:
    """The topology in ``file``, cached per path and modification time (a scenario's checks,
    its rank count and its build read the file once); InputError listing every problem."""
    path = Path(file)
    try:
        stat = path.stat()
    except OSError:
        raise InputError([Problem(file, "", "no such file")]) from None
    note_read(path, stat)  # read once per version: each run that names it reads it
    return _read(file, str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _read(file: str, resolved: str, mtime_ns: int, size: int) -> NcclTopology:
    root = read_xml(Path(file), "an NCCL topology file (NCCL_TOPO_DUMP_FILE's XML)")
    reader = _Reader(file)
    topology = reader.system(root)
    if reader.problems:
        raise InputError(reader.problems)
    return topology


class _Reader:
    """Walks the tree, collecting the devices and every problem with its element and line."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []
        self.devices: list[Device] = []

    def problem(self, element: XmlElement, message: str) -> None:
        self.problems.append(element.problem(self.file, message))

    def system(self, root: XmlElement) -> NcclTopology:
        if root.tag != "system":
            self.problem(root, "expected <system version=\"1\"> as the top element (the file "
                               "NCCL_TOPO_DUMP_FILE writes)")
            return NcclTopology(self.file, (), ())
        version = self.whole(root, "version")
        if version is not None and version != 1:
            self.problem(root, f"expected version=\"1\" (NCCL_TOPO_XML_VERSION), got {version}")
        self.known_children(root)
        cpus: list[Cpu] = []
        for element in root.children:
            if element.tag == "cpu":
                cpus.append(self.cpu(element, len(cpus)))
        if not cpus and not self.problems:
            self.problem(root, "expected at least one <cpu> holding the GPUs and NICs")
        topology = NcclTopology(self.file, tuple(cpus), tuple(self.devices))
        if not self.problems:
            self.check_gpus(root, topology)
        return topology

    def cpu(self, element: XmlElement, index: int) -> Cpu:
        numaid = self.whole(element, "numaid", least=-1)
        arch = self.text(element, "arch")
        vendor, family, model = "intel", 0, 0
        if arch == "x86_64":
            name = self.text(element, "vendor")
            if name == "AuthenticAMD":
                vendor = "amd"
            elif name is not None and name != "GenuineIntel":
                self.problem(element, f"expected vendor GenuineIntel or AuthenticAMD, got {quoted(name)}")
            if name == "GenuineIntel":
                family = self.whole(element, "familyid") or 0
                model = self.whole(element, "modelid") or 0
        elif arch == "arm64":
            vendor = "arm"
        elif arch is not None:
            self.problem(element, f"expected arch x86_64 or arm64 (the CPUs NCCL's model covers), "
                                  f"got {quoted(arch)}")
        nets: list[Net] = []
        for child in element.children:
            if child.tag == "pci":
                self.pci(child, index, None)
            elif child.tag == "nic":
                nets += self.nic(child, ethernet=True)
        return Cpu(numaid or 0, vendor, family, model, tuple(nets), element.line)

    def pci(self, element: XmlElement, cpu: int, parent: int | None) -> None:
        self.known_children(element)
        busid = self.text(element, "busid") or ""
        klass = (self.text(element, "class") or "").lower()
        bandwidth = self.link(element)
        tags = {child.tag for child in element.children} - {"pcilink"}
        if klass and not re.fullmatch(r"0x[0-9a-f]{6}", klass):
            self.problem(element, f"expected a class like 0x060400, got {quoted(klass)}")
            return
        if "gpu" in tags:
            gpus = [child for child in element.children if child.tag == "gpu"]
            if klass and not klass.startswith(GPU_CLASS):
                self.problem(element, f"expected class 0x03xxxx (a GPU) around a <gpu>, got {quoted(klass)}")
            elif tags != {"gpu"} or len(gpus) > 1:
                self.problem(element, "expected one <gpu> alone in a GPU's <pci> (several ranks "
                                      "on one GPU are not modelled)")
            else:
                self.devices.append(Device("gpu", busid, cpu, parent, bandwidth, element.line,
                                           gpu=self.gpu(gpus[0], busid)))
        elif "nic" in tags:
            if klass and not klass.startswith((NIC_CLASS, *SWITCH_CLASSES[1:])):
                self.problem(element, f"expected class 0x02xxxx (a NIC) around a <nic>, got {quoted(klass)}")
            elif tags != {"nic"}:
                self.problem(element, "expected a <nic> alone in a NIC's <pci>")
            else:
                nets = [net for child in element.children
                        for net in self.nic(child, not klass.startswith(INFINIBAND_CLASS))]
                self.devices.append(Device("nic", busid, cpu, parent, bandwidth, element.line,
                                           nets=tuple(nets)))
        elif klass.startswith((GPU_CLASS, NIC_CLASS)):
            inner = "<gpu>" if klass.startswith(GPU_CLASS) else "<nic>"
            self.problem(element, f"expected a {inner} inside the <pci> of class {klass}")
        elif klass and not klass.startswith(SWITCH_CLASSES):
            self.problem(element, f"unknown class {klass}: expected a PCIe switch (0x0604xx) "
                                  "holding <pci> elements, a GPU (0x03xxxx) holding a <gpu> or a "
                                  "NIC (0x02xxxx) holding a <nic>")
        elif klass:
            self.devices.append(Device("switch", busid, cpu, parent, bandwidth, element.line))
            index = len(self.devices) - 1
            for child in element.children:
                if child.tag == "pci":
                    self.pci(child, cpu, index)

    def gpu(self, element: XmlElement, busid: str) -> Gpu:
        self.known_children(element)
        values = [self.whole(element, name) for name in ("rank", "dev")]
        sm = self.whole(element, "sm", least=1)
        nvlinks = []
        for child in element.children:
            if child.tag != "nvlink":
                continue
            target, count = self.text(child, "target"), self.whole(child, "count", least=1)
            tclass = (self.text(child, "tclass") or "").lower()
            to = ("nvswitch" if tclass == NVSWITCH_CLASS else "cpu" if tclass == CPU_CLASS
                  else "gpu" if re.fullmatch(r"0x03[0-9a-f]{4}", tclass) else None)
            if to is None and tclass:
                self.problem(child, f"unknown tclass {tclass}: expected 0x068000 (an NVSwitch), "
                                    "0x03xxxx (a GPU) or 0x068001 (the CPU)")
            elif to is not None and target is not None and count is not None:
                nvlinks.append(NvLink(to, target, count, child.line))
        return Gpu(values[0] or 0, values[1] or 0, sm or 0, busid, tuple(nvlinks), element.line)

    def nic(self, element: XmlElement, ethernet: bool) -> list[Net]:
        self.known_children(element)
        nets = []
        for child in element.children:
            if child.tag != "net":
                continue
            dev, speed = self.whole(child, "dev"), self.whole(child, "speed", least=1)
            latency = self.number(child, "latency")
            guid = child.attrs.get("guid", "0")
            verbs = guid.strip().lower() not in ("", "0", "0x0")
            if dev is not None and speed is not None and latency is not None:
                nets.append(Net(child.attrs.get("name", f"net{dev}"), dev, speed * 1e6 / 8,
                                latency, ethernet, verbs, child.line))
        if not element.children:
            self.problem(element, "expected a <net> (a network port) inside <nic>")
        return nets

    def link(self, element: XmlElement) -> float:
        """The bandwidth of a ``<pci>``'s link up (``link_speed`` x ``link_width``); 0 after a
        problem. A width of 0 (not reported by the kernel) counts as 16, as NCCL counts it."""
        speed, width = self.text(element, "link_speed"), self.whole(element, "link_width", least=0)
        if speed is None or width is None:
            return 0.0
        rate = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*GT/s(?: PCIe)?\s*", speed)
        key = rate.group(1).removesuffix(".0") if rate else None
        if key not in PCIE_X16_BPS:
            self.problem(element, f"expected link_speed as NCCL writes it (2.5, 5.0, 8.0, 16.0, "
                                  f"32.0 or 64.0 GT/s PCIe), got {quoted(speed)}")
            return 0.0
        return PCIE_X16_BPS[key] * (width or 16) / 16

    def check_gpus(self, root: XmlElement, topology: NcclTopology) -> None:
        """GPUs: at least one, ranks and devices each once, one compute capability, every
        GPU-to-GPU NVLink to a GPU of the file; NIC ports each once, and at least one for the
        GPUs to reach the network through."""
        gpus = [d.gpu for d in topology.gpus if d.gpu is not None]
        if not gpus:
            self.problem(root, "expected at least one <gpu>")
            return
        nets = [net for d in topology.devices for net in d.nets] + [
            net for cpu in topology.cpus for net in cpu.nets]
        for tag, items, attribute in (("gpu", gpus, "rank"), ("gpu", gpus, "dev"),
                                      ("net", nets, "dev")):
            seen: dict[int, int] = {}
            for item in items:
                value = getattr(item, attribute)
                if value in seen:
                    self.problems.append(Problem(self.file, f"<{tag}> at line {item.line}", (
                        f"expected each {attribute} once, got {attribute}=\"{value}\" here and "
                        f"at line {seen[value]}")))
                seen.setdefault(value, item.line)
        if len({gpu.sm for gpu in gpus}) > 1:
            self.problems.append(Problem(self.file, f"<gpu> at line {gpus[-1].line}", (
                f"expected every GPU of one compute capability, got sm "
                f"{sorted({gpu.sm for gpu in gpus})}")))
        busids = {gpu.busid.lower() for gpu in gpus}
        for gpu in gpus:
            for link in gpu.nvlinks:
                if link.to == "gpu" and link.target.lower() not in busids:
                    self.problems.append(Problem(self.file, f"<nvlink> at line {link.line}", (
                        f"expected the target of a GPU link (tclass 0x03xxxx) to be a GPU's busid "
                        f"in the file, got {quoted(link.target)}")))
        if not nets:
            self.problems.append(Problem(self.file, f"<gpu> at line {gpus[0].line}", (
                f"expected a path from the GPU (rank {gpus[0].rank}, {gpus[0].busid}) to a NIC, "
                "found no <nic><net .../></nic> in the file")))

    def known_children(self, element: XmlElement) -> None:
        allowed = CHILDREN[element.tag]
        for child in element.children:
            if child.tag not in allowed:
                where = " or ".join(f"<{tag}>" for tag in allowed) or "nothing"
                self.problem(child, f"unknown element inside <{element.tag}>; expected {where}")

    def text(self, element: XmlElement, name: str) -> str | None:
        value = element.attrs.get(name)
        if value is None:
            self.problem(element, f"expected a {quoted(name)} attribute ({MEANING[name]}), missing")
        return value

    def whole(self, element: XmlElement, name: str, least: int = 0) -> int | None:
        """An integer attribute as NCCL reads it (``strtol``, base 0: decimal or 0x hex) into a
        C ``int`` (``xmlGetAttrInt``, src/graph/xml.h): at least ``least`` and at most
        :data:`INT_MAX` (a 30-digit ``sm`` is refused, not taken)."""
        value = self.text(element, name)
        if value is None:
            return None
        number = whole_in(value, least, prefixed=True)
        if number is None:
            self.problem(element, f"expected {name} to be a whole number from {least} to "
                                  f"{INT_MAX}, got {quoted(value)}")
            return None
        return number

    def number(self, element: XmlElement, name: str) -> float | None:
        """An optional non-negative number attribute (0 when absent, as NCCL takes it)."""
        value = element.attrs.get(name, "0")
        number = finite_in(value, 0, math.inf)
        if number is None:
            self.problem(element, f"expected {name} to be a number ≥ 0, got {quoted(value)}")
            return None
        return number
