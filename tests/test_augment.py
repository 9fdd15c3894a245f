import itertools

import pytest
import torch
import torch.nn.functional as F

from fedavail.data.augment import random_crop_flip
from fedavail.rng import torch_generator


def candidates(image: torch.Tensor, padding: int, flip: bool) -> list[torch.Tensor]:
    """Every crop (and mirror) of one [C, H, W] image that the augmentation may return."""
    _, height, width = image.shape
    padded = F.pad(image, (padding,) * 4)
    crops = []
    for top, left in itertools.product(range(2 * padding + 1), repeat=2):
        crop = padded[:, top:top + height, left:left + width]
        crops += [crop, crop.flip(-1)] if flip else [crop]
    return crops


def batch(seed: int = 0, shape=(64, 3, 6, 5)) -> torch.Tensor:
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)) + 1.0  # no zeros: padding is visible


def test_shape_dtype_and_determinism():
    images = batch()
    first = random_crop_flip(images, torch_generator(7, "augment", 1))
    again = random_crop_flip(images, torch_generator(7, "augment", 1))
    other = random_crop_flip(images, torch_generator(8, "augment", 1))
    assert first.shape == images.shape and first.dtype == images.dtype
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert torch.equal(images, batch())  # the input is left untouched


@pytest.mark.parametrize("padding,flip,check_coverage", [(1, True, True), (2, False, True), (0, True, True),
                                                         (4, True, False)])
def test_every_output_is_a_crop_or_mirror_of_its_own_input(padding, flip, check_coverage):
    images = batch(shape=(300, 2, 9, 8))
    out = random_crop_flip(images, torch.Generator().manual_seed(3), padding=padding, flip=flip)
    seen = set()
    for image, result in zip(images, out):
        matches = [i for i, c in enumerate(candidates(image, padding, flip)) if torch.equal(c, result)]
        assert len(matches) == 1, "output is not a padded crop (or mirror) of its input"
        seen.add(matches[0])
    if check_coverage:  # 300 samples are plenty to see each of at most 25 outcomes
        assert len(seen) == (2 * padding + 1) ** 2 * (2 if flip else 1)


def test_per_batch_draws_one_crop_and_flip_for_the_whole_batch():
    # torchvision's RandomCrop + RandomHorizontalFlip on a [B, C, H, W] tensor (the FedAWE code): every image of a
    # minibatch gets the same offset and flip; across minibatches the draws vary.
    images = batch(shape=(32, 2, 9, 8))
    outcomes = set()
    for seed in range(40):
        out = random_crop_flip(images, torch.Generator().manual_seed(seed), padding=2, per_batch=True)
        chosen = {next(i for i, c in enumerate(candidates(image, 2, True)) if torch.equal(c, result))
                  for image, result in zip(images, out)}
        assert len(chosen) == 1
        outcomes |= chosen
    assert len(outcomes) > 10


def test_hand_made_example():
    image = torch.tensor([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]])[None]  # [1, 1, 2, 3]
    outcomes = {tuple(random_crop_flip(image, torch.Generator().manual_seed(s), padding=0).flatten().tolist())
                for s in range(20)}
    assert outcomes == {(1.0, 2.0, 3.0, 4.0, 5.0, 6.0), (3.0, 2.0, 1.0, 6.0, 5.0, 4.0)}
    shifted = {
        tuple(random_crop_flip(image, torch.Generator().manual_seed(s), padding=1, flip=False).flatten().tolist())
        for s in range(60)
    }
    assert (0.0, 0.0, 0.0, 0.0, 1.0, 2.0) in shifted  # window moved up-left: zero padding enters top and left
    assert (5.0, 6.0, 0.0, 0.0, 0.0, 0.0) in shifted  # moved down-right
    assert (1.0, 2.0, 3.0, 4.0, 5.0, 6.0) in shifted and len(shifted) == 9


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_images_with_a_cuda_generator():
    images = batch().cuda()
    out = random_crop_flip(images, torch_generator(1, "augment", device="cuda"))
    again = random_crop_flip(images, torch_generator(1, "augment", device="cuda"))
    assert out.is_cuda and torch.equal(out, again)
    with pytest.raises(ValueError, match="generator is on cpu"):
        random_crop_flip(images, torch.Generator())


def test_rejects_what_is_not_a_batch():
    with pytest.raises(ValueError, match=r"\[B, C, H, W\]"):
        random_crop_flip(torch.zeros(3, 4, 4), torch.Generator())
    with pytest.raises(ValueError, match="padding must be >= 0"):
        random_crop_flip(torch.zeros(1, 3, 4, 4), torch.Generator(), padding=-1)
