"""Training data on the device and keyed minibatch streams: a client's minibatches for a round come from a generator
keyed by (seed, round, client), so they do not depend on who else participates, on batching, or on a resume."""

import torch

from fedavail.data.augment import random_crop_flip
from fedavail.data.prepared import text_windows
from fedavail.plan.experiments import AugmentationOptions
from fedavail.rng import torch_generator


class ClientData:
    """The train set on the device, the partition as CSR index lists, and the input transform."""

    def __init__(self, dataset: dict, offsets, indices, device: torch.device, augmentation: AugmentationOptions,
                 dtype: torch.dtype = torch.float32):
        self.kind, self.device, self.dtype, self.augmentation = dataset["kind"], device, dtype, augmentation
        self.x = dataset["train_x"].to(device)
        self.y = dataset["train_y"].to(device)
        self.offsets = torch.as_tensor(offsets, dtype=torch.int64)
        self.indices = torch.as_tensor(indices, dtype=torch.int64).to(device)
        if self.kind == "text":
            self.text = dataset["text"].to(device)
            self.seq_length = int(dataset["seq_length"])
        else:
            self.mean = dataset["mean"].to(device, dtype).view(1, -1, 1, 1)
            self.std = dataset["std"].to(device, dtype).view(1, -1, 1, 1)

    @property
    def num_clients(self) -> int:
        return len(self.offsets) - 1

    def client_sizes(self) -> torch.Tensor:
        return self.offsets[1:] - self.offsets[:-1]

    def inputs(self, raw: torch.Tensor) -> torch.Tensor:
        """Stored samples of either split -> model inputs: uint8 images -> normalised float; window starts ->
        int64 token windows (both splits share one token stream)."""
        if self.kind == "text":
            return text_windows(self.text, raw, self.seq_length)
        return (raw.to(self.dtype).div_(255.0) - self.mean) / self.std

    def client_positions(self, client: int) -> torch.Tensor:
        start, stop = int(self.offsets[client]), int(self.offsets[client + 1])
        if stop == start:
            raise ValueError(f"client {client} holds no training samples")
        return self.indices[start:stop]

    def step_batches(self, seed: int, round_index: int, client: int, steps: int, batch_size: int):
        """`steps` minibatches of exactly `batch_size` sample positions for this round (local work `steps: K`), and
        the generator that augments them. Consecutive reshuffles of the client's data (epochs without replacement), so
        a client holding fewer samples than a batch still yields full batches."""
        generator = torch_generator(seed, "minibatch", round_index, client, device=self.device)
        own = self.client_positions(client)
        needed = steps * batch_size
        order = torch.cat([torch.randperm(len(own), generator=generator, device=self.device)
                           for _ in range(-(-needed // len(own)))])
        return list(own[order[:needed]].view(steps, batch_size)), generator

    def epoch_order(self, seed: int, client: int, epoch: int, shuffle: bool) -> torch.Tensor:
        """The client's sample positions in the order of its epoch `epoch` (local work `epochs: E`): keyed by the
        epoch, not the round, so an epoch that spans participations continues in one order."""
        own = self.client_positions(client)
        if not shuffle:
            return own
        generator = torch_generator(seed, "epoch", client, epoch, device=self.device)
        return own[torch.randperm(len(own), generator=generator, device=self.device)]

    def batch(self, positions: torch.Tensor, generator: torch.Generator):
        x = self.inputs(self.x[positions])
        if self.kind == "image" and self.augmentation.active:
            x = random_crop_flip(x, generator, self.augmentation.crop_padding, self.augmentation.horizontal_flip,
                                 per_batch=self.augmentation.draw == "per_batch")
        return x, self.y[positions]

    def client_stream(self, seed: int, round_index: int, client: int, steps: int, batch_size: int):
        batches, generator = self.step_batches(seed, round_index, client, steps, batch_size)
        for positions in batches:
            yield self.batch(positions, generator)
