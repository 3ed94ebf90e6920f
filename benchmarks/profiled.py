"""One rank of a training run under torch.profiler, its time split into phases; `benchmarks.phases` runs it.

`python -m benchmarks.profiled FOLDER (-m MODULE | SCRIPT) [ARGUMENTS ...]`, under torchrun: each rank writes
`FOLDER/rank-<RANK>.json`. The entry runs unchanged, as `python` would run it, under the profiler, with the calls
that mark a phase wrapped in `record_function` labels: for both sides DDP's forward and `Tensor.backward`; the
trainer's and the workshop script's checkpoint, evaluation, metrics and stop vote. The profiler names the optimizer's
step and the DataLoader's batches itself. A span of the main thread that no phase covers, before the last step, is
the interpreter running the loop's own Python ("loop overhead").

Everything is in wall seconds on the main thread. Start-up imports are torch's (imported here first, with
CPython's default collector settings for both sides: the trainer's own start-up imports it faster, see
`trainer/startup.py`) and every import the entry makes before its first step, counting those this wrapper makes
for it to label its phases (each side's own modules only). DDP's gradient all-reduce runs on
gloo's threads while backward computes; what backward then waits for is "gradient all-reduce wait" (the end of
the backward span, after its last autograd function)."""

import builtins
import json
import os
import runpy
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

STARTED = time.perf_counter()

import torch  # after the clock: the start-up imports include torch's
from torch.autograd.profiler import record_function

# Each phase and the calls that are it, by the label the profiler records for them.
LABELS = {
    "forward": "phase: forward",
    "backward": "phase: backward",
    "checkpoint": "phase: checkpoint",
    "evaluation": "phase: evaluation",
    "metrics": "phase: metrics",
    "stop vote": "phase: stop vote",
    "final outputs": "phase: final outputs",
}
PHASE_OF_LABEL = {label: phase for phase, label in LABELS.items()}
# Top-level operators of the main thread outside any label, by the phase they serve.
OPERATOR_PHASES = {
    "aten::index": "data",
    "aten::to": "data",
    "aten::_to_copy": "data",
    "aten::cross_entropy_loss": "forward",
    "aten::div": "forward",
    "aten::item": "metrics",
    "aten::_local_scalar_dense": "metrics",
    "aten::add_": "metrics",
    "aten::detach": "metrics",
    "aten::zeros": "metrics",
}
PREFIX_PHASES = {"Optimizer.": "optimizer", "enumerate(DataLoader)": "data", "c10d::": "collectives"}


class ImportClock:
    """Wall seconds spent in imports (outermost ones only) until `stop`, at the first step."""

    def __init__(self) -> None:
        self.seconds, self.depth, self.stopped_at = 0.0, 0, 0.0
        self.original = builtins.__import__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.stopped_at or self.depth:
            return self.original(*args, **kwargs)
        self.depth += 1
        started = time.perf_counter()
        try:
            return self.original(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - started
            self.depth -= 1

    def stop(self) -> None:
        self.stopped_at = self.stopped_at or time.perf_counter()


def _labelled(owner: Any, name: str, phase: str) -> None:
    """Wrap `owner.name` so that each call is recorded under the phase's label."""
    original = getattr(owner, name)
    label = LABELS[phase]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with record_function(label):
            return original(*args, **kwargs)

    setattr(owner, name, wrapper)


def label_phases(entry: list[str], clock: ImportClock) -> None:
    """Both sides' phase-marking calls, and the trainer's or the workshop script's own, importing only what that
    entry imports itself (the import clock counts it); the first forward stops the clock."""
    from torch.nn.parallel import DistributedDataParallel

    forward = DistributedDataParallel.forward

    def first_forward(*args: Any, **kwargs: Any) -> Any:
        clock.stop()
        return forward(*args, **kwargs)

    DistributedDataParallel.forward = first_forward
    _labelled(DistributedDataParallel, "forward", "forward")
    _labelled(torch.Tensor, "backward", "backward")
    _labelled(torch, "save", "final outputs")  # only when nothing above it is a phase: the final model
    script_folder = Path(entry[0]).resolve().parent if entry[0] != "-m" else None
    if entry[0] == "-m" and entry[1].startswith("eks_ddp.trainer"):
        from eks_ddp.trainer import distributed, reporting, training

        _labelled(training.Run, "save_checkpoint", "checkpoint")
        _labelled(training.Run, "test_accuracy", "evaluation")
        _labelled(reporting.Reporter, "interval", "metrics")
        _labelled(training.Run, "_finish", "final outputs")
        _labelled(distributed.StopVote, "poll", "stop vote")
        _labelled(distributed.StopVote, "settle", "stop vote")
    elif script_folder is not None and (script_folder / "utils.py").is_file():  # the workshop script's helpers
        sys.path.insert(0, str(script_folder))
        # The script's own module, found only at run time (in the folder put first on sys.path above); `__import__`
        # goes through the import clock as an import statement would.
        utils = __import__("utils")
        from torch.utils.tensorboard import SummaryWriter

        _labelled(utils, "save_checkpoint", "checkpoint")
        _labelled(SummaryWriter, "add_scalar", "metrics")


def phase_of(event: Any) -> str:
    if event.name in PHASE_OF_LABEL:
        return PHASE_OF_LABEL[event.name]
    for prefix, phase in PREFIX_PHASES.items():
        if event.name.startswith(prefix):
            return phase
    return OPERATOR_PHASES.get(event.name, "other operators")


def split(events: list[Any], main_thread: int) -> dict[str, float]:
    """Seconds per phase from the main thread's top-level events; the time between them is loop overhead until
    the last forward, and after it the run's end."""
    top = sorted(
        (e for e in events if e.cpu_parent is None and e.thread == main_thread), key=lambda e: e.time_range.start
    )
    seconds: dict[str, float] = defaultdict(float)
    forwards = [e for e in top if e.name == LABELS["forward"]]
    if not forwards:
        raise SystemExit("profiled: no DDP forward ran on this rank (is the entry a DDP training run?)")
    first, last = forwards[0].time_range.start, forwards[-1].time_range.end
    previous_end = first
    for event in top:
        if event.time_range.end <= first:
            continue
        phase = phase_of(event)
        if phase == "backward":
            wait = backward_wait(event)
            seconds["gradient all-reduce wait"] += wait
            seconds["backward"] += event.cpu_time_total / 1e6 - wait
        else:
            seconds[phase] += event.cpu_time_total / 1e6
        if event.time_range.start < last:
            seconds["loop overhead"] += max(0.0, event.time_range.start - previous_end) / 1e6
        previous_end = max(previous_end, event.time_range.end)
    return dict(seconds)


def backward_wait(backward: Any) -> float:
    """The end of a backward span after its last autograd function: the wait for DDP's last all-reduce."""
    functions = [child for child in backward.cpu_children if child.name.startswith("autograd::engine")]
    if not functions:
        return 0.0
    return max(0.0, backward.time_range.end - max(child.time_range.end for child in functions)) / 1e6


def step_operators(events: list[Any], main_thread: int) -> dict[str, float]:
    """Self seconds per operator inside the training steps' forward and backward (evaluation's are not), most first."""
    steps = {LABELS["forward"], LABELS["backward"]}
    seconds: dict[str, float] = defaultdict(float)
    for event in events:
        if event.thread != main_thread or event.name in steps:
            continue
        top = event
        while top.cpu_parent is not None:
            top = top.cpu_parent
        if top.name in steps:
            seconds[event.name] += event.self_cpu_time_total / 1e6
    return {name: round(value, 3) for name, value in sorted(seconds.items(), key=lambda item: -item[1])[:40]}


def run_entry(entry: list[str]) -> None:
    """`-m MODULE ARGUMENTS...` or `SCRIPT ARGUMENTS...`, as `python` would run it."""
    if entry[0] == "-m":
        sys.argv = [entry[1], *entry[2:]]
        runpy.run_module(entry[1], run_name="__main__", alter_sys=True)
    else:
        script = Path(entry[0]).resolve()
        sys.path.insert(0, str(script.parent))
        sys.argv = [str(script), *entry[1:]]
        runpy.run_path(str(script), run_name="__main__")


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1:] == ["-m"]:
        raise SystemExit("usage: python -m benchmarks.profiled FOLDER (-m MODULE | SCRIPT) [ARGUMENTS ...]")
    output, entry = Path(argv[0]), argv[1:]
    torch_imported = time.perf_counter()
    clock = ImportClock()
    builtins.__import__ = clock
    label_phases(entry, clock)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        try:
            run_entry(entry)
        except SystemExit as stop:
            if stop.code not in (None, 0):
                raise
    ended = time.perf_counter()
    builtins.__import__ = clock.original
    events = list(profile.events() or [])
    forwards = [e for e in events if e.name == LABELS["forward"]]
    if not forwards:
        raise SystemExit("profiled: no DDP forward ran on this rank (is the entry a DDP training run?)")
    main_thread = forwards[0].thread
    imports = (torch_imported - STARTED) + clock.seconds
    phases = {
        "start-up imports": imports,
        "set-up until the first step": clock.stopped_at - STARTED - imports,
        **split(events, main_thread),
    }
    record = {
        "rank": int(os.environ.get("RANK", "0")),
        "phases": {name: round(value, 3) for name, value in phases.items()},
        "step_operators": step_operators(events, main_thread),
        "process_seconds": round(ended - STARTED, 3),
    }
    output.mkdir(parents=True, exist_ok=True)
    (output / f"rank-{record['rank']}.json").write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
