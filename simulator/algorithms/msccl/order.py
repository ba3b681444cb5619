"""The order an MSCCL schedule's steps run in: each step after the one before it in its
threadblock, after the step it depends on, and a receive after the send it takes.

Messages are matched as the runtime's connections carry them: the k-th message a GPU's
threadblock sends to GPU q on channel c is the k-th that q's threadblock receiving from that GPU
on c takes. :func:`flaws` says where that fails (a send no threadblock receives, counts
that differ) and where steps wait for each other in a circle; :func:`step_order` gives every
step after everything it waits for, which the replay (:mod:`.replay`) and the closed form
(:mod:`.algorithm`) walk.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from simulator.algorithms.msccl.checks import element_flaws
from simulator.algorithms.msccl.ir import Flaw, Gpu, MscclSchedule, Step, Threadblock

Node = tuple[int, int, int]
"""A step: (gpu, threadblock id, position in the threadblock)."""

Connection = tuple[int, int, int]
"""(sending gpu, receiving gpu, channel)."""

MAX_CIRCLE = 6
"""Steps of a circle a message spells out before '...': enough to see its shape, one line."""


def step_at(schedule: MscclSchedule, node: Node) -> Step:
    """The step ``node`` names."""
    gpu, tb, position = node
    found = schedule.gpu(gpu).threadblock(tb)
    assert found is not None
    return found.steps[position]


def describe(schedule: MscclSchedule, node: Node) -> str:
    """``gpu 0 tb 1 step 2 (line 14)``."""
    gpu, tb, position = node
    return f"gpu {gpu} tb {tb} step {position} (line {step_at(schedule, node).line})"


def _steps(schedule: MscclSchedule) -> Iterator[tuple[Gpu, Threadblock, int, Step]]:
    for gpu in schedule.gpus:
        for tb in gpu.threadblocks:
            for position, step in enumerate(tb.steps):
                yield gpu, tb, position, step


def traffic(schedule: MscclSchedule) -> dict[Connection, tuple[list[Node], list[Node]]]:
    """Per connection, its send steps and its receive steps, each in order."""
    found: dict[Connection, tuple[list[Node], list[Node]]] = {}
    for gpu, tb, position, step in _steps(schedule):
        node = (gpu.id, tb.id, position)
        if step.kind.sends:
            found.setdefault((gpu.id, tb.send, tb.channel), ([], []))[0].append(node)
        if step.kind.receives:
            found.setdefault((tb.recv, gpu.id, tb.channel), ([], []))[1].append(node)
    return found


def matched(schedule: MscclSchedule) -> dict[Node, Node]:
    """For each receive step, the send step whose message it takes (where there is one)."""
    return {receive: send for sends, receives in traffic(schedule).values()
            for send, receive in zip(sends, receives, strict=False)}


def waits(schedule: MscclSchedule) -> dict[Node, list[Node]]:
    """For each step, the steps it waits for: the one before it in its threadblock, the one it
    depends on, and the send whose message it receives."""
    taken = matched(schedule)
    before: dict[Node, list[Node]] = {}
    for gpu, tb, position, step in _steps(schedule):
        node = (gpu.id, tb.id, position)
        mine = before[node] = []
        if position:
            mine.append((gpu.id, tb.id, position - 1))
        if step.depends is not None:
            mine.append((gpu.id, *step.depends))
        if node in taken:
            mine.append(taken[node])
    return before


def step_order(schedule: MscclSchedule) -> tuple[list[Node], list[Node]]:
    """Every step after all it waits for (Kahn's algorithm, first ready first), and the steps
    left waiting in a circle (none in a sound schedule)."""
    before = waits(schedule)
    left = {node: len(previous) for node, previous in before.items()}
    after: dict[Node, list[Node]] = {node: [] for node in before}
    for node, previous in before.items():
        for earlier in previous:
            after[earlier].append(node)
    ready = deque(node for node in before if not left[node])
    ordered: list[Node] = []
    while ready:
        node = ready.popleft()
        ordered.append(node)
        for later in after[node]:
            left[later] -= 1
            if not left[later]:
                ready.append(later)
    done = set(ordered)
    return ordered, [node for node in before if node not in done]


def flaws(schedule: MscclSchedule) -> list[Flaw]:
    """What is wrong with ``schedule`` as the MSCCL runtime would run it: every element's flaws
    (:func:`~.checks.element_flaws`), then, where there are none, the sends and receives that do
    not match and the steps that wait for each other in a circle."""
    return element_flaws(schedule) or order_flaws(schedule)


def order_flaws(schedule: MscclSchedule) -> list[Flaw]:
    """Sends and receives that do not match, then (where they all do) a circle of steps that
    wait for each other."""
    found = _message_flaws(schedule)
    if found:
        return found
    _, stuck = step_order(schedule)
    if not stuck:
        return []
    circle = _circle(waits(schedule), set(stuck))
    first = circle[0]
    steps = [describe(schedule, node) for node in circle[1:MAX_CIRCLE]]
    chain = ", which waits for ".join(steps) + (", ..." if len(circle) > MAX_CIRCLE else "")
    gpu, tb, _ = first
    return [Flaw(step_at(schedule, first).line, step_at(schedule, first).tag, (
        f"gpu {gpu} tb {tb}: waits in a circle and never runs: it waits for {chain}, which "
        "waits for it"))]


def _circle(before: dict[Node, list[Node]], stuck: set[Node]) -> list[Node]:
    """A circle among ``stuck`` steps (each waits for a stuck one), from its least (gpu,
    threadblock, step), each step followed by one it waits for."""
    node = next(iter(sorted(stuck)))
    seen: list[Node] = []
    while node not in seen:
        seen.append(node)
        node = next(earlier for earlier in before[node] if earlier in stuck)
    circle = seen[seen.index(node):]
    start = circle.index(min(circle))
    return circle[start:] + circle[:start]


def _message_flaws(schedule: MscclSchedule) -> list[Flaw]:
    found = []
    for (src, dst, channel), (sends, receives) in sorted(traffic(schedule).items()):
        for k, (send, receive) in enumerate(zip(sends, receives, strict=False)):
            carried, taken = step_at(schedule, send).count, step_at(schedule, receive).count
            if carried != taken:
                step = step_at(schedule, receive)
                found.append(Flaw(step.line, step.tag, (
                    f"gpu {dst} tb {receive[1]}: receives {taken} chunk(s) as message {k + 1} "
                    f"from gpu {src} on channel {channel}, which {describe(schedule, send)} "
                    f"sends with {carried}")))
        for k, send in enumerate(sends[len(receives):], start=len(receives)):
            step = step_at(schedule, send)
            found.append(Flaw(step.line, step.tag, (
                f"gpu {src} tb {send[1]}: sends message {k + 1} to gpu {dst} on channel "
                f"{channel}, which no step receives: "
                + (f"gpu {dst} tb {receives[0][1]} receives {len(receives)} from gpu {src} on "
                   f"channel {channel}" if receives else
                   f"no threadblock of gpu {dst} has recv=\"{src}\" chan=\"{channel}\""))))
        for k, receive in enumerate(receives[len(sends):], start=len(sends)):
            step = step_at(schedule, receive)
            found.append(Flaw(step.line, step.tag, (
                f"gpu {dst} tb {receive[1]}: receives message {k + 1} from gpu {src} on "
                f"channel {channel}, which no step sends: "
                + (f"gpu {src} tb {sends[0][1]} sends {len(sends)} to gpu {dst} on channel "
                   f"{channel}" if sends else
                   f"no threadblock of gpu {src} has send=\"{dst}\" chan=\"{channel}\""))))
    return sorted(found, key=lambda flaw: flaw.line)
