"""The papers' image augmentation (random crop with zero padding, horizontal flip) as batched tensor ops."""

import torch
import torch.nn.functional as F


def random_crop_flip(images: torch.Tensor, generator: torch.Generator, padding: int = 4, flip: bool = True,
                     per_batch: bool = False) -> torch.Tensor:
    """Per sample: zero-pad by `padding`, crop back to H x W at a random offset, then mirror horizontally with
    probability 1/2 (torchvision's RandomCrop(padding) + RandomHorizontalFlip, FedSWE App. H). per_batch: one offset
    and one flip for the whole batch, what torchvision's transforms do when called on a [B, C, H, W] tensor (the FedAWE
    code). images: float [B, C, H, W] on the generator's device."""
    if images.dim() != 4:
        raise ValueError(f"images must be [B, C, H, W], got shape {tuple(images.shape)}")
    if padding < 0:
        raise ValueError(f"padding must be >= 0, got {padding}")
    if generator.device.type != images.device.type:
        raise ValueError(f"generator is on {generator.device} but images are on {images.device}")
    batch, channels, height, width = images.shape
    device = images.device
    draws = 1 if per_batch else batch
    row_offset = torch.randint(0, 2 * padding + 1, (draws, 1), generator=generator, device=device).expand(batch, 1)
    col_offset = torch.randint(0, 2 * padding + 1, (draws, 1), generator=generator, device=device).expand(batch, 1)
    rows = row_offset + torch.arange(height, device=device)  # [B, H] rows of the padded image
    cols = col_offset + torch.arange(width, device=device)  # [B, W]
    if flip:
        mirrored = torch.randint(0, 2, (draws, 1), generator=generator, device=device).bool().expand(batch, 1)
        cols = torch.where(mirrored, cols.flip(1), cols)
    padded = F.pad(images, (padding, padding, padding, padding))
    # Gather the rows, then the columns, of every sample's own crop window.
    picked_rows = padded.gather(2, rows[:, None, :, None].expand(batch, channels, height, padded.shape[3]))
    return picked_rows.gather(3, cols[:, None, None, :].expand(batch, channels, height, width))
