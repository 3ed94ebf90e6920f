"""Only transport failures are reported as a lost peer; configuration errors surface as themselves."""

import pytest
import torch.distributed as dist

from eks_ddp.trainer.distributed import is_peer_loss

LOST = [
    "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.1.7]:40631",
    "[../third_party/gloo/gloo/transport/tcp/pair.cc:598] Read error [10.0.1.7]:40631: Connection reset by peer",
    "NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version 2.21.5\n"
    "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
    "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete",
    "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE) ran for 1800000 ms",
]
NOT_LOST = [
    "No backend type associated with device type cpu",
    "NCCL error in: ProcessGroupNCCL.cpp:1970, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5\n"
    "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
    "Tensors must be CUDA and dense",
    "socket option SO_REUSEPORT is not supported by this gloo build",
]


@pytest.mark.parametrize("message", LOST)
def test_transport_failures_are_a_lost_peer(message: str) -> None:
    assert is_peer_loss(RuntimeError(message)) and is_peer_loss(dist.DistBackendError(message))


@pytest.mark.parametrize("message", NOT_LOST)
def test_other_errors_are_themselves(message: str) -> None:
    assert not is_peer_loss(RuntimeError(message)) and not is_peer_loss(dist.DistBackendError(message))


def test_a_network_error_is_a_lost_peer_whatever_it_says() -> None:
    assert is_peer_loss(dist.DistNetworkError("recv failed"))
