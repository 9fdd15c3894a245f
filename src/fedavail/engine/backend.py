"""Which back end trains a run's clients when `execution.batched` is auto: the batched one on CUDA; on the CPU where
benchmarks/step_cost.py measured it faster than the per-client loop for the model at the run's batch size, else the
loop. On the CPU the batched back end computes the gradients of CNNs made of convolutions, ReLUs, max-pools and linear
layers layer by layer (fedavail.engine.grouped), of other models with torch.func.vmap."""

import torch

# model -> the largest batch size at which vmap beat the loop on the CPU (benchmarks/step_cost.py, one thread:
# small_cnn per sample at 10 participants, loop / vmap: batch 16 81 / 54 µs, 32 69 / 49, 64 51 / 43; the configs'
# other CNNs at batch 32-128 run 2-3.5x slower on vmap). The grouped path is faster than vmap at these batches
# (benchmarks/roofline.py), so it only widens the margin.
VMAP_ON_CPU_UP_TO_BATCH = {"small_cnn": 64}


def picks_vmap(model_name: str, batch_size: int, device: torch.device) -> bool:
    """Whether `execution.batched: auto` trains this model's clients on the batched back end."""
    return device.type == "cuda" or batch_size <= VMAP_ON_CPU_UP_TO_BATCH.get(model_name, 0)
