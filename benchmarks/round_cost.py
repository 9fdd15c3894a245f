"""Round cost: one federated round of fedavail against a plain PyTorch training loop over exactly the same samples.

    python benchmarks/round_cost.py [--repeats 5] [--device cpu|cuda] [--threads N] [--vmap-clients N]

For the FedSWE SVHN CNN it times (a) 10 participants x 10 steps x batch 128 and (b) 50 participants x 10 steps x
batch 32, with the pipeline's gradient clipping (0.5) in both arms. The plain loop is what a user would write without
FL machinery: one nn.Module, torch.optim.SGD, the same minibatches (same indices, same normalisation, same clipping).
The arms alternate run by run, each run with a fresh model (benchmarks/peers.py), so load on a shared machine drifts
over both alike. It prints min and median seconds of each and the ratio of medians (target on CPU: <= 1.2).
With --vmap-clients N (default: 100 on CUDA, none on CPU) it also times the vmap-batched engine against the
per-client loop for N participants at batch 128 (target on CUDA at 100: >= 5x)."""

import argparse
import statistics
import sys

import torch
from peers import (
    STEPS,
    WORKLOADS,
    alternated,
    benchmark_setup,
    fedavail_arm,
    plain_loop_arm,
    prepared_batches,
    parse_workloads,
    print_table,
)

from fedavail.launcher import ensure_malloc_settings

GRAD_CLIP = 0.5


def main():
    # The same malloc settings as the train rule gives training jobs, so rounds are timed as the pipeline runs them.
    ensure_malloc_settings([sys.executable, *sys.argv])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="timed runs of each arm (after one warm-up run)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--workloads", nargs="+", default=[f"{p}x{b}" for p, b in WORKLOADS],
                        help="PARTICIPANTSxBATCH, e.g. 10x128")
    parser.add_argument("--vmap-clients", type=int, default=None,
                        help="participants of the vmap-vs-loop comparison (0: skip; default 100 on CUDA, 0 on CPU)")
    args = parser.parse_args()
    device, dataset, data = benchmark_setup(args.threads, args.device)
    vmap_clients = args.vmap_clients if args.vmap_clients is not None else (100 if device.type == "cuda" else 0)
    for participants, batch_size in parse_workloads(args.workloads):
        clients = torch.arange(participants)
        arms = {
            "fedavail round": fedavail_arm(dataset, device, data, clients, batch_size, channels_last=True,
                                           grad_clip=GRAD_CLIP),
            "plain loop": plain_loop_arm(dataset, device, prepared_batches(data, clients, batch_size), GRAD_CLIP),
        }
        seconds, results = alternated(arms, args.repeats, device)
        print_table(f"{participants} participants x {STEPS} steps x batch {batch_size}, {args.repeats} alternated "
                    f"runs per arm:", seconds, results, "fedavail round", "plain loop")
        ratio = statistics.median(seconds["fedavail round"]) / statistics.median(seconds["plain loop"])
        print(f"  ratio round / plain loop (medians): {ratio:.3f}")
    if vmap_clients:
        everyone = torch.arange(vmap_clients)
        arms = {
            "per-client loop": fedavail_arm(dataset, device, data, everyone, 128, channels_last=True,
                                            grad_clip=GRAD_CLIP, batched=False),
            "vmap-batched": fedavail_arm(dataset, device, data, everyone, 128, channels_last=True,
                                         grad_clip=GRAD_CLIP, batched=True),
        }
        seconds, results = alternated(arms, args.repeats, device)
        print_table(f"{vmap_clients} participants x {STEPS} steps x batch 128, loop against vmap:", seconds, results,
                    "vmap-batched", "per-client loop")
        speedup = statistics.median(seconds["per-client loop"]) / statistics.median(seconds["vmap-batched"])
        print(f"  vmap speed-up over the loop (medians): {speedup:.2f}x (target on CUDA >= 5x)")


if __name__ == "__main__":
    main()
