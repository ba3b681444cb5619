"""A training model from the user's own factory, ``{torch: package.module:factory}``, built in a
child Python process: there the module is imported, the factory called with no arguments, the
``torch.nn.Module`` it returns measured (:func:`~simulator.training.torchnet.network_from_module`),
and the :class:`~simulator.training.network.Network` sent back as JSON data.

Whatever the user's code does in the child (raise, call ``sys.exit``, ``os.abort`` or
``os._exit``, crash in native code, print, leave threads running) becomes one ``ValueError``
naming the factory, and the simulator's own process goes on to say so in one line. This confines
a crash, not the code: it still runs with the user's rights (no sandbox), which is why reading a
scenario imports nothing unless asked (``--allow-import``, ``Imports.ALLOW``). The child searches
the parent's ``sys.path``, so a module is found exactly where an ``import`` in the simulator's
process would find it. A factory that never returns holds the run as any code would; Ctrl-C
stops it (the child ignores SIGINT and is ended by the parent).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
from typing import Any

from simulator.errors import quoted
from simulator.training.network import Layer, Network, Tensor

_CHILD = ("import json, sys; request = json.loads(sys.stdin.read()); "
          "sys.path[:] = request['path']; "
          "from simulator.training.factory import answer; answer(request)")
"""The child's program: read the request, search the parent's path, answer (:func:`answer`)."""

NO_TORCH = "needs PyTorch: pip install 'allreduce-sim[torch]'"


class _Failed(Exception):
    """What the child reports: the line naming the factory and what went wrong."""


def network_from_factory(target: str, *, name: str, shape: tuple[int, ...] | None) -> Network:
    """The Network of the module ``target`` (``package.module:factory``) returns, named ``name``,
    its FLOPs measured on one sample of ``shape`` (None: estimated), built in a child process;
    ValueError, one line naming ``target``, whatever the user's code did instead."""
    if importlib.util.find_spec("torch") is None:  # before any of the user's code runs
        raise ValueError(NO_TORCH)
    request = json.dumps({"path": [entry for entry in sys.path if isinstance(entry, str)],
                          "target": target, "name": name,
                          "input": None if shape is None else list(shape)})
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD], input=request, check=False,
                              stdout=subprocess.PIPE, encoding="utf-8", errors="replace")
    except OSError as error:
        raise ValueError(f"cannot start Python ({sys.executable or 'none'}) to import "
                         f"{quoted(target)}: {error.strerror}") from None
    reply = _reply(done.stdout)
    if reply is None:
        raise ValueError(f"{quoted(target)} failed: {_ended(done.returncode)}")
    if isinstance(reply, str):
        raise ValueError(reply)
    return reply


def _ended(returncode: int) -> str:
    """How a child that sent no answer ended, in words."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the process importing it was killed by {name}" + (
            " (os.abort)" if name == "SIGABRT" else "")
    if returncode > 0:
        return f"the process importing it exited with code {returncode} (os._exit or a crash)"
    return "the process importing it ended without an answer"


def _reply(text: str) -> Network | str | None:
    """The child's answer: the Network, the line saying why there is none, or None when the
    child sent nothing readable (it died, or the user's code wrote over the answer)."""
    try:
        reply = json.loads(text)
        if "problem" in reply:
            return str(reply["problem"])
        return _decoded(reply["network"])
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def _encoded(network: Network) -> dict[str, Any]:
    return {"name": network.name, "sample": network.sample, "source": network.source,
            "layers": [{"name": layer.name, "flops": layer.flops,
                        "tensors": [[tensor.name, list(tensor.shape)] for tensor in layer.tensors]}
                       for layer in network.layers]}


def _decoded(data: dict[str, Any]) -> Network:
    layers = tuple(Layer(str(layer["name"]),
                         tuple(Tensor(str(name), tuple(int(n) for n in shape))
                               for name, shape in layer["tensors"]),
                         float(layer["flops"]))
                   for layer in data["layers"])
    return Network(str(data["name"]), layers, str(data["sample"]), str(data["source"]))


def answer(request: dict[str, Any]) -> None:
    """The child's side: build the Network and write it (or the problem) as JSON on the original
    stdout, the user's own output going to stderr; then end at once, so threads or ``atexit``
    handlers the user's code left cannot hold or change the answer. A crash of the user's code
    (``os.abort``, a native fault) dumps no core file into the working directory."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the parent, which ends this
    with contextlib.suppress(ImportError, ValueError, OSError):  # no such limit (Windows)
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    try:
        reply: dict[str, Any] = {"network": _encoded(_build(request))}
    except _Failed as failure:
        reply = {"problem": str(failure)}
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # the user's code may have replaced or closed them
            stream.flush()
    out.write(json.dumps(reply))
    out.flush()
    os._exit(0)


def _build(request: dict[str, Any]) -> Network:
    target = str(request["target"])
    module_name, _, factory = target.partition(":")
    try:
        build = getattr(importlib.import_module(module_name), factory)
    except (ImportError, AttributeError) as error:
        missing = isinstance(error, ModuleNotFoundError) and error.name is not None and \
            f"{module_name}.".startswith(f"{error.name}.")  # the target, not what it imports
        raise _Failed(f"cannot load {quoted(target)}: {_text(error)}" + (
            "; the module is looked for on Python's path (the current directory under python -m, "
            "then PYTHONPATH), not beside the scenario" if missing else "")) from None
    except BaseException as error:  # the module's own code, run by the import
        raise _Failed(f"{quoted(target)} failed while importing {module_name}: {_said(error)}") from None
    try:
        module = build()
    except BaseException as error:  # the user's factory: whatever it raises is its problem
        raise _Failed(f"{quoted(target)} failed: {_said(error)}") from None
    try:
        import torch

        from simulator.training.torchnet import network_from_module
    except ImportError:
        raise _Failed(NO_TORCH) from None
    if not isinstance(module, torch.nn.Module):
        raise _Failed(f"expected {quoted(target)} to return a torch.nn.Module, got a "
                      f"{type(module).__name__}")
    try:
        shape = request["input"]
        sample = None if shape is None else torch.zeros(1, *shape)
        return network_from_module(module, name=str(request["name"]), sample_input=sample,
                                   source=f"torch module {target}")
    except ValueError as error:  # no parameters, or a forward that fails on the input
        raise _Failed(_text(error)) from None
    except BaseException as error:  # the module's forward, run to count its FLOPs
        raise _Failed(f"{quoted(target)} failed: {_said(error)}") from None


def _said(error: BaseException) -> str:
    """What the user's code did, in one line: ``RuntimeError: boom``, ``it called sys.exit(3)``."""
    if isinstance(error, SystemExit):
        return "it called sys.exit()" if error.code is None else f"it called sys.exit({quoted(error.code)})"
    text = _text(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _text(error: BaseException) -> str:
    """An exception's message on one line (its own ``__str__`` is the user's code too)."""
    try:
        return " ".join(str(error).split())
    except Exception:
        return ""
