"""The phase split's arithmetic on made-up profiler events, and the table (the labels themselves are exercised by
`make bench-phases` on real runs: a profiled DDP run needs two ranks, too slow for this suite)."""

from dataclasses import dataclass, field
from typing import Any

from benchmarks import phases, profiled


@dataclass
class Range:
    start: float
    end: float


@dataclass
class Event:
    """The fields of torch.autograd.profiler_util.FunctionEvent that the split reads (times in microseconds)."""

    name: str
    start: float
    end: float
    thread: int = 1
    cpu_parent: Any = None
    cpu_children: list[Any] = field(default_factory=list)

    @property
    def time_range(self) -> Range:
        return Range(self.start, self.end)

    @property
    def cpu_time_total(self) -> float:
        return self.end - self.start


def _child(parent: Event, name: str, start: float, end: float) -> Event:
    child = Event(name, start, end, cpu_parent=parent)
    parent.cpu_children.append(child)
    return child


def test_a_step_splits_into_its_phases_and_backward_into_compute_and_the_all_reduce_wait() -> None:
    set_up = Event("aten::empty", 0, 400_000)
    data = Event("aten::index", 1_000_000, 1_010_000)
    forward = Event(profiled.LABELS["forward"], 1_020_000, 1_320_000)
    loss = Event("aten::cross_entropy_loss", 1_320_000, 1_330_000)
    backward = Event(profiled.LABELS["backward"], 1_330_000, 2_030_000)
    _child(backward, "autograd::engine::evaluate_function: ConvolutionBackward0", 1_340_000, 1_980_000)
    optimizer = Event("Optimizer.step#AdamW.step", 2_030_000, 2_040_000)
    vote = Event(profiled.LABELS["stop vote"], 2_040_000, 2_041_000)
    other_thread = Event("gloo:all_reduce", 1_400_000, 1_900_000, thread=7)
    second_forward = Event(profiled.LABELS["forward"], 2_051_000, 2_351_000)
    evaluation = Event(profiled.LABELS["evaluation"], 2_400_000, 3_400_000)
    events = [set_up, data, forward, loss, backward, optimizer, vote, other_thread, second_forward, evaluation]
    seconds = profiled.split(events, main_thread=1)
    assert {phase: round(value, 6) for phase, value in seconds.items()} == {  # the data before the first step: set-up
        "forward": 0.61,  # both forwards and the loss
        "backward": 0.65,
        "gradient all-reduce wait": 0.05,  # after the last autograd function
        "optimizer": 0.01,
        "stop vote": 0.001,
        "evaluation": 1.0,
        "loop overhead": 0.01,  # between the vote and the second forward, not after it
    }


def test_the_table_gives_each_side_its_phases_the_difference_and_the_operators() -> None:
    def record(forward: float, convolution: float) -> dict[str, Any]:
        phases_seconds = {"forward": forward, "backward": 2.0, "evaluation": 0.5, "start-up imports": 1.0}
        operators = {"aten::mkldnn_convolution": convolution, "aten::max_pool2d_with_indices": 0.1}
        return {"phases": phases_seconds, "step_operators": operators, "process_seconds": 9.0}

    ours, theirs = [record(1.0, 0.8), record(1.2, 0.9), record(1.1, 0.7)], [record(2.0, 1.5)]
    results = {
        "machine": {"cpu": "Test CPU", "cpus": 2, "native_bf16": False, "limited_to": "AVX2"},
        "settings": {"nproc": 2, "batch_size": 128, "train_images": 4000, "epochs": 1, "pairs": 3},
        "baseline": "the workshop's script",
        "trainer": phases.medians(ours),
        "baseline_phases": phases.medians(theirs),
        "trainer_operators": phases.operator_medians(ours),
        "baseline_operators": phases.operator_medians(theirs),
    }
    table = phases.report(results)
    assert "run as AVX2 only (no native bf16)" in table and "median of 3 run(s)" in table
    assert "| forward | 1.10 | 2.00 | -0.90 |" in table
    assert "| **training steps** | 3.10 | 4.00 | -0.90 |" in table  # forward and backward: the step's phases
    assert "| of which convolutions (forward and backward) | 0.80 | 1.50 | -0.70 |" in table
    assert "| evaluation | 0.50 | 0.50 | +0.00 |" in table and "| checkpoint |" not in table  # zero on both sides
    assert "| `aten::mkldnn_convolution` | 0.80 | 1.50 |" in table
