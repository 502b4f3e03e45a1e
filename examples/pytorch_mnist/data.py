"""An MNIST-like data set, made on the spot: 28x28 grey images of the digits 0 to 9.

Nothing is downloaded. Each image is a digit from a small 5x7 bitmap font, scaled up, then
randomly rotated, scaled, sheared, shifted, thickened and blurred, with noise on top, so no two
images are alike and a model has to learn the shapes. The same ``seed`` gives the same images
(on one PyTorch version). To train on the real MNIST instead, load it with ``torchvision`` and
return the same two tensors from :func:`make_digits`.
"""

import math

import torch
from torch.nn import functional

__all__ = ["IMAGE_SIZE", "MEAN", "STD", "make_digits"]

IMAGE_SIZE = 28
MEAN, STD = 0.26, 0.33
"""About the mean and the deviation of the pixels: images are normalised with them."""

# The digits 0 to 9 as 7 rows of 5 pixels ("#" is ink).
_FONT = [
    [".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."],
    ["..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."],
    [".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"],
    ["#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."],
    ["...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."],
    ["#####", "#....", "####.", "....#", "....#", "#...#", ".###."],
    ["..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."],
    ["#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."],
    [".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."],
    [".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."],
]


def _glyphs() -> torch.Tensor:
    """The ten digits centred on a 28x28 canvas, shape (10, 1, 28, 28), values 0 to 1."""
    bitmaps = torch.tensor(
        [[[float(pixel == "#") for pixel in row] for row in digit] for digit in _FONT]
    )
    # 7x5 pixels -> 21x15 (3x each way, blocky), placed in the middle of the canvas.
    big = bitmaps.repeat_interleave(3, dim=1).repeat_interleave(3, dim=2)
    canvas = torch.zeros(10, 1, IMAGE_SIZE, IMAGE_SIZE)
    top, left = (IMAGE_SIZE - 21) // 2, (IMAGE_SIZE - 15) // 2
    canvas[:, 0, top : top + 21, left : left + 15] = big
    return canvas


def make_digits(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` images, shape (n, 1, 28, 28), normalised (about mean 0 and deviation 1), and their
    labels, shape (n,), drawn at random from the ten digits. Deterministic for a given seed."""
    gen = torch.Generator().manual_seed(seed)

    def uniform(low: float, high: float) -> torch.Tensor:
        return low + (high - low) * torch.rand(n, generator=gen)

    labels = torch.randint(0, 10, (n,), generator=gen)
    images = _glyphs()[labels]
    # A random affine transform per image: rotation, scale, shear and shift.
    angle = uniform(-0.3, 0.3)  # radians, about 17 degrees either way
    scale = uniform(0.8, 1.15)
    shear = uniform(-0.3, 0.3)
    shift_x, shift_y = uniform(-0.15, 0.15), uniform(-0.15, 0.15)
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    theta = torch.stack(
        [
            torch.stack([cos, -sin + shear * cos, shift_x], dim=1),
            torch.stack([sin, cos + shear * sin, shift_y], dim=1),
        ],
        dim=1,
    )
    grid = functional.affine_grid(theta, list(images.shape), align_corners=False)
    images = functional.grid_sample(images, grid, align_corners=False)
    # Thicker strokes for about half of them, then a blur that rounds the blocky pixels off.
    thick = functional.max_pool2d(images, kernel_size=3, stride=1, padding=1)
    images = torch.where((torch.rand(n, generator=gen) < 0.5).view(n, 1, 1, 1), thick, images)
    images = functional.avg_pool2d(images, kernel_size=3, stride=1, padding=1)
    images = images + 0.1 * torch.randn(images.shape, generator=gen)
    images = images.clamp(0.0, 1.0)
    return (images - MEAN) / STD, labels


if __name__ == "__main__":
    # Print a few of them as text, to see what the model sees.
    images, labels = make_digits(4, seed=0)
    shades = " .:-=+*#%@"
    for image, label in zip(images, labels, strict=True):
        print(f"label {int(label)}")
        pixels = (image[0] * STD + MEAN).clamp(0, 1)
        for row in pixels:
            print("".join(shades[min(9, math.floor(float(v) * 10))] for v in row))
