"""Small real CUDA jobs for bench/gpu_check.py (torch only; no eq-tui import).

    python torch_job.py train --mib 12000 --seconds 20
    python torch_job.py oom-once --mib 4096 --seconds 5     # attempt 1 ($EQ_ATTEMPT) runs out
    python torch_job.py oom-always --gib 200
    python torch_job.py hang --mib 2048                     # holds memory, silent, forever
    python torch_job.py leak --mib 1024 --child-mib 2048 --seconds 5
    python torch_job.py hold --mib 2048 --seconds 600       # the leaked child (setsid)

Memory is taken with plain allocations (torch.empty on the device: cudaMalloc), never managed
memory. Progress is printed as `step N loss=...` lines.
"""

from __future__ import annotations

import argparse
import os
import select
import subprocess
import sys
import time

import torch

MIB = 2**20
SIDE = 4096  # matmul side: 64 MiB a float32 matrix


def hold(mib: int) -> torch.Tensor:
    """`mib` MiB on the GPU (beyond the CUDA context and the matmul buffers)."""
    return torch.empty(max(0, mib) * MIB, dtype=torch.uint8, device="cuda")


def compute(seconds: float) -> None:
    """Matmuls for `seconds`, a progress line about once a second."""
    a = torch.randn(SIDE, SIDE, device="cuda")
    b = torch.randn(SIDE, SIDE, device="cuda") / SIDE**0.5
    started = last = time.monotonic()
    step = 0
    while time.monotonic() - started < seconds:
        for _ in range(8):
            a = torch.tanh(a @ b)
        torch.cuda.synchronize()
        step += 1
        if time.monotonic() - last >= 1.0:
            last = time.monotonic()
            print(f"step {step} loss={a.abs().mean().item():.5f}", flush=True)
    print(f"step {step} loss={a.abs().mean().item():.5f} done", flush=True)


def train(args: argparse.Namespace) -> int:
    memory = hold(args.mib)
    print(f"holding {args.mib} MiB on {torch.cuda.get_device_name()}", flush=True)
    compute(args.seconds)
    del memory
    return 0


def oom_once(args: argparse.Namespace) -> int:
    if os.environ.get("EQ_ATTEMPT", "1") == "1":
        free, _total = torch.cuda.mem_get_info()
        first = hold(int(free * 0.5) // MIB)
        print(f"attempt 1: holding {first.numel() // MIB} MiB, asking {int(free * 0.7) // MIB} "
              "MiB more (more than is free, less than the card)", flush=True)
        hold(int(free * 0.7) // MIB)  # torch.OutOfMemoryError: a plain CUDA OOM
    return train(args)


def oom_always(args: argparse.Namespace) -> int:
    print(f"asking {args.gib} GiB", flush=True)
    hold(args.gib * 1024)  # more than any card: "Tried to allocate 200.00 GiB"
    return 0


def hang(args: argparse.Namespace) -> int:
    memory = hold(args.mib)
    torch.cuda.synchronize()
    # the last line it ever prints: the check reads when the silence began from it
    print(f"holding {args.mib} MiB; silent from t={time.time():.3f}", flush=True)
    while memory is not None:
        time.sleep(3600)
    return 0


def leak(args: argparse.Namespace) -> int:
    memory = hold(args.mib)
    compute(args.seconds)
    del memory
    ready_read, ready_write = os.pipe()
    child = subprocess.Popen(
        [sys.executable, __file__, "hold", "--mib", str(args.child_mib), "--seconds",
         str(args.child_seconds), "--ready-fd", str(ready_write)],
        start_new_session=True, pass_fds=(ready_write,), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(ready_write)
    held = select.select([ready_read], [], [], 120)[0] and os.read(ready_read, 16)
    print(f"left child pid={child.pid} (own session) holding {args.child_mib} MiB: "
          f"{'ready' if held else 'not ready after 120 s'}", flush=True)
    return 0


def hold_child(args: argparse.Namespace) -> int:
    memory = hold(args.mib)
    torch.cuda.synchronize()
    if args.ready_fd is not None:
        os.write(args.ready_fd, b"ok")
        os.close(args.ready_fd)
    time.sleep(args.seconds)  # bounded: a check that fails still frees the card later
    del memory
    return 0


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    for name in ("train", "oom-once", "hang", "leak", "hold"):
        mode = sub.add_parser(name)
        mode.add_argument("--mib", type=int, default=2048)
        mode.add_argument("--seconds", type=float, default=10.0)
    sub.choices["leak"].add_argument("--child-mib", type=int, default=2048)
    sub.choices["leak"].add_argument("--child-seconds", type=float, default=600.0)
    sub.choices["hold"].add_argument("--ready-fd", type=int)
    sub.add_parser("oom-always").add_argument("--gib", type=int, default=200)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    modes = {"train": train, "oom-once": oom_once, "oom-always": oom_always, "hang": hang,
             "leak": leak, "hold": hold_child}
    return modes[args.mode](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
